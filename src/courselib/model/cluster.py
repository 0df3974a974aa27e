"""The cluster's free capacity, indexed so that placing a pod does not scan every node.

:class:`Cluster` holds, per node, the free GPUs and memory and which job's pods sit there.
Nodes are kept in buckets by free-GPU count (each a sorted list of node indexes), so "a node
with at least g free GPUs, fewest first (best fit) or most first (spread)" looks at the few
buckets ``g … gpus_per_node`` and the first node that passes the memory/feature checks. The
buckets are brought up to date when next read, not at every change: a busy Slurm run binds and
frees a job's dozens of nodes far more often than it reads them.

Constraints follow Slurm's ``--constraint`` (FACTS §3.4, ``sbatch.1`` L281–286): ``a`` (the
node carries feature ``a``), ``a&b`` (AND), ``a|b`` (OR, per node), and the matching OR
``[a|b]`` ("all nodes must be allocated on a single rack"), which :func:`alternatives`
splits into the plain constraints to try one after another.
"""
from __future__ import annotations

import bisect
import heapq
import re
from dataclasses import dataclass

from courselib.model.workload import ClusterSpec, Job, Node

_FEATURE = re.compile(r"^[A-Za-z0-9_.:-]+$")


def parse_constraint(expr: str | None) -> list[frozenset[str]] | None:
    """``a&b|c`` → OR of ANDs ``[{a,b},{c}]`` (``&`` binds tighter, as in Slurm); None = any node."""
    if expr is None or not str(expr).strip():
        return None
    text = str(expr).strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    terms = []
    for alt in text.split("|"):
        feats = [f.strip() for f in alt.split("&")]
        if not all(_FEATURE.match(f) for f in feats):
            raise ValueError(f"{expr!r} is not a constraint: use features joined by & and |, "
                             "or [a|b] for a matching OR")
        terms.append(frozenset(feats))
    return terms


def alternatives(expr: str | None) -> list[str | None]:
    """The plain constraints to try: ``[a|b]`` → ``['a', 'b']`` (all nodes from one); else ``[expr]``."""
    if expr and expr.strip().startswith("[") and expr.strip().endswith("]"):
        return [alt.strip() for alt in expr.strip()[1:-1].split("|")]
    return [expr]


def is_plain(job, spec) -> bool:
    """A job whose pods only free GPUs place (``spec``: the ClusterSpec): not exclusive, at least
    one GPU a pod, memory not modelled. ``Cluster.plain`` adds "and no constraint"."""
    return not job.exclusive and job.gpus_per_pod > 0 and not (job.memory_per_pod and spec.memory_per_node)


def node_matches(node: Node, terms: list[frozenset[str]] | None) -> bool:
    return terms is None or any(t <= node.features for t in terms)


def fill_spread(nodes, room, free, want: int, gpus_per_pod: int) -> dict[int, int]:
    """Where ``want`` pods of ``gpus_per_pod`` GPUs go one at a time, each to the node of ``nodes``
    with the most free GPUs left (``free[i]``; ties to the lowest index) while it has room for more
    (``room[i]`` pods): the model's spread (kube-scheduler's LeastAllocated when requests follow
    GPUs), kept in a heap instead of a scan per pod. {node: pods}."""
    heap = [(-int(free[i]), i, int(room[i])) for i in nodes if room[i] > 0]
    heapq.heapify(heap)
    placed: dict[int, int] = {}
    for _ in range(want):
        if not heap:
            break
        f, i, left = heapq.heappop(heap)
        placed[i] = placed.get(i, 0) + 1
        if left > 1:
            heapq.heappush(heap, (f + gpus_per_pod, i, left - 1))
    return placed


@dataclass(slots=True)
class Binding:
    """``pods`` ranks of one job on one node, holding ``gpus`` GPUs and ``memory`` bytes."""

    node: int
    pods: int
    gpus: int
    memory: int


class Cluster:
    """Mutable free-capacity state of a :class:`ClusterSpec` (GPUs, memory, exclusivity)."""

    def __init__(self, spec: ClusterSpec):
        self.spec = spec
        self.nodes = spec.node_list()
        self.capacity = spec.gpus_per_node
        self.free = [n.gpus for n in self.nodes]
        self.free_mem = [n.memory for n in self.nodes]
        self.owner_exclusive: list[str | None] = [None] * len(self.nodes)
        self.jobs_on: list[dict[str, int]] = [dict() for _ in self.nodes]
        self.alloc: dict[str, dict[int, Binding]] = {}
        # the buckets (_levels) are brought up to date when first read after a change, not at every
        # change: a bind or a release over many nodes only notes the nodes it changed (_touched);
        # _at[i] is the bucket node i sits in, _counts[g] how many nodes have g free (kept at every
        # change: what fit_count and max_free read)
        self._levels: list[list[int]] = [[] for _ in range(self.capacity + 1)]
        self._levels[self.capacity] = list(range(len(self.nodes)))
        self._at = list(self.free)
        self._counts = [len(b) for b in self._levels]
        self._touched: list[int] = []
        self._remake = False    # True: too many nodes changed, every bucket made again from free
        self._memory = any(n.memory for n in self.nodes)
        self._allowed_cache: dict[str | None, frozenset[int] | None] = {}
        # running totals, so that "free GPUs", "GPUs a job holds" and "GPUs a queue holds" cost
        # O(1) instead of a sum over nodes or bindings (check() recomputes them from scratch)
        self._free_total = sum(self.free)
        #: False: every placement walks candidates() and fits() (the reference path)
        self.fast = True
        #: pods the last discarded place_all_or_nothing had placed before it gave up
        self.last_fit = 0
        self._held: dict[str, int] = {}
        self._pods: dict[str, int] = {}
        #: bumped by every bind, unbind and release: an answer computed from the free capacity is
        #: still the answer while this has not moved (Kueue's TAS retries, courselib.model.topology)
        self.changes = 0
        # the free GPUs as a numpy array, brought up to date from the nodes changed since
        # (free_array): what the topology-aware fast paths read instead of a list per call
        self._free_np = None
        self._dirty: list[int] = []
        self._queue_of: dict[str, str] = {}
        self.held_by_queue: dict[str, int] = {}

    # ---- queries -------------------------------------------------------------------------
    @property
    def total_gpus(self) -> int:
        return self.spec.total_gpus

    @property
    def free_gpus(self) -> int:
        return self._free_total

    def held(self, job: str) -> int:
        """GPUs held by ``job`` (bound pods, or whole nodes when exclusive)."""
        return self._held.get(job, 0)

    def bound_pods(self, job: str) -> int:
        return self._pods.get(job, 0)

    @property
    def _buckets(self) -> list[list[int]]:
        """Per free-GPU count, the nodes with that many free, in node order: brought up to date
        from the nodes changed since the last read (all of them made again when many changed)."""
        if self._touched or self._remake:
            self._sort_buckets()
        return self._levels

    def _sort_buckets(self) -> None:
        """Move the nodes changed since the last read (``_touched``) from the bucket each sat in
        (``_at``) to the one its free GPUs name now, or make every bucket again (``_remake``)."""
        free, levels, at = self.free, self._levels, self._at
        if self._remake:   # (one pass over the nodes, in index order, instead of each node moved)
            fresh: list[list[int]] = [[] for _ in levels]
            for i, v in enumerate(free):
                fresh[v].append(i)
            for bucket, made in zip(levels, fresh):
                bucket[:] = made
            at[:] = free
        else:
            out: dict[int, set] = {}
            into: dict[int, list] = {}
            for i in set(self._touched):
                old, v = at[i], free[i]
                if old != v:
                    out.setdefault(old, set()).add(i)
                    into.setdefault(v, []).append(i)
                    at[i] = v
            for b, gone in out.items():   # a bucket that loses or gains many nodes is filtered or
                bucket = levels[b]          # merged once instead of bisected node by node
                if 8 * len(gone) >= len(bucket):
                    bucket[:] = [i for i in bucket if i not in gone]
                else:
                    for i in gone:
                        del bucket[bisect.bisect_left(bucket, i)]
            for b, came in into.items():
                bucket = levels[b]
                if 8 * len(came) >= len(bucket):
                    bucket += came
                    bucket.sort()
                else:
                    for i in came:
                        bisect.insort(bucket, i)
        self._touched = []
        self._remake = False

    def bucket(self, free: int) -> list[int]:
        """The nodes with exactly ``free`` free GPUs, in node order (read only)."""
        return self._buckets[free]

    def max_free(self) -> int:
        """The most free GPUs on any one node (O(GPUs per node))."""
        return next((g for g in range(self.capacity, 0, -1) if self._counts[g]), 0)

    def plain(self, job: Job, constraint: str | None = "__job__") -> bool:
        """True when only free GPUs decide where a pod of ``job`` fits: no constraint, not
        exclusive, memory not modelled, at least one GPU a pod. Then every node in a bucket of
        at least ``gpus_per_pod`` free GPUs fits it (exclusively owned nodes have 0 free). (A
        topology-aware policy places a topology request by its domains: it asks before this.)"""
        c = job.constraint if constraint == "__job__" else constraint
        return c is None and is_plain(job, self.spec)

    def pods_that_fit(self, job: Job) -> int | None:
        """How many pods of ``job`` fit right now, from the free-GPU buckets alone (O(GPUs per
        node)); None when constraints, exclusivity or memory make the node checks necessary."""
        if not self.plain(job):
            return None
        return self.fit_count(job.gpus_per_pod)

    def fit_count(self, g: int) -> int:
        """How many pods of ``g`` GPUs (``g`` >= 1) fit on the free GPUs right now, wherever they are."""
        counts = self._counts
        return sum(counts[f] * (f // g) for f in range(g, self.capacity + 1))

    def free_array(self):
        """``free`` as a numpy int64 array (read only): kept between calls and updated from the
        nodes whose free GPUs changed since the last call, O(nodes changed) rather than O(nodes)."""
        import numpy as np
        if self._free_np is None:
            self._free_np = np.array(self.free, dtype=np.int64)
        elif self._dirty:
            idx = self._dirty
            self._free_np[idx] = [self.free[i] for i in idx]
        self._dirty = []
        return self._free_np

    def allowed(self, constraint: str | None) -> frozenset[int] | None:
        """Indexes of nodes that satisfy ``constraint`` (None = every node), cached."""
        if constraint not in self._allowed_cache:
            terms = parse_constraint(constraint)
            self._allowed_cache[constraint] = None if terms is None else frozenset(
                n.index for n in self.nodes if node_matches(n, terms))
        return self._allowed_cache[constraint]

    def fits(self, job: Job, i: int, constraint: str | None = "__job__") -> bool:
        """Can one more pod of ``job`` go on node ``i`` right now?"""
        c = job.constraint if constraint == "__job__" else constraint
        allowed = self.allowed(c)
        if allowed is not None and i not in allowed:
            return False
        owner = self.owner_exclusive[i]
        if job.exclusive:
            if owner == job.name:
                return self._room_in_own_node(job, i) > 0
            if self.jobs_on[i]:
                return False
            return self.free[i] >= job.gpus_per_pod and self._mem_ok(job, i)
        if owner is not None:
            return False
        return self.free[i] >= job.gpus_per_pod and self._mem_ok(job, i)

    def fits_without(self, job: Job, i: int, gone: dict[str, int]) -> bool:
        """:meth:`fits` (capacity only, the constraint aside) with ``gone`` pods per job taken off
        node ``i``: what a preemption's dry run asks (kube-scheduler v1.37.2 ``default_preemption.go``
        ``SelectVictimsOnNode`` L286–448 runs every filter with the victims removed)."""
        return self.room_without(job, i, gone) > 0

    def room_without(self, job: Job, i: int, gone: dict[str, int]) -> int:
        """How many pods of ``job`` :meth:`fits` would let onto node ``i`` one after another with
        ``gone`` pods of other jobs taken off it (the constraint aside). Free GPUs and memory come
        back pod by pod, but a node an exclusive job owns only with its last pod there; an
        exclusive pod needs a node with no pod left on it, and its first pod owns the node."""
        return self._room(job, i, *self._without(i, gone))

    def _room(self, job: Job, i: int, free: int, mem: int, owner: str | None, left: bool) -> int:
        """:meth:`room_without` from node ``i``'s state with the pods taken off (:meth:`_without`)."""
        g, m = job.gpus_per_pod, job.memory_per_pod
        if job.exclusive:
            if owner == job.name:
                return self._room_in_own_node(job, i)
            if left or free < g or not (m == 0 or self.nodes[i].memory == 0 or mem >= m):
                return 0
            return self.nodes[i].gpus // g if g else 10 ** 9   # the rest go in its own node
        if owner is not None:
            return 0
        n = free // g if g else 10 ** 9
        if m and self.nodes[i].memory:
            n = min(n, mem // m)
        return n

    def _without(self, i: int, gone: dict[str, int]) -> tuple[int, int, str | None, bool]:
        """Node ``i``'s free GPUs, free memory, exclusive owner and whether any pod is left on it,
        with ``gone`` pods per job taken off, read from the bindings."""
        free, mem, owner, left = self.free[i], self.free_mem[i], self.owner_exclusive[i], False
        for name, count in self.jobs_on[i].items():
            k = gone.get(name, 0)
            left = left or k < count
            if not k:
                continue
            b = self.alloc[name][i]
            if owner == name:       # exclusive: the whole node comes back with its last pod
                if k == count:
                    free, owner = free + b.gpus, None
            else:
                free += b.gpus * k // count
            mem += b.memory * k // count
        return free, mem, owner, left

    def place_without(self, job: Job, want: int, gone: dict[int, dict[str, int]]) -> dict[int, int]:
        """Where :meth:`place` with ``spread`` would put ``want`` more pods of ``job`` (its
        constraint, every filter) if the pods ``gone`` (node -> job -> pods) were taken off first:
        {node: pods}, changing nothing. A preemption's dry run for a group (kube-scheduler v1.37.2
        ``podgrouppreemption.go`` L223–240 removes every potential victim, then runs the group's
        scheduling algorithm once). The order is :meth:`candidates`': an exclusive job fills the
        nodes it owns, then takes empty ones by index; any other pod goes to the node with the most
        free GPUs left, ties to the lowest index."""
        allowed = self.allowed(job.constraint)
        nodes = range(len(self.nodes)) if allowed is None else sorted(allowed)
        plan: dict[int, int] = {}
        if job.exclusive:
            mine, left = self.alloc.get(job.name, {}), want
            for i in sorted(nodes, key=lambda i: (i not in mine, i)):
                k = min(left, self.room_without(job, i, gone.get(i, {})))
                if k > 0:
                    plan[i], left = k, left - k
            return plan
        after = {i: self._without(i, gone.get(i, {})) for i in nodes}   # read once per node
        room = {i: self._room(job, i, *after[i]) for i in nodes}
        return fill_spread(nodes, room, {i: after[i][0] for i in nodes}, want, job.gpus_per_pod)

    def _mem_ok(self, job: Job, i: int) -> bool:
        return job.memory_per_pod == 0 or self.nodes[i].memory == 0 or \
            self.free_mem[i] >= job.memory_per_pod

    def _room_in_own_node(self, job: Job, i: int) -> int:
        b = self.alloc[job.name][i]
        per_node = self.nodes[i].gpus // job.gpus_per_pod if job.gpus_per_pod else 10 ** 9
        return per_node - b.pods

    def room(self, job: Job, i: int) -> int:
        """How many more pods of ``job`` fit on node ``i`` right now (its constraint, exclusivity
        and memory included): what a topology-aware placement counts per node."""
        if not self.fits(job, i):
            return 0
        g = job.gpus_per_pod
        if job.exclusive and self.owner_exclusive[i] == job.name:
            return self._room_in_own_node(job, i)
        n = (self.nodes[i].gpus if job.exclusive else self.free[i]) // g if g else 10 ** 9
        if job.memory_per_pod and self.nodes[i].memory:
            n = min(n, self.free_mem[i] // job.memory_per_pod)
        return n

    def rooms(self, job: Job) -> list[int]:
        """:meth:`room` on every node, in node order."""
        if self.plain(job):
            g = job.gpus_per_pod
            return [f // g for f in self.free]
        return [self.room(job, i) for i in range(len(self.nodes))]

    def candidates(self, job: Job, *, spread: bool, constraint: str | None = "__job__"):
        """Nodes that fit one pod of ``job``: best fit (fewest free GPUs first) or, with
        ``spread``, most free first (kube-scheduler's LeastAllocated); ties by node index."""
        c = job.constraint if constraint == "__job__" else constraint
        if job.exclusive and job.name in self.alloc:
            for i in sorted(self.alloc[job.name]):
                if self.fits(job, i, c):
                    yield i
        need = self.capacity if job.exclusive else job.gpus_per_pod
        levels = range(self.capacity, need - 1, -1) if spread else range(need, self.capacity + 1)
        for g in levels:
            for i in self._buckets[g]:
                if self.fits(job, i, c):
                    yield i

    def first_fit_node(self, job: Job, *, spread: bool, constraint: str | None = "__job__") -> int | None:
        if self.fast and self.plain(job, constraint):  # the first node of the first bucket that fits
            need, top, counts = job.gpus_per_pod, self.capacity, self._counts
            for g in (range(top, need - 1, -1) if spread else range(need, top + 1)):
                if counts[g]:
                    return self._buckets[g][0]
            return None
        return next(self.candidates(job, spread=spread, constraint=constraint), None)

    # ---- changes -------------------------------------------------------------------------
    def _set_free(self, i: int, value: int) -> None:
        old = self.free[i]
        if old == value:
            return
        self.free[i] = value
        self._counts[old] -= 1
        self._counts[value] += 1
        waiting = bool(self._touched) or self._remake   # (the buckets wait for their next read)
        if not waiting:   # (up to date: node i moved between two buckets now, as cheap as later)
            bucket = self._levels[old]
            del bucket[bisect.bisect_left(bucket, i)]
            bisect.insort(self._levels[value], i)
            self._at[i] = value
        self._changed((i,), value - old, waiting)

    def _changed(self, nodes, delta: int, waiting: bool = True) -> None:
        """The bookkeeping after a batch wrote ``free`` and ``_counts`` directly: ``nodes`` (an
        iterable, C-speed: a job's bindings) holds every node whose free GPUs it changed, and may
        hold some it did not (the buckets and the array find them where they were); ``delta``:
        the free GPUs it added. ``waiting`` False: the buckets already have them where they are."""
        self._free_total += delta
        if self._free_np is not None:
            self._dirty += nodes
            if len(self._dirty) > len(self.free):   # rebuilt at the next call instead
                self._free_np, self._dirty = None, []
        if waiting and not self._remake:
            touched = self._touched
            touched += nodes
            if 4 * len(touched) >= len(self.free):   # (a quarter of the cluster or more: every
                self._touched, self._remake = [], True   # bucket made again at the next read)

    def bind(self, job: Job, i: int) -> int:
        """Bind one pod of ``job`` to node ``i``; returns the GPUs newly held (a whole node for
        the first pod of an exclusive job on it, 0 for its later pods there)."""
        if not self.fits(job, i, None):  # capacity only: callers chose i among candidates()
            raise ValueError(f"pod of {job.name} does not fit on {self.nodes[i].name}")
        per_job = self.alloc.setdefault(job.name, {})
        b = per_job.get(i)
        if b is None:
            b = per_job[i] = Binding(i, 0, 0, 0)
            self.jobs_on[i][job.name] = 0
        taken = 0
        if job.exclusive:
            if self.owner_exclusive[i] is None:
                self.owner_exclusive[i] = job.name
                taken = self.free[i]
        else:
            taken = job.gpus_per_pod
        b.pods += 1
        b.gpus += taken
        self.jobs_on[i][job.name] += 1
        if self.nodes[i].memory:
            b.memory += job.memory_per_pod
            self.free_mem[i] -= job.memory_per_pod
        self._set_free(i, self.free[i] - taken)
        self._count(job.name, 1, taken, job.queue)
        return taken

    def bind_plan(self, job: Job, plan) -> int:
        """Bind ``k`` pods of ``job`` to node ``i`` for each ``(i, k)`` of ``plan``; returns the
        pods bound. What :meth:`bind` does pod by pod, node by node for a plain job (the same
        bindings, buckets and totals), with the totals counted once."""
        if not is_plain(job, self.spec):
            n = 0
            for i, k in plan:
                for _ in range(k):
                    self.bind(job, i)
                n += k
            return n
        # (plain: no memory to count, no whole nodes to own; only free GPUs decide)
        g, name = job.gpus_per_pod, job.name
        per_job = self.alloc.setdefault(name, {})
        free, owner, jobs_on, counts = self.free, self.owner_exclusive, self.jobs_on, self._counts
        n = 0
        for i, k in plan:
            if k <= 0:
                continue
            gk = g * k
            f = free[i]
            if owner[i] is not None or f < gk:
                self._changed(per_job, -g * n)   # (the pods before it stay bound, the totals uncounted)
                raise ValueError(f"pod of {name} does not fit on {self.nodes[i].name}")
            b = per_job.get(i)
            if b is None:
                per_job[i] = Binding(i, k, gk, 0)
                jobs_on[i][name] = k
            else:
                b.pods += k
                b.gpus += gk
                jobs_on[i][name] += k
            free[i] = f - gk
            counts[f] -= 1
            counts[f - gk] += 1
            n += k
        self._changed(per_job, -g * n)
        if not per_job:
            del self.alloc[name]
        if n:
            self._count(name, n, g * n, job.queue)
        return n

    def _count(self, job: str, pods: int, gpus: int, queue: str | None = None) -> None:
        self.changes += 1
        if queue is not None:
            self._queue_of[job] = queue
        self._pods[job] = self._pods.get(job, 0) + pods
        self._held[job] = self._held.get(job, 0) + gpus
        q = self._queue_of[job]
        self.held_by_queue[q] = self.held_by_queue.get(q, 0) + gpus
        if not self._pods[job]:  # nothing bound: forget the job (a run of 100,000 jobs stays small)
            del self._pods[job], self._held[job], self._queue_of[job]

    def unbind_one(self, job: Job, i: int) -> int:
        """Remove one pod of ``job`` from node ``i`` (eviction); returns GPUs freed."""
        b = self.alloc[job.name][i]
        freed = 0 if job.exclusive and b.pods > 1 else (b.gpus if job.exclusive else job.gpus_per_pod)
        b.pods -= 1
        b.gpus -= freed
        self.jobs_on[i][job.name] -= 1
        if self.nodes[i].memory:
            b.memory -= job.memory_per_pod
            self.free_mem[i] += job.memory_per_pod
        if b.pods == 0:
            del self.alloc[job.name][i]
            del self.jobs_on[i][job.name]
            if not self.alloc[job.name]:
                del self.alloc[job.name]
            if self.owner_exclusive[i] == job.name:
                self.owner_exclusive[i] = None
        self._set_free(i, self.free[i] + freed)
        self._count(job.name, -1, -freed)
        return freed

    def release(self, job: str) -> int:
        """Free every pod of ``job``; returns the GPUs freed."""
        freed = pods = 0
        free, owner, jobs_on, counts = self.free, self.owner_exclusive, self.jobs_on, self._counts
        memory = self.nodes if self._memory else None
        bindings = self.alloc.pop(job, {})
        for i, b in bindings.items():
            g = b.gpus
            freed += g
            pods += b.pods
            del jobs_on[i][job]
            if memory is not None and memory[i].memory:
                self.free_mem[i] += b.memory
            if owner[i] == job:
                owner[i] = None
            if g:
                f = free[i]
                free[i] = f + g
                counts[f] -= 1
                counts[f + g] += 1
        self._changed(bindings, freed)
        if pods:
            self._count(job, -pods, -freed)  # (the totals once: what node by node would leave)
        return freed

    def place(self, job: Job, count: int, *, spread: bool = False,
              constraint: str | None = "__job__") -> int:
        """Bind up to ``count`` more pods of ``job`` greedily; returns how many were bound."""
        done = 0
        batch = self.fast and not spread and self.plain(job, constraint)
        while done < count:
            i = self.first_fit_node(job, spread=spread, constraint=constraint)
            if i is None:
                break
            # best fit keeps choosing node i while a pod still fits there (the buckets between
            # gpus_per_pod and its free count were empty): bind those pods without searching again
            for _ in range(min(count - done, self.free[i] // job.gpus_per_pod) if batch else 1):
                self.bind(job, i)
                done += 1
        return done

    def place_all_or_nothing(self, job: Job, count: int, *, spread: bool = False) -> bool:
        """Bind ``count`` pods of ``job`` or none (a Volcano Statement, discarded if short).

        A matching-OR constraint ``[a|b]`` tries each alternative in turn (all nodes from one).
        ``last_fit`` is then how many pods the discarded attempt had placed (the most over the
        alternatives): what Volcano's gang plugin counts as schedulable in its message.
        """
        self.last_fit = 0
        for alt in alternatives(job.constraint):
            before = {i: b.pods for i, b in self.alloc.get(job.name, {}).items()}
            placed = self.place(job, count, spread=spread, constraint=alt)
            if placed == count:
                self.last_fit = placed
                return True
            self.last_fit = max(self.last_fit, placed)
            self._rollback(job, before)
        return False

    def _rollback(self, job: Job, before: dict[int, int]) -> None:
        for i, b in sorted(list(self.alloc.get(job.name, {}).items())):
            for _ in range(b.pods - before.get(i, 0)):
                self.unbind_one(job, i)

    def check(self) -> None:
        """Invariants: no GPU double-booked or lost; indexes agree with the free counts."""
        for i, n in enumerate(self.nodes):
            used = sum(self.alloc[j][i].gpus for j in self.jobs_on[i])
            assert 0 <= self.free[i] and self.free[i] + used == n.gpus, (n.name, self.free[i], used)
            assert i in self._buckets[self.free[i]]
        assert sum(len(b) for b in self._buckets) == len(self.nodes)
        assert all(b == sorted(b) for b in self._buckets) and self._at == self.free
        assert self._counts == [len(b) for b in self._buckets], self._counts
        assert self._free_total == sum(self.free)
        for job in set(self._held) | set(self.alloc):
            assert self.held(job) == sum(b.gpus for b in self.alloc.get(job, {}).values()), job
            assert self.bound_pods(job) == sum(b.pods for b in self.alloc.get(job, {}).values()), job
        by_queue: dict[str, int] = {}
        for job, held in self._held.items():
            by_queue[self._queue_of[job]] = by_queue.get(self._queue_of[job], 0) + held
        assert all(by_queue.get(q, 0) == v for q, v in self.held_by_queue.items()), by_queue
