"""How often to checkpoint: Young's and Daly's optimal intervals and the time they waste.

Pure formulas; every duration is in **seconds**. ``C`` (``checkpoint_cost_s``, Daly's δ) is the
time one checkpoint takes, ``M`` (``mtbf_s``) the mean time between failures of the *whole job*
(see :func:`courselib.model.cost.job_mtbf`), ``R`` (``restart_s``) the time to restart after one.

Sources (FACTS §5): Young (1974), CACM 17(9):530–531; Daly (2006), FGCS 22(3):303–312; the code
read is LLNL/scr ``scripts/python/scr_ckpt_interval.py`` L219–246 @85e30b19.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from courselib.errors import InputError


def _positive(value, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value <= 0:
        raise InputError(f"{value!r} is not a duration > 0", field=field,
                         hint="write a duration with its unit, e.g. 60s, 5m or 2h")
    return float(value)


def _non_negative(value, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < 0:
        raise InputError(f"{value!r} is not a duration ≥ 0", field=field,
                         hint="write a duration with its unit, e.g. 0s or 5m")
    return float(value)


def young_interval(checkpoint_cost_s: float, mtbf_s: float) -> float:
    """Young's first-order optimum: ``T_opt = sqrt(2 · C · M)``.

    See FACTS §5: Young (1974); SCR ``scr_ckpt_interval.py``:
    ``math.sqrt(2.0 * checkpoint_cost * avg_secs_before_failure)``.
    """
    c = _positive(checkpoint_cost_s, "cost")
    m = _positive(mtbf_s, "mtbf")
    return math.sqrt(2.0 * c * m)


def daly_interval(checkpoint_cost_s: float, mtbf_s: float) -> float:
    """Daly's higher-order optimum compute time between checkpoints (excluding δ itself).

    ``τ = sqrt(2δM)·[1 + (1/3)·sqrt(δ/(2M)) + (1/9)·(δ/(2M))] − δ`` for ``δ < 2M``, else ``τ = M``.
    See FACTS §5: Daly (2006) eq. 37 as coded in SCR ``scr_ckpt_interval.py``. Cross-checked
    against the paper's figures: M = 24 h, 6 h, 15 min with δ = 5 min give 116.69, 56.71 and
    9.14 min. [derived] ``τ ≤ M`` always: below ``δ = 2M`` the curve rises to ``8M/9``.
    """
    c = _positive(checkpoint_cost_s, "cost")
    m = _positive(mtbf_s, "mtbf")
    m2 = 2.0 * m
    if c >= m2:
        return m
    f = c / m2
    return math.sqrt(c * m2) * (1.0 + math.sqrt(f) / 3.0 + f / 9.0) - c


def first_order_waste(interval_s: float, checkpoint_cost_s: float, mtbf_s: float,
                      restart_s: float = 0.0) -> float:
    """The first-order waste model, unclamped: ``W(T) = C/T + T/(2M) + R/M``.

    [derived, FACTS §5] checkpoint overhead ``C/T`` plus, per failure (rate ``1/M``), half an
    interval of lost work and one restart. It is minimised at Young's ``T = sqrt(2CM)`` where
    ``W = sqrt(2C/M) + R/M``. Valid only while ``C``, ``T`` and ``R`` are small against ``M``; it can
    exceed 1, which is meaningless — see :func:`waste_fraction`.
    """
    t = _positive(interval_s, "interval")
    c = _non_negative(checkpoint_cost_s, "cost")
    m = _positive(mtbf_s, "mtbf")
    r = _non_negative(restart_s, "restart")
    return c / t + t / (2.0 * m) + r / m


def waste_fraction(interval_s: float, checkpoint_cost_s: float, mtbf_s: float,
                   restart_s: float = 0.0) -> float:
    """Fraction of machine time wasted, ``first_order_waste`` **clamped to [0, 1]**.

    A fraction above 1 would mean the job wastes more time than it has: the first-order model
    has left its range (failures as frequent as checkpoints), and the honest reading is "the job
    makes essentially no progress". :class:`CheckpointPlan` reports whether it clamped.
    """
    return min(1.0, first_order_waste(interval_s, checkpoint_cost_s, mtbf_s, restart_s))


@dataclass(frozen=True)
class CheckpointPlan:
    """Young's and Daly's intervals for one (C, M, R), and the waste at Daly's interval."""

    checkpoint_cost_s: float
    mtbf_s: float
    restart_s: float
    young_s: float
    daly_s: float
    waste_fraction: float           # at daly_s, clamped to [0, 1]
    waste_fraction_young: float     # at young_s (the first-order minimum), clamped
    clamped: bool                   # True when the first-order model gave > 1 at daly_s


def checkpoint_plan(checkpoint_cost_s: float, mtbf_s: float, restart_s: float = 0.0) -> CheckpointPlan:
    """Everything the ``courselib checkpoint`` command prints, from one set of inputs."""
    young = young_interval(checkpoint_cost_s, mtbf_s)
    daly = daly_interval(checkpoint_cost_s, mtbf_s)
    raw = first_order_waste(daly, checkpoint_cost_s, mtbf_s, restart_s)
    return CheckpointPlan(
        checkpoint_cost_s=float(checkpoint_cost_s), mtbf_s=float(mtbf_s), restart_s=float(restart_s),
        young_s=young, daly_s=daly,
        waste_fraction=min(1.0, raw),
        waste_fraction_young=waste_fraction(young, checkpoint_cost_s, mtbf_s, restart_s),
        clamped=raw > 1.0,
    )
