"""Where a gang lands on a topology: each scheduler's own domain choice, read from its source.

A cluster's topology (``ClusterSpec.topology``) is a tree of levels, outermost first; a domain of
level L is ``size`` consecutive nodes, named ``L0``, ``L1``, … and the node is the innermost domain.
"Headcount fits, topology does not": 24 GPUs free in total, but no rack holds 24 of them.

Every function here takes ``k``, the pods of the job that fit on each node right now (the policy
has already applied constraints, exclusivity, memory, reservations), and returns a *plan*, a list
of ``(node index, pods)``, or ``None`` with the number of pods the best attempt placed. The
policies keep their own queues and pending messages; only the domain choice lives here.

- :func:`kueue_tas` — Kueue v0.17.1 Topology-Aware Scheduling, ``BestFit`` (the default profile:
  ``TASProfileMixed`` only changes *unconstrained* pod sets, ``TASBalancedPlacement`` is alpha
  and off, ``pkg/features/kube_features.go`` L430–433, L469–471). In
  ``pkg/cache/scheduler/tas_flavor_snapshot.go``: ``findLevelWithFitDomains`` L1205–1296 sorts
  the domains of the requested level by free pods, most first, then by their label values
  (``sortedDomainsWithLeader`` L1486–1510); if the first fits, ``findBestFitDomain`` L1188–1203
  takes the fitting domain with the *fewest* free pods (the first such in that order); if none
  fits, ``required`` fails with ``notFitMessage`` L1698–1718 and ``preferred`` goes one level up
  (L1254–1256) until the top, where it takes domains greedily, most free first, best-fitting the
  last. Then ``updateCountsToMinimumGeneric`` L1380–1445 and the descent L897–906 go level by
  level down to the nodes, pooling the children of every chosen domain, most free first,
  best-fitting the last. Label values compare as strings (``node10`` < ``node2``), as Kueue does.
- :func:`slurm_tree` — Slurm 26.05 ``topology/tree`` (``src/plugins/topology/tree/
  eval_nodes_tree.c`` at tag slurm-26-05-3-1): ``_eval_nodes_topo`` L773 confines the job to
  the highest switch with enough resources (L956–970), then adds whole leaf switches one by one,
  chosen by ``_topo_choose_best_switch`` L108–137: a closer switch that fits, else at the same
  distance the tighter fit (``_topo_compare_switches`` L60–106: of two that fit, fewer free
  nodes; of one, that one; of neither, climb to the parents and compare again; finally the one
  with more free nodes); inside a leaf, nodes in bitmap (index) order (L1301–1305). The
  course's topology.conf adds a root switch over the outermost level, so any job may span.
  ``--switches=1@T`` (required at the innermost level) waits at most ``max_switch_wait`` =
  300 s by default (``slurm.conf.5`` L4795–4798) and then takes what the tree gives
  (L1362–1376: ``time_waiting >= wait4switch``).
- :func:`volcano_hypernode` — Volcano v1.15.1 network-topology-aware scheduling, ``mode: hard``:
  ``pkg/scheduler/actions/allocate/allocate.go`` L380–452 tries the HyperNodes tier by tier from
  the lowest (``HyperNodeGradientForJobFn``, capped at ``highestTierAllowed``,
  ``pkg/scheduler/plugins/network-topology-aware/network_topology_aware.go`` L294–299), keeps
  those in which the job becomes ready, and takes the best score (L541–557); the score is bin
  packing, ``(used + request) / allocatable`` over the HyperNode (L385–437): the fullest
  HyperNode that still holds the job. Ties (equal scores) go to the lowest index here (Go's map
  order in Volcano). Inside the HyperNode tasks go node by node, fullest first (binpack).
- :func:`kube_gang_topology` — Kubernetes v1.37.2 ``TopologyAwareWorkloadScheduling`` (alpha,
  off, ``pkg/features/kube_features.go`` L2231–2233): ``pkg/scheduler/framework/plugins/
  topologyaware/topology_placement.go`` L60–100 makes one *placement* per domain of the PodGroup's
  single ``schedulingConstraints.topology`` key (a required level; there is no preferred form);
  each is tried with the PodGroup cycle and ``findBestPlacement`` (``schedule_one_podgroup.go``
  L1196–1226) takes the best ``ScorePlacement`` — NodeResourcesFit's, over cpu and memory only by
  default (``noderesources/resource_allocation.go`` L505–535) — ties by ``rand.Int()``. A pod
  that asks only for GPUs scores the same everywhere: the choice among fitting domains is a
  coin toss (here: a draw from the run's seed).
"""
from __future__ import annotations

import random

import numpy as np

from courselib.model import collective
from courselib.model.workload import ClusterSpec

TAS_TOPOLOGY = "default"   # the Topology object's name in the course's Kueue set-up


# ---- the tree ---------------------------------------------------------------------------------
def level_sizes(spec: ClusterSpec) -> list[tuple[str, int]]:
    """The levels outermost first, with the node itself (size 1) as the innermost."""
    levels = list(spec.topology)
    if not levels or levels[-1][1] != 1:
        levels.append(("node", 1))
    return levels


def domains_of(spec: ClusterSpec, level: str) -> list[range]:
    """The node ranges of the domains of ``level``, in order."""
    size = spec.level_size(level)
    return [range(d, d + size) for d in range(0, spec.nodes, size)]


def domains_spanned(spec: ClusterSpec, nodes, level: str) -> list[str]:
    """The domains of ``level`` that ``nodes`` (node indexes) are in, sorted by index."""
    size = spec.level_size(level)
    return [f"{level}{d}" for d in sorted({i // size for i in nodes})]


def placement_domains(spec: ClusterSpec, nodes) -> dict[str, list[str]]:
    """For each level of the topology, the domains a job's ``nodes`` landed in."""
    return {level: domains_spanned(spec, nodes, level) for level in spec.levels}


def fewest_domains(spec: ClusterSpec, level: str, k, pods: int) -> int | None:
    """The fewest domains of ``level`` whose free pods ``k`` could hold ``pods`` (None: not even all)."""
    sums = sorted((sum(k[i] for i in r) for r in domains_of(spec, level)), reverse=True)
    total = 0
    for n, s in enumerate(sums, 1):
        total += s
        if total >= pods:
            return n
    return None


# ---- Kueue TAS (BestFit) ------------------------------------------------------------------------
_RANKS: dict = {}


def _ranks(spec: ClusterSpec) -> list:
    """Per level (outermost first, the node last), each domain's place in Kueue's order of label
    values: the tuple of names from the outermost level down, compared as strings (``node10`` <
    ``node2``). Computed once per tree."""
    key = (spec.nodes, spec.topology)
    if key not in _RANKS:
        levels = level_sizes(spec)
        values: list[list[tuple]] = []
        for li, (level, size) in enumerate(levels):
            vals = []
            for d, start in enumerate(range(0, spec.nodes, size)):
                name = f"node{start + 1}" if size == 1 and level == "node" else f"{level}{d}"
                parent = values[-1][start // levels[li - 1][1]] if li else ()
                vals.append(parent + (name,))
            values.append(vals)
        ranks = []
        for vals in values:
            rank = np.empty(len(vals), dtype=np.int64)
            rank[sorted(range(len(vals)), key=vals.__getitem__)] = np.arange(len(vals))
            ranks.append(rank)
        _RANKS[key] = ranks
    return _RANKS[key]


def _sorted(idx, state, rank):
    """``sortedDomains`` (BestFit): most free pods first, then by label values (as strings)."""
    return idx[np.lexsort((rank[idx], -state[idx]))]


def _best_fit(order, state, needed: int) -> int:
    """``findBestFitDomainBy``: the first domain in ``order`` with the fewest free pods that still
    holds ``needed``; the first domain if none does."""
    st = state[order]
    fits = np.nonzero(st >= needed)[0]
    if not len(fits):
        return int(order[0])
    return int(order[fits[np.argmin(st[fits])]])


def _to_minimum(order, state, count: int) -> list[tuple[int, int]]:
    """``updateCountsToMinimumGeneric`` for pods: take domains in order, best-fitting the last;
    returns (domain, pods) pairs."""
    out, remaining = [], count
    for i in range(len(order)):
        d = int(order[i])
        if state[d] >= remaining:
            d = _best_fit(order[i:], state, remaining)
            out.append((d, remaining))
            return out
        remaining -= int(state[d])
        out.append((d, int(state[d])))
    return out


def kueue_tas(spec: ClusterSpec, k, pods: int, mode: str, level: str) -> tuple[list | None, int]:
    """Kueue TAS's assignment for a pod set of ``pods`` (``mode`` required/preferred at ``level``):
    ``(plan, pods)`` or ``(None, pods the best domain could fit)`` for the not-fit message."""
    required = mode == "required"
    levels = level_sizes(spec)
    kk = np.asarray(k, dtype=np.int64)
    states = [kk.reshape(-1, size).sum(axis=1) for _, size in levels]
    ranks = _ranks(spec)
    li = [name for name, _ in levels].index(level)
    while True:
        state = states[li]
        order = _sorted(np.arange(len(state)), state, ranks[li])
        top = int(order[0])
        if state[top] >= pods:
            fit = [_best_fit(order, state, pods)]
            break
        if required:
            return None, int(state[top])
        if li > 0:
            li -= 1
            continue
        fit, remaining = [], pods
        for i in range(len(order)):
            if remaining <= 0:
                break
            d = int(order[i])
            if state[d] >= remaining:
                d = _best_fit(order[i:], state, remaining)
            fit.append(d)
            remaining -= int(state[d])
        if remaining > 0:
            return None, pods - remaining
        break
    chosen = _to_minimum(np.array(fit), states[li], pods)
    for lj in range(li, len(levels) - 1):
        ratio = levels[lj][1] // levels[lj + 1][1]
        children = np.concatenate([np.arange(d * ratio, (d + 1) * ratio) for d, _ in chosen])
        chosen = _to_minimum(_sorted(children, states[lj + 1], ranks[lj + 1]), states[lj + 1], pods)
    return [(d, n) for d, n in chosen if n > 0], pods


def tas_not_fit(fit: int, pods: int, pod_set: str = "main") -> str:
    """Kueue's message for a pod set TAS cannot place (``flavorassigner.go`` L178 around
    ``notFitMessage``, ``tas_flavor_snapshot.go`` L1698–1718)."""
    name = f'"{TAS_TOPOLOGY}"'
    if fit == 0:
        tail = f"topology {name} doesn't allow to fit any of {pods} pod(s)"
    else:
        tail = f"topology {name} allows to fit only {fit} out of {pods} pod(s)"
    return f"couldn't assign flavors to pod set {pod_set}: {tail}"


# ---- Slurm topology/tree -----------------------------------------------------------------------
def slurm_tree(spec: ClusterSpec, k, pods: int, one_leaf: bool = False) -> tuple[list | None, int]:
    """Slurm's tree plugin: leaf switches (the innermost level) one by one, the tightest that fits,
    else the one under the tightest ancestor that fits, else the largest; nodes in index order.
    ``one_leaf``: ``--switches=1`` still waiting (its wait not over): only one leaf will do."""
    levels = [(name, size) for name, size in spec.topology]
    leaf_size = levels[-1][1]
    leaves = [range(s, s + leaf_size) for s in range(0, spec.nodes, leaf_size)]
    free = [sum(k[i] for i in r) for r in leaves]
    total = sum(free)
    if total < pods:
        return None, total
    if one_leaf:
        fitting = [(free[j], j) for j in range(len(leaves)) if free[j] >= pods]
        if not fitting:
            return None, max(free)
    # the subtree sizes (in leaves) above each leaf, innermost first, and the root (whole cluster)
    ups = [size // leaf_size for _, size in reversed(levels[:-1])] + [len(leaves)]
    avail = list(free)

    def under(j: int, span: int) -> int:          # free pods in leaf j's ancestor of ``span`` leaves
        a = j - j % span
        return sum(avail[a:a + span])

    spans = [1] + ups

    def better(i: int, j: int, rem: int) -> bool:  # _topo_compare_switches(i, j) > 0
        s = 0
        while True:
            ci, cj = under(i, spans[s]), under(j, spans[s])
            if ci >= rem and cj >= rem:
                if ci != cj:
                    return ci < cj                   # both fit: the tighter one
                break
            if (ci >= rem) != (cj >= rem):
                return ci >= rem                     # only one fits: that one
            if s + 1 < len(spans) and i // spans[s + 1] != j // spans[s + 1]:
                s += 1                               # neither: compare their parents
                continue
            break
        return under(i, spans[s]) > under(j, spans[s])   # the one with more free

    plan, chosen, rem = [], [], pods
    while rem > 0:
        best = None
        for j in range(len(leaves)):
            if j in chosen or not avail[j]:
                continue
            if one_leaf and avail[j] < pods:
                continue
            if best is None:
                best = j
                continue
            dj, db = _dist(chosen, j, ups), _dist(chosen, best, ups)
            fits_j = avail[j] >= rem
            if (dj < db and fits_j) or (dj == db and better(j, best, rem)):
                best = j
        if best is None:
            return None, pods - rem
        chosen.append(best)
        avail[best] = 0                              # "Used all" (L1346–1347)
        for i in leaves[best]:
            take = min(k[i], rem)
            if take:
                plan.append((i, take))
                rem -= take
            if rem == 0:
                break
    return plan, pods


def _dist(chosen: list[int], j: int, ups: list[int]) -> int:
    """Hops from leaf ``j`` to the leaves already chosen (``_topo_add_dist``): 2 per level up to
    the common ancestor, summed over the chosen leaves."""
    total = 0
    for c in chosen:
        hops = 0
        for span in ups:
            hops += 2
            if c // span == j // span:
                break
        total += hops
    return total


# ---- Volcano HyperNodes (hard mode) --------------------------------------------------------------
def volcano_hypernode(spec: ClusterSpec, k, pods: int, level: str, free_gpus, gpus_per_pod: int,
                      ) -> tuple[list | None, int]:
    """Volcano's hard network topology up to the tier of ``level``: tier by tier from the lowest,
    the HyperNodes that hold the whole job, the fullest after placing it (bin packing score), then
    tasks node by node inside it, fullest node first, ties by index."""
    names = [name for name, _ in spec.topology]
    best_fit = 0
    for level_name in reversed(names[names.index(level):]):   # tier 1 = innermost, up to the level
        size = spec.level_size(level_name)
        scored = []
        for d, r in enumerate(domains_of(spec, level_name)):
            fit = sum(k[i] for i in r)
            best_fit = max(best_fit, fit)
            if fit >= pods:
                used = size * spec.gpus_per_node - sum(free_gpus[i] for i in r)
                score = (used + pods * gpus_per_pod) / (size * spec.gpus_per_node)
                scored.append((-score, d, r))
        if scored:
            _, _, r = min(scored)
            return fill(r, k, pods, key=lambda i: (free_gpus[i], i)), pods
    return None, best_fit


# ---- kube-scheduler TopologyAwareWorkloadScheduling ----------------------------------------------
def kube_gang_topology(spec: ClusterSpec, k, need: int, want: int, level: str, free_gpus,
                       rng: random.Random) -> tuple[list | None, int]:
    """One placement per domain of ``level``; those where the group's quorum (``need`` pods)
    fits score alike (GPU requests are not scored by default), so one is drawn with ``rng``;
    inside it up to ``want`` pods go to the nodes with the most free GPUs first (LeastAllocated),
    ties by index. ``(None, the most pods any domain fits)`` when none holds the quorum."""
    fitting, best = [], 0
    for r in domains_of(spec, level):
        fit = sum(k[i] for i in r)
        best = max(best, fit)
        if fit >= need:
            fitting.append(r)
    if not fitting:
        return None, best
    r = fitting[rng.randrange(len(fitting))] if len(fitting) > 1 else fitting[0]
    return fill(r, k, want, key=lambda i: (-free_gpus[i], i)), want


def fill(nodes, k, pods: int, key) -> list:
    """Take ``pods`` from ``nodes`` in ``key`` order, as many on each node as fit."""
    plan, rem = [], pods
    for i in sorted(nodes, key=key):
        take = min(k[i], rem)
        if take:
            plan.append((i, take))
            rem -= take
        if not rem:
            break
    return plan


# ---- what a placement costs ---------------------------------------------------------------------
def split_cost(spec: ClusterSpec, placement, tp: int, comm_fraction: float,
               nvlink_level: str | None = None, fast_bps: float | None = None,
               slow_bps: float = collective.IB_PER_GPU_BPS) -> dict:
    """TP groups of a job placed as ``placement`` (``[(node, GPUs)]``) that cross an NVLink domain
    (the node, or a domain of ``nvlink_level`` such as an NVL72 rack), and the step slowdown that
    implies (:func:`courselib.model.collective.step_slowdown`): 1 when no group is split, since
    every rank waits for the slowest group. ``fast_bps`` defaults to H100 NVLink in a node and
    NVLink5 across a rack-scale domain."""
    if nvlink_level is None:
        domain_of, fast = (lambda i: i), collective.NVLINK_H100_BPS
    else:
        domain_of, fast = (lambda i: spec.domain_of(i, nvlink_level)), collective.NVLINK5_BPS
    fast = fast if fast_bps is None else fast_bps
    groups, split = collective.split_groups(placement, tp, domain_of)
    slowdown = collective.step_slowdown(comm_fraction, fast, slow_bps) if split else 1.0
    return {"tp": tp, "groups": groups, "split": split, "comm_fraction": comm_fraction,
            "fast_GBps": fast / collective.GB, "slow_GBps": slow_bps / collective.GB, "slowdown": slowdown}
