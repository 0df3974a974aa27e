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

Nodes are chosen best-fit (fewest free GPUs first), ties to the lowest node index.
"""
from __future__ import annotations

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

    def submit(self, state: SchedState, runs: list[JobRun]) -> None:
        self.jobs.extend(runs)

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
        """Slurm's reason for a job that can never run here, or None."""
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

    def _free_at(self, state: SchedState, t: float, reserved: dict[int, list]) -> tuple[list, list]:
        """Free GPUs and memory per node at time ``t`` (0 on nodes reserved at t)."""
        cluster = state.cluster
        if t <= state.now:
            free_g, free_m = list(cluster.free), list(cluster.free_mem)
        else:
            free_g = [n.gpus for n in cluster.nodes]
            free_m = [n.memory for n in cluster.nodes]
            for name, nodes in cluster.alloc.items():
                if self.expected_end.get(name, BIG) > t:
                    for i, b in nodes.items():
                        free_g[i] -= b.gpus
                        free_m[i] -= b.memory
        return free_g, free_m

    def plan(self, state: SchedState, job: Job, t: float, reserved: dict[int, list]) -> list | None:
        """Nodes and pod counts for ``job`` to run over ``[t, t + planned_runtime)``, or None."""
        cluster, t1 = state.cluster, t + job.planned_runtime
        free_g, free_m = self._free_at(state, t, reserved)
        for alt in alternatives(job.constraint):
            allowed = cluster.allowed(alt)
            cands = []
            for n in cluster.nodes:
                if allowed is not None and n.index not in allowed:
                    continue
                if any(r0 < t1 and t < r1 for r0, r1 in reserved.get(n.index, ())):
                    continue
                k = self._pods_on(job, n.gpus, free_g[n.index], free_m[n.index] if n.memory else None)
                if k:
                    cands.append((free_g[n.index], n.index, k))
            cands.sort()
            out, need = [], job.pods
            for _, i, k in cands:
                out.append((i, min(k, need)))
                need -= min(k, need)
                if need == 0:
                    return out
        return None

    def _start(self, state: SchedState, run: JobRun, plan: list) -> None:
        for i, k in plan:
            for _ in range(k):
                state.bind(run, i)
        self.expected_end[run.name] = state.now + run.job.planned_runtime
        state.set_reason(run, None)

    # ---- the cycle -----------------------------------------------------------------------------
    def schedule(self, state: SchedState) -> list[float]:
        pending = sorted((r for r in self.jobs if not r.finished and state.bound(r) == 0),
                         key=lambda r: (-r.job.priority, r.job.submit, r.seq))
        feasible = []
        for run in pending:
            reason = self.infeasible(state, run)
            if reason:
                state.set_reason(run, reason)
            else:
                feasible.append(run)
        left = []
        for k, run in enumerate(feasible):  # main scheduler: strict priority order
            plan = self.plan(state, run.job, state.now, {})
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

    def _backfill(self, state: SchedState, pending: list[JobRun]) -> None:
        now = state.now
        reserved: dict[int, list] = {}
        made = 0
        for run in pending[: self.bf_max_job_test]:
            job = run.job
            times = sorted({now} | {e for e in self.expected_end.values() if e > now}
                           | {r1 for rs in reserved.values() for _, r1 in rs if r1 > now})
            start, plan = None, None
            for t in times:
                if t > now + self.bf_window:
                    break
                plan = self.plan(state, job, t, reserved)
                if plan is not None:
                    start = t
                    break
            if start == now:
                self._start(state, run, plan)
                state.log(run.name, "started by backfill (delays no reservation)")
                continue
            fits_now = self.plan(state, job, now, {}) is not None
            state.set_reason(run, "Priority" if fits_now else "Resources")
            if start is None:
                continue
            if self.bf_job_part_count_reserve and made >= self.bf_job_part_count_reserve:
                continue
            nodes = [i for i, _ in plan]
            for i in nodes:
                reserved.setdefault(i, []).append((start, start + job.planned_runtime))
            self.reservations[run.name] = (start, start + job.planned_runtime, nodes)
            made += 1

    def on_finish(self, state: SchedState, run: JobRun) -> None:
        self.expected_end.pop(run.name, None)
