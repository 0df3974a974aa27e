"""The fast twin of the ``slurm`` policy: :class:`SlurmFast`, what ``make_policy("slurm")`` and
``--policy slurm`` run. Read :mod:`courselib.model.policies.slurm` first: it is the reference, and
this subclass makes exactly its decisions (``tests/test_gang_fastpath.py``: every pass's
reservations, every job's start, end and pending reason), only faster.

The reference replans every pending job it tests from the running jobs at every pass, on arrays
over every node. The fast path keeps an availability profile
(:class:`~courselib.model.policies.slurm_profile.Availability`: per node and free-GPU level, the
time the node gets there, kept up to date as jobs start and finish) and the running jobs' expected
ends sorted, so a pass asks "when do enough pods fit" with binary searches and jumps over the times
at which nothing freed up for the job; a plain job's plan is a few operations on bit masks
(100,000 jobs on 6,250 nodes: over 90 s before, under a minute of CPU). Within a pass, a plain job
no wider per pod, with no more pods and no longer a runtime than one that found no start in the
window, is not searched (:class:`_Staircase`). A job that can never run is told so once and leaves
the queue, and of the jobs behind the blocked one only those not yet told ``Priority`` are told,
so the main scheduler's cost does not grow with the jobs waiting behind it (issue 23). A backfill
pass carries the last pass's outcomes over where they must still hold (:meth:`SlurmFast._carried`):
a reservation where nothing changed, a job with no start that is tried only where it could now
have one, a job no smaller than one that still has none (75 overloaded nodes, 10,000 jobs: 37 s
before, 8 s after); on a tree, so does a job plain but for the tree plugin and not waiting for
``--switches`` (``tree_like`` in :meth:`SlurmFast._backfill`: the tree refuses it only where too
few pods fit, so it starts where a plain job would; 75 overloaded nodes on a tree, 10,000 jobs:
88 s before, 8–9 s after). Such a pass updates the last one's record in place and visits only the jobs
whose outcome may change; the jobs with no start that it tries are answered from one capacity
curve per time (:meth:`Availability.curve`; the figures are in benchmarks/README.md).
Early ends do not stop a pass from carrying (issue 35): a job that ended before its ``--time``
frees GPUs only from now until its old limit, so the walk tries each job only over that span
(as where a reservation moved away) and keeps its reservation where it still fails there; and
only from the first time one of the span's nodes has the job's GPUs a pod free (a small job that
ends early on a node others keep busy frees nothing for a whole-node job before they end).
A plain job's search in a pass is answered by the pass's
:class:`~courselib.model.policies.slurm_profile.Timeline` (the reserved nodes at every candidate
time as a mask, the free ones from the profile's masks): on a busy cluster each job looks past most
of the reservations made before it, and the rows that cannot hold it even alone are stepped over
with a popcount each (issue 35: about one exact count a search, where the walk planned at ~18
times and stepped over ~70; a reservation is an OR on the rows it spans, not an update of arrays).

On a workload of thousands of jobs (``KERNEL_FROM``) a pass whose every job is plain, on a cluster
with no topology or on topology/tree, goes whole to a compiled pass
(:mod:`~courselib.model.policies.slurm_kernel`, numba, the ``fast`` extra): the reference's loop on
node bit sets, made again at every pass, with none of the carrying above (busy ``base``, 10,000
jobs: 5.4 s of CPU against 55 s; on the busy sweep's tree ~8 s against more than 60;
benchmarks/README.md). On a tree it plans each job as the topology plugin does, and a job waiting
for ``--switches`` as the plugin refuses it. Its starts are made here in order and its reservations
become :attr:`reservations` when first read. Without numba, or for a pass with one job that is not
plain, the Python pass above runs; ``tests/test_slurm_kernel.py`` holds both to the reference.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from bisect import bisect_left, bisect_right, insort
from heapq import heapify, heappop, heappush
from operator import attrgetter, itemgetter
from typing import NamedTuple

import numpy as np

from courselib.model import compiled, topology
from courselib.model.gang import JobRun, SchedState
from courselib.model.policies import slurm_kernel
from courselib.model.policies.slurm import Slurm
from courselib.model.policies.slurm_profile import Availability, Timeline
from courselib.model.workload import Job

_job_name = attrgetter("job.name")
_seq = attrgetter("seq")
#: a workload of at least this many jobs has its backfill passes compiled (slurm_kernel.py), if it can,
#: on a cluster of at most KERNEL_NODES nodes: the compiled pass makes its rows again at every pass, each
#: a copy of every node's free levels, which on 6,250 nodes costs more than the Python pass saves by
#: carrying the last pass over (100,000 friendly jobs: 93 s against 22 s; on 1,000 nodes 97 s against
#: more than 200 s: benchmarks/README.md). Not on topology/tree, where the Python pass plans every job
#: with the plugin and carries little: 100,000 jobs on the 6,250-node tree took over 470 s so, 56 s compiled
KERNEL_FROM = 2000
KERNEL_NODES = 1024


class _Pass(NamedTuple):
    """What a backfill pass leaves for the next one to carry over (:meth:`SlurmFast._carried`)."""
    time: float
    outcomes: dict  # plain or tree-like job -> (start, plan): (None, None) for no start in the window
    names: list  # the jobs it tested, in order, less those it started
    marks: list  # indexes into names of the reserved jobs and of those not carried
    changes: list  # (start, end) of the jobs it started: the jobs before them did not meet them
    dom: dict  # a job with no start -> an earlier one, no smaller, that had none either
    resv: dict  # its reservations (Slurm.reservations): a kept one is the same tuple again
    roots: list  # (index into names, name, GPUs a pod, pods, runtime) of jobs with no start, in order
    kids: dict  # the inverse of dom: a job -> the set of jobs it rules out


class SlurmFast(Slurm):
    """:class:`~courselib.model.policies.slurm.Slurm`'s decisions, from the availability profile
    and the last backfill pass's outcomes (see the module's docstring)."""

    reference_class = Slurm

    @functools.wraps(Slurm.__init__, assigned=())  # (make_policy reads the options from its signature)
    def __init__(self, workload, seed: int = 0, **options):
        super().__init__(workload, seed, **options)
        self._ends: list | None = None  # (expected end, job) of the running, this pass
        self._switch_waiters: list = []  # jobs with --switches=N (their wait's end wakes a cycle)
        self._end_times: list[float] = []
        #: the running jobs' expected ends, each once and kept sorted as jobs start and finish
        #: (with a count of jobs per time), and the availability profile for plain jobs
        self._distinct_ends: list[float] = []
        self._ends_count: dict[float, int] = {}
        self._avail: Availability | None = None
        #: running job -> its nodes, and whether it holds every GPU of each (for on_finish)
        self._last_nodes: dict[str, tuple[list[int], bool]] = {}
        #: the cluster's free GPUs and memory per node as arrays, kept up to date from the nodes
        #: a start or an end touched (``_dirty``), instead of copied from its lists every cycle
        self._mirror: tuple | None = None
        self._dirty: set[int] = set()
        #: topology/tree (0: none): the leaf switch's nodes, and the free pods per leaf switch for
        #: each GPUs a pod asked so far, counted from ``_leaf_free`` and kept up to date from the
        #: nodes a start or an end touched (``_leaf_dirty``), for the plans made now (_tree_plan_now)
        spec = workload.cluster
        self._tree_leaf = spec.topology[-1][1] if spec.topology and spec.slurm_topology != "block" else 0
        self._leaf_free: np.ndarray | None = None
        self._leaf_pods: dict[int, np.ndarray] = {}
        self._leaf_dirty: set[int] = set()
        self._times_done: list[float] = []  # times > now whose free arrays are in _free_cache
        #: the runs and names of the queue's first entries, in order (at most bf_max_job_test
        #: after a pass), kept as the queue changes
        self._head_runs: list[JobRun] = []
        self._head_names: list[str] = []
        # the feasible pending jobs already in priority order, the jobs submitted since
        # the last cycle, those of them not yet told Priority, and each job shape's verdict once
        self._queue: list[tuple] = []
        self._new: list[tuple] = []
        self._untold: list[tuple] = []  # (key..., name, run) behind the head whose reason is not Priority
        self._shape_verdict: dict[tuple, str | None] = {}
        self._starts = self._ends_seen = self._window_changes = 0
        #: the last backfill pass that started nothing, [time, starts, ends, window
        #: changes, its candidate times, its reservations] (see _same_pass), or None
        self._memo: list | None = None
        self._pass_times: list[float] = []
        #: the last backfill pass (its time, name -> (start, plan), the early ends then),
        #: the jobs started since (run, time, plan) and the jobs that ended before their time limit
        self._carry: _Pass | None = None
        #: backfill passes, those that carried the last one's outcomes, reservations they moved,
        #: passes that updated the last one's record in place, searches of a job that the
        #: roots carried from the last pass spared, and carried passes that early ends or a start
        #: off its reservation freed capacity for (``freed`` in :meth:`_carried`), and spans of freed
        #: or moved-away capacity that a job was tried over only from their nodes' reach on
        self.carry_stats = {"passes": 0, "carried": 0, "moved": 0, "in_place": 0, "seeded": 0, "early": 0,
                            "reach": 0}
        self._started_since: list[tuple] = []
        #: the expected ends of the jobs that ended before them since the last pass's record (None:
        #: a job with no expected end, after which no pass carries)
        self._early_ends: list[float | None] = []
        self._early_nodes: list = []  # (the nodes each of them ran on)
        #: the compiled pass (slurm_kernel.py): None decides by the workload's size (KERNEL_FROM jobs)
        self.use_kernel: bool | None = None
        self._kernel_on: bool | None = None
        #: compiled passes, then summed over them: rows at the end, rows where a job failed, jumps
        #: past rows where an earlier job failed, rows put in a window's front, jobs started
        self.kernel_stats = np.zeros(6, np.int64)
        #: the running jobs' GPUs per node until their expected end, as rows of three arrays (end,
        #: node, GPUs; a free row has GPUs 0 and end -inf), kept as jobs start and end
        self._ev = (np.full(64, -np.inf), np.zeros(64, np.int64), np.zeros(64, np.int64))
        self._ev_rows: dict[str, list[int]] = {}
        self._ev_free: list[int] = list(range(63, -1, -1))
        #: by run (its seq): GPUs a pod, pods, runtime, and whether the compiled pass may plan it
        self._k_g = self._k_pods = self._k_run = self._k_plain = None
        #: and for topology/tree: --switches=N (0: none), the submit time, the wait; the tree's shape
        self._k_switches = self._k_submit = self._k_wait = None
        spec = self.workload.cluster
        self._k_tree = slurm_kernel.tree_shape(spec.topology, spec.nodes) if spec.topology else None
        self._k_work: dict = {}  # (the compiled pass's rows, kept for the next pass: backfill_pass's work)

    def _plain(self, state: SchedState, job: Job) -> bool:
        """A job the profile may plan: plain, on a cluster without a topology (the topology
        plugin places every job there: :meth:`Slurm.plan`)."""
        return state.cluster.plain(job) and not self.workload.cluster.topology

    def submit(self, state: SchedState, runs: list[JobRun]) -> None:
        super().submit(state, runs)
        if runs and self._kernel_ready():
            self._k_shapes(state, runs)
        for run in runs:
            self._new.append((-run.job.priority, run.job.submit, run.seq, run.job.name, run))
            if self.switches(run.job) is not None:
                self._switch_waiters.append(run)

    def infeasible(self, state: SchedState, run: JobRun) -> str | None:
        job = run.job  # the verdict depends only on the job's shape, not on its name
        shape = (job.pods, job.gpus_per_pod, job.memory_per_pod, job.exclusive, job.constraint, job.topology,
                 job.segment)
        if shape not in self._shape_verdict:
            self._shape_verdict[shape] = self._why_infeasible(state, run)
        return self._shape_verdict[shape]

    def _free_at(self, state: SchedState, t: float):
        key = (state.now, t)
        if key not in self._free_cache and t > state.now:
            if self._avail is not None and not self.workload.cluster.memory_per_node:
                # the profile's levels: node i has f free GPUs at t from when[f][i] <= t on (the
                # tree plugin's plans ask this at most of their times: no walk over the running
                # jobs' ends, nor a sort of them after every start); memory is not modelled
                self._free_cache[key] = (self._availability(state).free_at(t), self._free_now(state)[1].copy())
            else:
                self._free_cache[key] = self._free_at_from_nearest(state, t)
        elif key not in self._free_cache and t == state.now:
            self._free_cache[key] = tuple(a.copy() for a in self._free_now(state))
        return super()._free_at(state, t)

    def _free_now(self, state: SchedState):
        """The cluster's free GPUs and memory per node now, as arrays (:attr:`_mirror`)."""
        cluster = state.cluster
        if self._mirror is None:
            self._mirror = (np.array(cluster.free, dtype=np.int64), np.array(cluster.free_mem, dtype=np.int64))
        elif self._dirty:
            g, m = self._mirror
            if len(self._dirty) < 8:
                for i in self._dirty:
                    g[i], m[i] = cluster.free[i], cluster.free_mem[i]
            else:  # (a start or an end on dozens of nodes: one assignment each)
                idx = list(self._dirty)
                free, mem = cluster.free, cluster.free_mem
                g[idx] = [free[i] for i in idx]
                m[idx] = [mem[i] for i in idx]
        self._dirty.clear()
        return self._mirror

    def _free_at_from_nearest(self, state: SchedState, t: float):
        """Fast path of :meth:`Slurm._free_at`: start from the nearest earlier time already computed in
        this pass and add only what the jobs ending in between release (the running jobs sorted
        by expected end once per pass), instead of walking every running job for every ``t``."""
        if not self._free_cache or self._ends is None:
            alloc = state.cluster.alloc
            self._ends = sorted((e, name) for name, e in self.expected_end.items() if name in alloc)
            self._end_times = [e for e, _ in self._ends]
            self._times_done = []
        k = bisect_left(self._times_done, t) - 1
        if k >= 0:
            t0 = self._times_done[k]
            free_g, free_m = (a.copy() for a in self._free_cache[(state.now, t0)])
            lo = bisect_right(self._end_times, t0)
        else:
            free_g, free_m = (a.copy() for a in self._free_now(state))
            lo = 0
        for _, name in self._ends[lo:bisect_right(self._end_times, t)]:
            for i, b in state.cluster.alloc[name].items():
                free_g[i] += b.gpus
                free_m[i] += b.memory
        insort(self._times_done, t)
        return free_g, free_m

    def _blocked(self, reserved: list, t: float, t1: float, n: int):
        """:meth:`Slurm._blocked` (closed at ``t1``): the profile's mask of the reservations that
        overlap (:meth:`Availability.blocked`: the pass's reservations sorted by start, each
        one's nodes a mask kept while it is), as an array. (It was a reservations x nodes array
        filled row by row as reservations were made: on the overloaded tree, where the tree
        plugin's plans ask it, most of its cost.)"""
        if not reserved:
            return np.zeros(n, dtype=bool)
        if self._avail is None:  # (backfill makes the profile before it reserves anything)
            return super()._blocked(reserved, t, t1, n)
        m = self._avail.blocked(reserved, t, t1)
        return np.unpackbits(np.frombuffer(m.to_bytes((n + 7) // 8, "little"), np.uint8), count=n,
                             bitorder="little").view(bool)

    def plan(self, state: SchedState, job: Job, t: float, reserved: list) -> list | None:
        """:meth:`Slurm.plan`; a plain job's from the free-GPU buckets (now) or the profile."""
        if self._plain(state, job):
            if t == state.now and not reserved:
                return self._plan_now(state, job)
            return self._availability(state).plan(job, t, reserved)
        if self._tree_leaf and t == state.now and not reserved and state.cluster.plain(job):
            return self._tree_plan_now(state, job)
        return super().plan(state, job, t, reserved)

    def _tree_plan_now(self, state: SchedState, job: Job) -> list | None:
        """:meth:`Slurm.plan` now, with no reservation, for a job plain but for topology/tree: the
        plugin (:func:`courselib.model.topology.slurm_tree`) on the free pods per leaf switch kept
        from cycle to cycle, instead of summed again over every node for each plan (the main
        scheduler's plans on the 6,250-node tree: ~100 us each, 100,000 of them)."""
        free, leaf, g = state.cluster.free, self._tree_leaf, job.gpus_per_pod
        counted = self._leaf_free
        if counted is None:
            counted = self._leaf_free = np.array(free, dtype=np.int64)
        else:
            pods = self._leaf_pods
            for i in self._leaf_dirty:
                old, new = int(counted[i]), free[i]
                if old != new:
                    for h, per_leaf in pods.items():
                        per_leaf[i // leaf] += new // h - old // h
                    counted[i] = new
        self._leaf_dirty.clear()
        per_leaf = self._leaf_pods.get(g)
        if per_leaf is None:
            per_leaf = self._leaf_pods[g] = (counted // g).reshape(-1, leaf).sum(axis=1)
        plan, _ = topology.slurm_tree(self.workload.cluster, None, job.pods,
                                      self.switches(job) if self.waits_for_switch(job, state.now) else None,
                                      per_leaf=per_leaf, pods_in=lambda lo, hi: [f // g for f in free[lo:hi]])
        return plan

    def _start(self, state: SchedState, run: JobRun, plan: list) -> None:
        self._starts += 1
        if self._carry is not None:
            self._started_since.append((run, state.now, plan))
            if len(self._started_since) > 2 * self.bf_max_job_test:  # long since the last pass
                self._carry, self._started_since = None, []
        self._ends = None
        super()._start(state, run, plan)
        e = self.expected_end[run.name]
        self._ends_count[e] = self._ends_count.get(e, 0) + 1
        if self._ends_count[e] == 1:
            insort(self._distinct_ends, e)
        nodes = list(map(itemgetter(0), plan))
        # every node's GPUs taken (no node has more than ``capacity``, so the sum says it)
        whole = run.job.gpus_per_pod * sum(map(itemgetter(1), plan)) == state.cluster.capacity * len(plan)
        self._last_nodes[run.name] = (nodes, whole)
        self._dirty.update(nodes)
        if self._tree_leaf:
            self._leaf_dirty.update(nodes)
        if self._avail is not None:  # (on whole nodes: each holds this job alone, until e)
            self._avail.touch(nodes, e if whole else None)
        if self._kernel_ready():  # (the compiled pass's record of running jobs: only where it runs)
            self._ev_hold(run.name, e, state.cluster.alloc[run.name])

    def _ev_hold(self, name: str, e: float, alloc: dict) -> None:
        """The rows of a job that started: its GPUs on each of its nodes until ``e``."""
        ends, nodes, gpus = self._ev
        free = self._ev_free
        if len(free) < len(alloc):
            n = len(ends)
            grow = max(n, len(alloc))
            self._ev = ends, nodes, gpus = (np.concatenate([ends, np.full(grow, -np.inf)]),
                                            np.concatenate([nodes, np.zeros(grow, np.int64)]),
                                            np.concatenate([gpus, np.zeros(grow, np.int64)]))
            free[:0] = range(n + grow - 1, n - 1, -1)
        if not alloc:
            self._ev_rows[name] = []
            return
        rows = free[-len(alloc):][::-1]  # (the free rows last in the list first, as popped one by one)
        del free[-len(alloc):]
        ends[rows] = e
        nodes[rows] = list(alloc)
        gpus[rows] = [b.gpus for b in alloc.values()]
        self._ev_rows[name] = rows

    # ---- the cycle -----------------------------------------------------------------------------
    def schedule(self, state: SchedState) -> list[float]:
        self._free_cache.clear()
        self._ends = None
        if any(not r.finished and not self.waits_for_switch(r.job, state.now) for r in self._switch_waiters):
            self._memo = None   # a wait for switches is over: the job plans differently now
        self._wake: list[float] = []
        self._cycle(state)
        if not self._switch_waiters:
            return self._wake
        # the reference's wake-ups: each feasible pending job still waiting for its switches
        self._switch_waiters = [r for r in self._switch_waiters if not r.finished and state.bound(r) == 0
                                and self.waits_for_switch(r.job, state.now)]
        return self._wake + [r.job.submit + self.switch_wait(r.job) for r in self._switch_waiters
                             if not self.infeasible(state, r)]

    def _cycle(self, state: SchedState) -> None:
        """:meth:`Slurm.schedule` without walking the jobs that wait and cannot change (issue 23). A job
        that can never run is told so once, when it arrives (its verdict is fixed), and leaves
        the queue; the main scheduler starts jobs from the head of the feasible queue; of the
        jobs behind the blocked one only those not already told ``Priority`` are told (the new
        ones, and the one that was blocked before), in queue order, as the reference tells them
        all; only the first ``bf_max_job_test`` go to backfill. A Slurm job is bound whole or not
        at all and is never preempted, so the queue holds exactly the unbound feasible jobs."""
        queue = self._queue
        new, self._new = sorted(self._new), []
        for e in new:
            reason = self.infeasible(state, e[-1])
            if reason:
                state.set_reason(e[-1], reason)
            else:
                p = bisect_right(queue, e)
                if p < self.bf_max_job_test:
                    self._window_changes += 1  # backfill's jobs are not the same as last pass's
                queue.insert(p, e)
                if p < len(self._head_runs):  # (the head's mirrors: see below)
                    self._head_runs.insert(p, e[-1])
                    self._head_names.insert(p, e[3])
                insort(self._untold, e)
        starts_before = self._starts
        k = 0
        while k < len(queue):  # main scheduler: strict priority order
            run = queue[k][-1]
            self._block_why = None
            plan = self.plan(state, run.job, state.now, [])
            if plan is None:
                break
            self._start(state, run, plan)
            k += 1
        kept, self.reservations = self.reservations, {}
        if k == len(queue):
            del queue[:]
            self._untold, self._head_runs, self._head_names = [], [], []
            return
        head = queue[k]
        state.set_reason(head[-1], self._block_why or "Resources")   # (topology/block's words)
        untold = self._untold
        u = bisect_right(untold, head)  # (keys are unique: the runs themselves never compare)
        for e in untold[u:]:
            state.set_reason(e[-1], "Priority")
        self._untold = [head]  # the next cycle tells it Priority if another job is blocked first
        del queue[:k], self._head_runs[:k], self._head_names[:k]
        if not self.backfill:
            return
        if not self._backfill_due(state.now):  # (bf_interval) the last pass's reservations stand
            self.reservations, self._wake = kept, self._backfill_wake()
            return
        self._backfill_begins(state.now)
        if k == 0 and self._same_pass(state.now):
            self.reservations = self._memo[-1]
            self._memo[0] = state.now
            if self._carry is not None:  # and no start in the window up to now's end either
                self._carry = self._carry._replace(time=state.now)
            return
        # the jobs backfill tests and their names: the queue's head, mirrored from cycle to cycle
        # (each insertion, start and removal above is made in the mirrors too) instead of
        # copied out of the queue at every pass
        left, names, cap = self._head_runs, self._head_names, self.bf_max_job_test
        if len(left) > cap:
            del left[cap:], names[cap:]
        elif len(left) < min(cap, len(queue)):
            more = queue[len(left):cap]
            left.extend(map(itemgetter(-1), more))
            names.extend(map(itemgetter(3), more))
        main_starts = self._starts
        self._backfill(state, left)
        if self._starts != main_starts:  # started by backfill: out of the queue
            at = self._bf_started_at  # (their places in the queue, rising; the slow way if not)
            if len(at) == len(self._bf_started) and all(queue[k][-1] is r for k, r in zip(at, self._bf_started)):
                for k in reversed(at):
                    del queue[k], left[k], names[k]
            else:
                n, gone = len(left), {id(r) for r in self._bf_started}
                queue[:n] = [e for e in queue[:n] if id(e[-1]) not in gone]
                self._head_runs, self._head_names = [], []  # (made again at the next pass)
        if self._starts != starts_before:
            self._memo = None
        else:  # nothing started: the next pass may be this one again (_same_pass)
            self._memo = [state.now, self._starts, self._ends_seen, self._window_changes,
                          self._pass_times, self.reservations]

    def _same_pass(self, now: float) -> bool:
        """Whether a backfill pass now would make exactly the last pass's reservations: nothing
        started (in it or since), nothing ended, the jobs it tests are the same, no candidate time
        of it lies in (its time, now] (no running job's expected end, no reservation's start or
        end: those are all candidate times), and none comes into the window, (last + bf_window,
        now + bf_window]. Then every job fails now where it failed at the last pass's time (the
        same free GPUs, and every reservation that overlapped its run then overlaps it now, as
        all of them start later), and every other candidate time is tested as before. On the
        overloaded cluster most cycles are arrivals behind the jobs backfill tests (issue 23)."""
        memo = self._memo
        if memo is None or memo[1:4] != [self._starts, self._ends_seen, self._window_changes]:
            return False
        t0, times = memo[0], memo[4]
        if len(times) > 1 and times[1] <= now:  # times[0] is t0 itself
            return False
        lo = bisect_right(times, t0 + self.bf_window)
        return lo == len(times) or times[lo] > now + self.bf_window

    @staticmethod
    def _plan_now(state: SchedState, job: Job) -> list | None:
        """:meth:`plan` for a plain job now, from the free-GPU buckets instead of arrays over every
        node: best fit is the buckets in rising order, each in node order (O(nodes used))."""
        cluster, g, need = state.cluster, job.gpus_per_pod, job.pods
        if cluster.pods_that_fit(job) < need:
            return None
        out = []
        for f in range(g, cluster.capacity + 1):
            for i in cluster.bucket(f):
                if f // g >= need:
                    out.append((i, need))
                    return out
                out.append((i, f // g))
                need -= f // g
        return None

    def _backfill(self, state: SchedState, pending: list[JobRun]) -> None:
        """:meth:`Slurm._backfill` (the reference) with the same decisions, from the availability
        profile: a plain job's search starts at the first candidate time at which enough of its
        pods fit with no reservation at all (a binary search: that count never falls with time),
        and skips every later time at which nothing freed up for pods of its size. What the last
        pass found is carried over where it must still hold (:meth:`_carried`)."""
        if self._kernel_pass(state, pending):
            return
        now, horizon = state.now, state.now + self.bf_window
        reserved: list = []
        res_ends: list[float] = []  # sorted: the reservations' ends after now (candidate times too)
        made = 0
        avail = self._availability(state)
        self._failed: dict[float, _Staircase] = {}  # t -> the plain jobs that failed at t
        times_all = self._candidates(now)  # kept sorted as reservations add their ends
        never = _Staircase()  # plain jobs with no start in the window, by (GPUs a pod, pods, runtime)
        failed_at = self._failed
        direct = type(self).plan is SlurmFast.plan
        carry = self._carried(state) if direct else None
        monotone = carry is not None  # this pass only adds to what the last pass's jobs met
        since, carried, changes, last_names, marks, dom, last_resv, last_roots, kids, (freed, freed_on) = (
            carry if monotone else (None, None, [], None, None, {}, {}, [], {}, ([], [])))
        dom_now: dict[str, str] = {}  # this pass's: a job with no start -> one it is no smaller than
        outcomes: dict[str, tuple] = {}  # this pass's, for the next one: name -> (start, plan)
        self._bf_started: list[JobRun] = []
        self._bf_started_at: list[int] = []  # (their indexes in pending)
        # (the names of the queue's head, when these are its jobs as _cycle hands them on)
        names = self._head_names if pending is self._head_runs else None
        pending = pending[: self.bf_max_job_test]
        names = list(map(_job_name, pending)) if names is None else names[: self.bf_max_job_test]
        node_gpus = state.cluster.capacity  # (every node's GPUs: a start uses all of its nodes', or not)

        line_box: list = [None]
        spec = self.workload.cluster
        trees = direct and bool(spec.topology) and spec.slurm_topology != "block"

        def tree_like(job: Job) -> bool:
            """A job plain but for the tree plugin and not waiting for ``--switches``: the tree
            refuses it only where too few of its pods fit, as the profile counts them, so it
            starts where a plain job of its shape would, and the last pass's outcome carries as a
            plain job's (a kept reservation is the tree's plan again: the same free GPUs and
            reservations over its time give the same pods per node)."""
            return trees and state.cluster.plain(job) and not self.waits_for_switch(job, now)

        odd = [False]  # the tree refused a job where its pods fit (not expected; see tree_like)

        def timeline():
            """The pass's :class:`Timeline`, up to date with its times and reservations (made again
            after a start: the free GPUs changed), or None where it does not hold."""
            line = line_box[0]
            if line is None:
                line = line_box[0] = Timeline(self._availability(state), now, state.cluster.free, reserved,
                                              self._starts, times_all)
            elif line.version != self._starts:
                self._availability(state)  # (brought up to date: the rows' free GPUs are read again)
            line.sync(times_all, state.cluster.free, self._starts)
            return line if line.ok else None

        def search(job: Job, plain: bool, k: int):
            """The job's earliest start in the window from ``times_all[k]`` on, and its plan."""
            times = times_all
            runtime, pods, g = job.planned_runtime, job.pods, job.gpus_per_pod
            if plain and direct and runtime > 0:  # the pass's timeline answers it in one go
                line = timeline()
                if line is not None:
                    hit = line.earliest(g, pods, runtime, k, bisect_right(times, horizon))
                    if hit is None:
                        return None, None
                    return times[hit[0]], line.plan(hit[0], hit[1], job)
            # On a tree every job is placed by the topology plugin (not plain), but one that is
            # plain but for it needs, as the reference's plan asks first, its pods to fit on the
            # nodes no reservation holds: the profile's count (``gate``) rules out the times where
            # they do not, and only the others are planned (the same answer, without the arrays)
            gate = not plain and direct and state.cluster.plain(job)
            if gate and runtime > 0 and self.workload.cluster.slurm_topology != "block" \
                    and not self.waits_for_switch(job, now):
                # and the tree refuses a job only when too few pods fit, or for --switches while
                # it waits (topology.slurm_tree): its start is the first time the count holds,
                # which the pass's timeline finds as for a plain job; the tree plans it there
                line = timeline()
                if line is not None:
                    hit = line.earliest(g, pods, runtime, self._first_row(line, times, state, job, k),
                                        bisect_right(times, horizon))
                    if hit is None:
                        return None, None
                    plan = self.plan(state, job, times[hit[0]], reserved)
                    if plan is not None:
                        return times[hit[0]], plan
                    odd[0] = True  # (not expected: then its outcome is not carried, see tree_like)
                    k = hit[0] + 1   # (not expected: the walk below asks the tree at each time)
            if plain or gate:  # from the first time at which enough pods fit, reservations aside
                k = max(k, self._first_fit(times, state, avail, job))
            last, bound = None, -math.inf
            while k < len(times):
                t = times[k]
                if (plain or gate) and last is not None and last > now:
                    # It failed at ``last`` and fails again until enough of its pods fit on nodes
                    # that no reservation blocked then (``bound``), or a reservation ends: until
                    # then the blocked nodes only grow as the window [t, t + time limit] moves on.
                    r = bisect_right(res_ends, last)
                    nxt = min(bound, res_ends[r] if r < len(res_ends) else math.inf)
                    if nxt > t:
                        k = bisect_left(times, nxt, k)
                        if k == len(times):
                            break
                        t = times[k]
                k += 1
                if t > horizon:
                    break
                if plain:
                    last = t
                    # it cannot start at t if one as wide per pod, with no more pods and no longer
                    # a runtime, could not in this pass: the same free GPUs, more reservations
                    failed = failed_at.get(t)
                    if failed is not None and failed.covers(g, pods, runtime):
                        bound = -math.inf  # no bound known from this time's blocked nodes
                        continue
                if gate:
                    if avail.plan(job, t, reserved) is None:  # too few pods fit on the nodes left:
                        if t > now:  # the reference's plan is None too, and stays None as above
                            last, bound = t, avail.first_fit_outside(reserved, t, t + runtime, g, pods, times)
                        continue
                    last = None  # enough pods fit: the tree may still refuse, and nothing is known after
                    odd[0] = True  # (its outcome is then not carried: see tree_like)
                # a plain job's plan straight from the profile (up to date): what self.plan asks,
                # unless a subclass watches self.plan (the backfill problems' explainer does)
                plan = (avail.plan(job, t, reserved) if direct and plain and (reserved or t != now)
                        else self.plan(state, job, t, reserved))
                if plan is not None:
                    return t, plan
                if plain:
                    if failed is None:
                        failed = failed_at[t] = _Staircase()
                    failed.add(g, pods, runtime, checked=True)
                    bound = avail.first_fit_outside(reserved, t, t + runtime, g, pods, times)
            return None, None

        # In a carried pass (monotone): ``changes`` are the intervals over which this pass holds
        # something the last pass's jobs did not meet (a reservation, a running job, a reservation
        # that moved away); a reservation no change overlaps is exactly the last one, plan and all
        # (the same free GPUs at its start, the same reservations before it). ``fresh``: a
        # candidate time lies past the last pass's window and within this one, where a job with
        # no start last time must now be tried; ``released``: where the reservations that moved
        # were, where the jobs after them must look again.
        self.carry_stats["passes"] += 1
        self.carry_stats["carried"] += monotone
        self.carry_stats["early"] += bool(freed)
        edge = since + self.bf_window if monotone else math.inf
        fresh = monotone and bisect_right(times_all, edge) < bisect_right(times_all, horizon)

        def reserve_end(t1: float) -> bool:
            """A reservation's end among the candidate times; True if it is new and comes past
            the last pass's window into this one (then a job with no start must be tried there)."""
            if t1 > now and not _has(res_ends, t1):
                insort(res_ends, t1)
                if not _has(times_all, t1):
                    insort(times_all, t1)
                    return edge < t1 <= horizon
            return False

        def keep(name: str, s0: float, t1: float, plan) -> bool:
            """The last pass's reservation for ``name`` again (see :meth:`reserve_end`)."""
            nonlocal made
            r = last_resv.get(name)  # (the same tuple: the profile knows its nodes' mask)
            reserved.append(r if r is not None and r[0] == s0 else (s0, t1, [i for i, _ in plan]))
            self.reservations[name] = reserved[-1]
            made += 1
            return reserve_end(t1)

        def set_dom(name: str, d: str | None) -> None:
            """dom_now[name] = d (None: none), and kids with it (a pass in place)."""
            was = dom_now.get(name)
            if was == d:
                return
            if was is not None:
                sibs = kids.get(was)
                if sibs is not None:
                    sibs.discard(name)
                    if not sibs:
                        del kids[was]
            if d is None:
                del dom_now[name]
            else:
                dom_now[name] = d
                kids.setdefault(d, set()).add(name)

        first = 0  # the jobs before it are the last pass's, handled in bulk
        roots_now: list[tuple] = []
        marks_now: list[int] = []  # this pass's marks (see _Pass), as the walk makes them
        same = False  # the last pass's jobs in the same order, less some at the head, and more
        if monotone and names:
            try:  # the last pass's jobs before it: started since
                m = last_names.index(names[0])
            except ValueError:
                m = -1
            n = min(len(names), len(last_names) - m)
            same = m >= 0 and names[:n] == last_names[m:m + n]
        look_again: list[str] = []  # jobs ruled out by one that left the window
        if same:
            # this pass updates the last one's record in place (the walk writes only what changed)
            self.carry_stats["in_place"] += 1
            outcomes, dom_now = carried, dom
            for name in last_names[:m] + last_names[m + n:]:  # gone from the window
                outcomes.pop(name, None)
                set_dom(name, None)
                look_again.extend(kids.pop(name, ()))
        else:
            kids = {}  # (made from dom_now at the end)
        if same and not fresh and not freed:
            # the same jobs in the same order: walk only the reservations among them (and
            # any job not carried); the jobs between them found no start and still find none
            # (what keep() would do for each, at once: the reservations are the last pass's
            # tuples, their ends join the candidate times; it stops where keep() would)
            first, tset, kept = n, set(times_all), []
            for j in marks[bisect_left(marks, m):bisect_left(marks, m + n)]:
                name = last_names[j]
                r, old = last_resv.get(name), carried.get(name)  # (only plain and tree-like jobs are carried)
                if r is None or old is None or old[0] != r[0] or r[0] <= now or r[0] not in tset \
                        or (changes and _hit(changes, r[0], r[1])):
                    first = j - m
                    break
                kept.append((name, r))
                if r[1] > now and r[1] not in tset:
                    tset.add(r[1])
                    if edge < r[1] <= horizon:  # a new candidate time in this pass's window
                        fresh = True
                        first = j - m + 1
                        break
            if kept:
                reserved.extend(r for _, r in kept)
                self.reservations.update(kept)
                made += len(kept)
                res_ends = sorted({r[1] for _, r in kept if r[1] > now})
                times_all = sorted(tset)
            marks_now = [j - m for j in marks[bisect_left(marks, m):bisect_left(marks, m + first)]]
            roots_now = [(k - m,) + r[1:] for r in last_roots if m <= (k := r[0]) < m + first]
        # roots: the jobs with no start in this pass that were added to ``never`` or could be (the
        # last pass's in the part carried in bulk, then as the walk passes them), for the next
        # pass to seed its own ``never`` with; ``unseeded``: those not yet in this pass's ``never``
        unseeded, seeded = list(roots_now), set()
        released: list[tuple[float, float]] = list(freed)  # the last pass's reservations this one moved
        released_on: list = list(freed_on)  # (the nodes of each)
        #: index into released * stride + GPUs a pod -> the first time one of its nodes has them free
        reach: dict = {}
        stride = node_gpus + 1
        #: the earliest start and the latest end of ``released`` (inf, -inf: none)
        rel_box = [min((r[0] for r in released), default=math.inf), max((r[1] for r in released), default=-math.inf)]

        def release(iv: tuple, nodes: list) -> None:
            """``iv`` (start, end) where a reservation the later jobs met was, on ``nodes``: they
            look again."""
            released.append(iv)
            released_on.append(nodes)
            changes.append(iv)
            if iv[0] < rel_box[0]:
                rel_box[0] = iv[0]
            if iv[1] > rel_box[1]:
                rel_box[1] = iv[1]

        def at(job: Job, tree: bool, t: float, mask):
            """try_times' answer at ``t``, where the count says the job's pods fit: a plain job's
            plan from the profile; a tree job's from the topology plugin (which refuses it there
            only unexpectedly: then the reference's search from the start answers it)."""
            if not tree:
                return t, avail.plan(job, t, reserved, mask), False
            plan = self.plan(state, job, t, reserved)
            if plan is None:
                odd[0] = True
                return search(job, False, 0) + (True,)
            return t, plan, False

        def try_times(job: Job, until: float | None, tree: bool = False):
            """The earliest start of a carried job before ``until`` (its last start; None: it had
            none in the last window), its plan, and whether that is its answer from the whole
            window (a search was quicker); or (None, None, False). Only two kinds of candidate
            time can be one: past the last window, and in ``[start - runtime, end)`` of a
            reservation the last pass made and this one moved (nothing else holds less than when
            the job failed last time), or that early ends freed. Each such span starts no sooner
            than the first time one of its nodes has ``g`` GPUs free (:meth:`Availability.reach`):
            before then none of them holds a pod of the job's, and every other node holds no more
            pods and is blocked no less than when the job failed there last time, so it fails
            there again. Each time left is counted from the pass's capacity curve at that
            time (a plan only where the job fits)."""
            g, pods, runtime = job.gpus_per_pod, job.pods, job.planned_runtime
            if tree and runtime <= 0:
                return search(job, False, 0) + (True,)  # (the reference's search, from the start)
            if until is None and not released and runtime > 0 and edge >= now:
                hit = fresh_fit(g, pods, runtime)
                if hit is False:
                    return search(job, not tree, fresh_span[1]) + (True,)
                if not hit:
                    return None, None, False
                return at(job, tree, hit[0], hit[1])
            top = (bisect_right(times_all, horizon) if until is None
                   else min(bisect_left(times_all, until), bisect_right(times_all, horizon)))
            spans = [(bisect_right(times_all, edge), top)]
            if len(released) > 4:  # (one span that covers them all: its other times fail, as counted)
                spans.append((bisect_left(times_all, max(now, rel_box[0] - runtime)),
                              min(top, bisect_left(times_all, rel_box[1]))))
            else:
                for x in range(len(released)):
                    s0, e0 = released[x]
                    # (from the first time one of its nodes can hold a pod: before it, what freed
                    # or moved away there holds none of the job's pods, so it fails as it did)
                    w = reach.get(x * stride + g)  # (an int key, no tuple; g <= a node's GPUs)
                    if w is None:
                        w = reach[x * stride + g] = avail.reach(released_on[x], g)
                    if w > s0 - runtime and w > now:
                        self.carry_stats["reach"] += 1  # (a span cut short)
                    spans.append((bisect_left(times_all, max(now, s0 - runtime, w)),
                                  min(top, bisect_left(times_all, e0))))
            if len(spans) > 1:
                spans.sort()
            if freed and not tree and runtime > 0 and direct:
                # after early ends (busy clusters: their spans start now), the pass's timeline
                # steps over the rows of each span that cannot hold the job, as a search does
                line = timeline()
                if line is not None:
                    nxt = 0
                    for lo, hi in spans:
                        lo = max(lo, nxt)
                        if lo < hi:
                            hit = line.earliest(g, pods, runtime, lo, hi)
                            if hit is not None:
                                return times_all[hit[0]], line.plan(hit[0], hit[1], job), False
                        nxt = max(nxt, hi)
                    return None, None, False
            if sum(hi - lo for lo, hi in spans if hi > lo) > 8:
                # many times to try (a busy cluster: ends close together): the search from the
                # first of them, with its jumps over times at which nothing freed up, answers it
                lo = min((lo for lo, hi in spans if hi > lo))
                return search(job, not tree, lo) + (True,)
            nxt = 0  # the spans may overlap: each time once, in order
            ends = self._distinct_ends or [math.inf]
            for lo, hi in spans:
                for k in range(max(nxt, lo), hi):
                    t = times_all[k]
                    if runtime > 0 and (t > now or ends[0] > now):  # most fail: counted from the
                        # curve, not planned (now too, unless a running job is due to end now:
                        # the profile would count its GPUs free; a zero-length job started now)
                        mask, fit = avail.curve_at(avail.curve(reserved, t, g), t, t + runtime, g)
                        if fit >= pods:
                            return at(job, tree, t, mask)
                        continue
                    if tree:  # (now, with a running job due to end now: the reference's search)
                        return search(job, False, 0) + (True,)
                    failed = failed_at.get(t)
                    if failed is not None and failed.covers(g, pods, runtime):
                        continue
                    plan = (avail.plan(job, t, reserved) if reserved or t != now
                            else self.plan(state, job, t, reserved))
                    if plan is not None:
                        return t, plan, False
                    if failed is None:
                        failed = failed_at[t] = _Staircase()
                    failed.add(g, pods, runtime, checked=True)
                nxt = max(nxt, hi)
            return None, None, False

        fresh_span = (-1, 0, 0)  # (len(times_all), its indexes past the last window up to horizon)

        def fresh_fit(g: int, pods: int, runtime: float):
            """try_times' common case (no start last time, nothing moved, runtime > 0): only the
            times past the last window are new, the same for every job until a reservation adds
            an end, and one capacity curve per time answers them all. (t, blocked mask) of the
            first where the pods fit; None if none; False if so many that a search is quicker."""
            nonlocal fresh_span
            if fresh_span[0] != len(times_all):
                fresh_span = (len(times_all), bisect_right(times_all, edge), bisect_right(times_all, horizon))
            _, lo, hi = fresh_span
            if hi - lo > 8:
                return False
            for k in range(lo, hi):
                t = times_all[k]  # (> now: past the last window)
                mask, fit = avail.curve_at(avail.curve(reserved, t, g), t, t + runtime, g)
                if fit >= pods:
                    return t, mask
            return None
        started = []  # the jobs this pass starts: not in the queue the next pass walks
        started_at = self._bf_started_at  # their indexes in names
        # A pass in place visits only the jobs whose outcome may change, in order: the reserved
        # and the roots (marks, last_roots), the jobs new to the window, and a job some other one
        # ruled out once that one has a start now or left (kids); every other job has no start
        # still, ruled out by one that has none (the walk would skip it). A job that is not
        # plain makes the rest new: from it on every job is visited.
        selective, pos = same, None
        if selective:
            heap = [j - m for j in marks[bisect_left(marks, m + first):bisect_left(marks, m + n)]]
            heap += [k - m for r in last_roots if m + first <= (k := r[0]) < m + n]
            heap += range(n, len(names))
            if look_again:
                pos = dict(zip(names, range(len(names))))
                heap += [pos[c] for c in look_again if c in pos]
            heapify(heap)
        last = first - 1
        while True:
            if selective:
                if not heap:
                    break
                idx = heappop(heap)
                if idx <= last:
                    continue
            else:
                idx = last + 1
                if idx >= len(names):
                    break
            last = idx
            run, name = pending[idx], names[idx]
            old = carried.get(name) if monotone else None  # (only plain and tree-like jobs are carried)
            if old is not None:
                s0 = old[0]
                if s0 is None:
                    d = dom.get(name)
                    if (not fresh and not released) or (d is not None and outcomes.get(d, (0,))[0] is None):
                        # no start in the last window and none where it could find one now; or
                        # no smaller job before it found one (d: with no more pods, no longer)
                        if not same:
                            outcomes[name] = old
                            if d is not None:
                                dom_now[name] = d
                        if d is None:  # still none this pass: it rules out the jobs it covers later on
                            job = run.job
                            roots_now.append((idx, name, job.gpus_per_pod, job.pods, job.planned_runtime))
                            unseeded.append(roots_now[-1])
                        continue
                    job = run.job
                    if d is None and same and not released and edge >= now and job.planned_runtime > 0 \
                            and fresh_fit(job.gpus_per_pod, job.pods, job.planned_runtime) is None:
                        # a root that finds no start at the new times either: a root still, without
                        # the rest of the walk (most are, and most passes have ~30)
                        roots_now.append((idx, name, job.gpus_per_pod, job.pods, job.planned_runtime))
                        unseeded.append(roots_now[-1])
                        continue
                elif s0 > now and rel_box[0] > s0 + run.job.planned_runtime \
                        and not (changes and _hit(changes, s0, s0 + run.job.planned_runtime)) \
                        and _has(times_all, s0):
                    # (nothing changed where it is reserved, nor moved away where it could start sooner)
                    outcomes[name] = old  # the same reservation: the same nodes from the same time
                    marks_now.append(idx)
                    fresh = keep(name, s0, s0 + run.job.planned_runtime, old[1]) or fresh
                    continue
            job = run.job
            plain = self._plain(state, job)
            # a job the tree plugin places but could equally be carried: its start is a plain
            # job's (the first time its count holds), only its nodes are the tree's
            tree = not plain and tree_like(job)
            like = plain or tree
            runtime, pods = job.planned_runtime, job.pods
            if unseeded:  # the jobs before it that still have no start, not yet in ``never``
                for r in unseeded:
                    if not never.covers(r[2], r[3], r[4]):
                        never.add(r[2], r[3], r[4], checked=True, who=r[1])
                        seeded.add(r[1])
                unseeded = []
            d = never.owner(job.gpus_per_pod, pods, runtime) if like else None
            self.carry_stats["seeded"] += d in seeded
            if same:
                set_dom(name, d)
            if d is not None:
                # one no wider, with no more pods and no longer, found no start: nor will it
                start, plan = None, None
                if not same:
                    dom_now[name] = d
            elif old is None:
                start, plan = search(job, plain, 0)
            elif old[0] is None:  # no start in the last window: none before its end now either
                start, plan, _ = try_times(job, None, tree)
            elif old[0] > now:  # every earlier time fails now as it did: is its plan still there?
                start, plan, final = try_times(job, old[0], tree)
                if start is None and not final:  # (still a candidate time unless what ended then moved)
                    start, plan = old[0], None
                    if _has(times_all, start):
                        r = last_resv.get(name)
                        if tree:  # (the tree's plan: it may choose other leaves now)
                            plan = self.plan(state, job, start, reserved)
                        elif job.gpus_per_pod == avail.top and r is not None and r[0] == start \
                                and not (released and _hit(released, start, start + runtime)) \
                                and avail.still_free(r, start, start + runtime, reserved):
                            # Whole-node pods take the free nodes in index order, and since the
                            # last pass the free nodes at every later time only fell and only
                            # the moved reservations gave nodes back: with none of those over its
                            # time, and all its nodes still free and unreserved, its plan is the
                            # first that many of fewer nodes that still hold them: its own.
                            plan = old[1]
                        else:
                            plan = avail.plan(job, start, reserved)
                    if plan is None:
                        start, plan = search(job, plain, bisect_right(times_all, old[0]))
            else:
                start, plan = search(job, plain, 0)
            # a start now exactly as reserved, on whole nodes, holds what the reservation held
            # (the same nodes, every GPU, until the same end): for the jobs after it nothing moved
            moved = start == now and not (old is not None and (start, plan) == old and all(
                k * job.gpus_per_pod == node_gpus for _, k in plan))
            if monotone and old is not None and old[0] is not None and (moved or (start, plan) != old):
                # a reservation the later jobs met moved (or became a job that may leave some of
                # its nodes' GPUs free): where it was, they must look again
                r = last_resv.get(name)  # (its nodes as the reservation listed them: no new list)
                release((old[0], old[0] + runtime), r[2] if r is not None and r[0] == old[0] and r[2]
                        and len(r[2]) == len(old[1]) else [i for i, _ in old[1]])
                self.carry_stats["moved"] += 1
            elif monotone and old is None and like and name in last_resv:
                # not carried but reserved last time (a job that waited for --switches then, or
                # that the tree refused where its pods fit): where it was, the later jobs look again
                release(last_resv[name][:2], last_resv[name][2])
            if odd[0]:  # the tree refused it where its pods fit: not carried, as a job not plain
                like, odd[0] = False, False
            if not like:
                monotone = selective = False
            elif monotone and start is not None and (moved or old is None or (start, plan) != old):
                changes.append((start, start + runtime))  # held now, not by the last pass's jobs
            if like:
                outcomes[name] = (start, plan)
            elif same:
                outcomes.pop(name, None)
            if start is not None or not like:
                marks_now.append(idx)
                if selective and name in kids:  # the jobs it ruled out: to be looked at again
                    if pos is None:
                        pos = dict(zip(names, range(len(names))))
                    for c in kids[name]:
                        k = pos.get(c)
                        if k is not None and k > idx:
                            heappush(heap, k)
            if start is None:
                if like and d is None and not never.covers(job.gpus_per_pod, pods, runtime):
                    never.add(job.gpus_per_pod, pods, runtime, checked=True, who=name)
                    roots_now.append((idx, name, job.gpus_per_pod, pods, runtime))
                continue
            if old is not None and plan is old[1] and start == old[0] and start > now \
                    and not self.bf_job_part_count_reserve:
                r = last_resv.get(name)  # (made from old[1] at old[0] in the last pass)
                if r is not None and r[0] == start and r[1] == start + runtime:
                    # its last reservation again, the same plan from the same time: the same
                    # tuple, whose nodes' mask the profile knows (what _settle would append)
                    fresh = keep(name, start, start + runtime, plan) or fresh
                    continue
            outcome = self._settle(state, run, start, plan, reserved, made)
            if outcome == "started":
                started.append(name)
                started_at.append(idx)
                unseeded = []  # (the walk so far met more free GPUs than the rest will)
                self._bf_started.append(run)
                avail = self._availability(state)  # one more running job: fewer GPUs free
                e = self.expected_end[run.name]  # one more end among the candidate times
                if e > now and not _has(times_all, e):
                    insort(times_all, e)
                    fresh = fresh or edge < e <= horizon
                self._failed = failed_at = {}
                never = _Staircase()
            elif outcome == "reserved":
                made += 1
                avail.keep_mask(reserved[-1], plan)  # (its nodes' mask from the plan, not packed again)
                fresh = reserve_end(reserved[-1][1]) or fresh
        self._pass_times = times_all
        if not same:
            for c, d in dom_now.items():
                kids.setdefault(d, set()).add(c)
        if started:
            for k in reversed(started_at):  # (names is this pass's own list)
                del names[k]
            roots_now = [(r[0] - bisect_left(started_at, r[0]),) + r[1:] for r in roots_now]
            gone = set(started_at)
            marks_now = [k - bisect_left(started_at, k) for k in marks_now if k not in gone]
            if same:
                for name in started:
                    outcomes.pop(name, None)
        if self._distinct_ends and self._distinct_ends[0] <= now:
            # a job due to end now still holds its GPUs now but not a moment later, and no
            # candidate time lies between: what failed now says nothing about just after it
            self._carry, self._started_since = None, []
            return
        # (a job started here, after others were reserved: those met less than the next pass will)
        self._carry = _Pass(now, outcomes, names, marks_now,
                            [(now, self.expected_end[name]) for name in started], dom_now,
                            self.reservations, roots_now, kids)
        self._started_since, self._early_ends, self._early_nodes = [], [], []

    def _kernel_ready(self) -> bool:
        """Whether passes may go to the compiled pass: asked (``use_kernel``), or a workload of at
        least ``KERNEL_FROM`` jobs (below, compiling or loading it costs more than it saves) on
        at most ``KERNEL_NODES`` nodes or on a tree;
        numba installed; reservations for every job (``bf_job_part_count_reserve`` 0); no
        topology or topology/tree (the compiled pass plans as its plugin does; not topology/block);
        the reference's own ``plan``."""
        if self._kernel_on is None:
            spec = self.workload.cluster
            want = self.use_kernel
            if want is None:  # (on a tree at any size: the Python pass carries little there)
                want = len(self.workload.jobs) >= KERNEL_FROM and (spec.nodes <= KERNEL_NODES or bool(spec.topology))
            self._kernel_on = bool(want and compiled.available() and not self.bf_job_part_count_reserve
                                   and not (spec.topology and spec.slurm_topology == "block")
                                   and type(self).plan is SlurmFast.plan)
        return self._kernel_on

    def _kernel_pass(self, state: SchedState, pending: list[JobRun]) -> bool:
        """The pass by :func:`slurm_kernel.backfill_pass` if every job it tests is plain; False if
        not (then the Python pass runs). Its starts are made here in order, as the reference
        makes them; its reservations become :attr:`reservations` when first read."""
        if not self._kernel_ready():
            return False
        pending = pending[: self.bf_max_job_test]
        idx = np.fromiter(map(_seq, pending), np.int64, len(pending))
        if not self._k_plain[idx].all():
            return False
        now = state.now
        runtime = self._k_run[idx]
        ends, nodes, gpus = self._ev
        leaves = None
        if self._k_tree is not None:  # --switches=N while the job waits for them (waits_for_switch)
            leaves = np.where(now - self._k_submit[idx] < self._k_wait[idx], self._k_switches[idx], 0)
        kind, start, offsets, plan_nodes, plan_pods, times, stats = slurm_kernel.backfill_pass(
            now, now + self.bf_window, state.cluster.capacity, self._free_now(state)[0], ends, nodes, gpus,
            self._k_g[idx], self._k_pods[idx], runtime, exact=True, tree=self._k_tree, job_leaves=leaves,
            work=self._k_work)
        self.carry_stats["passes"] += 1
        self.kernel_stats += stats  # ([0] counts the passes)
        self._carry, self._started_since, self._early_ends, self._early_nodes = None, [], [], []
        self._failed = {}
        if stats[5]:  # jobs started now
            started = np.flatnonzero(kind == 1).tolist()
            for k in started:  # (only the started jobs' plans become lists: a pass plans hundreds)
                run = pending[k]
                a, z = int(offsets[k]), int(offsets[k + 1])
                self._start(state, run, list(zip(plan_nodes[a:z].tolist(), plan_pods[a:z].tolist())))
                state.log(run.name, "started by backfill (delays no reservation)")
        else:
            started = []
        self._bf_started = [pending[k] for k in started]
        self._bf_started_at = started
        self.reservations = _KernelReservations(pending, kind, start, offsets, plan_nodes, runtime)
        self._pass_times = times  # (an array: _same_pass only bisects it)
        return True

    def _k_shapes(self, state: SchedState, runs: list[JobRun]) -> None:
        """The shapes of newly submitted runs for the compiled pass, by seq (the arrays grow by doubling)."""
        top = max(r.seq for r in runs) + 1
        if self._k_plain is None or len(self._k_plain) < top:
            size = max(top, len(self.workload.jobs), 2 * (0 if self._k_plain is None else len(self._k_plain)))
            grown = (np.zeros(size, np.int64), np.zeros(size, np.int64), np.zeros(size), np.zeros(size, bool),
                     np.zeros(size, np.int64), np.zeros(size), np.zeros(size))
            if self._k_plain is not None:
                for new, old in zip(grown, (self._k_g, self._k_pods, self._k_run, self._k_plain, self._k_switches,
                                            self._k_submit, self._k_wait)):
                    new[:len(old)] = old
            (self._k_g, self._k_pods, self._k_run, self._k_plain, self._k_switches, self._k_submit,
             self._k_wait) = grown
        plain = state.cluster.plain
        tree = bool(self.workload.cluster.topology)
        for r in runs:
            j = r.job
            k = r.seq
            self._k_g[k], self._k_pods[k], self._k_run[k] = j.gpus_per_pod, j.pods, j.planned_runtime
            self._k_plain[k] = plain(j) and j.planned_runtime >= 0
            if tree:  # (--switches=N, waited for until submit + its wait: waits_for_switch)
                self._k_switches[k] = self.switches(j) or 0
                self._k_submit[k], self._k_wait[k] = j.submit, self.switch_wait(j)

    def _carried(self, state: SchedState) -> tuple | None:
        """The last pass's time, outcomes, the changes since (intervals), its jobs in order, their
        marks and their dominators (see :class:`_Pass`), when every outcome must still hold as far
        as the last pass looked; or None. Since the last pass the
        free GPUs at every time from now on have only fallen: every job that ended did so at its
        expected end (its GPUs were free from then on in the last profile too); every job that
        started either had no reservation (more GPUs taken) or started at its reservation's
        start on exactly its nodes, using every GPU of each (a whole-node reservation, now a
        running job until the same end). Then a job walked in the same order meets at least what
        it met last time, at every time: where it failed it fails (at a new candidate time it is
        no better off than at the last candidate time before it), so a reservation is still its
        answer if its plan still works there, and a job with no start in the last window can
        only find one past it. Reservations only (``bf_job_part_count_reserve`` = 0): a limit
        on them makes "no start" mean something else (issue 23).

        Early ends and starts off a reservation (issue 35: on a busy cluster every job ends before
        its ``--time``) come back as ``freed``, the intervals the walk treats as reservations that
        moved (``released``): a job that ended early at ``e`` > now frees its nodes' GPUs over
        ``(now, e)`` only, so a job can now start earlier only at a candidate time in ``[now, e)``
        (the free GPUs at every time from ``e`` on are the last pass's, as ``e`` was a candidate
        time then); a job started elsewhere than reserved frees where it was reserved, as a
        reservation that moved does (and holds where it runs: a change). ``freed`` comes with the
        nodes of each span (those of the job that ended, or of the reservation). Every time outside those
        spans still fails where it failed, so each job is tried only there (the pass's
        :class:`Timeline` over the spans) and keeps its reservation where none fits."""
        carry = self._carry
        if carry is None or self.bf_job_part_count_reserve or len(self._early_ends) > 64 or None in self._early_ends:
            return None
        if self._distinct_ends and self._distinct_ends[0] <= state.now:
            return None  # a job due to end now: its end is no candidate time now (see the pass's end)
        outcomes, changes = carry.outcomes, list(carry.changes)
        now = state.now
        freed = [(now, e) for e in self._early_ends if e > now]
        freed_on = [nodes for e, nodes in zip(self._early_ends, self._early_nodes) if e > now]
        nodes = state.cluster.nodes
        for run, t, plan in self._started_since:
            old = outcomes.get(run.name)
            if old is None and run.name in carry.resv:
                return None  # a job not carried (not plain, not tree-like) held a reservation: it is free now
            if old is None or old[0] is None:  # it held nothing the later jobs met: GPUs taken
                changes.append((t, t + run.job.planned_runtime))
                continue
            if old[0] != t or (old[1] != plan and sorted(i for i, _ in old[1]) != sorted(i for i, _ in plan)) or \
                    any(k * run.job.gpus_per_pod != nodes[i].gpus for i, k in old[1]):
                # started elsewhere: its reservation moved (see the walk), to where it runs
                freed.append((old[0], old[0] + run.job.planned_runtime))
                freed_on.append([i for i, _ in old[1]])
                changes.append(freed[-1])
                changes.append((t, t + run.job.planned_runtime))
        return (carry.time, outcomes, changes, carry.names, carry.marks, carry.dom, carry.resv, carry.roots,
                carry.kids, (freed, freed_on))

    def _candidates(self, now: float) -> list[float]:
        """The reference's candidate start times before any reservation: now and the running
        jobs' expected ends after now, sorted and distinct."""
        ends = self._distinct_ends
        return [now] + ends[bisect_right(ends, now):]

    def _first_row(self, line: Timeline, times: list[float], state: SchedState, job: Job, k: int) -> int:
        """The first row of the pass's timeline from ``k`` on that can be the start of ``job``
        (runtime > 0) as far as counts tell: row ``k`` if its count with its own reservations
        holds the pods (:meth:`Timeline.cap`, the walk's first question anyway), else the first
        later row at which they fit with no reservation at all. No row before it can hold them
        with some (its count there is at most that), so :meth:`Timeline.earliest` need not step
        over each (a big job on a busy tree: thousands of rows, each counted from the profile's
        masks). A binary search, galloping from ``k``, as the count never falls with time
        (:meth:`_first_fit`). Asked for jobs the tree places: on the busy sweep's plain jobs the
        first fit is ~5 rows on, and the gallop cost more than the rows it spared."""
        g, pods = job.gpus_per_pod, job.pods
        if k >= len(times) or line.cap(k, g) >= pods:
            return k
        k += 1  # (the rows after row k are all after now)
        avail, n = self._availability(state), len(times)
        short, hi, step = k - 1, k, 1  # rows up to ``short`` are short; ``hi`` fits (or is n)
        while hi < n and avail.fit(times[hi], g) < pods:
            short, hi, step = hi, hi + step, 2 * step
        return _first_fitting(times, avail, g, pods, short + 1, min(hi, n))

    @staticmethod
    def _first_fit(times: list[float], state: SchedState, avail: "Availability", job: Job) -> int:
        """Index of the first time in ``times`` (``times[0]`` is now) at which the plain ``job``'s
        pods all fit on the cluster, reservations aside (len(times) if never): a binary search,
        as the count never decreases with time."""
        if state.cluster.fit_count(job.gpus_per_pod) >= job.pods:  # (a plain job: what pods_that_fit says)
            return 0
        return _first_fitting(times, avail, job.gpus_per_pod, job.pods, 1, len(times))

    def on_finish(self, state: SchedState, run: JobRun) -> None:
        rows = self._ev_rows.pop(run.name, None)
        if rows:
            ends, _, gpus = self._ev
            ends[rows], gpus[rows] = -np.inf, 0
            self._ev_free.extend(rows)
        self._ends_seen += 1
        ran_on = self._last_nodes.get(run.name, ((), False))[0]
        self._dirty.update(ran_on)
        if self._tree_leaf:
            self._leaf_dirty.update(ran_on)
        e = self.expected_end.get(run.name)
        super().on_finish(state, run)
        if e != state.now:  # it ended before its time limit: GPUs free earlier than planned
            self._early_ends.append(e)
            self._early_nodes.append(ran_on)
        if e is not None:
            self._ends_count[e] -= 1
            if not self._ends_count[e]:
                del self._ends_count[e]
                del self._distinct_ends[bisect_left(self._distinct_ends, e)]
            if self._avail is not None and e > state.now:
                # the simulator released the job's GPUs just before, earlier than the profile
                # says. (Ended on time, its nodes' times are its end, not after now: every
                # question the profile answers about a later time is the same; only what it
                # read from the cluster's buckets for now must be read again.)
                nodes, whole = self._last_nodes.pop(run.name, ((), False))
                self._avail.touch(nodes, -math.inf if whole else None)
            elif self._avail is not None:
                self._avail.forget_now()
        self._last_nodes.pop(run.name, None)


    def _availability(self, state: SchedState) -> "Availability":
        """The availability profile, brought up to date with the nodes changed since its last use."""
        if self._avail is None:
            self._avail = Availability(state.cluster, self.expected_end)
        self._avail.refresh(state.now)
        return self._avail


class _KernelReservations(Mapping):
    """:attr:`Slurm.reservations` of a compiled pass, made into tuples only when read (a pass
    makes hundreds; most are never read): name -> (start, end, node indexes)."""

    def __init__(self, runs, kind, start, offsets, nodes, runtime):
        self._args = (runs, kind, start, offsets, nodes, runtime)
        self._made: dict | None = None

    def _dict(self) -> dict:
        if self._made is None:
            runs, kind, start, offsets, nodes, runtime = self._args
            offs, nodes = offsets.tolist(), nodes.tolist()
            made = {}
            for k in np.flatnonzero(kind == 2).tolist():
                s = float(start[k])
                made[runs[k].job.name] = (s, s + float(runtime[k]), nodes[offs[k]:offs[k + 1]])
            self._made, self._args = made, None
        return self._made

    def __getitem__(self, name):
        return self._dict()[name]

    def __iter__(self):
        return iter(self._dict())

    def __len__(self):
        return len(self._dict())


class _Staircase:
    """Plain jobs that failed (at one candidate time, or at every one in the backfill window), per
    GPUs a pod, as the lower-left corners (pods, runtime) none of which dominates another. A later
    job as wide per pod with at least as many pods and at least as long a runtime fails too: during
    a pass the free GPUs at any time only fall (jobs start) and the reservations only grow, and at
    a candidate time added by a new end or reservation a job is no better off than at the candidate
    before it. So :meth:`covers` answers what the search would (tests/test_gang_fastpath.py), in
    O(log corners) instead of a walk over every failure."""

    def __init__(self):
        self._by_g: dict[int, tuple[list, list, list]] = {}  # g -> (pods rising, runtimes falling, who)

    def covers(self, g: int, pods: int, runtime: float) -> bool:
        ps, rs, _ = self._by_g.get(g, ((), (), ()))
        i = bisect_right(ps, pods) - 1
        return i >= 0 and rs[i] <= runtime

    def owner(self, g: int, pods: int, runtime: float):
        """The name given with a failed job that covers this one (see :meth:`covers`), or None."""
        ps, rs, ws = self._by_g.get(g, ((), (), ()))
        i = bisect_right(ps, pods) - 1
        return ws[i] if i >= 0 and rs[i] <= runtime else None

    def add(self, g: int, pods: int, runtime: float, checked: bool = False, who=True) -> None:
        """Add a failed job; ``checked``: the caller knows :meth:`covers` is false for it."""
        if not checked and self.covers(g, pods, runtime):
            return
        ps, rs, ws = self._by_g.setdefault(g, ([], [], []))
        j = bisect_left(ps, pods)
        end = j
        while end < len(ps) and rs[end] >= runtime:  # corners the new one dominates
            end += 1
        ps[j:end], rs[j:end], ws[j:end] = [pods], [runtime], [who]


def _hit(intervals: list, a: float, b: float) -> bool:
    """Whether any of ``intervals`` ((start, end) pairs) overlaps ``[a, b]``: a job's window, closed
    at its end as Slurm's backfill tests it (:meth:`Slurm._blocked`)."""
    for x, y in intervals:
        if x <= b and a < y:
            return True
    return False


def _has(sorted_list: list[float], t: float) -> bool:
    k = bisect_left(sorted_list, t)
    return k < len(sorted_list) and sorted_list[k] == t


def _first_fitting(times: list[float], avail: "Availability", g: int, pods: int, lo: int, hi: int) -> int:
    """The first index in ``[lo, hi)`` of ``times`` at which ``pods`` pods of ``g`` GPUs fit on the
    cluster, reservations aside (``hi`` if none): a binary search, as the count never falls with time."""
    return bisect_left(range(hi), True, lo, hi, key=lambda r: avail.fit(times[r], g) >= pods)
