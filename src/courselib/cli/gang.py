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
    try:
        result = simulate(workload, args.policy, horizon=horizon, seed=args.seed, **options)
    except (TypeError, ValueError) as err:
        raise InputError(str(err), field="--set") from None
    if args.json:
        from courselib.cli.main import print_json
        print_json(result.to_dict())
        return 0
    extra = "".join(f" --set {o}" for o in args.set)
    print(f"ARG {args.workload} --policy {args.policy}"
          f"{' --horizon ' + args.horizon if args.horizon else ''} --seed {args.seed}{extra}")
    print(gang_table(result))
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

