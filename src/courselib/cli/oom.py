"""``courselib oom``: simulate an OOM kill, compute a pod's oom_score_adj, or watch the real kernel."""
from __future__ import annotations

from courselib.errors import InputError
from courselib.units import PAGE_SIZE, format_bytes, parse_memory


def register(subparsers) -> None:
    p = subparsers.add_parser("oom", help="the OOM killer: simulate, Kubernetes oom_score_adj, real kernel",
                              description="The kernel's OOM killer at a cgroup boundary and on the node.")
    sub = p.add_subparsers(dest="oom_command", metavar="SUBCOMMAND")

    s = sub.add_parser("simulate", help="which process does the OOM killer pick? (SCENARIO.yaml)")
    s.add_argument("scenario", metavar="SCENARIO.yaml")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.set_defaults(func=cmd_simulate)

    a = sub.add_parser("score-adj", help="QoS class and oom_score_adj of each container of a pod")
    a.add_argument("pod", metavar="POD.yaml", help="a Pod, or a workload with a pod template")
    a.add_argument("--node-memory", required=True, metavar="SIZE",
                   help="the node's memory capacity, e.g. 16Gi (machine capacity, not allocatable)")
    a.add_argument("--kubernetes", metavar="VERSION", default=None,
                   help="the kubelet's version, 1.30 to 1.37 (default: the course's, 1.37.2)")
    a.add_argument("--json", action="store_true")
    a.set_defaults(func=cmd_score_adj)

    r = sub.add_parser("real", help="real processes in a temporary memory cgroup, killed by the kernel")
    r.add_argument("--limit", default="64Mi", metavar="SIZE", help="the cgroup's memory limit (default 64Mi)")
    r.add_argument("--scenario", default="largest", metavar="NAME",
                   help="largest, adj-shifts, same-adj, trigger-dies, protected, last-resort, or all")
    r.add_argument("--repeat", type=int, default=1, metavar="N", help="run each scenario N times")
    r.add_argument("--json", action="store_true")
    r.set_defaults(func=cmd_real)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _mib(pages) -> str:
    return "-" if pages is None else f"{pages * PAGE_SIZE / 2 ** 20:.1f}"


def cmd_simulate(args) -> int:
    from courselib.cli.main import print_json
    from courselib.io.scenario import read_scenario
    from courselib.sim.memcg import simulate, summary

    sc = read_scenario(args.scenario)
    out = summary(simulate(sc))
    if args.json:
        print_json(out)
        return 0
    where = "memory cgroup (memory.max" if sc.scope == "memcg" else "node (RAM"
    print(f"{sc.scope} OOM, cgroup {sc.cgroup}: {where} = {sc.limit} pages = {format_bytes(sc.limit * PAGE_SIZE)})")
    if out["totalpages"] is not None:
        print(f"totalpages = {out['totalpages']}; one oom_score_adj point = totalpages/1000 = "
              f"{out['totalpages'] // 1000} pages")
    print(f"{'process':<16} {'adj':>5} {'rss MiB':>9} {'points':>10} {'oom_score':>9}  status")
    for p in sc.processes:
        pts = out["points"].get(p.name)
        print(f"{p.name:<16} {p.task.oom_score_adj:>5} {_mib(p.task.rss):>9} "
              f"{'never' if pts is None and p.name in out['points'] else ('-' if pts is None else pts):>10} "
              f"{out['oom_score'].get(p.name, '-'):>9}  {out['status'][p.name]}"
              + (" (exit 137)" if out["exit_codes"][p.name] else ""))
    for k in out["ooms"]:
        print(f"t={k['time']:g}s {k['scope']} OOM in {k['domain']}: victim {k['victim'] or 'none'}"
              + (f", group {k['group']} killed: {', '.join(k['killed'])}" if k["group"] else ""))
    if out["panic"]:
        print(f"Kernel panic: {out['panic']} (no process could be killed)")
    elif out["victim"] is None and out["ooms"]:
        print("no eligible process: a memcg OOM kills nothing and does not panic")
    ev = out["events"]
    print(f"memory.events: oom {ev['oom']}  oom_kill {ev['oom_kill']}  oom_group_kill {ev['oom_group_kill']}"
          f"  (high {ev['high']}, max {ev['max']} simulated steps)")
    return 0


def cmd_score_adj(args) -> int:
    from courselib.cli.main import print_json
    from courselib.io.pod import read_pods
    from courselib.model.qos import KUBERNETES_VERSION, pod_oom_score_adj, rules

    capacity = parse_memory(args.node_memory, field="--node-memory")
    if capacity <= 0:
        raise InputError("must be positive", field="--node-memory")
    try:
        kubelet = rules(args.kubernetes or KUBERNETES_VERSION)
    except ValueError as err:
        raise InputError(str(err), field="--kubernetes", hint="give e.g. --kubernetes 1.31") from None
    rows = []
    for r in read_pods(args.pod):
        qos, adjs = pod_oom_score_adj(r.pod, capacity, kubelet)
        rows.append({"kind": r.kind, "name": r.name, "template": r.where, "line": r.line,
                     "qos": qos, "priorityClassName": r.pod.priority_class_name,
                     "containers": [{"name": a.name, "init": a.init, "oom_score_adj": a.oom_score_adj}
                                    for a in adjs]})
    if args.json:
        print_json({"node_memory": capacity, "kubernetes": kubelet.version, "pods": rows})
        return 0
    for row in rows:
        print(f"{row['kind']} {row['name']} ({row['template']}): QoS {row['qos']}, "
              f"node memory {format_bytes(capacity)}, kubelet v{kubelet.version}")
        for c in row["containers"]:
            print(f"  {c['name']:<24} oom_score_adj {c['oom_score_adj']:>5}" + ("  (init)" if c["init"] else ""))
    return 0


def cmd_real(args) -> int:
    from courselib.cli.main import print_json
    from courselib.live.memcg import SCENARIOS, can_lower_adj, run_real

    limit = parse_memory(args.limit, field="--limit")
    names = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    if args.scenario not in SCENARIOS and args.scenario != "all":
        raise InputError(f"no scenario {args.scenario!r}", field="--scenario",
                         hint="choose from " + ", ".join(SCENARIOS) + ", all")
    if args.repeat < 1:
        raise InputError("must be at least 1", field="--repeat")
    runs, skipped = [], []
    for name in names:
        if args.scenario == "all" and any(h.oom_score_adj < 0 for h in SCENARIOS[name].hogs) \
                and not can_lower_adj():
            skipped.append(name)
            continue
        for _ in range(args.repeat):
            runs.append(run_real(name, limit=limit))
    if args.json:
        print_json({"runs": [r.as_dict() for r in runs], "skipped": skipped,
                    "all_match": all(r.match for r in runs)})
        return 0 if all(r.match for r in runs) else 1
    for r in runs:
        print(f"[{r.scenario}] cgroup {r.cgroup_version} {r.cgroup_path}")
        print(f"  limit {format_bytes(r.limit)} = {r.limit // PAGE_SIZE} pages; one adj point = "
              f"{r.limit // PAGE_SIZE // 1000} pages; charged before growth {format_bytes(r.usage_before)}")
        print(f"  {'process':<8} {'pid':>7} {'adj':>5} {'rss pages':>9} {'pte kB':>6} {'points':>7} "
              f"{'kernel rss':>10} {'k.points':>8} {'exit':>5}")
        unit = r.limit // PAGE_SIZE // 1000
        for m in r.measured:
            rc = r.returncodes.get(m.name)
            code = "-" if rc is None else (f"{128 - rc}" if rc < 0 else str(rc))
            kt = r.kernel_table.get(m.name)
            # the kernel's own numbers from its OOM report, through the same formula
            kpts = "-" if kt is None else (kt["rss"] + kt["swapents"] + kt["pgtables_bytes"] // PAGE_SIZE
                                           + kt["oom_score_adj"] * unit)
            pts = r.predicted_points.get(m.name)
            print(f"  {m.name:<8} {m.pid:>7} {m.oom_score_adj:>5} {m.rss:>9} {m.pagetables // 1024:>6} "
                  f"{'never' if pts is None else pts:>7} {kt['rss'] if kt else '-':>10} {kpts:>8} {code:>5}")
        print(f"  prediction: kill {', '.join(r.predicted_killed) or 'nobody'}; oom_kill {r.predicted_oom_kill}")
        print(f"  kernel:     killed {', '.join(r.killed) or 'nobody'} (returncode "
              f"{', '.join(str(r.returncodes[n]) for n in r.killed) or '-'}, exit 137); "
              f"oom_kill {r.oom_kill}")
        for line in r.kernel_log:
            if "Killed process" in line:
                print(f"  dmesg: {line[:160]}")
        print(f"  {'MATCH' if r.match else 'MISMATCH'}")
    for name in skipped:
        print(f"[{name}] skipped: needs a negative oom_score_adj (CAP_SYS_RESOURCE), which this process lacks")
    return 0 if all(r.match for r in runs) else 1
