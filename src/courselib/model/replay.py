"""Replay a core-count trace (SWF) on a pool of cores: FIFO and EASY backfilling.

A Standard Workload Format trace (Feitelson's Parallel Workloads Archive) gives each job a
submit time, a run time, a number of processors and, in field 9, a requested time. This
module replays such a trace on a machine of ``cores`` identical processors with one of two
textbook policies — the baseline every batch-scheduling paper compares against:

- ``fifo`` — first come, first served: jobs start strictly in submit order; a job that does not
  fit blocks every job behind it, even if they would fit (the queue head is the gate).
- ``easy`` — EASY backfilling (Lifka 1995, the Argonne IBM SP scheduler; stated as an algorithm
  by Mu'alem & Feitelson 2001, IEEE TPDS 12(6), §2): jobs start in submit order while they fit;
  when the head job does not fit it gets a **reservation** at the *shadow time* — the earliest
  time, from the running jobs' *expected* ends, at which enough cores are free for it — and the
  cores still free at that time beyond its need are the *extra* cores. A later job may then
  start now ("backfill") only if it fits now **and** either ends (by its estimate) no later than
  the shadow time or uses no more than the extra cores. So backfilling never delays the head
  job's reservation; only the head job holds one (that is what makes it EASY rather than
  conservative backfilling, where every queued job holds one).

The estimate is the job's requested time (SWF field 9) — never below its recorded run time
(a job cannot outrun its limit) — or its run time where the trace gives no request, as in the
Lublin-256 model trace (then estimates are exact and EASY's reservations are kept to the second).

Event order at one instant, shared by both paths: jobs that end at ``t`` free their cores
first, then jobs submitted at ``t`` join the queue, then one scheduling pass starts what it can
at ``t``. A job of zero run time frees its cores at once and the queue is scanned again at the
same instant. A job asking for more cores than the machine has can never start: it is rejected
(``start`` is ``None``), as a batch system refuses it at submission.

Two paths compute the same schedule: :func:`replay` (fast: event skipping for FIFO, a running
list kept sorted by expected end for EASY) and :func:`replay_reference` (recomputes everything
at every event from the definitions above; short enough to check by eye). A test compares them
on random workloads. From ``KERNEL_FROM`` jobs on, with numba installed (the ``fast`` extra),
:func:`replay`'s EASY runs compiled (:mod:`courselib.model.replay_kernel`, the same rules on
arrays; ``tests/test_replay_kernel.py``).
"""
from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right, insort
from dataclasses import dataclass, field
from typing import NamedTuple

from courselib.model import compiled

POLICIES = ("fifo", "easy")


class CoreJob(NamedTuple):
    """One job of a core-count trace: submitted at ``submit``, it holds ``procs`` cores for ``run`` seconds."""

    id: str
    submit: float
    run: float
    procs: int
    estimate: float  # the scheduler's view of the run time: requested time, else run time


@dataclass(frozen=True)
class Schedule:
    """A replay's result: ``start[i]`` is job ``i``'s start time (``None``: rejected)."""

    policy: str
    cores: int
    jobs: tuple[CoreJob, ...]
    start: tuple[float | None, ...]
    reservations: dict = field(default_factory=dict)  # reference path only: job index -> shadow time

    def waits(self) -> list[float]:
        return [s - j.submit for j, s in zip(self.jobs, self.start) if s is not None]

    def summary(self) -> dict:
        """Mean wait, makespan, utilisation and mean bounded slowdown (10 s bound, Feitelson)."""
        done = [(j, s) for j, s in zip(self.jobs, self.start) if s is not None]
        if not done:  # the same keys, nothing to measure
            return {"policy": self.policy, "cores": self.cores, "jobs": len(self.jobs), "started": 0,
                    "rejected": len(self.jobs), "mean_wait_s": None, "max_wait_s": None,
                    "makespan_s": None, "utilization": None, "mean_bounded_slowdown": None}
        first = min(j.submit for j, _ in done)
        last = max(s + j.run for j, s in done)
        waits = [s - j.submit for j, s in done]
        bsld = [max(1.0, (s - j.submit + j.run) / max(j.run, 10.0)) for j, s in done]
        area = sum(j.run * j.procs for j, _ in done)
        span = last - first
        return {"policy": self.policy, "cores": self.cores, "jobs": len(self.jobs),
                "started": len(done), "rejected": len(self.jobs) - len(done),
                "mean_wait_s": round(sum(waits) / len(waits), 3), "max_wait_s": max(waits),
                "makespan_s": span,
                "utilization": round(area / (span * self.cores), 4) if span > 0 else None,
                "mean_bounded_slowdown": round(sum(bsld) / len(bsld), 3)}


def from_trace_jobs(trace_jobs) -> tuple[list[CoreJob], list[tuple[str, str]]]:
    """Turn trace records (``id, submit, duration, procs, requested_time``) into :class:`CoreJob`.

    Records without a run time or a processor count cannot be replayed; they are returned as
    ``(id, reason)`` so the caller can say how many were skipped and why.
    """
    jobs: list[CoreJob] = []
    skipped: list[tuple[str, str]] = []
    for t in trace_jobs:
        if t.duration is None:
            skipped.append((t.id, "no run time"))
            continue
        if not t.procs or t.procs < 1:
            skipped.append((t.id, "no processor count"))
            continue
        req = t.requested_time
        est = t.duration if req is None or req <= 0 else max(req, t.duration)
        jobs.append(CoreJob(t.id, float(t.submit), float(t.duration), int(t.procs), float(est)))
    return jobs, skipped


def _check(jobs, cores: int, policy: str) -> None:
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; choose one of {', '.join(POLICIES)}")
    if cores < 1:
        raise ValueError("the machine needs at least one core")


# ------------------------------------------------------------------------------------------
# Fast path


def replay(jobs, cores: int, policy: str = "fifo") -> Schedule:
    """Replay ``jobs`` on ``cores`` cores under ``policy`` (``fifo`` or ``easy``)."""
    jobs = tuple(jobs)
    _check(jobs, cores, policy)
    submit = [j.submit for j in jobs]
    run = [j.run for j in jobs]
    procs = [j.procs for j in jobs]
    order = [i for i in sorted(range(len(jobs)), key=submit.__getitem__) if procs[i] <= cores]
    if policy == "fifo":
        start = _fifo(order, submit, run, procs, cores)
    elif len(order) >= KERNEL_FROM and compiled.available():
        from courselib.model import replay_kernel  # (numpy and numba: only for long traces)
        start = [None] * len(jobs)
        got = replay_kernel.easy([submit[i] for i in order], [run[i] for i in order], [procs[i] for i in order],
                                 [jobs[i].estimate for i in order], cores)
        for i, s in zip(order, got):
            start[i] = s
    else:
        start = _easy(order, submit, run, procs, [j.estimate for j in jobs], cores)
    return Schedule(policy, cores, jobs, tuple(start))


#: EASY runs compiled (:mod:`courselib.model.replay_kernel`, the ``fast`` extra) from this many
#: jobs on: loading it costs about half a second (numba), compiling it the first time about 5 s
KERNEL_FROM = 5_000


def _fifo(order, submit, run, procs, cores):
    """FIFO skips the events that cannot change anything: while the head is blocked, arrivals
    only lengthen the queue, so the next instant that matters is the next end."""
    start: list[float | None] = [None] * len(submit)
    ends: list[tuple[float, int]] = []          # heap of (end time, cores)
    push, pop = heapq.heappush, heapq.heappop
    free = cores
    n = len(order)
    head = 0                                     # queue = order[head:arrived]
    arrived = 0
    while head < n:
        if head == arrived:                      # empty queue: jump to the next arrival
            t = submit[order[arrived]]
        else:                                    # blocked head: only an end can unblock it
            t = ends[0][0]
        while ends and ends[0][0] <= t:
            free += pop(ends)[1]
        while arrived < n and submit[order[arrived]] <= t:
            arrived += 1
        while head < arrived:
            i = order[head]
            p = procs[i]
            if p > free:
                break
            free -= p
            start[i] = t
            push(ends, (t + run[i], p))
            head += 1
    return start


def _easy(order, submit, run, procs, est, cores):
    """EASY with shortcuts that change no decision.

    - The shadow time is read off the running jobs kept sorted by expected end.
    - Waiting jobs are also kept in buckets by width, so a backfill scan visits only the jobs
      narrow enough to fit the free cores, in queue order (queue position = rank in submit
      order); a pass with fewer free cores than the narrowest waiting job scans nothing.
    - At an instant with arrivals only (no end, same head) only the new arrivals are scanned:
      every job scanned before still fails, since free and extra cores can only have shrunk, the
      shadow time is the same and the clock has moved on.
    - A job that failed the reservation test (ends after the shadow time, wider than the extra
      cores) is *parked* out of its bucket while the head, the shadow time and the extra cores
      stay as they were (extra no larger than when it failed): it would fail again. Any change
      puts every parked job back.
    """
    start: list[float | None] = [None] * len(submit)
    ends: list[tuple[float, int, int]] = []      # heap of (end, job, cores)
    by_expected: list[tuple[float, int, int]] = []  # running, sorted by (expected end, job, cores)
    expected: dict[int, float] = {}
    push, pop = heapq.heappush, heapq.heappop
    n = len(order)
    waiting = bytearray(n)                       # by rank: arrived and not started
    buckets: dict[int, list[int]] = {}           # width -> ranks of waiting jobs, ascending
    widths: list[int] = []                       # widths with a non-empty bucket, ascending
    free = cores
    nwait = 0
    qhead = 0                                    # no waiting rank below this
    arrived = 0
    inf = float("inf")
    full = True                                  # the next scan must recompute the reservation
    scanned = 0                                  # ranks below this failed the last scan
    shadow = extra = 0
    parked: list[int] = []                       # ranks that failed the reservation test
    park_shadow = park_floor = inf               # the shadow then; the least extra then

    def take(r, p):
        b = buckets[p]
        del b[bisect_left(b, r)]
        if not b:
            widths.remove(p)

    def unpark():
        for r in parked:
            p = procs[order[r]]
            b = buckets[p]
            if not b:
                insort(widths, p)
            insort(b, r)
        parked.clear()

    def begin(r, t):
        i = order[r]
        p = procs[i]
        waiting[r] = 0
        take(r, p)
        push(ends, (t + run[i], i, p))
        e = t + est[i]
        expected[i] = e
        insort(by_expected, (e, i, p))
        start[i] = t

    while arrived < n or nwait:
        t = submit[order[arrived]] if arrived < n else inf
        if ends and ends[0][0] < t:
            t = ends[0][0]
        while ends and ends[0][0] <= t:
            full = True
            _, i, p = pop(ends)
            free += p
            del by_expected[bisect_left(by_expected, (expected.pop(i), i, p))]
        while arrived < n and submit[order[arrived]] <= t:
            p = procs[order[arrived]]
            waiting[arrived] = 1
            b = buckets.get(p)
            if b is None:
                b = buckets[p] = []
            if not b:
                insort(widths, p)
            b.append(arrived)
            nwait += 1
            arrived += 1
        # main pass: heads in order while they fit
        while qhead < arrived:
            if not waiting[qhead]:
                qhead += 1
                continue
            p = procs[order[qhead]]
            if p > free:
                break
            if parked:                           # a new head: every parked job comes back
                unpark()
            free -= p
            begin(qhead, t)
            nwait -= 1
            qhead += 1
            full = True
        if nwait < 2 or (not parked and free < widths[0]):
            continue                             # (parked jobs: their test must be redone)
        if full:
            # the head's reservation: shadow time and extra cores
            need = procs[order[qhead]]
            avail = free
            shadow = inf
            for e, _, p in by_expected:
                if avail >= need and e > shadow:
                    break
                avail += p
                if avail >= need and shadow == inf:
                    shadow = e
            extra = avail - need
            if parked and (shadow != park_shadow or extra > park_floor):
                unpark()
            if not parked:
                park_floor = inf
            park_shadow = shadow
            cand = []
            for w in widths[:bisect_right(widths, free)]:
                cand += buckets[w]
            cand.sort()
            full = False
        else:
            cand = [r for r in range(scanned, arrived) if waiting[r]]
        # backfill: fits now, and ends by the shadow time or stays within the extra cores
        for r in cand:
            i = order[r]
            p = procs[i]
            if p > free:
                continue
            if t + est[i] <= shadow:
                free -= p
            elif p <= extra:
                free -= p
                extra -= p
            else:
                take(r, p)
                parked.append(r)
                if extra < park_floor:
                    park_floor = extra
                continue
            begin(r, t)
            nwait -= 1
            if not free:
                break
        scanned = arrived
    return start


# ------------------------------------------------------------------------------------------
# Reference path: the definitions, recomputed at every event


def replay_reference(jobs, cores: int, policy: str = "fifo") -> Schedule:
    """The same schedule as :func:`replay`, computed the obvious way (for tests and teaching).

    Also records, for EASY, each job's reservation (shadow time) the first time it is the
    blocked head of the queue.
    """
    jobs = tuple(jobs)
    _check(jobs, cores, policy)
    n = len(jobs)
    start: list[float | None] = [None] * n
    reservations: dict[int, float] = {}
    waiting = sorted((i for i in range(n) if jobs[i].procs <= cores), key=lambda i: (jobs[i].submit, i))
    t = jobs[waiting[0]].submit if waiting else 0.0
    while waiting:
        running = [i for i in range(n) if start[i] is not None and start[i] + jobs[i].run > t]
        free = cores - sum(jobs[i].procs for i in running)
        queue = [i for i in waiting if jobs[i].submit <= t]
        started = []
        for i in queue:                                       # heads, in order, while they fit
            if jobs[i].procs > free:
                break
            free -= jobs[i].procs
            started.append(i)
        blocked = queue[len(started):]
        if policy == "easy" and blocked:
            head = blocked[0]
            # shadow time: walk the running jobs (and those just started) by expected end
            ends = sorted((start[i] + jobs[i].estimate, jobs[i].procs) for i in running)
            ends += [(t + jobs[i].estimate, jobs[i].procs) for i in started]
            ends.sort()
            avail, shadow = free, None
            for e, p in ends:
                avail += p
                if avail >= jobs[head].procs:
                    shadow = e
                    break
            extra = free + sum(p for e, p in ends if e <= shadow) - jobs[head].procs
            reservations.setdefault(head, shadow)
            for i in blocked[1:]:
                p = jobs[i].procs
                by_shadow = t + jobs[i].estimate <= shadow
                if p <= free and (by_shadow or p <= extra):
                    free -= p
                    extra -= 0 if by_shadow else p
                    started.append(i)
        for i in started:
            start[i] = t
        waiting = [i for i in waiting if start[i] is None]
        if any(jobs[i].run == 0 for i in started):
            continue                                          # a zero-length job: scan again now
        future = [start[i] + jobs[i].run for i in range(n) if start[i] is not None and start[i] + jobs[i].run > t]
        future += [jobs[i].submit for i in waiting if jobs[i].submit > t]
        if not future:
            break
        t = min(future)
    return Schedule(policy, cores, jobs, tuple(start), reservations)
