"""Text views of a gang simulation's result: the table and the one-line summary that
``courselib gang simulate`` prints and the gang playground shows under its chart (no matplotlib)."""
from __future__ import annotations

from courselib.units import format_duration


def duration(seconds) -> str:
    """A duration as the course writes it (``1h30m``), ``-`` for none."""
    return "-" if seconds is None else format_duration(seconds)


def gang_table(result) -> str:
    """The compact per-job table of a :class:`~courselib.sim.gang.Result`."""
    losses = any(j.pods_lost or j.restarts or j.end_reason for j in result.jobs)
    head = ("job", "state", "submit", "1st bound", "start", "end", "GPUs", "held max", "wasted GPU-h") \
        + (("pods lost", "restarts", "back after"), ("reason",))[not losses] + (("reason",) if losses else ())
    rows = [head]
    for j in result.jobs:
        row = (j.name, j.state, duration(j.submit), duration(j.first_bound), duration(j.start),
               duration(j.end), str(j.gpus), str(j.gpus_held_max), f"{j.wasted_gpu_hours:.2f}")
        if losses:
            back = ", ".join("never" if b is None else duration(b - a) for a, b in j.recoveries) or "-"
            row += (str(j.pods_lost), str(j.restarts), back)
        rows.append(row + (j.end_reason or j.pending_reason or "",))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head) - 1)]
    return "\n".join(("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1]).rstrip() for r in rows)


def gang_summary(result) -> str:
    """Utilisation, wasted GPU-hours, wait and job completion times of a gang result, in one line."""
    pct = f"{100 * result.utilisation:.1f}%"
    return (f"utilisation {pct}  wasted {result.wasted_gpu_hours:.2f} GPU-h  "
            f"wait mean {duration(result.mean_wait)} p95 {duration(result.p95_wait)}  "
            f"JCT mean {duration(result.mean_jct)} p95 {duration(result.p95_jct)}  "
            f"(window {duration(result.end_time)}, {result.total_gpus} GPUs)")
