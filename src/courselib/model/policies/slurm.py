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
  reserves **whole nodes** for it (L83, L88). A reservation that begins exactly when the job
  would end is in its way: Slurm's window is closed at its end (:meth:`Slurm._blocked`). Slurm's default ``bf_job_part_count_reserve=0``
  "will reserve resources for any pending job" (``slurm.conf.5`` L4345–4348): conservative-like,
  not EASY; set it to 1 to approximate EASY. Reservations reach ``bf_window`` = 1440 min ahead.
  Memory is planned from the running jobs' memory too; ``bf_resolution`` is not modelled.
- **When backfill runs**: real ``slurmctld`` runs it in its own thread, not on events: a pass starts
  once ``bf_interval`` seconds (default 30) have passed since the last one ended *and* a job, node,
  partition or reservation changed since (then it re-checks every second) — Slurm 26.05
  ``src/plugins/sched/backfill/backfill.c`` ``backfill_agent`` L1133–1216, ``_more_work`` L4049–4061.
  ``bf_interval`` here does the same, with slurm.conf's default of 30 s (a pass at the first cycle
  at least ``bf_interval`` after the last pass that follows a submission, start or end, with a
  wake-up at that time; the first pass at the first cycle); ``bf_interval=0`` runs a pass at every
  cycle, an idealised scheduler. The main scheduler runs on events, as Slurm's does: a job it
  starts in priority order starts at once, one that backfill starts may wait up to 30 s.
- ``--constraint`` (features, ``&``, ``|``, matching OR ``[a|b]``) and ``--exclusive`` (whole
  nodes, all their GPUs) as in ``sbatch.1`` L281–286 and L940–947; the ``--time`` limit is
  enforced (the job ends ``TIMEOUT``).
- Pending reasons use Slurm's names (``job_reason_codes.shtml``): ``Resources``, ``Priority``,
  ``PartitionNodeLimit`` (larger than the partition), ``BadConstraints`` (no set of nodes
  with the requested features can ever hold it).

Nodes are chosen best-fit (fewest free GPUs first), ties to the lowest node index. On a cluster
with a topology every job, with a request or without, is placed by Slurm's topology plugin
(``eval_nodes_tree`` L1464-1472 runs for every job unless ``TopologyParam=TopoOptional``):
``topology/tree`` (:func:`~courselib.model.topology.slurm_tree`, ``--switches``) or
``topology/block`` (:func:`~courselib.model.topology.slurm_block`, ``--segment``), as the
cluster's ``slurm_topology`` says. A Slurm job
is allocated all of its ``pods`` (tasks); ``min_member`` plays no part here. For a replay on a real
``slurmctld`` a job maps to ``sbatch -n PODS --gpus-per-task=GPUS_PER_POD [--time] [--constraint]
[--exclusive]`` with priority order = (priority, submit time).

This file is the reference: every cycle it sorts every pending job, and backfill replans each job
it tests from the running jobs, on arrays over every node. The policy the simulator runs by
default (``make_policy("slurm")``, ``--policy slurm``) is its fast twin,
:class:`~courselib.model.policies.slurm_fast.SlurmFast`: a subclass that makes the same decisions
from an availability profile (``slurm_profile.py``) and the last pass's outcomes, proven equal to
this one by ``tests/test_gang_fastpath.py`` (the way CPython keeps ``heapq`` beside ``_heapq``); on
workloads of thousands of jobs its backfill passes are compiled (``slurm_kernel.py``,
``tests/test_slurm_kernel.py``).
"""
from __future__ import annotations

import numpy as np

from courselib.model import topology
from courselib.model.cluster import alternatives
from courselib.model.gang import JobRun, SchedState
from courselib.model.policies.base import Policy
from courselib.model.workload import Job, Workload

BIG = 10 ** 9
#: slurm.conf's default ``bf_interval``: the backfill thread sleeps this long after a pass ends and
#: starts the next once something changed (Slurm 26.05 src/plugins/sched/backfill/backfill.c L102-104,
#: backfill_agent L1133-1216, _more_work L4049-4061; courselib/data/versions.toml)
BF_INTERVAL_S = 30.0


class Slurm(Policy):
    name = "slurm"
    enforces_time_limit = True

    def __init__(self, workload: Workload, seed: int = 0, backfill: bool = True,
                 bf_job_part_count_reserve: int = 0, bf_max_job_test: int = 500,
                 bf_window: float = 1440 * 60.0, max_switch_wait: float = 300.0,
                 bf_interval: float = BF_INTERVAL_S):
        super().__init__(workload, seed)
        self.max_switch_wait = max_switch_wait
        self.backfill = backfill
        self.bf_job_part_count_reserve = bf_job_part_count_reserve
        self.bf_max_job_test = bf_max_job_test
        self.bf_window = bf_window
        self.bf_interval = bf_interval
        self._last_bf: float | None = None  # when the last backfill pass ran
        self._bf_changed = True  # a submission, start or end since then (Slurm's _more_work)
        self.jobs: list[JobRun] = []
        self.expected_end: dict[str, float] = {}
        self.reservations: dict[str, tuple[float, float, list[int]]] = {}  # last pass, for teaching
        self._free_cache: dict[tuple, tuple] = {}
        self._mask_cache: dict = {}
        self._infeasible: dict[str, str | None] = {}
        self._block_why: str | None = None   # topology/block's reason for the last plan it refused

    def submit(self, state: SchedState, runs: list[JobRun]) -> None:
        self.jobs.extend(runs)
        self._bf_changed = True

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
        if run.name not in self._infeasible:
            self._infeasible[run.name] = self._why_infeasible(state, run)
        return self._infeasible[run.name]

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

    def _blocked(self, reserved: list, t: float, t1: float, n: int):
        """The nodes (a boolean array over ``n``) held by a reservation that overlaps ``[t, t1]``.

        Closed at the job's end, as Slurm's backfill tests it: a reservation that begins exactly when
        the job would end keeps its nodes (``node_space[j].begin_time <= end_time``, the job's end
        being its start + time limit), one that ends exactly at the job's start does not
        (``end_time <= start_res``): ``src/plugins/sched/backfill/backfill.c`` at slurm-26-05-3-1,
        L3015, L3088-3090 (seen on the real 26.05.5: ``tests/test_slurm_plan.py``, the busy run)."""
        blocked = np.zeros(n, dtype=bool)
        for start, end, nodes in reserved:
            if start <= t1 and t < end:
                blocked[nodes] = True
        return blocked

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
        """Nodes and pod counts for ``job`` to run from ``t`` until ``t + planned_runtime`` without
        touching a reservation (closed at its end: :meth:`_blocked`) (``reserved``: (start, end, node indexes)), or None."""
        spec, t1 = state.workload.cluster, t + job.planned_runtime
        free_g, free_m = self._free_at(state, t)
        blocked = self._blocked(reserved, t, t1, len(free_g))
        if job.exclusive:
            k = np.where(free_g == spec.gpus_per_node, spec.gpus_per_node // max(job.gpus_per_pod, 1), 0)
        else:
            k = free_g // job.gpus_per_pod if job.gpus_per_pod else np.full(len(free_g), BIG)
        if spec.memory_per_node and job.memory_per_pod:
            k = np.minimum(k, free_m // job.memory_per_pod)
        k = np.where(blocked, 0, k)  # pods that fit on each node
        for alt in alternatives(job.constraint):
            kk = k if alt is None else np.where(self._allowed_mask(state, alt), k, 0)
            if kk.sum() < job.pods:  # too few pods fit on these nodes
                continue
            if spec.topology:   # every job goes through the topology plugin, asked or not
                plan = self._topology_plan(spec, job, kk, state.now)
                if plan is None:
                    continue
                return plan
            idx = np.nonzero(kk)[0]
            order = idx[np.lexsort((idx, free_g[idx]))]  # best fit: fewest free GPUs, then index
            cum = np.cumsum(kk[order])
            m = int(np.searchsorted(cum, job.pods))
            out = [(int(i), int(kk[i])) for i in order[:m]]
            out.append((int(order[m]), int(job.pods - (cum[m - 1] if m else 0))))
            return out
        return None

    def _topology_plan(self, spec, job: Job, k, now: float) -> list | None:
        """topology/tree (leaf switches, tightest first; ``--switches``) or topology/block (one
        block of the smallest BlockSizes that holds the job; ``--segment``) on free pods ``k``."""
        if spec.slurm_topology == "block":
            per_node = spec.gpus_per_node // job.gpus_per_pod if job.gpus_per_pod else job.pods
            plan, why = topology.slurm_block(spec, [int(x) for x in k], job.pods, per_node, job.segment)
            self._block_why = why
            return plan
        # the wait is measured against the clock (time(NULL) in eval_nodes_tree.c L814-820),
        # also when backfill plans a later start: a reservation keeps the count until it is over
        tree = topology.slurm_tree_reference if self.reference else topology.slurm_tree
        plan, _ = tree(spec, [int(x) for x in k] if self.reference else k, job.pods,
                       self.switches(job) if self.waits_for_switch(job, now) else None)
        return plan

    def switches(self, job: Job) -> int | None:
        """``--switches=N`` for a job that requires the innermost level (N = its ``max_domains``,
        default 1: leaf switches); None otherwise: a requirement above the leaf switches has no
        Slurm form (tree counts leaves)."""
        spec = self.workload.cluster
        if spec.slurm_topology == "block":
            return None
        if job.topology and job.topology[0] == "required" and job.topology[1] == spec.levels[-1]:
            return job.max_domains or 1
        return None

    def switch_wait(self, job: Job) -> float:
        """How long ``job`` waits for its switches: its own ``@wait``, at most ``max_switch_wait``
        (``job_mgr.c`` ``_max_switch_wait`` L870-895: the smaller of the two)."""
        if job.topology_wait is None:
            return self.max_switch_wait
        return min(job.topology_wait, self.max_switch_wait)

    def waits_for_switch(self, job: Job, t: float) -> bool:
        """Still within ``--switches=N@wait`` at time ``t`` (then N leaf switches at most)."""
        return self.switches(job) is not None and t - job.submit < self.switch_wait(job)

    def topology_note(self, job: Job) -> str | None:
        if not job.topology or not self.workload.cluster.topology:
            return None
        if self.workload.cluster.slurm_topology == "block":
            return (f"topology/block has no per-job level: {job.topology[0]} {job.topology[1]!r} was "
                    "placed as every job is, in one block of the smallest BlockSizes that holds it "
                    "(--segment splits it)")
        if job.topology[0] == "required" and self.switches(job) is None:
            return (f"Slurm's topology/tree counts leaf switches only (--switches): a required "
                    f"{job.topology[1]!r} above the leaves was placed as the tree places every job")
        if self.switches(job) is not None:
            return (f"--switches={self.switches(job)}@{self.switch_wait(job):g}s: after max_switch_wait "
                    "Slurm runs it on whatever switches the tree gives")
        return None

    def _start(self, state: SchedState, run: JobRun, plan: list) -> None:
        self._free_cache.clear()  # the cluster changed
        state.bind_plan(run, plan)
        self.expected_end[run.name] = state.now + run.job.planned_runtime
        state.set_reason(run, None)
        self._bf_changed = True

    # ---- the cycle -----------------------------------------------------------------------------
    def schedule(self, state: SchedState) -> list[float]:
        self._free_cache.clear()
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
            self._block_why = None
            plan = self.plan(state, run.job, state.now, [])
            if plan is None:
                # topology/block's own words when enough nodes are free but no block holds the
                # job: squeue shows slurm_errno.c's text (seen on the real 26.05.5), else Resources
                state.set_reason(run, self._block_why or "Resources")
                left = feasible[k:]
                for other in feasible[k + 1:]:
                    state.set_reason(other, "Priority")
                break
            self._start(state, run, plan)
        if not (self.backfill and left):
            self.reservations = {}
            return self._switch_wakes(state, left)
        if not self._backfill_due(state.now):  # the last pass's reservations stand
            return self._backfill_wake() + self._switch_wakes(state, left)
        self.reservations = {}
        self._backfill_begins(state.now)
        self._backfill(state, left)
        return self._switch_wakes(state, left)

    def _switch_wakes(self, state: SchedState, left: list[JobRun]) -> list[float]:
        """A job waiting for one leaf switch is looked at again when its wait is over."""
        return [r.job.submit + self.switch_wait(r.job) for r in left
                if self.waits_for_switch(r.job, state.now) and state.bound(r) == 0]

    # ---- when backfill runs (bf_interval) -------------------------------------------------------
    def _backfill_due(self, now: float) -> bool:
        """Does a backfill pass run in this cycle? Always with ``bf_interval`` 0; else once
        ``bf_interval`` has passed since the last pass and something changed since."""
        if self.bf_interval <= 0 or self._last_bf is None:
            return True
        return now >= self._last_bf + self.bf_interval and self._bf_changed

    def _backfill_wake(self) -> list[float]:
        """The wake-up a cycle that skipped backfill asks for: when the next pass may run."""
        return [self._last_bf + self.bf_interval] if self._bf_changed else []

    def _backfill_begins(self, now: float) -> None:
        self._last_bf, self._bf_changed = now, False  # (a start in the pass is a change again)

    def _backfill(self, state: SchedState, pending: list[JobRun]) -> None:
        """Each job in priority order, at its earliest start: now (if it delays no reservation),
        else a reservation of whole nodes from then on. The candidate start times are now, the
        running jobs' expected ends and the reservations' ends (when something frees up)."""
        now = state.now
        reserved: list = []  # (start, end, node indexes): whole nodes, as Slurm's backfill reserves
        made = 0
        for run in pending[: self.bf_max_job_test]:
            job = run.job
            times = sorted({now} | {e for e in self.expected_end.values() if e > now}
                           | {r1 for _, r1, _ in reserved if r1 > now})
            start, plan = None, None
            for t in times:
                if t > now + self.bf_window:
                    break
                plan = self.plan(state, job, t, reserved)
                if plan is not None:
                    start = t
                    break
            made += self._settle(state, run, start, plan, reserved, made) == "reserved"

    def _settle(self, state: SchedState, run: JobRun, start: float | None, plan, reserved: list,
                made: int) -> str:
        """What backfill does with a job's earliest start: start it now, reserve its nodes from
        then on, or nothing (no start in the window, or the reservation limit reached)."""
        if start == state.now:
            self._start(state, run, plan)
            state.log(run.name, "started by backfill (delays no reservation)")
            return "started"
        # Backfill leaves the reason alone: the main scheduler already marked the first blocked
        # job Resources and every job behind it Priority (job_scheduler.c _failed_partition ->
        # WAIT_PRIORITY), which a real squeue shows (tests/test_slurm_live.py resources-priority).
        if start is None or (self.bf_job_part_count_reserve and made >= self.bf_job_part_count_reserve):
            return "none"
        nodes = [i for i, _ in plan]
        reserved.append((start, start + run.job.planned_runtime, nodes))
        self.reservations[run.name] = reserved[-1]
        return "reserved"

    def on_finish(self, state: SchedState, run: JobRun) -> None:
        self.expected_end.pop(run.name, None)
        self._bf_changed = True
