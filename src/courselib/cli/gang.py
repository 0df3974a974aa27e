"""``courselib gang simulate WORKLOAD.yaml --policy P``: the mini gang scheduler from the shell.

Human output: the arguments (so a run can be repeated), a compact per-job table, the totals and
a one-line verdict; ``--trace`` adds the concrete allocation sequence. ``--json`` prints one
object with ``policy``, ``deadlock``, ``wasted_gpu_hours``, ``jobs`` (``name``, ``state``,
``start`` in seconds or null, ``end``, ``gpus_held_max``, …) and the ``trace``.
"""
from __future__ import annotations

from courselib.errors import InputError
from courselib.model.policies import policy_names
from courselib.plots.text import duration, gang_summary, gang_table
from courselib.units import parse_duration

POLICIES = policy_names()


def register(subparsers) -> None:
    gang = subparsers.add_parser("gang", help="gang scheduling: simulate a workload under a policy",
                                 description="The mini gang scheduler: one workload, five policies.")
    sub = gang.add_subparsers(dest="gang_command", metavar="SUBCOMMAND")
    sim = sub.add_parser("simulate", help="run WORKLOAD.yaml under a scheduling policy",
                         description="Simulate WORKLOAD.yaml under kube-default, kube-gang, volcano, kueue or slurm.")
    sim.add_argument("workload", metavar="WORKLOAD.yaml")
    sim.add_argument("--policy", required=True, choices=POLICIES)
    sim.add_argument("--horizon", default=None,
                     help="stop after this much simulated time (30s, 25m, 24h, 1d); default: until nothing "
                          "can change, at most last submit + max(1d, 2 x sum of durations)")
    sim.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    sim.add_argument("--set", action="append", default=[], metavar="OPTION=VALUE",
                     help="a policy option, e.g. overcommit_factor=1.5, backfill=false, preemption=true, "
                          "config_api=v1beta1, pod_group_cycle=false, permit_timeout=60, "
                          "group_order=b,a (repeatable)")
    sim.add_argument("--tp", type=int, default=None,
                     help="on a topology cluster: tensor-parallel size, to report per job the TP groups that "
                          "cross a slow link and the step slowdown (a split group crosses through the NICs "
                          "of the domain holding the fewest of its GPUs, 50 GB/s each)")
    sim.add_argument("--comm-fraction", type=float, default=0.1,
                     help="with --tp: exposed TP communication as a fraction of a step on NVLink (default 0.1)")
    sim.add_argument("--nvlink-level", default=None,
                     help="with --tp: the topology level that is one NVLink domain (an NVL72 rack); "
                          "default: the node")
    sim.add_argument("--stretch", action="store_true",
                     help="with --tp: a started job trains (1-f)+f*r times as long when its TP groups are split "
                          "over a slow link, so it ends later and holds its GPUs longer (default: durations as "
                          "written)")
    sim.add_argument("--trace", action="store_true", help="also print the allocation sequence")
    sim.add_argument("--json", action="store_true", help="print one JSON object")
    sim.set_defaults(func=cmd_simulate)
    gang.set_defaults(func=lambda args: (gang.print_help(), 2)[1])


def _option(text: str):
    if "=" not in text:
        raise InputError(f"{text!r} is not OPTION=VALUE", field="--set", hint="e.g. --set overcommit_factor=1.5")
    key, value = text.split("=", 1)
    low = value.strip().lower()
    if low in ("true", "false"):
        return key.strip(), low == "true"
    if low in ("none", "null"):
        return key.strip(), None
    for conv in (int, float):
        try:
            return key.strip(), conv(value)
        except ValueError:
            pass
    return key.strip(), value.strip()


def cmd_simulate(args) -> int:
    from courselib.io.workload import load_workload
    from courselib.sim.gang import simulate

    from courselib.sim.gang import EVENT_POLICIES
    workload = load_workload(args.workload)
    if (workload.events or any(j.preemption_policy for j in workload.jobs)) and args.policy not in EVENT_POLICIES:
        raise InputError(f"the workload has events (preemption, failures), which are modelled for "
                         f"{', '.join(EVENT_POLICIES)}", file=str(args.workload), field="--policy",
                         hint="choose --policy kube-default, kube-gang or kueue")
    horizon = None if args.horizon is None else parse_duration(args.horizon, field="--horizon")
    options = dict(_option(o) for o in args.set)
    factor = options.get("overcommit_factor")
    if args.policy == "volcano" and isinstance(factor, (int, float)) and not isinstance(factor, bool) \
            and factor < 1:  # NaN compares False: refused below with the other meaningless values
        import sys
        print(f"courselib: note: overcommit_factor {factor:g} is below 1; Volcano's overcommit plugin logs "
              "it as invalid and uses 1.2, and so does this simulation", file=sys.stderr)
    stretch = None
    if args.stretch:
        if args.tp is None:
            raise InputError("--stretch stretches durations by a split TP group's slowdown: give --tp",
                             field="--stretch", hint="e.g. --tp 8 --stretch")
        _check_tp(args, workload)
        from courselib.model.topology import Stretch
        stretch = Stretch(args.tp, args.comm_fraction, args.nvlink_level)
    try:
        result = simulate(workload, args.policy, horizon=horizon, seed=args.seed, stretch=stretch, **options)
    except (TypeError, ValueError) as err:
        raise InputError(str(err), field="--set") from None
    costs = _placement_costs(args, workload, result)
    if args.json:
        from courselib.cli.main import print_json
        doc = result.to_dict()
        if costs:
            doc["placement_cost"] = costs
        print_json(doc)
        return 0
    extra = "".join(f" --set {o}" for o in args.set)
    if args.tp is not None:
        extra += f" --tp {args.tp} --comm-fraction {args.comm_fraction:g}" + \
            (f" --nvlink-level {args.nvlink_level}" if args.nvlink_level else "") + \
            (" --stretch" if args.stretch else "")
    print(f"ARG {args.workload} --policy {args.policy}"
          f"{' --horizon ' + args.horizon if args.horizon else ''} --seed {args.seed}{extra}")
    print(gang_table(result))
    if workload.cluster.topology:
        print(placement_lines(workload, result, costs, args.tp, stretched=args.stretch))
    if args.trace:
        print("allocation sequence:")
        for e in result.trace:
            print(f"  t={duration(e.time):>7}  {e.job:<12} {e.what}  [holds {e.held}]")
    for e in result.events:
        if "preempt" in e:
            got = ", ".join(f"{n} lost {k} pod{'s' if k > 1 else ''}" for n, k in e["victims"].items()) \
                or "no pod was preempted"
            print(f"event t={duration(e['at'])}: {e['preempt']} arrived to preempt {e['job']}: {got}")
        else:
            print(f"event t={duration(e['at'])}: pod {e['pod']} of {e['fail']} fails")
    print(gang_summary(result))
    print(result.verdict)
    return 0



def _placement_costs(args, workload, result) -> dict:
    """Per started job on a topology cluster, with ``--tp``: its split TP groups and slowdown."""
    from courselib.model.topology import split_cost
    if args.tp is None:
        return {}
    _check_tp(args, workload)
    spec = workload.cluster
    out = {}
    for j in result.jobs:
        if j.placement is None:
            continue
        if j.gpus % args.tp:   # a job the TP size does not fit has no TP groups to price
            out[j.name] = None
            continue
        out[j.name] = split_cost(spec, j.placement, args.tp, args.comm_fraction, args.nvlink_level)
    return out


def _check_tp(args, workload) -> None:
    """``--tp``, ``--comm-fraction`` and ``--nvlink-level`` make sense for this workload, or one
    located line."""
    spec = workload.cluster
    if not spec.topology:
        raise InputError("--tp prices a placement on a topology: the cluster has none", field="--tp",
                         hint="add cluster.topology to the workload")
    if args.nvlink_level is not None and args.nvlink_level not in spec.levels:
        raise InputError(f"{args.nvlink_level!r} is not a level of cluster.topology", field="--nvlink-level",
                         hint=f"name one of: {', '.join(spec.levels)}")
    if not 0 <= args.comm_fraction <= 1:
        raise InputError(f"{args.comm_fraction:g} is not a fraction", field="--comm-fraction",
                         hint="write a number from 0 to 1, e.g. 0.1")
    if args.tp < 1:
        raise InputError(f"{args.tp} is not a tensor-parallel size", field="--tp", hint="write 1 or more")


def placement_lines(workload, result, costs: dict, tp: int | None = None, stretched: bool = False) -> str:
    """Where each started job landed (domains per level) and, with ``--tp``, what that costs
    (``stretched``: the run applied it, so a split job's end is already that much later)."""
    levels = workload.cluster.levels
    lines = [f"placement ({' / '.join(levels)}):"]
    for j in result.jobs:
        if j.domains is None:
            continue
        where = " | ".join(" ".join(j.domains[level]) for level in levels)
        line = f"  {j.name:<12} {where}"
        c = costs.get(j.name)
        if j.name in costs and c is None:
            line += f"   TP {tp} does not divide its {j.gpus} GPUs"
        elif c:
            link = (f" ({c['fast_GBps']:g} -> {c['slow_GBps']:g} GB/s: {c['nics']} NIC"
                    f"{'s' if c['nics'] > 1 else ''} x {c['nic_GBps']:g} on the emptier side)") if c["split"] else ""
            line += (f"   TP {c['tp']}: {c['split']} of {c['groups']} groups cross a slow link{link}: "
                     f"step x{c['slowdown']:.2f}")
            if stretched and c["split"]:
                line += " (applied: its duration stretched)"
        if j.topology_note:
            line += f"   note: {j.topology_note}"
        lines.append(line)
    return "\n".join(lines)
