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
  and off, ``pkg/features/kube_features.go`` L430–433, L469–471). A job with no topology request
  in a ClusterQueue whose flavors are all topology-aware (the course's set-up) is *implied* TAS
  and unconstrained (``tas_flavorassigner.go`` L216–225): ``LeastFreeCapacity`` on the nodes
  (:func:`_least_free_capacity`), seen on the real Kueue (``examples/topology/mixed.yaml``). In
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
  ``--switches=N@T`` (required at the innermost level, at most N leaf switches): the plugin
  places the job as above and then counts the leaf switches of that placement (L1362–1372); if
  there are more than N and the job has waited less than T (``time_waiting`` from
  ``wait4switch_start``, the job's first evaluation, L814–820, against the clock, not the time
  backfill plans for) it sets ``best_switch = false`` (L1377–1411: the ``try_again`` with
  fewer nodes is only for a job with a node range, ``req_nodes > min_nodes``, which the
  course's jobs never have) and ``select/cons_tres`` refuses the placement
  (``job_test.c`` L1490–1497, L1584, L1951: "waiting for switches"); the job stays pending
  with reason ``Resources``. The count is of the greedy placement, not the fewest leaves that
  could hold the job. T is capped by ``max_switch_wait`` = 300 s by default
  (``job_mgr.c`` L870–895, L7757–7764; ``slurm.conf.5`` L4795–4798); after it the job takes
  what the tree gives (L1373–1376).
- :func:`volcano_hypernode` — Volcano v1.15.1 network-topology-aware scheduling, ``mode: hard``
  (required) and ``mode: soft`` (preferred): ``pkg/scheduler/actions/allocate/allocate.go``
  L370–462 tries the HyperNodes tier by tier from the lowest (``HyperNodeGradientForJobFn``,
  capped at ``highestTierAllowed``, ``pkg/scheduler/plugins/network-topology-aware/
  network_topology_aware.go`` L293–308, L602–671), keeps those in which the job becomes ready,
  and takes the best score (L541–557); the score is bin packing, ``(used + request) /
  allocatable`` over the HyperNode (L359–437): the fullest HyperNode that still holds the job.
  Ties (equal scores) go to the lowest index here (a random pick in Volcano). Soft mode is the
  same search with no tier limit: at session open a soft job becomes hard with
  ``highestTierAllowed`` = the tier of the virtual ``<cluster-top-hypernode>`` over every node
  (``pkg/scheduler/framework/session.go`` L285–310, L1066–1103, since v1.15.0), so it spans only
  when no real HyperNode holds it; the tier written with ``preferred`` is not used. Inside the
  HyperNode tasks go one by one to the node the network-topology-aware score ranks first (the
  tier of its lowest common ancestor with the job's HyperNode so far, then the share of the
  job's tasks in its tier-1 HyperNode, L559–589, L756–806; ``allocate.go`` L719–880), fullest
  first among equals (binpack) — :func:`volcano_tasks`.
- :func:`kube_gang_topology` — Kubernetes v1.37.2 ``TopologyAwareWorkloadScheduling`` (alpha,
  off, ``pkg/features/kube_features.go`` L2231–2233): ``pkg/scheduler/framework/plugins/
  topologyaware/topology_placement.go`` L60–100 makes one *placement* per domain of the PodGroup's
  single ``schedulingConstraints.topology`` key (a required level; there is no preferred form);
  each is tried with the PodGroup cycle and ``findBestPlacement`` (``schedule_one_podgroup.go``
  L1196–1226) takes the best total of the PlacementScore plugins — NodeResourcesFit's
  ``ScorePlacement``, whose strategy is *MostAllocated* over cpu and memory
  (``noderesources/fit.go`` L247–255; ``resource_allocation.go`` L505–535), and PodGroupPodsCount
  (``podgrouppodscount/podgroup_pods_count.go`` L54–90) — ties by ``rand.Int()``. The course's
  pods ask for cpu and memory in proportion to their GPUs, so the fullest domain that holds the
  group wins (best fit, like Kueue's); equally full domains (empty ones) are a draw, a seeded
  one here. (A first version of this model read the score as "GPUs are not scored, every fitting
  domain ties", true only of pods that ask for nothing but GPUs.)
"""
from __future__ import annotations

import functools
import random
from dataclasses import dataclass

import numpy as np

from courselib.model import collective
from courselib.model.cluster import fill_spread
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
    return _spanned(level, spec.level_size(level), nodes)


def _spanned(level: str, size: int, nodes) -> list[str]:
    return [f"{level}{d}" for d in sorted({i // size for i in nodes})]


def placement_domains(spec: ClusterSpec, nodes) -> dict[str, list[str]]:
    """For each level of the topology, the domains a job's ``nodes`` landed in (asked for every
    job of a result: the levels' sizes read as the topology lists them, not looked up)."""
    return {level: _spanned(level, size, nodes) for level, size in spec.topology}


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


def kueue_tas(spec: ClusterSpec, k, pods: int, mode: str, level: str | None) -> tuple[list | None, int]:
    """Kueue TAS's assignment for a pod set of ``pods`` (``mode`` required/preferred at ``level``,
    or ``unconstrained``): ``(plan, pods)`` or ``(None, pods the best attempt could fit)`` for the
    not-fit message."""
    required = mode == "required"
    levels = level_sizes(spec)
    kk = np.asarray(k, dtype=np.int64)
    states = [kk.reshape(-1, size).sum(axis=1) for _, size in levels]
    ranks = _ranks(spec)
    if mode == "unconstrained":
        return _least_free_capacity(states[-1], ranks[-1], pods)
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


def _least_free_capacity(state, rank, pods: int) -> tuple[list | None, int]:
    """An *unconstrained* pod set under ``TASProfileMixed`` (beta and on in v0.17.1,
    ``pkg/features/kube_features.go`` L430–433): ``LeastFreeCapacity`` at the lowest level, the
    node (``levelKeyWithImpliedFallback`` L1084–1092). ``findLevelWithFitDomains`` L1235–1240
    takes the first node, fewest free pods first (``sortedDomainsWithLeader`` L1495–1498, then
    label values), that holds the whole pod set; if none does, L1253–1293 take nodes in the same
    order, least free first, until the pods are placed, and ``updateCountsToMinimumGeneric``
    L1423–1435 fills them in that order without BestFit's last-domain optimisation."""
    order = np.lexsort((rank, state))
    whole = np.nonzero(state[order] >= pods)[0]
    if len(whole):
        return [(int(order[whole[0]]), pods)], pods
    plan, remaining = [], pods
    for d in order:
        if remaining <= 0:
            break
        take = int(min(state[d], remaining))
        if take:
            plan.append((int(d), take))
            remaining -= take
    if remaining > 0:
        return None, pods - remaining
    return plan, pods


def kueue_tas_fast(spec: ClusterSpec, k, pods: int, mode: str, level: str | None) -> tuple[list | None, int]:
    """:func:`kueue_tas`, the same answer with less work (the policies' fast path): an
    unconstrained pod set reads the nodes alone (:func:`_least_free_capacity_fast`), not every
    level's sums; a pod set that one domain of its level holds takes the least free such domain
    (BestFit's choice) without sorting the level and without the sums above it; a ``preferred``
    one that no domain holds is :func:`kueue_tas`."""
    kk = np.asarray(k, dtype=np.int64)
    ranks = _ranks(spec)
    if mode == "unconstrained":
        return _least_free_capacity_fast(kk, ranks[-1], pods)
    levels = level_sizes(spec)
    li = [name for name, _ in levels].index(level)
    states = {lj: kk if levels[lj][1] == 1 else kk.reshape(-1, levels[lj][1]).sum(axis=1)
              for lj in range(li, len(levels))}
    state = states[li]
    fits = np.nonzero(state >= pods)[0]
    if not len(fits):
        if mode == "required":
            return None, int(state.max())
        return kueue_tas(spec, kk, pods, mode, level)
    least = fits[state[fits] == state[fits].min()]
    chosen = [(int(least[np.argmin(ranks[li][least])]), pods)]
    for lj in range(li, len(levels) - 1):
        ratio = levels[lj][1] // levels[lj + 1][1]
        children = np.concatenate([np.arange(d * ratio, (d + 1) * ratio) for d, _ in chosen])
        chosen = _to_minimum(_sorted(children, states[lj + 1], ranks[lj + 1]), states[lj + 1], pods)
    return [(d, n) for d, n in chosen if n > 0], pods


def _least_free_capacity_fast(state, rank, pods: int) -> tuple[list | None, int]:
    """:func:`_least_free_capacity` without sorting the nodes when one holds the pod set: the
    first in (free pods, label) order that does is the lowest-ranked of those with the fewest free
    pods at least ``pods``."""
    whole = state >= pods
    if whole.any():
        least = state[whole].min()
        cands = np.nonzero(state == least)[0]
        return [(int(cands[np.argmin(rank[cands])]), pods)], pods
    # no node holds it: the nodes with free pods, least free first, until the pods are placed
    nz = np.nonzero(state > 0)[0]
    takes = state[nz]
    total = int(takes.sum())
    if total < pods:
        return None, total
    order = np.lexsort((rank[nz], takes))
    takes = takes[order]
    last = int(np.searchsorted(np.cumsum(takes), pods))   # the first prefix that holds them
    plan = list(zip(nz[order[:last + 1]].tolist(), takes[:last + 1].tolist()))
    plan[-1] = (plan[-1][0], pods - int(takes[:last].sum()))
    return plan, pods


def tas_not_fit(fit: int, pods: int, pod_set: str = "main", *, nodes: int = 0,
                excluded: dict | None = None) -> str:
    """Kueue's message for a pod set TAS cannot place (``flavorassigner.go`` L178 around
    ``notFitMessage``, ``tas_flavor_snapshot.go`` L1698–1718). ``excluded``: the nodes TAS left
    out and why (``ExclusionStats``, L422–465: ``affinity``, ``resource "nvidia.com/gpu"`` for a
    node where not one pod fits, L1612–1619), of ``nodes`` in all; the real message names them."""
    name = f'"{TAS_TOPOLOGY}"'
    if fit == 0:
        tail = f"topology {name} doesn't allow to fit any of {pods} pod(s)"
    else:
        tail = f"topology {name} allows to fit only {fit} out of {pods} pod(s)"
    reasons = sorted(f"{why}: {n}" for why, n in (excluded or {}).items() if n)
    if reasons:
        tail += f". Total nodes: {nodes}; excluded: {', '.join(reasons)}"
    return f"couldn't assign flavors to pod set {pod_set}: {tail}"


def tas_exclusions(k, allowed, short_of: str = "nvidia.com/gpu") -> dict:
    """Why TAS leaves nodes out for a pod set (``fillInCounts`` L1563–1619): not matching its
    required node affinity (``allowed``: the indexes that do; None: all), else not one pod fits
    (counted under the resource that runs out, ``short_of``)."""
    affinity = 0 if allowed is None else len(k) - len(allowed)
    if allowed is None and isinstance(k, np.ndarray):
        full = int(np.count_nonzero(k == 0))
    else:
        full = sum(1 for i, n in enumerate(k) if n == 0 and (allowed is None or i in allowed))
    return {"affinity": affinity, f'resource "{short_of}"': full}


# ---- Slurm topology/tree -----------------------------------------------------------------------
def slurm_tree_spans(topology, nodes: int) -> list[int]:
    """A tree's spans in leaf switches, as the plugin's loop compares them: 1 (the leaf switch), then
    each level above the leaves, innermost first, and the whole cluster last. ``topology``:
    ``((level, size), ...)``, outermost first, on ``nodes`` nodes (the innermost level's size
    divides every other)."""
    leaf = topology[-1][1]
    return [1] + [size // leaf for _, size in reversed(topology[:-1])] + [nodes // leaf]


def slurm_tree(spec: ClusterSpec, k, pods: int, max_leaves: int | None = None,
               per_leaf=None, pods_in=None) -> tuple[list | None, int]:
    """Slurm's tree plugin: leaf switches (the innermost level) one by one, the tightest that fits,
    else the one under the tightest ancestor that fits, else the largest; nodes in index order.
    ``max_leaves``: ``--switches=N`` still waiting (its wait not over): a placement over more
    than N leaf switches is refused (None: any placement will do). ``per_leaf`` and ``pods_in``:
    the free pods per leaf switch, and a function giving them on nodes ``lo`` to ``hi - 1`` as a
    list, if the caller keeps them (then ``k`` is not read)."""
    leaf_size = spec.topology[-1][1]
    if per_leaf is None:
        kk = np.asarray(k, dtype=np.int64)
        per_leaf = kk.reshape(-1, leaf_size).sum(axis=1)

        def pods_in(lo: int, hi: int) -> list:
            return kk[lo:hi].tolist()
    total = int(per_leaf.sum())
    if total < pods:
        return None, total
    fitting = np.nonzero(per_leaf >= pods)[0]
    if len(fitting):
        # one leaf holds the job: the plugin's loop (slurm_tree_reference) takes the tightest
        # such leaf first (the lowest index among equals, _topo_compare_switches) and finishes
        # the job in its nodes, in index order; computed at once, since most jobs are this one
        # (every job goes through the plugin)
        j = int(fitting[np.argmin(per_leaf[fitting])])
        plan = []
        _fill(range(leaf_size), pods_in(j * leaf_size, (j + 1) * leaf_size), pods, plan, j * leaf_size)
        return plan, pods
    return _slurm_tree_leaves(spec, pods_in, pods, max_leaves, per_leaf)


#: From this many leaf switches on, :func:`_slurm_tree_leaves` sums and adds hops in numpy
#: (the 6,250-node tree's 625 leaves); below, in Python (the overloaded cluster's 15)
WIDE_TREE = 64


#: (the tree's shape, pods, max_leaves, numpy or not, the free pods per leaf) -> what
#: :func:`_tree_choice` answered: a busy tree's backfill asks the same question again and again
#: (the 6,250-node tree: 96 % of the calls, the same free pods at the same times for job after job)
_TREE_CHOICES: dict = {}


def _slurm_tree_leaves(spec: ClusterSpec, pods_in, pods: int, max_leaves: int | None,
                       per_leaf) -> tuple[list | None, int]:
    """:func:`slurm_tree_reference`'s loop over the leaf switches (:func:`_tree_choice`), its
    choice of leaves kept for the same free pods per leaf (the loop reads nothing else: the
    leaves' free pods, their sums by ancestor and the hops between leaves), and the plan made
    from the nodes of the chosen leaves in index order (``pods_in(lo, hi)``: their free pods)."""
    levels = spec.topology   # (already a tuple of (level, size) tuples: ClusterSpec makes it so)
    leaf_size = levels[-1][1]
    key = _tree_key(levels, spec.nodes, pods, max_leaves, len(per_leaf) >= WIDE_TREE, per_leaf)
    got = _TREE_CHOICES.get(key)
    if got is None:
        if len(_TREE_CHOICES) >= 4096:
            _TREE_CHOICES.clear()
        got = _TREE_CHOICES[key] = _tree_choice(spec, per_leaf, pods, max_leaves)
    chosen, short = got
    if chosen is None:
        return None, short
    plan, rem = [], pods
    for best in chosen:
        lo, hi = best * leaf_size, min((best + 1) * leaf_size, spec.nodes)
        rem = _fill(range(hi - lo), pods_in(lo, hi), rem, plan, lo)
    return plan, pods


def _tree_key(levels: tuple, nodes: int, pods: int, max_leaves: int | None, wide: bool, per_leaf) -> tuple:
    """What :func:`_tree_choice`'s answer depends on, as a key of :data:`_TREE_CHOICES`."""
    return levels, nodes, pods, max_leaves, wide, per_leaf.tobytes()


def _tree_choice(spec: ClusterSpec, per_leaf, pods: int, max_leaves: int | None) -> tuple[list | None, int]:
    """:func:`slurm_tree_reference`'s loop over the leaf switches, the same choices with less
    work: each leaf's hops to the leaves chosen so far are kept and added to as a leaf is
    chosen (the reference sums them over the chosen leaves for every comparison), and the free
    pods under every ancestor are kept per level (the reference sums the leaves under it).
    ``per_leaf``: the free pods per leaf, as an array. The sums per level are summed in numpy,
    once a call (625 leaves: the setup in Python took most of a call), and the hops are added by
    level, not leaf by leaf. (The leaves chosen, in order, or None and the pods placed / the most
    free pods of a leaf, as :func:`slurm_tree` answers: a leaf's pods go to the job up to what
    is left of it, whatever its nodes.)"""
    levels = [(name, size) for name, size in spec.topology]
    leaf_size = levels[-1][1]
    avail = per_leaf.tolist()
    n_leaves, total = len(avail), sum(avail)
    if total < pods:
        return None, total
    free_max = max(avail)
    spans = slurm_tree_spans(levels, spec.nodes)
    ups = spans[1:]
    wide = n_leaves >= WIDE_TREE  # numpy pays only over many leaves
    # sums[s][j // spans[s]]: the free pods in leaf j's ancestor of spans[s] leaves (s = 0: the leaf)
    if wide:
        sums = [avail] + [np.add.reduceat(per_leaf, np.arange(0, n_leaves, span)).tolist() for span in ups]
    else:
        sums = [avail] + [[sum(avail[a:a + span]) for a in range(0, n_leaves, span)] for span in ups]
    anc = _leaf_ancestors(n_leaves, tuple(ups), wide)
    dist = np.zeros(n_leaves, dtype=np.int64) if wide else None  # (wide: dl's array)
    dl = [0] * n_leaves  # hops from each leaf to the leaves chosen (_dist)
    depth = len(spans)

    def compare(i: int, j: int, rem: int) -> tuple[bool, bool]:
        s = 0
        while True:
            span = spans[s]
            ci, cj = sums[s][i // span], sums[s][j // span]
            i_fit = ci >= rem
            if i_fit and cj >= rem:
                if ci != cj:
                    return ci < cj, True
                break
            if i_fit != (cj >= rem):
                return i_fit, i_fit
            if s + 1 < depth and i // spans[s + 1] != j // spans[s + 1]:
                s += 1
                continue
            break
        span = spans[s]
        return sums[s][i // span] > sums[s][j // span], i_fit

    chosen, rem = [], pods
    cands = [j for j in range(n_leaves) if avail[j]]
    while rem > 0:
        best = None
        for j in cands:
            if best is None:
                best, db = j, dl[j]
                continue
            dj = dl[j]
            if dj > db:  # farther than the best so far: it cannot take its place
                continue
            tighter, fits_j = compare(j, best, rem)
            if (dj < db and fits_j) or (dj == db and tighter):
                best, db = j, dj
        if best is None:
            return None, pods - rem
        chosen.append(best)
        taken = avail[best]
        for s in range(1, depth):
            sums[s][best // spans[s]] -= taken
        avail[best] = 0                              # (sums[0] is avail)
        cands.remove(best)
        # each leaf's hops to ``best``: 2 per level up to their common ancestor (the first
        # level, innermost first, at which they share one), for every leaf at once
        if wide:
            hops = np.full(n_leaves, 2 * len(anc), dtype=np.int64)
            for u in range(len(anc) - 2, -1, -1):
                hops[anc[u] == anc[u][best]] = 2 * (u + 1)
            dist += hops
            dl = dist.tolist()
        else:
            mine = [a[best] for a in anc]
            for j in cands:
                for u, a in enumerate(anc):
                    if a[j] == mine[u]:
                        dl[j] += 2 * (u + 1)
                        break
        rem -= min(rem, taken)  # (what _fill places on its nodes)
    if max_leaves and len(chosen) > max_leaves:
        return None, free_max
    return chosen, pods


def slurm_tree_reference(spec: ClusterSpec, k, pods: int, max_leaves: int | None = None,
                         ) -> tuple[list | None, int]:
    """:func:`slurm_tree` as the plugin's loop reads, leaf switch by leaf switch, for every job;
    then, for ``--switches=N`` still waiting, the count of the placement's leaf switches
    (``eval_nodes_tree.c`` L1362–1411)."""
    levels = [(name, size) for name, size in spec.topology]
    leaf_size = levels[-1][1]
    leaves = [range(s, s + leaf_size) for s in range(0, spec.nodes, leaf_size)]
    free = [sum(k[i] for i in r) for r in leaves]
    total = sum(free)
    if total < pods:
        return None, total
    # the subtree sizes (in leaves) above each leaf, innermost first, and the root (whole cluster)
    spans = slurm_tree_spans(levels, spec.nodes)
    ups = spans[1:]
    avail = list(free)

    def under(j: int, span: int) -> int:          # free pods in leaf j's ancestor of ``span`` leaves
        a = j - j % span
        return sum(avail[a:a + span])

    def compare(i: int, j: int, rem: int) -> tuple[bool, bool]:
        """``_topo_compare_switches(i, j)`` (L60-106): (is i the better fit, ``i_fit``). ``i_fit``
        is whether i *at the level the comparison stopped* holds the rest: the loop climbs to
        the parents when neither leaf fits and sets ``*i_fit_out`` again at each level."""
        s = 0
        while True:
            ci, cj = under(i, spans[s]), under(j, spans[s])
            i_fit = ci >= rem
            if i_fit and cj >= rem:
                if ci != cj:
                    return ci < cj, True             # both fit: the tighter one
                break
            if i_fit != (cj >= rem):
                return i_fit, i_fit                  # only one fits: that one
            if s + 1 < len(spans) and i // spans[s + 1] != j // spans[s + 1]:
                s += 1                               # neither: compare their parents
                continue
            break
        return under(i, spans[s]) > under(j, spans[s]), i_fit   # the one with more free

    plan, chosen, rem = [], [], pods
    while rem > 0:
        best = None
        for j in range(len(leaves)):
            if j in chosen or not avail[j]:
                continue
            if best is None:
                best = j
                continue
            dj, db = _dist(chosen, j, ups), _dist(chosen, best, ups)
            tighter, fits_j = compare(j, best, rem)
            # _topo_choose_best_switch L124-135: closer and "fits" (as the comparison left i_fit:
            # a closer leaf whose parent holds the rest wins, seen on the real 26.05.5), or as
            # close and a better fit
            if (dj < db and fits_j) or (dj == db and tighter):
                best = j
        if best is None:
            return None, pods - rem
        chosen.append(best)
        avail[best] = 0                              # "Used all" (L1346–1347)
        rem = _fill(leaves[best], k, rem, plan)
    if max_leaves and len(chosen) > max_leaves:   # best_switch = false: waiting for switches
        return None, max(free)
    return plan, pods


def _fill(nodes, k, rem: int, plan: list, base: int = 0) -> int:
    """Take up to ``k[i]`` pods on each of ``nodes`` in order until ``rem`` are placed (appended to
    ``plan`` as node ``base + i``); the pods still to place."""
    for i in nodes:
        take = min(k[i], rem)
        if take:
            plan.append((base + i, take))
            rem -= take
        if rem == 0:
            break
    return rem


@functools.lru_cache(maxsize=16)
def _leaf_ancestors(n_leaves: int, ups: tuple, wide: bool) -> list:
    """Per level above the leaves (innermost first, the root last), each leaf's ancestor there
    (leaf j's is j // span), as arrays (``wide``) or lists: the same for every call on one tree."""
    j = np.arange(n_leaves)
    if wide:
        return [j // span for span in ups]
    return [(j // span).tolist() for span in ups]


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


# ---- Slurm topology/block ----------------------------------------------------------------------
#: What ``eval_nodes_block`` returns when it finds no place (``slurm_errno.c`` L964-975).
BLOCK_NO_FIT = "No suitable topology unit found"
BLOCK_SEGMENT_NO_FIT = "No suitable topology unit found for segment"
BLOCK_CONFIG = "Requested topology configuration is not available"
BLOCK_INSUFFICIENT = "Insufficient resources in topology unit"


def slurm_block_sizes(spec: ClusterSpec) -> tuple[int, ...]:
    """topology/block's BlockSizes on ``spec``: ``spec.block_sizes``, or else the sizes of the
    topology's levels that are the base block (the innermost level) times a power of two."""
    if spec.block_sizes:
        return tuple(sorted(spec.block_sizes))
    base = spec.topology[-1][1]
    ratios = {size // base for _, size in spec.topology}
    return tuple(sorted(base * r for r in ratios if not r & (r - 1)))


def _block_levels(spec: ClusterSpec) -> tuple[int, list[int]]:
    base = spec.topology[-1][1]
    return base, sorted((b // base).bit_length() - 1 for b in slurm_block_sizes(spec))


def _level_for(rem_nodes: int, base: int, levels: list[int]) -> tuple[int, int]:
    """``_get_block_level`` (L226-244): the block level for ``rem_nodes`` (the first BlockSizes
    level that holds them, -1: none, the whole topology) and the level below it (``llblock``)."""
    need = -(-rem_nodes // base)
    lvl = (need - 1).bit_length()               # ceil(log2(need)), 0 for one base block
    below = [x for x in levels if x <= lvl - 1] if lvl > 0 else []
    llblock = max(below) if below else 0
    above = [x for x in levels if x >= lvl]
    return (min(above) if above else -1), llblock


def _block_one(rem_nodes: int, usable: list[bool], base: int, levels: list[int]) -> list[int] | None:
    """One pass of ``eval_nodes_block`` (L344-1087) for ``rem_nodes`` nodes among ``usable``:
    the block of the chosen size with the fewest usable nodes that holds them (ties to the last,
    L668-679), then its base blocks one by one (``_choose_best_bblock`` L65-172), nodes in index
    order. The node indexes, or None (no block holds them, or the llblock limit stops it)."""
    nb = len(usable) // base
    level, ll = _level_for(rem_nodes, base, levels)
    bpb, block_cnt = (nb, 1) if level < 0 else (1 << level, -(-nb // (1 << level)))
    bpl = 1 << ll
    max_ll = -(-rem_nodes // (bpl * base))
    use_ll = bpb != bpl * max_ll                              # L547-551
    on_bb = [sum(usable[b * base:(b + 1) * base]) for b in range(nb)]
    on_ll = [sum(on_bb[x:x + bpl]) for x in range(0, nb, bpl)]
    block_inx, block_nodes = -1, 0
    for j in range(block_cnt):                                # L612-681
        bbs = range(j * bpb, min((j + 1) * bpb, nb))
        bnc = sum(on_bb[b] for b in bbs)
        if use_ll:
            lls = sorted(on_ll[j * bpb // bpl: j * bpb // bpl + max(bpb // bpl, 1)], reverse=True)
            avail = sum(lls[:max_ll])
        else:
            avail = bnc
        if avail < rem_nodes:
            continue
        if block_inx == -1 or bnc <= block_nodes:
            block_inx, block_nodes = j, bnc
    if block_inx == -1:
        return None
    bbs = list(range(block_inx * bpb, min((block_inx + 1) * bpb, nb)))
    on_ll = {}
    for b in bbs:
        on_ll[b // bpl] = on_ll.get(b // bpl, 0) + on_bb[b]
    required: list[int] = []
    taken: list[int] = []
    rem, prev = rem_nodes, rem_nodes + 1
    while prev != rem:                                        # L1013-1077
        prev = rem
        best, best_fit, best_same = -1, False, True
        for i in bbs:
            if i in required:
                continue
            fit = on_bb[i] >= rem
            if use_ll and (best == -1 or best // bpl != i // bpl):
                same = any(r // bpl == i // bpl for r in required)
                if best == -1 or (same and not best_same):
                    best, best_fit, best_same = i, fit, same
                    continue
                if not same and best_same:
                    continue
                cnt, best_cnt = on_ll[i // bpl], on_ll[best // bpl]
                if (cnt >= rem) != (best_cnt >= rem):
                    if cnt >= rem:
                        best, best_fit, best_same = i, fit, same
                    continue
                if cnt != best_cnt:
                    if (cnt < best_cnt) == (cnt >= rem):      # both fit: fewer; neither: more
                        best, best_fit, best_same = i, fit, same
                    continue
            if (best == -1 or (fit and not best_fit) or (not fit and not best_fit and on_bb[i] >= on_bb[best])
                    or (fit and on_bb[i] <= on_bb[best])):
                best, best_fit = i, fit
        if best == -1 or (max_ll <= 0 and not best_same):
            break
        required.append(best)
        for n in range(best * base, (best + 1) * base):
            if usable[n] and rem > 0:
                taken.append(n)
                rem -= 1
        if rem <= 0:
            return taken
        if not best_same:
            max_ll -= 1
    return None


def slurm_block(spec: ClusterSpec, k, pods: int, per_node: int, segment: int | None = None,
                ) -> tuple[list | None, str | None]:
    """Slurm's block plugin (``src/plugins/topology/block/eval_nodes_block.c`` at slurm-26-05-3-1)
    for a job of ``pods`` pods, ``per_node`` of them on a whole node: its nodes (``--nodes``,
    ``ceil(pods / per_node)``) all inside one block of the smallest BlockSizes that holds them
    (the whole cluster if none does), the block with the fewest usable nodes; with ``segment``
    (``--segment``) each segment of that many nodes so, one after the other (L463-1132). Every job
    goes through it, with or without a request. ``(plan, None)`` or ``(None, Slurm's words)``."""
    base, levels = _block_levels(spec)
    need = -(-pods // max(per_node, 1))
    seg = segment if segment and segment <= need else None    # L322-326: larger than the job
    if seg and need % seg:                                    # L328-333
        return None, BLOCK_CONFIG
    usable = [x > 0 for x in k]
    nodes: list[int] = []
    for _ in range(need // seg if seg else 1):
        got = _block_one(seg or need, usable, base, levels)
        if got is None:
            return None, BLOCK_SEGMENT_NO_FIT if seg and need > seg else BLOCK_NO_FIT
        for n in got:
            usable[n] = False
        nodes += got
    plan, rem = [], pods
    for n in sorted(nodes):
        take = min(k[n], rem)
        if take:
            plan.append((n, take))
            rem -= take
    return (plan, None) if rem == 0 else (None, BLOCK_INSUFFICIENT)


# ---- Volcano HyperNodes (hard and soft mode) -----------------------------------------------------
def volcano_tier_sizes(spec: ClusterSpec) -> list[int]:
    """Nodes in one HyperNode of each tier, tier 1 (the innermost level) first, and last the
    session's virtual ``<cluster-top-hypernode>`` over every node, one tier above the highest
    (``framework/session.go`` L285–310 ``addClusterTopHyperNode``)."""
    return [size for _, size in reversed(spec.topology)] + [spec.nodes]


def volcano_highest_tier(spec: ClusterSpec, mode: str, level: str) -> int:
    """``highestTierAllowed`` as Volcano uses it: the tier of ``level`` in hard mode; in soft
    mode the cluster top's tier, whatever the job wrote (``session.go`` L1081–1103,
    ``convertSoftToHardTopology``: a soft job becomes hard with ``HighestTierAllowed`` = the
    cluster top's tier and ``HighestTierName`` cleared)."""
    names = [name for name, _ in reversed(spec.topology)]
    return names.index(level) + 1 if mode == "hard" else len(names) + 1


def volcano_hypernode(spec: ClusterSpec, k, pods: int, level: str, free_gpus, gpus_per_pod: int,
                      mode: str = "hard", all_pods: int | None = None, reference: bool = False,
                      ) -> tuple[list | None, int]:
    """Volcano's network topology for a job placing ``pods`` tasks (``all_pods``: every task of
    the job, default ``pods``): tier by tier from the lowest, up to ``highestTierAllowed``
    (:func:`volcano_highest_tier`), the HyperNodes that hold the tasks; of these the best
    bin-packing score, ``(used + request) / allocatable`` with ``request`` every task of the job
    (``network_topology_aware.go`` L384–437; 0 when it overflows), ties to the lowest index (Go's
    random pick among equals in ``SelectBestHyperNodeAndScore``); inside it the tasks one by one
    (:func:`volcano_tasks`). Soft mode reaches the whole cluster at its top tier: it spans only
    when no HyperNode of a real tier holds the job. ``(None, the most tasks one HyperNode
    holds)`` when none does."""
    sizes = volcano_tier_sizes(spec)
    request = (pods if all_pods is None else all_pods) * gpus_per_pod
    best_fit = 0
    fast = not reference
    if fast:
        kk, ff = np.asarray(k, dtype=np.int64), np.asarray(free_gpus, dtype=np.int64)
    for tier in range(1, volcano_highest_tier(spec, mode, level) + 1):
        size = sizes[tier - 1]
        alloc = size * spec.gpus_per_node
        if fast:
            fits = kk.reshape(-1, size).sum(axis=1)
            best_fit = max(best_fit, int(fits.max()))
            ok = np.nonzero(fits >= pods)[0]
            if not len(ok):
                continue
            used = alloc - ff.reshape(-1, size).sum(axis=1)[ok]
            scores = [(u + request) / alloc if u + request <= alloc else 0.0 for u in used.tolist()]
            d = int(ok[scores.index(max(scores))])
        else:
            scored = []
            for d, r in enumerate(domains_of_size(spec, size)):
                fit = sum(k[i] for i in r)
                best_fit = max(best_fit, fit)
                if fit >= pods:
                    used = alloc - sum(free_gpus[i] for i in r)
                    scored.append((-((used + request) / alloc if used + request <= alloc else 0.0), d))
            if not scored:
                continue
            d = min(scored)[1]
        return volcano_tasks(spec, tier, d, k, pods, free_gpus, gpus_per_pod, reference=reference), pods
    return None, best_fit


def domains_of_size(spec: ClusterSpec, size: int) -> list[range]:
    """The node ranges of ``size`` consecutive nodes, in order."""
    return [range(d, d + size) for d in range(0, spec.nodes, size)]


def volcano_tasks(spec: ClusterSpec, tier: int, d: int, k, pods: int, free_gpus, gpus_per_pod: int,
                  reference: bool = False) -> list:
    """Tasks one by one inside HyperNode ``d`` of ``tier`` (``allocate.go`` L719–866
    ``allocateResourcesForTasks``): each goes to the node with the best score, and after each the
    job's allocated HyperNode becomes the lowest common ancestor of the tier-1 HyperNode of that
    node and the one before (``getNewAllocatedHyperNode`` L869–880). The network-topology-aware
    plugin scores a node by that ancestor's tier, ``(maxTier − tier) / (maxTier − minTier)``, 1 in
    the job's own HyperNode, 0 for every node before the first task (``network_topology_aware.go``
    L559–589, L760–798; maxTier is the cluster top's), and among the nodes with the best score
    adds the share of the job's tasks already in the node's tier-1 HyperNode (L578–586,
    L779–806). A pod that asks only for GPUs gets the same score from every other default plugin,
    so the ties left (Go picks one at random, ``SelectBestNodeAndScore``) go to the fullest node,
    then the lowest index: the binpack stand-in this model uses everywhere. ``reference``: the
    literal task-by-task scoring; otherwise the node chosen keeps every task it has room for (it
    stays the best: its score is the highest one left, and its tier-1 HyperNode holds the most
    tasks of the job), and each search climbs from the allocated HyperNode outwards."""
    sizes = volcano_tier_sizes(spec)
    size = sizes[tier - 1]
    lo, hi = d * size, (d + 1) * size
    if reference:
        return _volcano_tasks_reference(sizes, lo, hi, k, pods, free_gpus, gpus_per_pod)
    return _volcano_tasks_fast(sizes, tier, lo, hi, k, pods, free_gpus)


def _lca(sizes: list[int], node: int, allocated: tuple[int, int] | None) -> tuple[int, int]:
    """The lowest common ancestor of ``node``'s tier-1 HyperNode and ``allocated`` ((tier, first
    node)), as (tier, first node)."""
    if allocated is None:
        return 1, node - node % sizes[0]
    tier, first = allocated
    for t in range(tier, len(sizes) + 1):
        s = sizes[t - 1]
        if node // s == first // s:
            return t, node - node % s
    raise AssertionError("the cluster top holds every node")


def _volcano_tasks_reference(sizes, lo, hi, k, pods, free_gpus, gpus_per_pod) -> list:
    max_tier = len(sizes)
    room = {i: k[i] for i in range(lo, hi)}
    free = {i: free_gpus[i] for i in range(lo, hi)}
    per_leaf: dict[int, int] = {}
    placed: dict[int, int] = {}
    allocated = None
    for _ in range(pods):
        scores = {}
        for i in range(lo, hi):
            if room[i] <= 0:
                continue
            if allocated is None:
                scores[i] = 0.0
            else:
                tier, _ = _lca(sizes, i, allocated)
                scores[i] = (max_tier - tier) / (max_tier - 1)
        top = max(scores.values())
        best = [i for i, s in scores.items() if s == top]
        if len(best) > 1:     # the share of the job's tasks in the node's tier-1 HyperNode
            share = {i: per_leaf.get(i // sizes[0], 0) / pods for i in best}
            most = max(share.values())
            best = [i for i in best if share[i] == most]
        i = min(best, key=lambda n: (free[n], n))
        room[i] -= 1
        free[i] -= gpus_per_pod
        per_leaf[i // sizes[0]] = per_leaf.get(i // sizes[0], 0) + 1
        placed[i] = placed.get(i, 0) + 1
        allocated = _lca(sizes, i, allocated)
    return list(placed.items())


def _volcano_tasks_fast(sizes, tier, lo, hi, k, pods, free_gpus) -> list:
    room = np.asarray(k[lo:hi], dtype=np.int64).copy()
    free = np.asarray(free_gpus[lo:hi], dtype=np.int64)
    leaf = sizes[0]
    per_leaf: dict[int, int] = {}
    plan, rem, allocated = [], pods, None

    def fullest(segments) -> int | None:
        """Of the nodes in ``segments`` ([a, b) ranges) with room: the fewest free GPUs, then the
        lowest index."""
        best = None
        for x, y in segments:
            if x >= y:
                continue
            idx = np.nonzero(room[x - lo:y - lo] > 0)[0]
            if not len(idx):
                continue
            j = int(idx[np.argmin(free[x - lo:y - lo][idx])]) + x
            if best is None or (free[j - lo], j) < (free[best - lo], best):
                best = j
        return best

    def outside(a: int, b: int, holes) -> list[tuple[int, int]]:
        """[a, b) less the ranges ``holes`` (sorted, inside it)."""
        out, x = [], a
        for h0, h1 in holes:
            out.append((x, h0))
            x = h1
        out.append((x, b))
        return out

    while rem > 0:
        if allocated is None:
            i = fullest([(lo, hi)])
        else:
            t, a = allocated
            b = a + sizes[t - 1]
            i = None
            # inside the allocated HyperNode, every node scores alike: the tier-1 HyperNodes
            # holding the most tasks of the job first, then those holding none
            for count in sorted(set(per_leaf.values()), reverse=True):
                i = fullest([(lf * leaf, lf * leaf + leaf) for lf, c in per_leaf.items() if c == count])
                if i is not None:
                    break
            if i is None:
                i = fullest(outside(a, b, sorted((lf * leaf, lf * leaf + leaf) for lf in per_leaf)))
            while i is None and t < tier:   # climb: the parent's other nodes score alike, lower
                t += 1
                pa = a - a % sizes[t - 1]
                i = fullest(outside(pa, pa + sizes[t - 1], [(a, b)]))
                a, b = pa, pa + sizes[t - 1]
        take = min(int(room[i - lo]), rem)
        room[i - lo] -= take
        rem -= take
        plan.append((i, take))
        per_leaf[i // leaf] = per_leaf.get(i // leaf, 0) + take
        allocated = _lca(sizes, i, allocated)
    return plan


# ---- kube-scheduler TopologyAwareWorkloadScheduling ----------------------------------------------
#: What the course's pods ask for beside GPUs, and what a fake node has
#: (``courselib.live.kube.plan.job_manifest``, ``KubeShape``): one CPU and 16 GiB per GPU of a 64-CPU,
#: 1 TiB node, so that kube-scheduler's cpu and memory scores rank nodes and domains by their GPUs.
NODE_MILLICPU = 64_000
NODE_MEMORY = 1024 * 2**30
GPU_MILLICPU, GPU_MEMORY = 1000, 16 * 2**30
NO_GPU_MILLICPU, NO_GPU_MEMORY = 100, 256 * 2**20


def pod_requests(job, spec: ClusterSpec) -> tuple[int, int]:
    """(millicores, bytes) one pod of ``job`` asks for in a replay (``plan.job_manifest``)."""
    g = job.gpus_per_pod
    cpu = g * GPU_MILLICPU if g else NO_GPU_MILLICPU
    if job.memory_per_pod and spec.memory_per_node:
        mem = job.memory_per_pod // 2**20 * 2**20
    else:
        mem = g * GPU_MEMORY if g else NO_GPU_MEMORY
    return cpu, mem


def requests_follow_gpus(job, spec: ClusterSpec) -> bool:
    """Whether what ``job``'s pods hold on a node in cpu and memory is its GPUs there times one GPU's
    share (at least one GPU a pod, not exclusive, no memory of its own): then a node's allocated
    cpu and memory follow from its free GPUs alone."""
    g = job.gpus_per_pod
    return g >= 1 and not job.exclusive and pod_requests(job, spec) == (g * GPU_MILLICPU, g * GPU_MEMORY)


def node_allocatable(spec: ClusterSpec) -> tuple[int, int]:
    """(millicores, bytes) of one fake node (``plan.shape_for``)."""
    return NODE_MILLICPU, (spec.memory_per_node // 2**20 * 2**20 if spec.memory_per_node else NODE_MEMORY)


def spread_fill(nodes, k, want: int, free_gpus, gpus_per_pod: int, prefer: dict | None = None,
                ) -> tuple[list, bool]:
    """Pod by pod, as the PodGroup cycle places them (``schedule_one_podgroup.go`` L600–640): each
    to a node of ``nodes`` with the most free GPUs (NodeResourcesFit LeastAllocated over the cpu and
    memory that go with them); equal nodes tie and kube-scheduler's ``selectHost`` draws one. The
    model takes the lowest index, or, given ``prefer`` (node -> pods, where the real run put them),
    a tied node the real run used. Returns ``(plan, followed)``: ``followed`` is false when the real
    placement is not one the tie rule allows."""
    kk = {i: k[i] for i in nodes if k[i] > 0}
    free = {i: free_gpus[i] for i in kk}
    left = dict(prefer) if prefer else {}
    followed = True
    placed: dict[int, int] = {}
    for _ in range(want):
        if not kk:
            break
        top = max(free[i] for i in kk)
        tied = [i for i in kk if free[i] == top]
        real = [i for i in tied if left.get(i, 0) > 0]
        if prefer is not None and not real:
            followed = False
        i = min(real) if real else min(tied)
        if real:
            left[i] -= 1
        placed[i] = placed.get(i, 0) + 1
        free[i] -= gpus_per_pod
        kk[i] -= 1
        if not kk[i]:
            del kk[i]
    if prefer is not None and any(v > 0 for v in left.values()):
        followed = False
    return sorted(placed.items()), followed


@dataclass(frozen=True)
class GangPlacement:
    """What kube-scheduler's placement search does with one PodGroup."""
    plan: list | None           # [(node, pods)] in the chosen domain; None: no placement fits
    domain: str | None          # the chosen domain ("rack1")
    tied: tuple = ()            # the domains whose placements scored best: any of them may be chosen
    scores: tuple = ()          # (domain, NodeResourcesFit, PodGroupPodsCount) of each feasible one
    fit: int = 0                # the most pods any domain placed
    statuses: tuple = ()        # no placement: each domain's "minCount (M) ...: S scheduled" S
    followed: bool = True       # the real run's choice (if given) was one of the tied


def placement_score(spec: ClusterSpec, nodes, used, pods: int, request) -> int:
    """NodeResourcesFit's ``ScorePlacement`` (``noderesources/fit.go`` L247–255, L873–875: the
    *MostAllocated* strategy over the plugin's resources, cpu and memory by default;
    ``resource_allocation.go`` L505–535 sums requests and allocatable over the placement's nodes;
    ``most_allocated.go`` L29–68): ``(allocated + the group's requests) × 100 / allocatable`` per
    resource, integer division, averaged. The fuller domain scores higher."""
    alloc = node_allocatable(spec)
    total = 0
    for r in range(2):
        cap = alloc[r] * len(nodes)
        req = sum(used[i][r] for i in nodes) + pods * request[r]
        total += min(req, cap) * 100 // cap
    return total // 2


def kube_gang_topology(spec: ClusterSpec, k, need: int, want: int, level: str, free_gpus,
                       rng: random.Random, *, gpus_per_pod: int = 1, used=None, request=(0, 0),
                       follow_domain: str | None = None, follow_nodes: dict | None = None,
                       ) -> GangPlacement:
    """One placement per domain of ``level`` (``topology_placement.go`` L60–100; Go map order, so
    no order between them); each is tried with the PodGroup cycle (pods placed by
    :func:`spread_fill`), and it is feasible when the group's quorum (``need`` pods) is placed.
    ``findBestPlacement`` (``schedule_one_podgroup.go`` L1196–1226) takes the highest total of the
    PlacementScore plugins, ties by ``rand.Int()``: NodeResourcesFit's MostAllocated
    (:func:`placement_score`) and PodGroupPodsCount (``podgrouppodscount/podgroup_pods_count.go``
    L54–90: the pods placed × 100 / the most any placement placed), weight 1 each
    (``apis/config/v1/default_plugins.go`` L42, L102–105). A domain is *forced* when it alone
    scores best; among tied domains the model takes ``follow_domain`` (the real run's) if it is one
    of them, else draws one with ``rng``. ``used[i]``: (millicores, bytes) allocated on node ``i``."""
    used = used if used is not None else [(0, 0)] * spec.nodes
    size = spec.level_size(level)
    feasible, statuses = [], []
    for d, r in enumerate(domains_of(spec, level)):
        prefer = follow_nodes if follow_domain == f"{level}{d}" else None
        plan, ok = spread_fill(r, k, want, free_gpus, gpus_per_pod, prefer)
        placed = sum(n for _, n in plan)
        if placed >= need:
            feasible.append((d, plan, placed, ok))
        else:
            statuses.append(placed)
    if not feasible:
        return GangPlacement(None, None, fit=max(statuses, default=0), statuses=tuple(statuses))
    most = max(p for _, _, p, _ in feasible)
    scores = [(d, placement_score(spec, range(d * size, (d + 1) * size), used, p, request), p * 100 // most)
              for d, _, p, _ in feasible]
    best = max(f + c for _, f, c in scores)
    tied = [d for d, f, c in scores if f + c == best]
    names = tuple(f"{level}{d}" for d in tied)
    by = {d: (plan, ok) for d, plan, _, ok in feasible}
    if follow_domain in names:
        d = tied[names.index(follow_domain)]
        followed = by[d][1] if follow_nodes is not None else True
    else:
        d = tied[rng.randrange(len(tied))] if len(tied) > 1 else tied[0]
        followed = follow_domain is None
    return GangPlacement(by[d][0], f"{level}{d}", names,
                         tuple((f"{level}{dd}", f, c) for dd, f, c in scores), most, (), followed)


def spread_fill_fast(lo: int, hi: int, k, want: int, free_gpus, gpus_per_pod: int) -> list:
    """:func:`spread_fill` on the nodes ``lo`` to ``hi`` without a real run to follow: the same
    pods on the same nodes, the node with the most free GPUs (then the lowest index) kept at the
    top of a heap instead of found by a scan per pod (:func:`~courselib.model.cluster.fill_spread`)."""
    return sorted(fill_spread(range(lo, hi), k, free_gpus, want, gpus_per_pod).items())


def kube_gang_topology_fast(spec: ClusterSpec, free, need: int, want: int, level: str,
                            rng: random.Random, *, gpus_per_pod: int, used_cpu, used_mem,
                            request=(0, 0)) -> GangPlacement:
    """:func:`kube_gang_topology` for a job whose pods only free GPUs place (``free``: the free GPUs
    per node, a numpy array) and no real run to follow, over every domain at once: a domain's
    PodGroup cycle places ``min(want, its free pods)`` pods (:func:`spread_fill` stops at
    ``want`` or when no node has room), its :func:`placement_score` is its summed ``used_cpu`` and
    ``used_mem`` (per node, numpy) with the group's requests; only the chosen domain is filled pod
    by pod (:func:`spread_fill_fast`). The same tie draw with ``rng``."""
    size = spec.level_size(level)
    k = free // gpus_per_pod
    placed = np.minimum(k.reshape(-1, size).sum(axis=1), want)
    ok = placed >= need
    if not ok.any():
        statuses = tuple(placed.tolist())
        return GangPlacement(None, None, fit=max(statuses, default=0), statuses=statuses)
    feas = np.nonzero(ok)[0]
    p = placed[feas]
    most = int(p.max())
    total = np.zeros(len(feas), dtype=np.int64)
    for used, cap_node, req in ((used_cpu, node_allocatable(spec)[0], request[0]),
                                (used_mem, node_allocatable(spec)[1], request[1])):
        cap = cap_node * size
        got = used.reshape(-1, size).sum(axis=1)[feas] + p * req
        total += np.minimum(got, cap) * 100 // cap
    fit_score = total // 2
    count_score = p * 100 // most
    sums = fit_score + count_score
    tied = feas[sums == sums.max()].tolist()
    names = tuple(f"{level}{d}" for d in tied)
    d = tied[rng.randrange(len(tied))] if len(tied) > 1 else tied[0]
    plan = spread_fill_fast(d * size, (d + 1) * size, k, want, free, gpus_per_pod)
    scores = tuple((f"{level}{dd}", f, c) for dd, f, c in zip(feas.tolist(), fit_score.tolist(),
                                                                count_score.tolist()))
    return GangPlacement(plan, f"{level}{d}", names, scores, most, (), True)


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
    every rank waits for the slowest group. A split group's ring crosses through the NICs of the
    domain holding the fewest of its GPUs, ``slow_bps`` per NIC, one NIC a GPU, capped at NVLink
    (:func:`courselib.model.collective.split_link_bps`): a 7+1 split pays one NIC, 4+4 four.
    ``fast_bps`` defaults to H100 NVLink in a node and NVLink5 across a rack-scale domain.

    ``slow_GBps`` is the slowest group's link (``fast_GBps`` when nothing is split), ``nics`` the
    NICs it crosses through (None when nothing is split), ``nic_GBps`` one NIC."""
    if nvlink_level is None:
        domain_of, fast = (lambda i: i), collective.NVLINK_H100_BPS
    else:
        domain_of, fast = (lambda i: spec.domain_of(i, nvlink_level)), collective.NVLINK5_BPS
    fast = fast if fast_bps is None else fast_bps
    splits = collective.group_splits(placement, tp, domain_of)
    crossing = [c for c in splits if len(c) > 1]
    nics = min((min(c) for c in crossing), default=None)
    slow = min((collective.split_link_bps(c, nic_bps=slow_bps, nvlink_bps=fast) for c in crossing), default=fast)
    slowdown = collective.step_slowdown(comm_fraction, fast, slow) if crossing else 1.0
    return {"tp": tp, "groups": len(splits), "split": len(crossing), "comm_fraction": comm_fraction,
            "fast_GBps": fast / collective.GB, "slow_GBps": slow / collective.GB, "nics": nics,
            "nic_GBps": slow_bps / collective.GB, "slowdown": slowdown}


class Stretch:
    """Opt-in: a started job trains ``(1 − f) + f·r`` times as long when its tensor-parallel
    groups are split over a slow link (:func:`split_cost`'s ``slowdown``: every step waits for the
    slowest group, whose link is the NICs of its emptier side), so a split gang finishes later and
    holds its GPUs longer.

    ``tp`` GPUs per TP group, ``comm_fraction`` f (exposed TP communication as a share of a step on
    NVLink), ``nvlink_level`` the level that is one NVLink domain (None: the node). A job whose
    GPUs ``tp`` does not divide has no TP groups to split: it is not stretched. Not on by default:
    a workload's ``duration`` is what the job took where it ran, the real schedulers the course
    compares against (Kueue, kube-scheduler, Slurm) run pods that sleep that long wherever they
    land, and f is an assumption about the model the workload does not carry."""

    def __init__(self, tp: int, comm_fraction: float = 0.1, nvlink_level: str | None = None):
        if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
            raise ValueError(f"tp={tp!r}: a tensor-parallel size is a whole number, 1 or more")
        if not 0 <= comm_fraction <= 1:
            raise ValueError(f"comm_fraction={comm_fraction!r}: a fraction from 0 to 1")
        self.tp, self.comm_fraction, self.nvlink_level = tp, float(comm_fraction), nvlink_level

    def __repr__(self) -> str:
        return f"Stretch(tp={self.tp}, comm_fraction={self.comm_fraction:g}, nvlink_level={self.nvlink_level!r})"

    def check(self, spec: ClusterSpec) -> None:
        """A ValueError if ``nvlink_level`` is not a level of ``spec``'s topology."""
        if self.nvlink_level is not None and self.nvlink_level not in spec.levels:
            raise ValueError(f"nvlink_level={self.nvlink_level!r} is not a level of cluster.topology "
                             f"({', '.join(spec.levels) or 'the cluster has none'})")

    def slowdown(self, spec: ClusterSpec, placement) -> float:
        """The step slowdown of a job placed as ``placement`` (``[(node, GPUs)]``); 1 when
        nothing is split or ``tp`` does not divide its GPUs."""
        if sum(g for _, g in placement) % self.tp:
            return 1.0
        return split_cost(spec, placement, self.tp, self.comm_fraction, self.nvlink_level)["slowdown"]
