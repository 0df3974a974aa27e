"""What ``courselib slurm replay`` and ``courselib kube replay`` print, over the shared result shape.

Both replays end the same way: optionally record the run (``--record``), optionally compare it
with the model (``--compare``: exit 1 below 100 % agreement), and print the run and the
comparison as tables or as one JSON object (``--json``). The system's result module
(:mod:`courselib.live.slurm.result`, :mod:`courselib.live.kube.result`) supplies ``compare``,
``format_replay``, ``format_comparison`` and ``replay_to_dict``.
"""
from __future__ import annotations

import sys
from pathlib import Path


def report(args, result, results, *, record=None) -> int:
    """Record, compare and print ``result`` as ``args`` ask (``workload``, ``record``, ``compare``,
    ``json``); ``record(path, workload_text=…, workload_file=…)`` writes the recording (default:
    ``results.record(result, path, …)``). The exit status: 1 if a comparison disagreed, else 0."""
    if args.record:
        from courselib.io.yamlfile import read_text
        write = record or (lambda path, **kw: results.record(result, path, **kw))
        out = write(args.record, workload_text=read_text(args.workload, "workload"),
                    workload_file=Path(args.workload).as_posix())
        print(f"recorded to {out}", file=sys.stderr)
    comparison = results.compare(result, name=args.workload) if args.compare else None
    if args.json:
        from courselib.cli.main import print_json
        out = {"workload": args.workload, "replay": results.replay_to_dict(result)}
        if comparison is not None:
            out["comparison"] = comparison.to_dict()
        print_json(out)
    else:
        print(results.format_replay(result))
        if comparison is not None:
            print()
            print(results.format_comparison(comparison))
    return 1 if comparison is not None and comparison.agreement < 1.0 else 0
