"""Time in the learner's hands: the state of a finished simulation after each of its events.

The simulators already write down what happened, in order: :func:`courselib.sim.gang.simulate`'s
``trace`` (a job submitted, pods bound, the barrier passed, GPUs released) and
:func:`courselib.sim.barrier.simulate`'s ``trace`` (ranks joined, a checkpoint, a rank lost, the
watchdog fired, torchrun restarted). :func:`gang_steps` and :func:`barrier_steps` turn a result into
a list of states — step 0 is the moment before the first event, step *k* the state just after event
*k* — each with one line saying what happened. Nothing is simulated again: the last step is the
simulator's final result (tested), and a playground or a web page only moves a :class:`Cursor`
over the list (pause, step, back, reset), as eduWRENCH's simulated clusters let a learner do.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from courselib.sim import barrier

__all__ = ["BarrierStep", "Cursor", "GangStep", "barrier_steps", "clock", "gang_steps", "rank_states"]


def clock(t: float) -> str:
    """Simulated time as the steppers print it: ``0:05`` (hours:minutes), with seconds when there are any."""
    s = round(t)
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}" + (f":{sec:02d}" if sec else "")


@dataclass(frozen=True)
class GangStep:
    """The gang simulation just after event ``index`` (0: before the first event)."""

    index: int
    t: float
    job: str | None          # whose event it was (None at step 0)
    what: str                # the trace's words for it
    held: dict               # job -> GPUs held
    training: dict           # job -> training (the barrier has passed)?
    total_gpus: int

    @property
    def training_gpus(self) -> int:
        return sum(h for j, h in self.held.items() if self.training[j])

    @property
    def idle_gpus(self) -> int:
        """GPUs held by jobs that are not training: the waste the course is about."""
        return sum(h for j, h in self.held.items() if not self.training[j])

    @property
    def free_gpus(self) -> int:
        return self.total_gpus - sum(self.held.values())

    @property
    def text(self) -> str:
        """One line: what happened, then who holds what."""
        holds = ", ".join(f"job {j} {h}" + (" (training)" if self.training[j] else "") for j, h in self.held.items())
        head = (f"t={clock(self.t)} job {self.job}: {self.what.rstrip('.')}" if self.job is not None
                else f"t={clock(self.t)} before the first event")
        return (f"{head}. GPUs held: {holds}; of {self.total_gpus} GPUs {self.training_gpus} training, "
                f"{self.idle_gpus} held idle, {self.free_gpus} free.")

    def to_dict(self) -> dict:
        return {"t": self.t, "job": self.job, "what": self.what, "held": dict(self.held),
                "training": dict(self.training), "text": self.text}


def gang_steps(result) -> tuple[GangStep, ...]:
    """One :class:`GangStep` per event of ``result`` (a :class:`courselib.sim.gang.Result`), after step 0.

    An event is a line of ``result.trace``; where the result also holds its binds
    (``simulate(..., binds=True)``), a cycle's ``bound k pods`` lines become one step per bind, in the
    order the policy made them: a pod at a time for a policy that binds pod by pod (kube-default,
    Kueue's pods), the whole placement for one that places a gang in one go. A trace line carries the
    GPUs its job holds afterwards; a job trains from its ``barrier passed`` line until ``training
    stopped`` or until it holds nothing (completed, evicted, failed).
    """
    names = [j.name for j in result.jobs]
    held = {n: 0 for n in names}
    training = {n: False for n in names}
    steps = [GangStep(0, 0.0, None, "", dict(held), dict(training), result.total_gpus)]

    def add(t, job, what, now_held):
        held[job] = now_held
        if what.startswith("barrier passed"):
            training[job] = True
        elif what.startswith("training stopped") or now_held == 0:
            training[job] = False
        steps.append(GangStep(len(steps), t, job, what, dict(held), dict(training), result.total_gpus))

    groups = {g.first: g for g in getattr(result, "binds", ())}
    trace, i = result.trace, 0
    while i < len(trace):
        group = groups.get(i)
        lines = trace[i:i + group.lines] if group else ()
        if group and not _one_bind_per_line(group, lines):
            of = {e.job: _PLACED.sub("", e.what, count=1) for e in lines}   # "/512 placed (min_member 512)"
            for b in group.binds:
                what = (f"bound {b.pods} pod{'s' if b.pods != 1 else ''}" + (f" on {b.node}" if b.node else "")
                        + f": {b.placed}{of[b.job]}")
                add(b.time, b.job, what, b.held)
            i += group.lines
            continue
        e = trace[i]
        add(e.time, e.job, e.what, e.held)
        i += 1
    return tuple(steps)


_PLACED = re.compile(r"^bound \d+ pods?: \d+")


def _one_bind_per_line(group, lines) -> bool:
    """The cycle's binds are its lines already: one bind per job, of all the line's pods."""
    return (len(group.binds) == len(lines)
            and all(b.job == e.job and b.held == e.held and e.what.startswith(f"bound {b.pods} pod")
                    for b, e in zip(group.binds, lines)))


@dataclass(frozen=True)
class BarrierStep:
    """The barrier run just after event ``index`` (0: before the first event)."""

    index: int
    t: float
    phase: str | None
    detail: str
    ranks: int               # ranks the event concerned
    states: dict             # rank state (courselib.sim.barrier.STATES) -> ranks in it at ``t``
    restarts: int            # failures recovered from so far (every rank back)
    lost_gpu_hours: float    # the GPU-hours those failures lost
    finished: bool

    @property
    def text(self) -> str:
        now = ", ".join(f"{n} {s}" for s, n in self.states.items() if n) or "no rank running"
        head = (f"t={clock(self.t)} {self.phase} ({self.ranks} rank{'s' if self.ranks != 1 else ''}): "
                f"{self.detail.rstrip('.')}"
                if self.phase is not None else f"t={clock(self.t)} before the first event")
        return (f"{head}. Now: {now}; restarts so far {self.restarts}, "
                f"{self.lost_gpu_hours:.2f} GPU-hours lost.")

    def to_dict(self) -> dict:
        return {"t": self.t, "phase": self.phase, "detail": self.detail, "ranks": self.ranks,
                "states": dict(self.states), "restarts": self.restarts,
                "lost_gpu_hours": round(self.lost_gpu_hours, 2), "finished": self.finished, "text": self.text}


def rank_states(result, t: float) -> dict:
    """How many ranks of a barrier result are in each state (``barrier.STATES``) at time ``t``, read from its segments."""
    counts = {s: 0 for s in barrier.STATES}
    for rows in result.segments.values():
        for start, end, state in rows:
            if start <= t < end:
                counts[state] += 1
                break
    return counts


def barrier_steps(result) -> tuple[BarrierStep, ...]:
    """One :class:`BarrierStep` per line of ``result.trace`` (a :class:`courselib.sim.barrier.BarrierResult`).

    The ranks' states are read from the result's segments at the event's time (step 0: no rank has
    started); a failure counts, with its GPU-hours, once every rank is back.
    """
    def at(i, t, phase, detail, ranks, finished):
        done = [f for f in result.failures if f.restarted_at_s <= t]
        return BarrierStep(i, t, phase, detail, ranks, rank_states(result, t), len(done),
                           sum(f.lost_gpu_hours for f in done), finished)

    steps = [BarrierStep(0, 0.0, None, "", 0, {s: 0 for s in barrier.STATES}, 0, 0.0, False)]
    finished = False
    for i, e in enumerate(result.trace, start=1):
        finished = finished or e.phase == "finished"
        steps.append(at(i, e.t_s, e.phase, e.detail, e.ranks, finished))
    return tuple(steps)


class Cursor:
    """Where a learner is in a list of steps: ``step``, ``back``, ``reset``, ``seek``; ``playing`` for a Play button.

    Moves stop at the ends (no wrap-around); the widgets and the web page keep one of these.
    """

    def __init__(self, steps):
        if not steps:
            raise ValueError("a stepper needs at least one step (step 0, before the first event)")
        self.steps = tuple(steps)
        self.index = 0

    @property
    def state(self):
        return self.steps[self.index]

    @property
    def at_end(self) -> bool:
        return self.index == len(self.steps) - 1

    def seek(self, index: int):
        self.index = max(0, min(int(index), len(self.steps) - 1))
        return self.state

    def step(self):
        return self.seek(self.index + 1)

    def back(self):
        return self.seek(self.index - 1)

    def reset(self):
        return self.seek(0)
