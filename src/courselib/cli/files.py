"""``courselib sbatch|manifest|docker|trace|lint``: read the files practitioners write.

Thin views over ``courselib.io`` readers and ``courselib.model`` (layers, lint findings).
Exit status: 0 clean, 1 lint findings (errors or warnings), 2 unreadable input.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from courselib.errors import CourseError, InputError
from courselib.model.policies import policy_names
from courselib.units import format_duration as _dur


def _print_json(obj) -> None:
    from courselib.cli.main import print_json
    print_json(obj)


def _show(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_show(v)}" for k, v in value.items())
    return str(value)


def _one_line(text: str, width: int) -> str:
    first = text.splitlines()[0] if text else ""
    if len(first) > width or "\n" in text:
        return first[:width - 4] + " ..."
    return first


# ----------------------------------------------------------------------------------------------

def _sbatch_parse(args) -> int:
    from courselib.io.sbatch import read_sbatch
    r = read_sbatch(args.file)
    d = r.to_dict()
    if args.json:
        _print_json(d)
        return 0
    print(f"{args.file}")
    rows = [("nodes", d["nodes"]), ("GPUs per node", d["gpus_per_node"]),
            ("total GPUs", d["total_gpus"] if d["total_gpus"] is not None
             else f"unknown ({d['total_gpus_reason']})"),
            ("constraint", d["constraint"]), ("exclusive", d["exclusive"]),
            ("time limit (min)", d["time_limit_min"]), ("partition", d["partition"]),
            ("array", d["array"]["text"] if d["array"] else None),
            ("components", len(d["components"]))]
    for k, v in rows:
        print(f"  {k:<17} {_show(v)}")
    for item in d["ignored_directives"]:
        print(f"  ignored (after the first command, line {d['first_command_line']}): "
              f"line {item['line']}: {item['text']}")
    for item in d["unknown_options"]:
        print(f"  unknown option: line {item['line']}: {item['option']}")
    return 0


def _manifest_parse(args) -> int:
    from courselib.io.manifests import read_manifests
    readings = read_manifests(args.file, validate=not args.no_validate)
    if args.json:
        _print_json([r.to_dict() for r in readings])
        return 0
    print(args.file)
    for r in readings:
        d = r.to_dict()
        print(f"  [{d['doc_index']}] {d['kind']} {d['name']} ({d['api_version']}), line {d['line']}")
        if r.is_workload or r.kind == "PodGroup":
            print(f"      gang {_show(d['gang_size'])} ({d['gang_rule']}); pods {_show(d['pods'])}; "
                  f"GPUs/pod {_show(d['gpus_per_pod'])}; total GPUs {_show(d['total_gpus'])}")
            print(f"      memory limit/pod {_show(d['memory_limit'])}; queue {_show(d['queue'])}"
                  + (f" ({d['queue_source']})" if d["queue_source"] else "")
                  + f"; scheduler {_show(d['scheduler_name'])}")
        else:
            print(f"      {d['gang_rule']}")
        for p in d["problems"]:
            where = f"line {p['line']}: " if p["line"] is not None else ""
            print(f"      problem: {where}{p['field'] + ': ' if p['field'] else ''}{p['message']}")
        for t in d["unresolved_templates"]:
            print(f"      unresolved template, line {t['line']}: {t['field']} = {t['value']}")
        for v in d["validation_errors"]:
            print(f"      schema: line {v['line']}: {v['message']}")
        for n in d["notes"]:
            print(f"      note: {n}")
    return 0


def _docker_layers(args) -> int:
    from courselib.io.dockerfile import read_dockerfile
    from courselib.live.container.rebuild import ignore_patterns
    from courselib.model.layers import BuildContext, Change, rebuilt_count
    r = read_dockerfile(args.dockerfile)
    # the build context is the Dockerfile's directory (as with `docker build -f F DIR`, F in DIR)
    where = Path(args.context) if args.context else Path(args.dockerfile).resolve().parent
    try:
        rel = str(Path(args.dockerfile).resolve().relative_to(where.resolve()))
    except ValueError:
        rel = None
    bctx = BuildContext(dockerfile=rel, ignore=ignore_patterns(where) if where.is_dir() else ())
    change = None
    if args.changed is not None:
        change = Change(path=args.changed)
    elif args.edited_line is not None:
        change = Change(line=args.edited_line)
    if change is None:
        if args.json:
            _print_json(r.to_dict())
            return 0
        for st in r.stages:
            print(f"stage {st.index}{' ' + st.name if st.name else ''}: FROM {st.base}"
                  + (f"  (= {st.base_resolved})" if st.base_resolved and st.base_resolved != st.base else ""))
            for s in r.steps:
                if s.stage == st.index and s.instruction != "FROM":
                    print(f"  {s.index + 1:>3} line {s.line:<4} {_one_line(s.text, 90)}")
        return 0
    plan = r.plan(change, context=bctx)
    if args.json:
        _print_json({"file": r.file, "change": {"path": change.path, "line": change.line},
                     "rebuilt": rebuilt_count(plan), "steps": len(plan),
                     "plan": [{"step": p.step.index + 1, "stage": p.step.stage,
                               "line": p.step.line, "instruction": p.step.instruction,
                               "text": p.step.text, "rebuilt": p.rebuilt, "reason": p.reason}
                              for p in plan]})
        return 0
    what = f"file {change.path} changed" if change.path else f"line {change.line} edited"
    print(f"{r.file}: {what}: {rebuilt_count(plan)} of {len(plan)} steps rebuild")
    for p in plan:
        mark = "REBUILD" if p.rebuilt else "cached "
        print(f"  {mark} {p.step.index + 1:>3} line {p.step.line:<4} {_one_line(p.step.text, 60):<60}"
              + (f"  <- {p.reason}" if p.rebuilt else ""))
    return 0


def _docker_rebuild(args) -> int:
    from courselib.live.recorded import machine_note, write as write_recorded
    from courselib.live.container.rebuild import rebuild

    if args.record and Path(args.record).exists():
        raise InputError("exists; not overwritten", file=args.record, hint="remove it first or choose another path")
    build_args = {}
    for kv in args.build_arg:
        k, eq, v = kv.partition("=")
        if not eq or not k:
            raise InputError(f"{kv!r} is not KEY=VALUE", field="--build-arg")
        build_args[k] = v
    say = (lambda msg: None) if args.json else (lambda msg: print(msg, file=sys.stderr))
    r = rebuild(args.context, changed=args.changed, edited_line=args.edited_line, line_text=args.line_text,
                file=args.file, build_args=build_args or None, say=say)
    d = r.as_dict()
    if args.record:
        d["recorded_on"] = machine_note()
        write_recorded(args.record, d)
    agreement = d["comparison"]["agreement"]
    if args.json:
        if not args.compare:
            d.pop("comparison")
            d.pop("comparisons")
        _print_json(d)
        return 1 if args.compare and agreement < 1 else 0
    print(f"builder: {r.builder}; base: {r.base['name']} (stand-in for {r.base['stand_in_for']})")
    for rep in r.replaced_from:
        print(f"  line {rep['line']}: FROM {rep['from']} -> {rep['to']} (no registry: the stand-in base)")
    for b in r.builds:
        print(f"  {b.label}: {b.seconds:.2f} s, {sum(1 for s in b.steps if s.cached)} steps from the cache, "
              f"{sum(1 for s in b.steps if s.cached is False)} run")
    for c in r.comparisons:
        print(f"{c.edit.describe()}: " + "; ".join(c.done))
        head = f"  {'step':>4} {'line':>4}  {'instruction':44s} {'builder':8s}"
        print(head + (f" {'courselib':9s} agree" if args.compare else "  layer"))
        for row in c.rows:
            line = f"  {row['step']:>4} {row['line']:>4}  {row['text'][:44]:44s} {row['real']:8s}"
            if args.compare:
                line += f" {row['predicted']:9s} {'yes' if row['agree'] else 'NO'}"
            else:
                line += f"  {(row['layer_after'] or '-')[:12]}"
            print(line)
        if args.compare:
            print(f"  agreement: {sum(x['agree'] for x in c.rows)} of {len(c.rows)} steps "
                  f"({100 * c.agreement:.0f} %)")
    return 1 if args.compare and agreement < 1 else 0


def _docker_rebuild_suite(args) -> int:
    from courselib.live.recorded import machine_note, write as write_recorded
    from courselib.live.container.rebuild import suite

    if args.record and Path(args.record).exists():
        raise InputError("exists; not overwritten", file=args.record, hint="remove it first or choose another path")
    d = suite(say=lambda msg: print(msg, file=sys.stderr))
    d["recorded_on"] = machine_note()
    if args.record:
        write_recorded(args.record, d)
    t = d["table"]
    if args.json:
        _print_json(d)
    else:
        print(f"{'scenario':52s} {'steps':>5} {'agreed':>6} {'rebuilt':>7}")
        for r in d["differential"]:
            print(f"{r['name'][:52]:52s} {r['steps']:>5} {r['agreed']:>6} {r['rebuilt_real']:>7}")
        print(f"{t['agreed']} of {t['scenarios']} scenarios agree on every step ({t['steps_agreed']} of "
              f"{t['steps']} steps)")
    return 0 if t["agreed"] == t["scenarios"] else 1


def _docker_rebuild_seed(args) -> int:
    from courselib.live.recorded import machine_note, write as write_recorded
    from courselib.live.container.rebuild import seed_rebuilds

    if args.record and Path(args.record).exists():
        raise InputError("exists; not overwritten", file=args.record, hint="remove it first or choose another path")
    d = seed_rebuilds(say=lambda msg: print(msg, file=sys.stderr))
    d["recorded_on"] = machine_note()
    if args.record:
        write_recorded(args.record, d)
    if args.json:
        _print_json(d)
        return 0
    for order in ("deps_first", "code_first"):
        print(order.replace("_", " ") + ":")
        for b in d[order]["builds"]:
            print(f"  {b['label']}: {b['seconds']:.2f} s ({b['reused']} steps from the cache, {b['ran']} run)")
    return 0


def _trace_load(args) -> int:
    from courselib.io.traces import read_trace
    r = read_trace(args.file)
    s = r.summary()
    if args.json:
        _print_json(s)
        return 0
    print(f"{s['file']}: {s['format']} ({s['kind']}), {s['rows']} rows, {s['jobs']} jobs")
    for k in ("cluster", "span_s", "duration_s", "gpus", "multi_gpu_jobs", "gpu_hours", "procs"):
        if s.get(k) is not None:
            print(f"  {k:<15} {_show(s[k])}")
    for n in s.get("notes", []):
        print(f"  note: {n}")
    if s.get("skipped_total"):
        print(f"  {s['skipped_total']} lines read with missing fields (first: line "
              f"{s['skipped'][0]['line']})")
    return 0


def _trace_replay(args) -> int:
    from courselib.io.traces import read_trace
    from courselib.sim.traces import parse_cluster, parse_topology, replay, workload_of

    cluster = parse_cluster(args.cluster) if args.cluster else None
    topology = parse_topology(args.topology) if args.topology else None
    reading = read_trace(args.file)
    w = workload_of(reading, cluster, args.limit, topology)[0]  # errors before any bar is drawn
    policies = policy_names() if args.policy == "all" else [args.policy]
    out = []
    for policy in policies:
        bar = _progress_bar(len(w.jobs), f"{policy}")
        try:
            out.append(replay(reading, policy, cluster, args.limit,
                              progress=bar.update if bar is not None else None,
                              topology=args.topology).summary())
        finally:
            if bar is not None:
                bar.close()
    if args.json:
        _print_json(out[0] if len(out) == 1 else out)
        return 0
    s0 = out[0]
    print(f"ARG trace {args.file}")
    print(f"ARG --cluster {s0['cluster']}" + (f" --limit {args.limit}" if args.limit else "")
          + (f" --topology {args.topology}" if args.topology else ""))
    print(f"{s0['file']}: {s0['format']}, {s0['jobs']} of {s0['jobs_in_trace']} jobs replayed as gangs "
          f"on {s0['cluster']} GPUs ({s0['cluster_rule']})")
    print(f"{'policy':<13} {'deadlock':>8} {'idle GPU-h':>11} {'util':>6} {'not run':>7} "
          f"{'wait mean':>10} {'p50':>8} {'p90':>8} {'p99':>8} {'JCT mean':>9}")
    for s in out:
        q, c = s["queueing_delay_s"], s["jct_s"]
        print(f"{s['policy']:<13} {'YES' if s['deadlock'] else 'no':>8} {s['idle_gpu_hours']:>11,.1f} "
              f"{s['utilisation']:>6.1%} {s['never_started']:>7} {_dur(q['mean']):>10} {_dur(q['p50']):>8} "
              f"{_dur(q['p90']):>8} {_dur(q['p99']):>8} {_dur(c['mean']):>9}")
    for s in out:
        if "topology" in s:
            t = s["topology"]
            print(f"topology {t['levels']}, {s['policy']}: of {t['started']} started jobs, " + ", ".join(
                f"{n} span more than one {level}" for level, n in t["spanning"].items()))
    for s in out:
        print(f"by gang size, {s['policy']} (GPUs: jobs, mean / p90 wait, idle GPU-h):  " + "  ".join(
            f"{b['gpus']}: {b['jobs']}, {_dur(b['queueing_delay_s']['mean'])} / "
            f"{_dur(b['queueing_delay_s']['p90'])}, {b['idle_gpu_hours']:,.1f}" for b in s["by_gang_size"]))
    return 0


def _progress_bar(total: int, what: str):
    """A tqdm bar on stderr for a long replay (none when stderr is not a terminal or tqdm is
    missing): one step per job that ends."""
    if total < 2000:
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency; a bare install still replays
        return None
    return tqdm(total=total, desc=what, unit="job", disable=None, leave=False, mininterval=0.5)


# ----------------------------------------------------------------------------------------------

def detect_kind(path: Path, text: str) -> str:
    """sbatch / manifest / dockerfile / trace, by name first, then by content."""
    name = path.name.lower()
    if name.endswith((".tsv", ".md", ".json", ".txt", ".py", ".ipynb")):
        return "unknown"
    if name.endswith((".yaml", ".yml")):
        return "manifest"
    if "dockerfile" in name or name.endswith(".containerfile"):
        return "dockerfile"
    if name.endswith((".swf", ".csv", ".trace", ".tar.gz", ".header")):
        return "trace"
    if name.endswith((".sbatch", ".slurm")) or "#SBATCH" in text:
        return "sbatch"
    first = next((ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")), "")
    if first.split()[:1] and first.split()[0].upper() in ("FROM", "ARG"):
        return "dockerfile"
    if first.startswith(("apiVersion", "kind", "---")):
        return "manifest"
    return "sbatch" if text.startswith("#!") else "unknown"


def _is_workload(text: str) -> bool:
    """A course workload file (top-level ``cluster:`` and ``jobs:``), not a Kubernetes manifest."""
    tops = {ln.split(":", 1)[0] for ln in text.splitlines() if ln[:1].isalpha() and ":" in ln}
    return {"cluster", "jobs"} <= tops and "apiVersion" not in tops


def lint_file(path: str) -> list:
    """The findings for one file (raises ``CourseError`` if it cannot be read)."""
    from courselib.io.policy import FILE_LIMITS, read_text
    p = Path(path)
    if p.name.lower().endswith(".tar.gz"):
        from courselib.io.traces import read_trace
        read_trace(path)
        return []
    text = read_text(path, "trace")  # the largest cap of the kinds lint reads; then the kind's own
    kind = detect_kind(p, text)
    if kind in FILE_LIMITS and len(text) > FILE_LIMITS[kind].value:
        cap = FILE_LIMITS[kind]
        raise InputError(f"{cap.show(len(text))} is more than courselib reads of {cap.what} "
                         f"({cap.show(cap.value)})", file=path, hint=cap.hint())
    if kind == "sbatch":
        from courselib.io.sbatch import parse_sbatch
        from courselib.lint import lint_sbatch
        return lint_sbatch(parse_sbatch(text, file=path, strict=False), text)
    if kind == "manifest" and _is_workload(text):
        from courselib.io.workload import parse_workload
        from courselib.io.yamlfile import load_one
        from courselib.lint import lint_workload
        doc = load_one(path, "workload")
        jobs = doc.get("jobs") if isinstance(doc, dict) else None
        lines = {j.get("name"): jobs.line_of(i) for i, j in enumerate(jobs or []) if isinstance(j, dict)}
        return lint_workload(parse_workload(doc, file=path), path, lines)
    if kind == "manifest":
        from courselib.io.manifests import read_manifests_text
        from courselib.lint import lint_manifests
        return lint_manifests(read_manifests_text(text, file=path))
    if kind == "dockerfile":
        from courselib.io.dockerfile import parse_dockerfile
        from courselib.lint import lint_dockerfile
        return lint_dockerfile(parse_dockerfile(text, file=path))
    if kind == "trace":
        from courselib.io.traces import parse_trace_text
        parse_trace_text(text, file=path, name=p.name)
        return []
    raise InputError("cannot tell what kind of file this is", file=path,
                     hint="lint reads sbatch scripts, Kubernetes YAML, Dockerfiles and traces")


def _expand(paths: list[str]) -> list[str]:
    """Files as given; a directory becomes the job files below it (sbatch scripts, YAML,
    Dockerfiles), skipping hidden directories and files of other kinds."""
    out: list[str] = []
    for path in paths:
        p = Path(path)
        if not p.is_dir():
            out.append(path)
            continue
        for f in sorted(p.rglob("*")):
            if not f.is_file() or any(part.startswith(".") for part in f.relative_to(p).parts):
                continue
            name = f.name.lower()
            if name.endswith((".yaml", ".yml", ".sbatch", ".slurm")) or "dockerfile" in name:
                out.append(str(f))
            elif name.endswith(".sh"):
                try:
                    with open(f, "rb") as fh:  # is_file() above: a regular file, so this cannot block
                        head = fh.read(20000).decode("utf-8", errors="replace")
                except OSError:
                    continue
                if "#SBATCH" in head:
                    out.append(str(f))
    return out


def _lint(args) -> int:
    from courselib.model.lint import sort_findings
    if args.explain is not None:
        return _explain(args)
    if not args.files:
        raise InputError("nothing to lint", field="FILE",
                         hint="give sbatch scripts, Kubernetes YAML or Dockerfiles (or a directory), "
                              "or --explain CODE for what a finding means")
    findings = []
    unreadable = 0
    args.files = _expand(args.files)
    for path in args.files:
        try:
            findings += lint_file(path)
        except CourseError as err:
            unreadable += 1
            print(f"courselib: {err}", file=sys.stderr)
    if args.min_severity != "info":
        keep = {"error": {"error"}, "warning": {"error", "warning"}}[args.min_severity]
        findings = [f for f in findings if f.severity in keep]
    findings = sort_findings(findings)
    if args.json:
        _print_json([f.to_dict() for f in findings])
    else:
        for f in findings:
            print(f.format())
        counts = {s: sum(1 for f in findings if f.severity == s) for s in ("error", "warning", "info")}
        print(f"{len(args.files)} file(s): {counts['error']} error(s), {counts['warning']} "
              f"warning(s), {counts['info']} note(s)"
              + (f"; {unreadable} unreadable" if unreadable else ""), file=sys.stderr)
    if unreadable:
        return 2
    return 1 if any(f.severity in ("error", "warning") for f in findings) else 0


def _explain(args) -> int:
    """``courselib lint --explain CODE``: what the rule finds, why it matters, the usual fix."""
    from courselib.lint import RULES, explain
    if args.files:
        raise InputError("--explain takes a rule code, not files", field="--explain",
                         hint=f"e.g. courselib lint --explain {args.explain}")
    text = explain(args.explain)
    if args.json:
        r = RULES[args.explain.strip().upper()]
        _print_json({"code": r.code, "kind": r.kind, "severity": r.severity, "title": r.title,
                     "why": r.why, "fix": r.fix})
    else:
        print(text)
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("sbatch", help="read an sbatch script as Slurm does")
    sp = p.add_subparsers(dest="sbatch_command", metavar="ACTION", required=True)
    q = sp.add_parser("parse", help="nodes, GPUs, constraint, time limit, ... of a script")
    q.add_argument("file")
    q.add_argument("--json", action="store_true", help="machine-readable output")
    q.set_defaults(func=_sbatch_parse)

    p = subparsers.add_parser("manifest", help="read Kubernetes YAML: gang size, GPUs, queue")
    sp = p.add_subparsers(dest="manifest_command", metavar="ACTION", required=True)
    q = sp.add_parser("parse", help="one entry per document")
    q.add_argument("file")
    q.add_argument("--json", action="store_true")
    q.add_argument("--no-validate", action="store_true",
                   help="skip the Kubernetes schema check of core kinds")
    q.set_defaults(func=_manifest_parse)

    p = subparsers.add_parser("docker", help="Dockerfile stages and the layer cache")
    sp = p.add_subparsers(dest="docker_command", metavar="ACTION", required=True)
    q = sp.add_parser("layers", help="the build steps; with a change, which of them rebuild")
    q.add_argument("dockerfile")
    g = q.add_mutually_exclusive_group()
    g.add_argument("--changed", metavar="PATH", help="a file of the build context that changed")
    g.add_argument("--edited-line", metavar="N", type=int, help="a Dockerfile line that was edited")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=_docker_layers)

    q.add_argument("--context", metavar="DIR",
                   help="the build context (default: the Dockerfile's directory; its .dockerignore counts)")
    q = sp.add_parser("rebuild", help="build for real (buildah), change a file or line, rebuild; --compare with "
                                      "the layers prediction (needs root)")
    q.add_argument("context", metavar="CONTEXT", help="the build context directory (copied; never changed)")
    q.add_argument("--changed", metavar="PATH", action="append", default=[],
                   help="a file of the context to change in the copy (repeatable; a new path is created)")
    q.add_argument("--edited-line", metavar="N", type=int, help="edit line N of the Dockerfile in the copy")
    q.add_argument("--line-text", metavar="TEXT", help="the new text of --edited-line (default: a harmless edit)")
    q.add_argument("--file", metavar="DOCKERFILE", default="Dockerfile", help="the Dockerfile, inside CONTEXT")
    q.add_argument("--build-arg", metavar="K=V", action="append", default=[])
    q.add_argument("--compare", action="store_true",
                   help="print courselib's prediction beside the builder's verdict; exit 1 below 100%% agreement")
    q.add_argument("--json", action="store_true")
    q.add_argument("--record", metavar="FILE", help="write the run as a recorded run (refuses to overwrite)")
    q.set_defaults(func=_docker_rebuild)

    q = sp.add_parser("rebuild-suite", help="the differential suite: every scenario built, changed and rebuilt "
                                            "for real beside courselib's prediction (needs root; minutes)")
    q.add_argument("--json", action="store_true")
    q.add_argument("--record", metavar="FILE", help="write the run as a recorded run (refuses to overwrite)")
    q.set_defaults(func=_docker_rebuild_suite)

    q = sp.add_parser("rebuild-seed", help="chapter 4's real run: the seed's Dockerfile shape built, edited three "
                                           "times and rebuilt; the code-first order beside it (needs root)")
    q.add_argument("--json", action="store_true")
    q.add_argument("--record", metavar="FILE", help="write the run as a recorded run (refuses to overwrite)")
    q.set_defaults(func=_docker_rebuild_seed)

    p = subparsers.add_parser("trace", help="cluster traces: SWF and GPU-trace CSVs")
    sp = p.add_subparsers(dest="trace_command", metavar="ACTION", required=True)
    q = sp.add_parser("load", help="summary of a trace")
    q.add_argument("file")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=_trace_load)
    q = sp.add_parser("replay", help="replay a GPU trace's jobs as gangs under a scheduling policy",
                      description="Replay a real GPU trace under a gang policy: GPU-hours held idle "
                                  "at the barrier, deadlocks, queueing delay, JCT, utilisation.")
    q.add_argument("file", metavar="TRACE")
    q.add_argument("--policy", required=True, choices=policy_names() + ["all"])
    q.add_argument("--cluster", metavar="NODESxGPUS",
                   help="the cluster, e.g. 64x8; default: sized so the trace offers it a load of 0.8")
    q.add_argument("--limit", type=int, metavar="N", help="replay the first N usable jobs only")
    q.add_argument("--topology", metavar="SPEC",
                   help="replay on a topology: LEVEL:SIZE,... outermost first, optionally @required:LEVEL or "
                        "@preferred:LEVEL for every job, e.g. rack:8,block:4@preferred:rack")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=_trace_replay)

    p = subparsers.add_parser("lint", help="catch gang/OOM/time-limit mistakes in job files")
    p.add_argument("files", nargs="*", metavar="FILE",
                   help="sbatch scripts, Kubernetes YAML, Dockerfiles, traces; a directory is searched")
    p.add_argument("--explain", metavar="CODE", help="what a finding's code means: the rule, why it matters, "
                                                      "how to fix it (e.g. --explain K006)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--min-severity", choices=("info", "warning", "error"), default="info",
                   help="hide findings below this severity")
    p.set_defaults(func=_lint)
