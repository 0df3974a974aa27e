"""``slurm``: whole-job allocation in priority order, then backfill with reservations (FACTS §3.4).

Slurm needs no "gang" feature for all-nodes-at-once: a job is an allocation, and it stays
PENDING until all of it can be allocated (``quickstart.shtml`` L36–41, ``sbatch.1`` L1942).
(Slurm's own "gang scheduling" is time-slicing, ``PreemptMode=SUSPEND,GANG`` — not modelled.)

- **Main scheduler**: jobs in priority order (priority, then submit time); each is allocated
  whole or not at all; "once any job … in a partition is left pending, no other jobs in that
  partition will be scheduled" (``sched_config.shtml`` L16): the blocked job's reason is
  ``Resources``, the ones behind it ``Priority``.
- **Backfill** (``sched/backfill``, on by default here): walks pending jobs in priority order
  (at most ``bf_max_job_test`` = 500), finds each one's earliest start from the running jobs'
  expected ends (start + ``time_limit``, or ``duration`` when no limit is given) and the
  reservations already made, starts it now if that delays no reservation, and otherwise
  reserves **whole nodes** for it (L83, L88). Slurm's default ``bf_job_part_count_reserve=0``
  "will reserve resources for any pending job" (``slurm.conf.5`` L4345–4348): conservative-like,
  not EASY; set it to 1 to approximate EASY. Reservations reach ``bf_window`` = 1440 min ahead.
  Memory is planned from the running jobs' memory too; ``bf_resolution`` is not modelled.
- ``--constraint`` (features, ``&``, ``|``, matching OR ``[a|b]``) and ``--exclusive`` (whole
  nodes, all their GPUs) as in ``sbatch.1`` L281–286 and L940–947; the ``--time`` limit is
  enforced (the job ends ``TIMEOUT``).
- Pending reasons use Slurm's names (``job_reason_codes.shtml``): ``Resources``, ``Priority``,
  ``PartitionNodeLimit`` (larger than the partition), ``BadConstraints`` (no set of nodes
  with the requested features can ever hold it).

Nodes are chosen best-fit (fewest free GPUs first), ties to the lowest node index. A Slurm job
is allocated all of its ``pods`` (tasks); ``min_member`` plays no part here. For a replay on a real
``slurmctld`` a job maps to ``sbatch -n PODS --gpus-per-task=GPUS_PER_POD [--time] [--constraint]
[--exclusive]`` with priority order = (priority, submit time).
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right, insort

import numpy as np

from courselib.model.cluster import alternatives
from courselib.model.gang import JobRun, SchedState
from courselib.model.policies import Policy
from courselib.model.workload import Job, Workload

BIG = 10 ** 9


class Slurm(Policy):
    name = "slurm"
    enforces_time_limit = True

    def __init__(self, workload: Workload, seed: int = 0, backfill: bool = True,
                 bf_job_part_count_reserve: int = 0, bf_max_job_test: int = 500,
                 bf_window: float = 1440 * 60.0):
        super().__init__(workload, seed)
        self.backfill = backfill
        self.bf_job_part_count_reserve = bf_job_part_count_reserve
        self.bf_max_job_test = bf_max_job_test
        self.bf_window = bf_window
        self.jobs: list[JobRun] = []
        self.expected_end: dict[str, float] = {}
        self.reservations: dict[str, tuple[float, float, list[int]]] = {}  # last pass, for teaching
        self._free_cache: dict[tuple, tuple] = {}
        self._ends: list | None = None  # fast path: (expected end, job) of the running, this pass
        self._end_times: list[float] = []
        self._times_done: list[float] = []  # times > now whose free arrays are in _free_cache
        self._mask_cache: dict = {}
        self._infeasible: dict[str, str | None] = {}
        # fast path: pending jobs already in priority order, and each job shape's verdict once
        self._queue: list[tuple] = []
        self._shape_verdict: dict[tuple, str | None] = {}

    def submit(self, state: SchedState, runs: list[JobRun]) -> None:
        self.jobs.extend(runs)
        for run in runs:
            insort(self._queue, (-run.job.priority, run.job.submit, run.seq, run))

    # ---- capacity arithmetic ---------------------------------------------------------------
    @staticmethod
    def _pods_on(job: Job, node_gpus: int, free_g: int, free_m: int | None) -> int:
        if job.exclusive and free_g < node_gpus:
            return 0
        n = free_g // job.gpus_per_pod if job.gpus_per_pod else BIG
        if free_m is not None and job.memory_per_pod:
            n = min(n, free_m // job.memory_per_pod)
        return n

    def infeasible(self, state: SchedState, run: JobRun) -> str | None:
        """Slurm's reason for a job that can never run here, or None (a fixed property of the job)."""
        if self.reference:
            if run.name not in self._infeasible:
                self._infeasible[run.name] = self._why_infeasible(state, run)
            return self._infeasible[run.name]
        job = run.job  # the verdict depends only on the job's shape, not on its name
        shape = (job.pods, job.gpus_per_pod, job.memory_per_pod, job.exclusive, job.constraint)
        if shape not in self._shape_verdict:
            self._shape_verdict[shape] = self._why_infeasible(state, run)
        return self._shape_verdict[shape]

    def _why_infeasible(self, state: SchedState, run: JobRun) -> str | None:
        cluster, job = state.cluster, run.job
        best = 0
        try:
            alts = alternatives(job.constraint)
            for alt in alts:
                allowed = cluster.allowed(alt)
                nodes = cluster.nodes if allowed is None else [cluster.nodes[i] for i in sorted(allowed)]
                best = max(best, sum(self._pods_on(job, n.gpus, n.gpus, n.memory or None) for n in nodes))
        except ValueError:
            return "BadConstraints"
        if best >= job.pods:
            return None
        return "PartitionNodeLimit" if job.constraint is None else "BadConstraints"

    def _free_at(self, state: SchedState, t: float):
        """Free GPUs and memory per node (numpy arrays) at time ``t`` from the running jobs'
        expected ends; cached for one scheduling pass (it does not depend on the job planned)."""
        key = (state.now, t)
        if key not in self._free_cache and not self.reference and t > state.now:
            self._free_cache[key] = self._free_at_from_nearest(state, t)
        if key not in self._free_cache:
            cluster = state.cluster
            free_g = np.array(cluster.free, dtype=np.int64)
            free_m = np.array(cluster.free_mem, dtype=np.int64)
            if t > state.now:
                for name, nodes in cluster.alloc.items():
                    if self.expected_end.get(name, BIG) <= t:
                        for i, b in nodes.items():
                            free_g[i] += b.gpus
                            free_m[i] += b.memory
            self._free_cache[key] = (free_g, free_m)
        return self._free_cache[key]

    def _free_at_from_nearest(self, state: SchedState, t: float):
        """Fast path of :meth:`_free_at`: start from the nearest earlier time already computed in
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
            free_g = np.array(state.cluster.free, dtype=np.int64)
            free_m = np.array(state.cluster.free_mem, dtype=np.int64)
            lo = 0
        for _, name in self._ends[lo:bisect_right(self._end_times, t)]:
            for i, b in state.cluster.alloc[name].items():
                free_g[i] += b.gpus
                free_m[i] += b.memory
        insort(self._times_done, t)
        return free_g, free_m

    def _allowed_mask(self, state: SchedState, alt):
        if alt not in self._mask_cache:
            allowed = state.cluster.allowed(alt)
            mask = np.ones(len(state.cluster.nodes), dtype=bool)
            if allowed is not None:
                mask[:] = False
                mask[list(allowed)] = True
            self._mask_cache[alt] = mask
        return self._mask_cache[alt]

    def plan(self, state: SchedState, job: Job, t: float, reserved: list) -> list | None:
        """Nodes and pod counts for ``job`` to run over ``[t, t + planned_runtime)`` without
        touching a reservation (``reserved``: (start, end, node indexes)), or None."""
        if not self.reference and t == state.now and not reserved and state.cluster.plain(job):
            return self._plan_now(state, job)
        spec, t1 = state.workload.cluster, t + job.planned_runtime
        free_g, free_m = self._free_at(state, t)
        blocked = np.zeros(len(free_g), dtype=bool)
        if reserved and not self.reference:  # the same test on arrays kept as reservations are made
            starts, ends, nodes = self._reservation_arrays(reserved, len(free_g))
            overlap = (starts < t1) & (t < ends)
            if overlap.any():
                blocked = nodes[overlap].any(axis=0)
        elif reserved:
            starts = np.fromiter((r[0] for r in reserved), float, len(reserved))
            ends = np.fromiter((r[1] for r in reserved), float, len(reserved))
            for j in np.nonzero((starts < t1) & (t < ends))[0]:
                blocked[reserved[j][2]] = True
        if job.exclusive:
            k = np.where(free_g == spec.gpus_per_node, spec.gpus_per_node // max(job.gpus_per_pod, 1), 0)
        else:
            k = free_g // job.gpus_per_pod if job.gpus_per_pod else np.full(len(free_g), BIG)
        if spec.memory_per_node and job.memory_per_pod:
            k = np.minimum(k, free_m // job.memory_per_pod)
        k = np.where(blocked, 0, k)
        for alt in alternatives(job.constraint):
            kk = k if alt is None and not self.reference else np.where(self._allowed_mask(state, alt), k, 0)
            if not self.reference and kk.sum() < job.pods:  # too few pods fit: no need to order nodes
                continue
            idx = np.nonzero(kk)[0]
            if not len(idx):
                continue
            order = idx[np.lexsort((idx, free_g[idx]))]  # best fit: fewest free GPUs, then index
            cum = np.cumsum(kk[order])
            if cum[-1] < job.pods:
                continue
            m = int(np.searchsorted(cum, job.pods))
            out = [(int(i), int(kk[i])) for i in order[:m]]
            out.append((int(order[m]), int(job.pods - (cum[m - 1] if m else 0))))
            return out
        return None

    def _start(self, state: SchedState, run: JobRun, plan: list) -> None:
        self._free_cache.clear()  # the cluster changed
        self._ends = None
        for i, k in plan:
            for _ in range(k):
                state.bind(run, i)
        self.expected_end[run.name] = state.now + run.job.planned_runtime
        state.set_reason(run, None)

    # ---- the cycle -----------------------------------------------------------------------------
    def schedule(self, state: SchedState) -> list[float]:
        self._free_cache.clear()
        self._ends = None
        if self.reference:
            pending = sorted((r for r in self.jobs if not r.finished and state.bound(r) == 0),
                             key=lambda r: (-r.job.priority, r.job.submit, r.seq))
        else:  # a Slurm job is bound whole or not at all: the queue holds exactly the unbound ones
            self._queue = [e for e in self._queue if not e[-1].finished and state.bound(e[-1]) == 0]
            pending = [e[-1] for e in self._queue]
        feasible = []
        for run in pending:
            reason = self.infeasible(state, run)
            if reason:
                state.set_reason(run, reason)
            else:
                feasible.append(run)
        left = []
        for k, run in enumerate(feasible):  # main scheduler: strict priority order
            plan = self.plan(state, run.job, state.now, [])
            if plan is None:
                state.set_reason(run, "Resources")
                left = feasible[k:]
                for other in feasible[k + 1:]:
                    state.set_reason(other, "Priority")
                break
            self._start(state, run, plan)
        self.reservations = {}
        if self.backfill and left:
            self._backfill(state, left)
        return []

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

    def _known_to_fail(self, job: Job, t: float) -> bool:
        """A plain job cannot start at ``t`` if one as wide per pod, with no more pods and no longer
        runtime, could not in this pass: the same free GPUs, a superset of blocking reservations."""
        return any(p <= job.pods and r <= job.planned_runtime
                   for p, r in self._failed.get((t, job.gpus_per_pod), ()))

    def _reservation_arrays(self, reserved: list, n: int):
        """(starts, ends, nodes-matrix) of this pass's reservations, filled in as they are made."""
        cache = getattr(self, "_resv", None)
        if cache is None or cache[0] is not reserved:
            rows = max(1, min(self.bf_max_job_test, 64))
            cache = self._resv = [reserved, 0, np.zeros(rows), np.zeros(rows), np.zeros((rows, n), dtype=bool)]
        _, done, starts, ends, nodes = cache
        if len(reserved) > len(starts):  # grow by doubling
            rows = max(len(reserved), 2 * len(starts))
            starts, ends = np.resize(starts, rows), np.resize(ends, rows)
            nodes = np.vstack([nodes, np.zeros((rows - len(nodes), n), dtype=bool)])
            cache[2:] = starts, ends, nodes
        for r in range(done, len(reserved)):
            starts[r], ends[r] = reserved[r][0], reserved[r][1]
            nodes[r, :] = False
            nodes[r, reserved[r][2]] = True
        cache[1] = len(reserved)
        k = len(reserved)
        return starts[:k], ends[:k], nodes[:k]

    def _backfill(self, state: SchedState, pending: list[JobRun]) -> None:
        now = state.now
        reserved: list = []  # (start, end, node indexes): whole nodes, as Slurm's backfill reserves
        made = 0
        if not self.reference:  # the candidate start times, kept sorted as reservations are added
            times_all, free_by_time = self._profile(state, reserved)
            self._failed: dict[tuple, list] = {}  # (t, GPUs per pod) -> (pods, runtime) that failed
        for run in pending[: self.bf_max_job_test]:
            job = run.job
            if self.reference:
                times = sorted({now} | {e for e in self.expected_end.values() if e > now}
                               | {r1 for _, r1, _ in reserved if r1 > now})
            else:
                times = times_all
                if state.cluster.plain(job):  # no start before enough GPUs are free at all
                    times = times_all[self._first_time(times_all, free_by_time, job.gpus):]
            start, plan = None, None
            plain = not self.reference and state.cluster.plain(job)
            for t in times:
                if t > now + self.bf_window:
                    break
                if plain and self._known_to_fail(job, t):
                    continue
                plan = self.plan(state, job, t, reserved)
                if plan is not None:
                    start = t
                    break
                if plain:
                    self._failed.setdefault((t, job.gpus_per_pod), []).append((job.pods, job.planned_runtime))
            if start == now:
                self._start(state, run, plan)
                if not self.reference:  # one more running job: one more end time, fewer GPUs free
                    times_all, free_by_time = self._profile(state, reserved)
                    self._failed = {}
                state.log(run.name, "started by backfill (delays no reservation)")
                continue
            # Backfill leaves the reason alone: the main scheduler already marked the first blocked
            # job Resources and every job behind it Priority (job_scheduler.c _failed_partition ->
            # WAIT_PRIORITY), which a real squeue shows (tests/test_slurm_live.py resources-priority).
            if start is None:
                continue
            if self.bf_job_part_count_reserve and made >= self.bf_job_part_count_reserve:
                continue
            nodes = [i for i, _ in plan]
            reserved.append((start, start + job.planned_runtime, nodes))
            if not self.reference and start + job.planned_runtime > now and \
                    start + job.planned_runtime not in free_by_time:
                t1 = start + job.planned_runtime
                k = bisect_left(times_all, t1)
                times_all.insert(k, t1)
                free_by_time[t1] = free_by_time[times_all[k - 1]]
            self.reservations[run.name] = (start, start + job.planned_runtime, nodes)
            made += 1

    def _profile(self, state: SchedState, reserved: list) -> tuple[list[float], dict[float, int]]:
        """The backfill's candidate start times (now, the running jobs' expected ends, the
        reservations' ends; sorted) and the GPUs free in the whole cluster at each."""
        now = state.now
        times = sorted({now} | {e for e in self.expected_end.values() if e > now}
                       | {r1 for _, r1, _ in reserved if r1 > now})
        return times, self._free_totals(state, times, sorted(self.expected_end.items(), key=lambda kv: kv[1]))

    @staticmethod
    def _free_totals(state: SchedState, times: list[float], ends: list) -> dict[float, int]:
        """GPUs free in the whole cluster at each time in ``times`` (sorted): free now plus what
        the running jobs expected to end by then release. Never decreases with time."""
        out, free, k = {}, state.cluster.free_gpus, 0
        for t in times:
            while t > state.now and k < len(ends) and ends[k][1] <= t:
                free += state.cluster.held(ends[k][0])
                k += 1
            out[t] = free
        return out

    @staticmethod
    def _first_time(times: list[float], free_by_time: dict, gpus: int) -> int:
        """Index of the first time at which at least ``gpus`` GPUs are free (len(times) if none);
        binary search, as the free total never decreases."""
        lo, hi = 0, len(times)
        while lo < hi:
            mid = (lo + hi) // 2
            if free_by_time[times[mid]] >= gpus:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def on_finish(self, state: SchedState, run: JobRun) -> None:
        self.expected_end.pop(run.name, None)
