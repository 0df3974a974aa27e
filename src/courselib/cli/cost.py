"""``courselib cost`` and ``courselib checkpoint``: price idle GPUs, a lost rank, a checkpoint interval.

Thin views over :mod:`courselib.model.cost` and :mod:`courselib.model.checkpoint`. Each run echoes
its arguments first (``ARG …`` lines) so anyone can reproduce it; ``--json`` prints one document.
"""
from __future__ import annotations

from courselib.cli.barrier import add_ladder_arguments, ladder_from_args
from courselib.errors import InputError
from courselib.io.policy import check_count
from courselib.model import checkpoint as ckpt
from courselib.model import collective, cost, recovery

#: the fast links a TP group should stay on (per GPU, one direction; courselib.model.collective)
SPLIT_FAST = {"nvlink4-h100": collective.NVLINK_H100_BPS, "nvlink5-nvl72": collective.NVLINK5_BPS}
from courselib.units import format_duration, format_usd, parse_duration


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "cost", help="wasted GPU-hours and dollars of GPUs held while a job waits for its gang",
        description="Wasted GPU-hours = GPUs held × wait, priced over a price or a range, and the "
                    "same job under a gang admission check (no GPU held while pending).")
    p.add_argument("--gpus", type=int, help="GPUs already allocated and idle (e.g. 400)")
    p.add_argument("--wait", help="how long they wait for the rest: 25m, 0.417h, 1500s")
    p.add_argument("--price", default="2-4", help="$ per GPU-hour: 3, or a range 2-4 (default 2-4)")
    p.add_argument("--gang-size", type=int, help="the whole job's GPUs (e.g. 512), to show how many are missing")
    p.add_argument("--preset", choices=sorted(cost.PRESETS),
                   help="the seed's 400/112/25 min at $2-4, or the exercise's 480/32/40 min at $3")
    p.add_argument("--recovery", choices=recovery.RUNGS + ("all",),
                   help="price one lost rank recovered on this rung of the recovery ladder (or all of them)")
    p.add_argument("--ranks", type=int, help="with --recovery: ranks (GPUs) in the job (default 512)")
    p.add_argument("--since-checkpoint", help="with --recovery: how long after the last checkpoint the rank "
                   "is lost (default 30m)")
    p.add_argument("--loss-kind", choices=("error", "silent"),
                   help="with --recovery: error (its process is gone, NCCL reports it) or silent (it hangs)")
    add_ladder_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=_cost)

    r = subparsers.add_parser(
        "split-cost", help="what a tensor-parallel group split over a slow link costs a run",
        description="A TP group across a slower link runs every all-reduce at that link's bandwidth; with "
                    "exposed TP communication a fraction f of a step on NVLink, a step takes (1-f) + f x r "
                    "as long (r = fast/slow bandwidth), for every GPU of the job, for the whole run.")
    r.add_argument("--gpus", type=int, required=True, help="GPUs in the job (every one waits for the slowest group)")
    r.add_argument("--run", required=True, help="how long the run takes well placed: 30d, 720h")
    r.add_argument("--comm-fraction", type=float, required=True,
                   help="exposed TP communication as a fraction of a step on NVLink, e.g. 0.1")
    r.add_argument("--fast", choices=sorted(SPLIT_FAST), default="nvlink4-h100",
                   help="the link the group should use (default nvlink4-h100: 450 GB/s a GPU one way; "
                        "nvlink5-nvl72: 900 GB/s)")
    r.add_argument("--slow-gbps", type=float, default=collective.IB_PER_GPU_BPS / collective.GB,
                   help="the split group's slowest hop, GB/s one way (default 50: one 400 Gb/s NIC, the "
                        "worst split, one GPU alone across; a 4+4 split crosses through 4 NICs, 200)")
    r.add_argument("--price", default="2-4", help="$ per GPU-hour: 3, or a range 2-4 (default 2-4)")
    r.add_argument("--json", action="store_true", help="print one JSON document")
    r.set_defaults(func=_split_cost)

    q = subparsers.add_parser(
        "checkpoint", help="Young's and Daly's checkpoint intervals, the waste at them, the cost of failures",
        description="Optimal checkpoint interval for a checkpoint cost C and a job MTBF M "
                    "(Young 1974, Daly 2006) and the first-order waste fraction C/T + T/(2M) + R/M.")
    q.add_argument("--cost", required=True, dest="ckpt_cost", help="time one checkpoint takes: 60s, 5m")
    q.add_argument("--mtbf", required=True, help="mean time between failures of the whole job: 2h, 1d")
    q.add_argument("--restart", default="0s", help="time to restart after a failure (default 0s)")
    q.add_argument("--gpus", type=int, help="GPUs in the job: also print the expected cost of failures")
    q.add_argument("--timeout", default="10m",
                   help="detection delay: the watchdog timeout (default 10m, PyTorch's NCCL default)")
    q.add_argument("--interval", help="checkpoint interval to price (default: Daly's)")
    q.add_argument("--price", help="$ per GPU-hour for the failure cost: 3 or 2-4")
    q.add_argument("--json", action="store_true", help="print one JSON document")
    q.set_defaults(func=_checkpoint)


def _round(v, nd=2):
    return [round(x, nd) for x in v] if isinstance(v, list) else round(v, nd)


def _price_text(p: cost.Price) -> str:
    return f"${p.low:g}-${p.high:g}" if p.is_range else f"${p.low:g}"


def _wait_from_args(args) -> cost.GangWait:
    if args.preset:
        if args.gpus is not None or args.wait is not None:
            raise InputError("--preset fixes the GPUs and the wait", field="--preset",
                             hint="drop --gpus/--wait, or drop --preset")
        return cost.PRESETS[args.preset]
    if args.gpus is None or args.wait is None:
        raise InputError("needs --gpus and --wait", field="cost",
                         hint="e.g. courselib cost --gpus 400 --wait 25m --price 2-4, or --preset seed")
    check_count("gpus", args.gpus, field="--gpus")
    if args.gang_size is not None:
        check_count("gpus", args.gang_size, field="--gang-size")
    return cost.GangWait(gpus_held=args.gpus, wait_s=parse_duration(args.wait, field="--wait"),
                         price=cost.Price.parse(args.price), gang_size=args.gang_size)


def cost_document(w: cost.GangWait) -> dict:
    """The ``cost`` command's JSON: GPU-hours rounded to 0.01, dollars to cents."""
    c = cost.gang_wait_cost(w)
    price = [w.price.low, w.price.high] if w.price.is_range else w.price.low
    return {
        "gpus_held": w.gpus_held, "gang_size": w.gang_size, "missing": w.missing,
        "wait_s": w.wait_s, "wait_h": round(w.wait_s / 3600, 4),
        "price_usd_per_gpu_hour": price,
        "wasted_gpu_hours": round(c.wasted_gpu_hours, 2),
        "cost_usd": _round(c.cost_usd),
        "with_gang_admission": {"gpus_held_while_pending": 0,
                                "wasted_gpu_hours": round(c.gang_wasted_gpu_hours, 2),
                                "cost_usd": _round(c.gang_cost_usd)},
        "saving_usd": _round(c.saving_usd),
    }


def recovery_document(args) -> dict:
    """``cost --recovery``: each rung's figures for one lost rank, priced."""
    if args.preset or args.gpus is not None or args.wait is not None:
        raise InputError("--recovery prices a lost rank, not GPUs held while waiting", field="--recovery",
                         hint="drop --gpus/--wait/--preset (use --ranks)")
    kw = ladder_from_args(args)
    if args.ranks is not None:
        check_count("gpus", args.ranks, field="--ranks")
        kw["ranks"] = args.ranks
    if args.since_checkpoint is not None:
        kw["since_checkpoint_s"] = parse_duration(args.since_checkpoint, field="--since-checkpoint")
    if args.loss_kind:
        kw["loss"] = args.loss_kind
    x = recovery.LadderInputs(**kw)
    price = cost.Price.parse(args.price)
    names = recovery.RUNGS if args.recovery == "all" else (args.recovery,)
    rows = []
    for r in (recovery.rung(n, x) for n in names):
        row = r.to_dict()
        row["cost_usd"] = _round(price.times(r.lost_gpu_hours))
        rows.append(row)
    return {"inputs": {k: v for k, v in x.__dict__.items()}, "state_bytes": x.state_bytes,
            "price_usd_per_gpu_hour": [price.low, price.high] if price.is_range else price.low,
            "rungs": rows}


def _recovery(args) -> int:
    doc = recovery_document(args)
    if args.json:
        from courselib.cli.main import print_json
        print_json(doc)
        return 0
    x = doc["inputs"]
    print(f"ARG ranks {x['ranks']}  ARG since-checkpoint {format_duration(x['since_checkpoint_s'])}  "
          f"ARG loss-kind {x['loss']}  ARG params {x['params']:g}  ARG replacement-wait "
          f"{format_duration(x['replacement_wait_s'])}  ARG price {args.price}")
    print(f"state to reload or move: {x['params']:g} parameters × {x['bytes_per_param']:g} bytes = "
          f"{doc['state_bytes'] / 1e12:,.2f} TB")
    print()
    head = ("rung", "detect", "recover", "redone", "idle GPUs", "lost GPU-h", "cost", "ranks after")
    lines = [head]
    def t(v):
        return format_duration(round(v, 1) if v < 60 else round(v))
    for r in doc["rungs"]:
        lines.append((r["name"], t(r["detection_s"]), t(r["recovery_s"]), t(r["redone_s"]), str(r["idle_gpus"]), f"{r['lost_gpu_hours']:,.2f}",
                      format_usd(r["cost_usd"]), f"{r['capacity_after']}"
                      + (f" (+{r['spare_gpus']} spare)" if r["spare_gpus"] else "")))
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(head))]
    for line in lines:
        print("  ".join(str(c).ljust(w) for c, w in zip(line, widths)).rstrip())
    print()
    for r in doc["rungs"]:
        parts = " + ".join(f"{k} {t(v)}" for k, v in r["parts"].items())
        print(f"{r['name']}: recover = {parts}; needs {r['needs']}")
    return 0


def _cost(args) -> int:
    if args.recovery:
        return _recovery(args)
    for flag, value in (("--ranks", args.ranks), ("--since-checkpoint", args.since_checkpoint),
                        ("--loss-kind", args.loss_kind)):
        if value is not None:
            raise InputError(f"{flag} goes with --recovery", field=flag, hint="add --recovery RUNG")
    if ladder_from_args(args):
        raise InputError("the ladder's inputs go with --recovery", field="--recovery", hint="add --recovery RUNG")
    w = _wait_from_args(args)
    doc = cost_document(w)
    if args.json:
        from courselib.cli.main import print_json
        print_json(doc)
        return 0
    print(f"ARG gpus {w.gpus_held}")
    print(f"ARG wait {format_duration(w.wait_s)} ({w.wait_s:g} s = {w.wait_s / 3600:.4f} h)")
    print(f"ARG price {_price_text(w.price)} per GPU-hour")
    if w.gang_size is not None:
        print(f"ARG gang-size {w.gang_size} ({w.missing} missing)")
    print()
    print(f"without a gang admission check: {w.gpus_held} GPUs held idle × {w.wait_s / 3600:.4f} h "
          f"= {doc['wasted_gpu_hours']:,.2f} GPU-hours → {format_usd(doc['cost_usd'])}")
    print("with a gang admission check (Volcano minMember, a Slurm allocation): 0 GPUs held while "
          f"pending → 0 GPU-hours, {format_usd(doc['with_gang_admission']['cost_usd'])}")
    print(f"saving: {format_usd(doc['saving_usd'])} per occurrence (the job starts at the same moment "
          "either way: when the last GPUs free up)")
    return 0


def checkpoint_document(args) -> dict:
    c = parse_duration(args.ckpt_cost, field="--cost")
    m = parse_duration(args.mtbf, field="--mtbf")
    r = parse_duration(args.restart, field="--restart")
    plan = ckpt.checkpoint_plan(c, m, r)
    doc = {
        "checkpoint_cost_s": c, "mtbf_s": m, "restart_s": r,
        "young_s": round(plan.young_s, 2), "daly_s": round(plan.daly_s, 2),
        "waste_fraction": round(plan.waste_fraction, 4),
        "waste_fraction_young": round(plan.waste_fraction_young, 4),
        "waste_clamped": plan.clamped,
    }
    if args.gpus is not None:
        check_count("gpus", args.gpus, field="--gpus")
        interval = parse_duration(args.interval, field="--interval") if args.interval else plan.daly_s
        detect = parse_duration(args.timeout, field="--timeout")
        f = cost.expected_failure_cost(args.gpus, interval, m, detection_s=detect, restart_s=r)
        doc["failure"] = {
            "gpus": args.gpus, "interval_s": round(interval, 2), "detection_s": detect,
            "expected_lost_s_per_failure": round(f.expected_lost_s_per_failure, 2),
            "expected_gpu_hours_per_failure": round(f.expected_gpu_hours_per_failure, 2),
            "failures_per_day": round(f.failures_per_day, 4),
            "expected_gpu_hours_per_day": round(f.expected_gpu_hours_per_day, 2),
            "waste_fraction_at_interval": round(ckpt.waste_fraction(interval, c, m, r), 4),
        }
        if args.price:
            price = cost.Price.parse(args.price)
            doc["failure"]["cost_usd_per_failure"] = _round(price.times(f.expected_gpu_hours_per_failure))
            doc["failure"]["cost_usd_per_day"] = _round(price.times(f.expected_gpu_hours_per_day))
    elif args.interval or args.price:
        raise InputError("--interval and --price price the failures of a job", field="--gpus",
                         hint="add --gpus N")
    return doc


def _checkpoint(args) -> int:
    doc = checkpoint_document(args)
    if args.json:
        from courselib.cli.main import print_json
        print_json(doc)
        return 0
    print(f"ARG cost {format_duration(doc['checkpoint_cost_s'])}  ARG mtbf {format_duration(doc['mtbf_s'])}"
          f"  ARG restart {format_duration(doc['restart_s'])}")
    print()
    print(f"Young (1974)  T = sqrt(2·C·M)            = {doc['young_s']:,.2f} s "
          f"({doc['young_s'] / 60:.2f} min)")
    print(f"Daly (2006)   τ = higher-order optimum   = {doc['daly_s']:,.2f} s "
          f"({doc['daly_s'] / 60:.2f} min)")
    note = "  (clamped: the first-order model gave more than 1)" if doc["waste_clamped"] else ""
    print(f"waste fraction C/T + T/(2M) + R/M at Daly's τ = {doc['waste_fraction']:.4f}{note}")
    print(f"                                  at Young's T = {doc['waste_fraction_young']:.4f}")
    if "failure" in doc:
        f = doc["failure"]
        print()
        print(f"one failure of a {f['gpus']}-GPU job checkpointing every {format_duration(f['interval_s'])}: "
              f"every GPU loses on average interval/2 + {format_duration(f['detection_s'])} detection + "
              f"{format_duration(doc['restart_s'])} restart = {format_duration(f['expected_lost_s_per_failure'])}")
        print(f"  = {f['expected_gpu_hours_per_failure']:,.2f} GPU-hours per failure"
              + (f", {format_usd(f['cost_usd_per_failure'])}" if "cost_usd_per_failure" in f else ""))
        print(f"  × {f['failures_per_day']:g} failures/day = {f['expected_gpu_hours_per_day']:,.2f} GPU-hours/day"
              + (f", {format_usd(f['cost_usd_per_day'])}/day" if "cost_usd_per_day" in f else ""))
    return 0


def split_cost_document(args) -> dict:
    run_s = parse_duration(args.run, field="--run")
    check_count("gpus", args.gpus, field="--gpus")
    if not 0 <= args.comm_fraction <= 1:
        raise InputError(f"{args.comm_fraction:g} is not a fraction", field="--comm-fraction",
                         hint="write a number from 0 to 1, e.g. 0.1")
    fast = SPLIT_FAST[args.fast]
    if not 0.001 <= args.slow_gbps < fast / collective.GB:   # (from 1 MB/s: a GPU link, not a typo)
        raise InputError(f"{args.slow_gbps:g} GB/s is not a link slower than {args.fast}'s "
                         f"{fast / collective.GB:g} GB/s", field="--slow-gbps",
                         hint="write the slow link's GB/s one way, e.g. 50 for a 400 Gb/s NIC")
    slow = args.slow_gbps * collective.GB
    slowdown = collective.step_slowdown(args.comm_fraction, fast, slow)
    doc = cost.split_placement_cost(args.gpus, run_s, slowdown, cost.Price.parse(args.price))
    doc.update(fast=args.fast, fast_GBps=fast / collective.GB, slow_GBps=args.slow_gbps,
               comm_fraction=args.comm_fraction, halving_comm_fraction=collective.halving_comm_fraction(fast, slow))
    return doc


def _split_cost(args) -> int:
    doc = split_cost_document(args)
    if args.json:
        from courselib.cli.main import print_json
        print_json(doc)
        return 0
    price = cost.Price.parse(args.price)
    print(f"ARG gpus {doc['gpus']}  run {format_duration(doc['run_s'])}  comm-fraction {doc['comm_fraction']:g}")
    print(f"ARG fast {doc['fast']} ({doc['fast_GBps']:g} GB/s)  slow {doc['slow_GBps']:g} GB/s  "
          f"price {_price_text(price)} per GPU-hour")
    print()
    r = doc["fast_GBps"] / doc["slow_GBps"]
    print(f"bandwidth ratio r = {r:g}: one split TP group makes every step (1 - f) + f x r = "
          f"x{doc['slowdown']:.3f} as long, for the whole job")
    half = doc["halving_comm_fraction"]
    print("MFU halves when f = 1/(r - 1) = " + (f"{100 * half:.1f} %" if half is not None else "never (r <= 1)")
          + f"; at f = {doc['comm_fraction']:g} it is divided by {doc['slowdown']:.3f}")
    print(f"over the run: +{format_duration(doc['extra_s'])} x {doc['gpus']} GPUs = "
          f"{doc['extra_gpu_hours']:,.1f} GPU-hours -> {format_usd(doc['cost_usd'])}")
    return 0
