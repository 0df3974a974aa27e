"""``courselib slurm``: a real Slurm on this machine (up/down/status) and replays against the model.

    courselib slurm up [--nodes N] [--gpus-per-node G] [--features nvlink:2,ib] [--port P]
                       [--topology rack:8,block:4 [--slurm-topology tree|block] [--block-sizes 4,8]]
    courselib slurm status [--json]
    courselib slurm replay WORKLOAD.yaml [--compare] [--json] [--seconds-per-minute S]
    courselib slurm down
    courselib slurm replay-swf TRACE.swf [--cores N] [--policy fifo|easy|both] [--limit N] [--json]

Needs root and the course's Slurm (the pinned release's Debian packages in their own root, built
once by ``make setup-slurm``); elsewhere each command says so in one line and touches nothing. ``replay-swf`` needs neither:
it replays a Standard Workload Format trace on a pool of cores with courselib's FIFO or EASY
backfilling model (``courselib.model.replay``) and prints waits, slowdown and utilisation.
"""
from __future__ import annotations

import sys


def _say(msg: str) -> None:
    print(msg, file=sys.stderr)


def _up(args) -> int:
    from courselib.live import slurm
    shape = slurm.ClusterShape(nodes=args.nodes, gpus_per_node=args.gpus_per_node,
                               features=slurm.parse_features(args.features), base_port=args.port,
                               topology=_levels(args.topology, "--topology"),
                               topology_plugin=args.slurm_topology,
                               block_sizes=tuple(n for _, n in _levels(args.block_sizes, "--block-sizes",
                                                                       bare=True)))
    cluster = slurm.up(shape, say=_say)
    print(f"local Slurm up: {cluster.shape.describe()}")
    print(f"use it with:    export SLURM_CONF={cluster.conf}")
    return 0


def _levels(text: str | None, field: str, bare: bool = False) -> tuple:
    """``rack:8,block:4`` -> (("rack", 8), ("block", 4)); with ``bare``, ``4,8`` -> (("", 4), ("", 8))."""
    from courselib.errors import InputError
    out = []
    for part in (text or "").split(","):
        if not part.strip():
            continue
        name, _, size = part.strip().rpartition(":") if not bare else ("", "", part.strip())
        if (not bare and not name) or not size.isdigit():
            raise InputError(f"{part!r} is not {'a node count' if bare else 'LEVEL:SIZE'}", field=field,
                             hint="write --block-sizes 4,8" if bare else "write --topology rack:8,block:4")
        out.append((name, int(size)))
    return tuple(out)


def _down(args) -> int:
    from courselib.live import slurm
    if slurm.load_cluster() is None:
        print("no local Slurm is up; nothing to stop")
        return 0
    out = slurm.down(say=_say)
    if args.json:
        from courselib.cli.main import print_json
        print_json(out)
    else:
        for p in out["stopped"]:
            print(f"stopped {p['role']} (PID {p['pid']})")
    if out["left"]:
        print(f"courselib: PIDs {out['left']} did not stop; the state file is kept",
              file=sys.stderr)
        return 1
    return 0


def _status(args) -> int:
    from courselib.live import slurm
    info = slurm.status()
    if args.json:
        from courselib.cli.main import print_json
        print_json(info)
        return 0
    if "processes" not in info:
        print("no local Slurm is up (start one with `courselib slurm up`)")
        return 0
    print(f"local Slurm {info.get('version', 'unknown')} "
          f"{'up' if info['up'] else 'BROKEN (some processes died; run `courselib slurm down`)'}: "
          f"{info['shape']}")
    print(f"programs: {info['launcher']}")
    print(f"state directory: {info['state_dir']}")
    for p in info["processes"]:
        print(f"  {p['role']:<14} PID {p['pid']:<8} {'running' if p['alive'] else 'gone'}")
    for n in info.get("nodes", []):
        print(f"  {n['node']:<8} {n['state']:<10} {n['gres']:<8} {','.join(n['features']) or '-'}")
    return 0


def _replay(args) -> int:
    from courselib.io.workload import load_workload
    from courselib.live import slurm
    from courselib.live.slurm import plan as slurm_plan, replay as slurm_replay, result as slurm_result

    workload = load_workload(args.workload)
    plan = slurm_plan.plan_replay(workload, seconds_per_minute=args.seconds_per_minute,
                                  file=args.workload)
    cluster = slurm.load_cluster()
    if cluster is None or not cluster.all_ours():
        slurm.check_available(cluster.launcher if cluster is not None else None)
        from courselib.errors import CourseError
        raise CourseError("no local Slurm is up",
                          hint=f"start one with `courselib slurm up {plan.shape.cli_args()}`")
    say = _say if not args.json else (lambda m: None)
    if not cluster.shape.same_nodes(plan.shape):
        # The replay drives the whole local cluster anyway (it holds the partition down while it
        # submits), so a cluster of another shape is restarted with the workload's, on its ports.
        say(f"the local Slurm is {cluster.shape.describe()}, the workload needs "
            f"{plan.shape.describe()}: restarting it with that shape")
        out = slurm.down(cluster, say=say)
        if out["left"]:
            from courselib.errors import CourseError
            raise CourseError(f"PIDs {out['left']} of the local Slurm did not stop",
                              hint="run `courselib slurm down`, then the replay again")
        import dataclasses
        cluster = slurm.up(dataclasses.replace(plan.shape, base_port=cluster.shape.base_port), say=say)
    result = slurm_replay.run_replay(cluster, plan, say=say)
    from courselib.cli.replay import report
    return report(args, result, slurm_result,
                  record=lambda path, **kw: slurm_result.record(result, path, cluster=cluster, **kw))


def _replay_swf(args) -> int:
    from courselib.cli.main import print_json
    from courselib.errors import InputError
    from courselib.io.traces import read_trace
    from courselib.model.replay import from_trace_jobs, replay
    from courselib.units import format_duration

    reading = read_trace(args.trace)
    if reading.format != "swf":
        raise InputError(f"this is a {reading.format} trace, not SWF", file=args.trace,
                         hint="replay-swf replays Standard Workload Format (.swf) traces")
    from courselib.io.traces import MAX_MACHINE
    cores = args.cores
    if cores is not None and not 1 <= cores <= MAX_MACHINE:
        raise InputError(f"{cores} cores: give a whole number from 1 to {MAX_MACHINE:,}", field="--cores")
    if args.limit is not None and args.limit < 0:
        raise InputError(f"{args.limit} jobs: give a whole number of jobs, 0 or more", field="--limit")
    if cores is None:
        size = dict(reading.cluster)
        cores = int(size.get("MaxProcs") or size.get("MaxNodes") or 0)
        if cores < 1:
            given = {k: v for k, v in reading.header if k in ("MaxProcs", "MaxNodes")}
            what = ("gives no MaxProcs or MaxNodes" if not given else
                    "gives no usable machine size (" + ", ".join(f"{k}: {v[:30]}" for k, v in given.items()) + ")")
            raise InputError(f"the trace's header {what}", file=args.trace,
                             field="MaxProcs", hint="say how many cores with --cores N")
    jobs, skipped = from_trace_jobs(reading.jobs)
    if args.limit is not None:
        jobs = jobs[:args.limit]
    policies = ("fifo", "easy") if args.policy == "both" else (args.policy,)
    out = {"trace": args.trace, "cores": cores, "jobs": len(jobs), "skipped": len(skipped),
           "estimate": "requested time (SWF field 9), never below the run time; the run time "
                       "where no time was requested",
           "policies": [replay(jobs, cores, p).summary() for p in policies]}
    if args.json:
        print_json(out)
        return 0
    print(f"{args.trace}: {len(jobs)} jobs on {cores} cores"
          + (f" ({len(skipped)} records skipped: no run time or processor count)" if skipped else ""))
    print(f"{'policy':<6} {'started':>8} {'rejected':>8} {'mean wait':>12} {'max wait':>12} "
          f"{'bounded slowdown':>16} {'utilisation':>11}")
    for s in out["policies"]:
        print(f"{s['policy']:<6} {s['started']:>8} {s.get('rejected', 0):>8} "
              f"{format_duration(s['mean_wait_s']):>12} {format_duration(s['max_wait_s']):>12} "
              f"{_or_dash(s['mean_bounded_slowdown']):>16} {_or_dash(s['utilization']):>11}")
    return 0


def _or_dash(value) -> str:
    return "-" if value is None else str(value)


def register(subparsers) -> None:
    from courselib.live.slurm.plan import MIN_SLEEP
    p = subparsers.add_parser("slurm", help="a real local Slurm: up, down, status, replay a workload",
                              description="A real Slurm on this machine (munge, slurmctld, one slurmd "
                                          "per node, emulated GPUs) in a temporary directory on "
                                          "ports 17800+. Needs root and the course's Slurm (make setup-slurm).")
    sub = p.add_subparsers(dest="slurm_command", metavar="SUBCOMMAND")

    up = sub.add_parser("up", help="start the local cluster (idempotent)")
    up.add_argument("--nodes", type=int, default=4, help="slurmd nodes (default 4)")
    up.add_argument("--gpus-per-node", type=int, default=8, help="emulated GPUs per node (default 8)")
    up.add_argument("--features", default="nvlink:2",
                    help="node features: NAME (every node) or NAME:K (node1..nodeK), comma-separated "
                         "(default nvlink:2)")
    up.add_argument("--port", type=int, default=17800,
                    help="slurmctld port; node K listens on PORT+K (default 17800)")
    up.add_argument("--topology", default=None,
                    help="a tree of LEVEL:SIZE, outermost first (rack:8,block:4): writes topology.conf")
    up.add_argument("--slurm-topology", choices=("tree", "block"), default="tree",
                    help="TopologyPlugin: topology/tree (switches) or topology/block (default tree)")
    up.add_argument("--block-sizes", default=None, help="BlockSizes in nodes (block only; default: "
                    "the levels' sizes that are the base block times a power of two)")
    up.set_defaults(func=_up)

    down = sub.add_parser("down", help="stop every process of the local cluster, by PID")
    down.add_argument("--json", action="store_true", help="machine-readable output")
    down.set_defaults(func=_down)

    st = sub.add_parser("status", help="is the local cluster up; its processes and nodes")
    st.add_argument("--json", action="store_true", help="machine-readable output")
    st.set_defaults(func=_status)

    rp = sub.add_parser("replay", help="submit a workload's jobs to the local cluster and record "
                                       "what Slurm did")
    rp.add_argument("workload", help="WORKLOAD.yaml (see examples/slurm/)")
    rp.add_argument("--compare", action="store_true",
                    help="also run courselib's slurm policy and report the agreement (exit 1 if < 100%%)")
    rp.add_argument("--json", action="store_true", help="machine-readable output")
    rp.add_argument("--seconds-per-minute", type=float, default=None,
                    help="real seconds a job sleeps per --time minute of duration (default: the "
                         f"shortest job sleeps {MIN_SLEEP:g} s)")
    rp.add_argument("--record", metavar="FILE.json", default=None,
                    help="also write the replay as JSON (how the chapter's recorded runs are made)")
    rp.set_defaults(func=_replay)

    rs = sub.add_parser("replay-swf", help="replay an SWF trace on a pool of cores with the FIFO or "
                                           "EASY backfilling model (no Slurm needed)")
    rs.add_argument("trace", help="a Standard Workload Format trace (.swf)")
    rs.add_argument("--cores", type=int, default=None,
                    help="cores of the machine (default: the header's MaxProcs, else MaxNodes)")
    rs.add_argument("--policy", choices=("fifo", "easy", "both"), default="both",
                    help="fifo, easy (EASY backfilling) or both (default)")
    rs.add_argument("--limit", type=int, default=None, help="replay only the first N jobs")
    rs.add_argument("--json", action="store_true", help="machine-readable output")
    rs.set_defaults(func=_replay_swf)

    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])
