"""What idle-but-held GPUs and a lost rank cost, in GPU-hours and dollars.

Pure formulas (no I/O). Durations are **seconds** everywhere in this module; GPU-hours are
``gpus × seconds / 3600``. Minutes versus hours is the classic slip, so callers turn text such
as ``25m`` into seconds with :func:`courselib.units.parse_duration` first.

Sources: DESIGN.md §3 (engine 3, "wasted GPU-hours = N_allocated × T_wait"); FACTS §3.1 (Volcano's
gang plugin binds no pod until ``minMember`` can be placed, so a gang-admitted job holds no GPU
while pending); FACTS §4.2–4.3 and §5 (a lost rank restarts all ranks; work lost = time since the
last checkpoint + detection + restart).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from courselib.errors import InputError

SECONDS_PER_HOUR = 3600.0
SECONDS_PER_DAY = 86400.0


def _check_count(value, field: str, *, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(f"{value!r} is not a whole number ≥ {minimum}", field=field,
                         hint="give a count of GPUs such as 400")
    return value


def _check_seconds(value, field: str, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < 0 or (positive and value == 0):
        need = "> 0" if positive else "≥ 0"
        raise InputError(f"{value!r} is not a duration {need} in seconds", field=field,
                         hint="write a duration with its unit, e.g. 25m, 0.417h or 1500s")
    return float(value)


@dataclass(frozen=True)
class Price:
    """A price per GPU-hour in US dollars: one number, or a range ``low``–``high``."""

    low: float
    high: float

    def __post_init__(self):
        for name in ("low", "high"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise InputError(f"{v!r} is not a price ≥ 0 in $/GPU-hour", field="price")
        if self.low > self.high:
            raise InputError(f"range {self.low:g}-{self.high:g} is written backwards", field="price",
                             hint=f"write the low price first: {self.high:g}-{self.low:g}")

    @property
    def is_range(self) -> bool:
        return self.low != self.high

    @classmethod
    def parse(cls, text) -> "Price":
        """``"3"`` → a single price; ``"2-4"`` → a range. A backwards range (``4-2``) is an error."""
        if isinstance(text, Price):
            return text
        if isinstance(text, (int, float)) and not isinstance(text, bool):
            return cls(float(text), float(text))
        m = re.fullmatch(r"\s*\$?([0-9]*\.?[0-9]+)\s*(?:-\s*\$?([0-9]*\.?[0-9]+)\s*)?", str(text))
        if not m:
            raise InputError(f"{text!r} is not a price", field="price",
                             hint="write dollars per GPU-hour: 3 or a range 2-4")
        low = float(m.group(1))
        high = float(m.group(2)) if m.group(2) is not None else low
        return cls(low, high)

    def times(self, quantity: float) -> float | list[float]:
        """``quantity × price``: a number for a single price, ``[low, high]`` for a range."""
        if self.is_range:
            return [quantity * self.low, quantity * self.high]
        return quantity * self.low


def gpu_hours(gpus: int, seconds: float) -> float:
    """GPU-hours for ``gpus`` GPUs held for ``seconds``: ``gpus × seconds / 3600``."""
    _check_count(gpus, "gpus")
    _check_seconds(seconds, "seconds")
    return gpus * seconds / SECONDS_PER_HOUR


def wasted_gpu_hours(gpus_allocated: int, wait_s: float) -> float:
    """GPUs held while the job waits for its missing ranks: ``N_allocated × T_wait`` (DESIGN.md §3).

    The seed article's example: 400 GPUs held idle for 25 min while the other 112 of a 512-GPU
    job are pending: ``400 × 1500 / 3600 = 166.67`` GPU-hours (the seed rounds this to "~167").
    """
    _check_count(gpus_allocated, "gpus")
    _check_seconds(wait_s, "wait")
    return gpus_allocated * wait_s / SECONDS_PER_HOUR


@dataclass(frozen=True)
class GangWait:
    """A job whose first ``gpus_held`` GPUs wait ``wait_s`` for the rest of the gang.

    ``gang_size`` is the whole job (``minMember`` × GPUs per pod); ``None`` when unknown.
    """

    gpus_held: int
    wait_s: float
    price: Price
    gang_size: int | None = None
    name: str = ""

    def __post_init__(self):
        _check_count(self.gpus_held, "gpus")
        _check_seconds(self.wait_s, "wait")
        if self.gang_size is not None:
            _check_count(self.gang_size, "gang-size", minimum=1)
            if self.gang_size < self.gpus_held:
                raise InputError(f"{self.gang_size} is smaller than the {self.gpus_held} GPUs already held",
                                 field="gang-size", hint="give the whole job's GPU count, e.g. 512")

    @property
    def missing(self) -> int | None:
        return None if self.gang_size is None else self.gang_size - self.gpus_held


@dataclass(frozen=True)
class GangWaitCost:
    """The same pending job priced two ways: without a gang admission check, and with one."""

    wait: GangWait
    wasted_gpu_hours: float             # without gang admission: partial allocation held idle
    cost_usd: float | list[float]
    gang_wasted_gpu_hours: float        # with gang admission (Volcano minMember, Slurm allocation): 0
    gang_cost_usd: float | list[float]
    saving_usd: float | list[float]


def gang_wait_cost(wait: GangWait) -> GangWaitCost:
    """Price a partial allocation held while pending, against a gang admission check.

    Without a gang check (vanilla kube-scheduler, pod at a time: FACTS §3.3) the placed pods hold
    their GPUs idle until the last rank arrives, because training starts only after the NCCL init
    barrier (FACTS §4.1). With Volcano's gang plugin no pod is bound until ``minMember`` fit
    (FACTS §3.1, ``allocate.go`` L343 commits only when ``JobReady``), so the job holds **no** GPU
    while pending; the job still starts at the same moment, when the last GPUs free up.
    """
    wasted = wasted_gpu_hours(wait.gpus_held, wait.wait_s)
    gang_wasted = 0.0
    return GangWaitCost(
        wait=wait,
        wasted_gpu_hours=wasted,
        cost_usd=wait.price.times(wasted),
        gang_wasted_gpu_hours=gang_wasted,
        gang_cost_usd=wait.price.times(gang_wasted),
        saving_usd=wait.price.times(wasted - gang_wasted),
    )


# The course's two worked cases. Seed: 512-GPU job, 400 placed and idle for 25 min waiting for
# the other 112, at $2-$4 per GPU-hour. Exercise: 480 placed, 32 missing, 40 min at $3.
SEED = GangWait(gpus_held=400, wait_s=25 * 60.0, price=Price(2.0, 4.0), gang_size=512,
                name="seed: 400 held, 112 missing, 25 min")
EXERCISE = GangWait(gpus_held=480, wait_s=40 * 60.0, price=Price(3.0, 3.0), gang_size=512,
                    name="exercise: 480 held, 32 missing, 40 min")
PRESETS = {"seed": SEED, "exercise": EXERCISE}


# --- a lost rank -----------------------------------------------------------------------------

def lost_rank_gpu_hours(gpus: int, since_checkpoint_s: float, detection_s: float,
                        restart_s: float) -> float:
    """GPU-hours one lost rank costs: **every** GPU of the job loses the same wall time.

    ``gpus × (since_checkpoint + detection + restart) / 3600``. Every rank is restarted, not just
    the lost one (torchrun: "if k<=n workers fail all workers are stopped and restarted", FACTS
    §4.3), and resumes from the last checkpoint, so the work since then is redone on every GPU;
    the survivors first sit blocked in the collective until the watchdog fires (PyTorch's NCCL
    timeout, 10 min by default, FACTS §4.2). FACTS §5, "Restart cost in gang systems".
    """
    _check_count(gpus, "gpus")
    total = sum(_check_seconds(v, f) for v, f in ((since_checkpoint_s, "since-checkpoint"),
                                                   (detection_s, "timeout"), (restart_s, "restart")))
    return gpus * total / SECONDS_PER_HOUR


def job_mtbf(component_mtbf_s: float, components: int) -> float:
    """MTBF of a job that fails when any one of ``components`` independent parts fails: ``M / n``.

    [derived] Failures of independent parts with exponential lifetimes add their rates, so a
    512-GPU job whose GPUs each fail once in 5 years fails about every 3.6 days.
    """
    _check_seconds(component_mtbf_s, "mtbf", positive=True)
    _check_count(components, "components", minimum=1)
    return component_mtbf_s / components


@dataclass(frozen=True)
class InterruptionReport:
    """A reported run: ``interruptions`` of a job on ``gpus`` GPUs over ``days`` days."""

    gpus: int
    days: float
    interruptions: int
    source: str

    @property
    def job_mtbf_s(self) -> float:
        """Mean time between the job's interruptions."""
        return self.days * SECONDS_PER_DAY / self.interruptions

    @property
    def gpu_mtbf_s(self) -> float:
        """[derived] Per-GPU mean time between interruptions, treating every interruption as one GPU's
        (or its host's) failure and every GPU as running the whole time: ``gpus × days / interruptions``.
        An upper-end estimate, since the report says "up to" 16K GPUs."""
        return self.gpus * self.job_mtbf_s


# The Llama 3 report, section 3.3.4: "During a 54-day snapshot period of pre-training, we experienced a
# total of 466 job interruptions ... 419 were unexpected", on up to 16,384 H100 GPUs (``llama3-2024``).
LLAMA3 = InterruptionReport(gpus=16_384, days=54.0, interruptions=419, source="llama3-2024")


@dataclass(frozen=True)
class FailureCost:
    """Expected cost of rank failures for a job checkpointing every ``interval_s``."""

    gpus: int
    interval_s: float
    mtbf_s: float
    detection_s: float
    restart_s: float
    expected_lost_s_per_failure: float     # wall time every GPU loses, on average
    expected_gpu_hours_per_failure: float
    failures_per_day: float
    expected_gpu_hours_per_day: float


def expected_failure_cost(gpus: int, interval_s: float, mtbf_s: float, *,
                          detection_s: float = 600.0, restart_s: float = 0.0) -> FailureCost:
    """Expected loss per failure and per day [derived, first-order, FACTS §5].

    A failure falls, on average, half an interval after the last checkpoint, so each failure costs
    every GPU ``interval/2 + detection + restart``; failures arrive ``86400 / MTBF`` times a day.
    ``detection_s`` defaults to PyTorch's 10-minute NCCL timeout (``pytorch-distributed-init``), the
    upper bound: a peer that hangs without an error is noticed only then; one whose process is gone is
    usually noticed sooner, by NCCL's own error (:mod:`courselib.model.nccl`).
    """
    _check_count(gpus, "gpus")
    _check_seconds(interval_s, "interval", positive=True)
    _check_seconds(mtbf_s, "mtbf", positive=True)
    _check_seconds(detection_s, "timeout")
    _check_seconds(restart_s, "restart")
    lost_s = interval_s / 2.0 + detection_s + restart_s
    per_failure = gpus * lost_s / SECONDS_PER_HOUR
    per_day = SECONDS_PER_DAY / mtbf_s
    return FailureCost(gpus, interval_s, mtbf_s, detection_s, restart_s, lost_s, per_failure,
                       per_day, per_failure * per_day)


def split_placement_cost(gpus: int, run_s: float, slowdown: float, price: "Price") -> dict:
    """What a placement that slows every step by ``slowdown`` costs over a run that would take
    ``run_s`` seconds well placed: the extra time, the extra GPU-hours (every GPU of the job waits
    for the slowest group) and their price."""
    gpus = _check_count(gpus, "gpus", minimum=1)
    run_s = _check_seconds(run_s, "run")
    if slowdown < 1:
        raise ValueError("slowdown must be at least 1")
    extra_s = run_s * (slowdown - 1)
    extra = gpu_hours(gpus, extra_s)
    return {"gpus": gpus, "run_s": run_s, "slowdown": slowdown, "extra_s": extra_s,
            "extra_gpu_hours": extra, "cost_usd": price.times(extra)}
