"""One Slurm backfill pass compiled with numba: :meth:`Slurm._backfill`'s decisions for plain jobs.

:class:`~courselib.model.policies.slurm_fast.SlurmFast` hands a pass to :func:`backfill_pass` when
every job it tests is plain (only free GPUs decide where a pod fits), the cluster has no topology or
topology/tree (not topology/block), ``bf_job_part_count_reserve`` is 0 (every job may reserve) and
numba is installed (the ``fast`` extra; otherwise the Python pass makes the same decisions, more
slowly). It is the reference's loop (``slurm.py``, ``_backfill``, ``plan`` and ``_blocked``) on
other data, proven equal to it by ``tests/test_slurm_kernel.py``:

- **Rows.** The pass's candidate times (now, the running jobs' expected ends after now, the
  reservations' ends) are rows kept in time order. A row holds, per free-GPU level ``f`` (1 to a
  node's GPUs), the nodes with at least ``f`` GPUs free then, as 64-bit words (bit i = node i), and
  the nodes held by a reservation running then (``start <= t < end``). A job of ``g`` GPUs a pod
  fits ``floor(free / g)`` pods on a node: the number of the levels ``g, 2g, ...`` the node
  reaches, so the pods that fit at a row are popcounts. A row's levels are made when a search
  first reaches one (:func:`_make_row`, in time order, from the row before and the jobs ending
  in between); the first row where a job's pods fit with nothing reserved is found among the rows
  made by a binary search, past them by a galloping one. On the 6,250-node tree a pass reached
  ~1,050 of ~5,600 rows, and making them all had taken half of it.
- **A job's search.** The reference blocks the nodes of every reservation that overlaps the run
  ``[t, t + runtime]`` (closed at the end: ``Slurm._blocked``). Every reservation starts at a
  candidate time, so these are the nodes held at some row inside the run: an OR over a window of
  rows that slides forward with ``t`` (kept as a two-stack queue, one OR a row; while there are
  fewer than ``LIST_UPTO`` reservations, made from their list instead). The search starts
  at the first row where the pods fit with no reservation at all (a binary search: free GPUs only
  grow with time within a pass).
- **Failures shared.** Within a pass the free GPUs at a row only fall (jobs start) and the
  reservations only grow, so a job with no fewer GPUs a pod, no fewer pods and no shorter a run
  than one that failed at a row fails there too (:func:`_beaten`; each row keeps up to
  ``CORNERS`` such failures), and at every row before that one's start (:func:`_past`): the
  search jumps there. A job's search also begins no earlier than the start of an earlier job no
  larger (:func:`_floor`: that one failed at every row before its start). A row where the
  reservations running then already leave too few pods fails without its window (the window's OR
  only blocks more); that count is kept per row and GPUs a pod until the row changes
  (:func:`_forget`). On the busy cluster of issue 35 (1,000 jobs) the searches test 6.7 M rows
  instead of 56.8 M (benchmarks/README.md).
- **A plan** is best fit, as ``Slurm.plan``: the nodes with the fewest free GPUs first, ties to
  the lowest index: the nodes at exactly level ``f`` (``f`` rising), each in index order.
- **On topology/tree** every job is placed by the plugin (:func:`_tree_plan`: the loop of
  ``topology.slurm_tree_reference`` over the leaf switches, on the pods that fit per leaf and per
  ancestor, counted from the row's levels). The plugin refuses a job only where too few of its
  pods fit, so its start is where a plain job's would be and only its plan differs; except a job
  still waiting for ``--switches=N`` (``job_leaves``), which the plugin also refuses where more
  than N leaf switches would hold it. Such a job's search goes on past those rows, and it keeps
  no failure for others (:func:`_beat`, :func:`_keep_floor`): a refusal by the plugin says
  nothing of a job that does not wait for switches. The busy sweep's topology cell (10,000 jobs)
  took over 60 s in the Python pass and takes ~8 s so (benchmarks/README.md).
- **A start now** takes its GPUs from every row made before its expected end (the rows made later
  inherit that, and get them back at its end) and adds that end as a row (and from the cluster
  just after now, ``after``, which a row made before the first later one copies: row 0 still holds
  the GPUs of a job due to end now, the rows after it do not); **a reservation** holds its nodes on
  the rows it spans (only the words of its nodes) and adds its end as a row. A new row copies the
  row before it (nothing frees up between two candidate times, and every reservation running at the
  earlier one still runs at the new one).

Compiled on first use with its helpers inline (:func:`courselib.model.compiled.compile_pass`; 6-12 s
on 2 cores, or about 0.3 s from numba's disk cache: :func:`courselib.model.compiled.cache_dir`), which
is why :class:`SlurmFast` uses it by default only for workloads of thousands of jobs;
:func:`courselib.model.compiled.available` says whether numba can be imported, without importing it.
"""
from __future__ import annotations

import numpy as np

from courselib.model.compiled import compile_pass
from courselib.model.topology import slurm_tree_spans

_KERNELS: dict = {}
#: False runs the pass as plain Python (the same code, uncompiled: slow; the tests plant slips in it)
COMPILED = True
#: the pass reads the cluster's tree; the pass compiled for a cluster with no topology is a copy
#: with TREE False (:func:`kernel`), in which every branch on the tree is compiled out: present,
#: they made a plain pass 3-4 % slower (replayed passes of the busy sweep's base and nodes=300)
TREE = True


def kernel(tree: bool = True):
    """The compiled pass (compiled, or read from the cache, on the first call); ``tree=False``:
    the copy for clusters with no topology."""
    fn = _KERNELS.get(tree)
    if fn is None:
        fn = _KERNELS[tree] = compile_pass(globals(), _HELPERS, _backfill_pass,
                                           None if tree else {"TREE": False})
    return fn


def warm() -> None:
    """Compile the passes (or load them from numba's cache) now: one pass of one job on two nodes,
    with no topology and on a tree of one leaf switch."""
    none_i, none_f = np.zeros(0, np.int64), np.zeros(0, np.float64)
    for tree in (None, tree_shape((("block", 2),), 2)):
        backfill_pass(0.0, 10.0, 8, np.full(2, 8, np.int64), none_f, none_i, none_i, np.array([8]), np.array([1]),
                      np.array([5.0]), tree=tree)


def backfill_pass(now: float, horizon: float, capacity: int, free_now: np.ndarray,
                  ev_end: np.ndarray, ev_node: np.ndarray, ev_gpus: np.ndarray,
                  job_g: np.ndarray, job_pods: np.ndarray, job_runtime: np.ndarray, exact: bool = False,
                  tree: np.ndarray | None = None, job_leaves: np.ndarray | None = None, work: dict | None = None):
    """One pass over the jobs (in priority order) on the cluster now: the free GPUs per node
    ``free_now``, and the running jobs' GPUs per node ``ev_gpus[k]`` on node ``ev_node[k]`` until
    their expected end ``ev_end[k]`` (entries with 0 GPUs are ignored). Returns ``(kind, start,
    offsets, nodes, pods, times)``: per job 0 (no start in the window), 1 (started now) or 2
    (reserved from ``start``); its plan is ``nodes[offsets[j]:offsets[j + 1]]`` with ``pods`` pods
    on each; ``times`` are the pass's candidate times at its end, sorted (``times[0]`` is now);
    ``stats``: 1 (the pass), rows at the end, rows where a job failed, jumps past rows where an
    earlier job failed, rows put in a window's front, jobs started now. ``exact``: the arrays are
    already contiguous, of int64 (floats: float64), as :class:`SlurmFast` keeps them: not converted
    (a pass of few jobs on a small cluster takes tens of microseconds; the conversions, about 4).

    ``tree``: the cluster's topology/tree as :func:`tree_shape` gives it (None: no topology, plans
    are best fit); ``job_leaves``: per job, the most leaf switches it may take while it waits for
    ``--switches`` (0: any; None: 0 for every job).

    ``work``: a dict the caller keeps from pass to pass, where the pass keeps arrays for the next
    one (:func:`_pools`: the rows' levels on a tree, the plans made), and the running jobs'
    expected ends and their order (``order``), which the next pass merges the few changed entries
    into (:func:`_sorted_ends`) instead of sorting ~16,000 entries again (6,250-node tree: 16 % of
    a pass; SlurmFast's arrays are changed in place, so the ends are a copy). An array made anew
    for each pass is memory the C allocator may give back to the system at the pass's end and
    take again at the next, whose pages then fault in anew when first written: on the
    6,250-node tree ~70 % of each pass went to the rows' levels (~45 MB; replayed passes: 31.8
    ms against 9.6 with them kept); on the busy sweep's ``nodes=300``, to the plans' arrays
    (five of ~0.6 MB, sized for every tested job's pods) a third of the pass (whole runs: 6.1-8.1
    s of passes against 4.8-5.5 with them kept)."""
    fn = kernel(tree is not None) if COMPILED else _backfill_pass
    prev_end, prev_order = (_NO_ENDS, _NO_ORDER) if work is None else work.get("order", (_NO_ENDS, _NO_ORDER))
    n = len(free_now)
    words = (n + 63) // 64
    if job_leaves is None:  # (with no tree the pass never reads it)
        job_leaves = _NO_LEAVES if tree is None else np.zeros(len(job_g), np.int64)
    if tree is None:
        tree = _NO_TREE
    if not exact:
        free_now = np.ascontiguousarray(free_now, dtype=np.int64)
        ev_end, ev_node, ev_gpus = (np.ascontiguousarray(ev_end, dtype=np.float64),
                                    np.ascontiguousarray(ev_node, dtype=np.int64),
                                    np.ascontiguousarray(ev_gpus, dtype=np.int64))
        job_g, job_pods = np.ascontiguousarray(job_g, dtype=np.int64), np.ascontiguousarray(job_pods, dtype=np.int64)
        job_runtime = np.ascontiguousarray(job_runtime, dtype=np.float64)
        tree, job_leaves = np.ascontiguousarray(tree, dtype=np.int64), np.ascontiguousarray(job_leaves, dtype=np.int64)
    levels, ipool = _pools(work)
    out = fn(float(now), float(horizon), int(capacity), words, free_now, ev_end, ev_node, ev_gpus, job_g,
             job_pods, job_runtime, tree, job_leaves, levels, ipool, prev_end, prev_order)
    if work is not None:
        work["order"] = (out[7], out[8])
        work["pools"] = (out[9], out[10])
    return out[:7]


def _pools(work: dict | None) -> tuple[np.ndarray, np.ndarray]:
    """The arrays the pass keeps from one pass to the next (the last pass's, kept in ``work``;
    the pass makes larger ones, a half larger than it needs, when they are too small): the rows'
    levels on a tree, and a pool of integers it carves the plans made and the GPUs each start
    takes from (floats where times: the same bits, viewed as float64). Every entry the pass
    reads it writes first in that pass."""
    if work is None:
        return _NO_WORDS, _NO_INTS
    return work.get("pools", (_NO_WORDS, _NO_INTS))


_NO_TREE = np.zeros(1, np.int64)
_NO_LEAVES = np.zeros(0, np.int64)
_NO_ENDS = np.empty(0, np.float64)
_NO_ORDER = np.empty(0, np.int64)
_NO_WORDS = np.empty((0, 1, 1), np.uint64)
_NO_INTS = np.empty(0, np.int64)


def tree_shape(topology, nodes: int) -> np.ndarray:
    """A topology ``((level, size), ...)``, outermost first, on ``nodes`` nodes, as the pass reads
    it: the leaf switch's nodes (the innermost level's size), then its spans in leaf switches
    (:func:`courselib.model.topology.slurm_tree_spans`)."""
    return np.array([topology[-1][1]] + slurm_tree_spans(topology, nodes), np.int64)


# ---- the pass (plain Python that numba compiles; no Python objects inside) ----------------------

def _popcount(x):
    """Set bits of a uint64 (SWAR; numba lowers it to a few instructions)."""
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return int((x * np.uint64(0x0101010101010101)) >> np.uint64(56))


def _set_free(levels, slot, node, old, new):
    """Node ``node`` goes from ``old`` to ``new`` free GPUs in row ``slot``'s levels."""
    w, bit = node // 64, np.uint64(1) << np.uint64(node % 64)
    if new < old:
        for f in range(new + 1, old + 1):
            levels[slot, f, w] &= ~bit
    else:
        for f in range(old + 1, new + 1):
            levels[slot, f, w] |= bit


def _free_of(levels, slot, node, capacity):
    """Free GPUs of ``node`` in row ``slot``: the highest level it reaches."""
    w, bit = node // 64, np.uint64(1) << np.uint64(node % 64)
    f = 0
    while f < capacity and levels[slot, f + 1, w] & bit:
        f += 1
    return f


def _count(levels, slot, g, capacity, blocked, words, need):
    """Pods of ``g`` GPUs that fit in row ``slot`` off the ``blocked`` nodes (stops at ``need``)."""
    total = 0
    f = g
    while f <= capacity:
        for w in range(words):
            total += _popcount(levels[slot, f, w] & ~blocked[w])
        if total >= need:
            return total
        f += g
    return total


def _find(times, n_rows, t):
    """Position of the first row at time >= ``t``."""
    lo, hi = 0, n_rows
    while lo < hi:
        mid = (lo + hi) // 2
        if times[mid] < t:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _blocked_by_list(res_start, res_end, res_mask, n_res, t, end, blocked, words):
    """``blocked``: the nodes of every reservation that overlaps ``[t, end]``, closed at ``end``
    (``Slurm._blocked`` itself), from the pass's list of reservations."""
    for w in range(words):
        blocked[w] = np.uint64(0)
    for k in range(n_res):
        if res_start[k] <= end and t < res_end[k]:
            for w in range(words):
                blocked[w] |= res_mask[k, w]


def _add_row(times, slots, n_rows, levels, held, held_pods, t, after, built):
    """The row at time ``t`` (> now), made as a copy of the row before it if it is new (of slot
    ``after`` if that is row 0, now: just after now, the jobs due to end by now have ended);
    returns (its position, the number of rows, the number of rows whose levels are made). Its
    levels are copied only among the rows made (:func:`_make_row`): past them, they are made when
    a search reaches them, as a copy of the row before them then (nothing ends in between)."""
    pos = _find(times, n_rows, t)
    if pos < n_rows and times[pos] == t:
        return pos, n_rows, built
    slot = n_rows  # (slots are handed out in order; positions shift, slots never move)
    prev = slots[pos - 1] if pos > 1 else after
    if pos < built:
        levels[slot, :, :] = levels[prev, :, :]
        held_pods[slot, :] = held_pods[prev, :]
        built += 1
    held[slot, :] = held[prev, :]
    for k in range(n_rows, pos, -1):
        times[k] = times[k - 1]
        slots[k] = slots[k - 1]
    times[pos] = t
    slots[pos] = slot
    return pos, n_rows + 1, built


def _make_row(levels, times, slots, built, after, capacity, ev_end, ev_node, ev_gpus, order, ev_k,
              st_end, st_node, st_gpus, n_st):
    """Make the free-GPU levels of the row at position ``built``, the first not made yet: a copy of
    the row before it (of ``after`` if that is row 0), with the GPUs freed by the running jobs
    whose expected end falls after that row's time and by this one's (``order[ev_k:]``, sorted by
    end), and by the jobs started in this pass (``st_*``: each plan's node, GPUs and end) likewise.
    Returns the index of the next running job's end. A row is its time's free GPUs whenever it is
    made: a start takes its GPUs from the rows made before its end, and the rows made later
    inherit that until its end gives them back."""
    s = slots[built]
    src = slots[built - 1] if built > 1 else after
    t0, t = times[built - 1], times[built]
    levels[s, :, :] = levels[src, :, :]
    n_ev = order.shape[0]
    while ev_k < n_ev and ev_end[order[ev_k]] <= t:
        x = order[ev_k]
        if ev_gpus[x] > 0:
            i = ev_node[x]
            old = _free_of(levels, s, i, capacity)
            _set_free(levels, s, i, old, old + ev_gpus[x])
        ev_k += 1
    for q in range(n_st):
        if t0 < st_end[q] <= t:
            i = st_node[q]
            old = _free_of(levels, s, i, capacity)
            _set_free(levels, s, i, old, old + st_gpus[q])
    return ev_k


#: blocked nodes are made from the list of reservations while there are fewer than this many
LIST_UPTO = 16
#: and at a job's first row with a window while there are fewer than this many: a job that starts
#: there (most) pays a look at each reservation instead of an OR over each row of its window, and
#: one that fails goes on with the window's rows (replayed passes of the 6,250-node tree: 15 %
#: less a pass; friendly 1,000 nodes 5 %; 256 instead of 64 gained 2.5 % there and cost 1-2 %
#: on the busy sweep's nodes=300)
LIST_FIRST = 64
#: earlier jobs kept for the floors of later ones (:func:`_keep_floor`): 16 (replayed passes of the
#: busy sweep's sizes=small and nodes=300 and friendly 1,000 nodes: 4 or 8 cost 2-6 % more than
#: 16 on one of them; unbounded, 4 % more on nodes=300, whose passes keep ~22 a job)
FLOORS = 16
#: jobs that failed at a row kept per row: 2 (replayed busy passes: 2 or 3 took 480 us a pass, 1 took
#: 1,410, 4 took 540, 8 took 580 and 16 took 605: the check costs more than it spares past 3)
CORNERS = 2


def _beaten(corner_g, corner_p, corner_r, corner_j, n_corners, slot, g, pods, run):
    """A job of ``pods`` pods of ``g`` GPUs for ``run`` s fails at row ``slot``: one with no more
    GPUs a pod, no more pods and no longer a run failed there earlier in the pass. Since then the
    free GPUs there only fell (jobs started) and the reservations only grew, and this job fits no
    more pods on a node (``floor(free / g)``), needs no fewer and blocks no fewer nodes (a window
    no shorter): it fails too. Returns that job's index, or -1."""
    for c in range(n_corners[slot]):
        if corner_g[slot, c] <= g and corner_p[slot, c] <= pods and corner_r[slot, c] <= run:
            return corner_j[slot, c]
    return -1


def _beat(corner_g, corner_p, corner_r, corner_j, n_corners, slot, g, pods, run, job):
    """Keep a failure at row ``slot`` (see :func:`_beaten`): it replaces a kept one it is no larger
    than, or takes a free place, or the place of the last one kept (which is then forgotten: a
    job it would have beaten is only checked, never decided otherwise)."""
    n = n_corners[slot]
    for c in range(n):
        if g <= corner_g[slot, c] and pods <= corner_p[slot, c] and run <= corner_r[slot, c]:
            corner_g[slot, c], corner_p[slot, c], corner_r[slot, c], corner_j[slot, c] = g, pods, run, job
            return
    c = n if n < CORNERS else CORNERS - 1
    corner_g[slot, c], corner_p[slot, c], corner_r[slot, c], corner_j[slot, c] = g, pods, run, job
    if n < CORNERS:
        n_corners[slot] = n + 1


def _past(times, n_rows, top, horizon, stop):
    """The next row to test for a job that failed at a row where an earlier job no larger failed
    too (:func:`_beaten`): the first row at or after that one's start ``stop`` (inf: it had none).
    That job failed at every row there was then before ``stop``, and the job fails there too (as
    in :func:`_beaten`). It also fails at every row made since before ``stop``: a new row copies
    the free GPUs of an older row ``p`` before it (nothing frees up in between; a job started
    since frees its own GPUs only), and every reservation that blocked the earlier job at ``p``
    ends at an older row, after the new one, so it blocks the job at the new row too."""
    if stop > horizon:
        return top
    return _find(times, n_rows, stop)


def _floor(fl_g, fl_p, fl_r, fl_t, n_fl, g, pods, run):
    """The latest start (``fl_t``; inf: none in the window) of an earlier job in the pass with no
    more GPUs a pod, no more pods and no longer a run than this one; -inf if none is kept. That
    job failed at every row before its start: at those its search tested or stepped over, and at
    those before its search began, where its pods did not fit even with nothing reserved. So
    this job fails at each of them too, as in :func:`_beaten`, and at the rows made since before
    that start, as in :func:`_past`: its search begins there."""
    floor = -np.inf
    for k in range(n_fl):
        if fl_g[k] <= g and fl_p[k] <= pods and fl_r[k] <= run and fl_t[k] > floor:
            floor = fl_t[k]
    return floor


def _keep_floor(fl_g, fl_p, fl_r, fl_t, n_fl, g, pods, run, t):
    """Keep a job's shape and start ``t`` (inf: none) for the floors of later jobs (:func:`_floor`);
    returns how many are kept. Not kept if a kept one is no larger and starts no earlier: every
    later job it would floor, that one floors no earlier. Kept ones no smaller that start no
    later are dropped, for the same reason. With ``FLOORS`` kept, it replaces the earliest start
    if its own is later. A job forgotten costs only a floor (a later search begins earlier and
    steps over more rows), never a decision."""
    for k in range(n_fl):
        if fl_g[k] <= g and fl_p[k] <= pods and fl_r[k] <= run and fl_t[k] >= t:
            return n_fl
    m = 0
    for k in range(n_fl):
        if not (g <= fl_g[k] and pods <= fl_p[k] and run <= fl_r[k] and t >= fl_t[k]):
            fl_g[m], fl_p[m], fl_r[m], fl_t[m] = fl_g[k], fl_p[k], fl_r[k], fl_t[k]
            m += 1
    if m < FLOORS:
        fl_g[m], fl_p[m], fl_r[m], fl_t[m] = g, pods, run, t
        return m + 1
    low = 0
    for k in range(1, m):
        if fl_t[k] < fl_t[low]:
            low = k
    if fl_t[low] < t:
        fl_g[low], fl_p[low], fl_r[low], fl_t[low] = g, pods, run, t
    return m


def _forget(held_pods, slot):
    """Row ``slot`` changed (a job started before its end, or a reservation holds nodes there):
    its counts of the pods that fit off the nodes held then (``held_pods``, per GPUs a pod) are
    made again when next asked: the row's version (column 0) moves on, and a count holds for the
    version it was made in (the version in its high 32 bits). One write a row: a reservation
    forgets the counts of every row it spans (~1,500 rows on the 6,250-node tree), and writing
    them all again cost 5 % of a pass there (3.5 % on friendly 1,000 nodes). A count not
    forgotten is never too low (within a pass the free GPUs only fall and the reservations only
    grow): it costs the window's count at that row, which blocks those nodes too, never a
    decision. A count too low would fail a row that fits (the tests plant one in a new row's
    copy)."""
    held_pods[slot, 0] += 1


def _compare(sums, anc, tree, i, j, rem):
    """``_topo_compare_switches(i, j)`` as :func:`courselib.model.topology.slurm_tree_reference`
    reads it: (is leaf ``i`` the better fit, does ``i`` hold the rest ``rem`` at the level where the
    comparison stopped). ``sums[s, a]``: the free pods under ancestor ``a`` of ``tree[1 + s]``
    leaves (s = 0: the leaf), less those of the leaves already chosen; ``anc[s, a]``: leaf ``a``'s
    ancestor there (``a // tree[1 + s]``, kept: a division costs more than the rest of a step)."""
    depth = tree.shape[0] - 1
    s = 0
    while True:
        ci, cj = sums[s, anc[s, i]], sums[s, anc[s, j]]
        i_fit = ci >= rem
        j_fit = cj >= rem
        if i_fit and j_fit:
            if ci != cj:
                return ci < cj, True  # both fit: the tighter one
            break
        if i_fit != j_fit:
            return i_fit, i_fit  # only one fits: that one
        if s + 1 < depth and anc[s + 1, i] != anc[s + 1, j]:
            s += 1  # neither: compare their parents
            continue
        break
    return sums[s, anc[s, i]] > sums[s, anc[s, j]], i_fit


def _tree_plan(levels, slot, g, capacity, blocked, tree, need, max_leaves, node_leaf, anc, sums, dist, order,
               out_nodes, out_pods, n_out):
    """topology/tree's plan (:func:`courselib.model.topology.slurm_tree_reference`, the plugin's
    loop) for ``need`` pods of ``g`` GPUs at row ``slot`` off the ``blocked`` nodes, written to
    ``out_nodes``/``out_pods`` from ``n_out`` on; returns where it ends, or -1 if the plugin
    refuses the job (too few pods; more than ``max_leaves`` leaf switches while it waits for
    ``--switches``, 0: any). ``node_leaf``: each node's leaf switch; ``anc``: each leaf's
    ancestors (:func:`_compare`); ``sums``, ``dist``, ``order``: room for the free pods per leaf and
    per ancestor, each leaf's hops to the chosen ones, the chosen leaves."""
    leaf = tree[0]
    depth = tree.shape[0] - 1
    n_leaves = tree[depth]
    for a in range(n_leaves):
        sums[0, a] = 0
    # the pods that fit per leaf: a node holds one more for each level g, 2g, ... it reaches
    total = 0
    words = blocked.shape[0]
    f = g
    while f <= capacity:
        for w in range(words):
            bits = levels[slot, f, w] & ~blocked[w]
            while bits:
                low = bits & (~bits + np.uint64(1))
                bits ^= low
                sums[0, node_leaf[w * 64 + _popcount(low - np.uint64(1))]] += 1
                total += 1
        f += g
    if total < need:
        return -1
    # one leaf holds the job: the tightest (the lowest index among equals), as the loop chooses
    best = -1
    for a in range(n_leaves):
        if sums[0, a] >= need and (best < 0 or sums[0, a] < sums[0, best]):
            best = a
    n_chosen = 0
    if best >= 0:
        order[0] = best
        n_chosen = 1
    else:
        for s in range(1, depth):  # the free pods under each ancestor
            for a in range(n_leaves // tree[1 + s]):
                sums[s, a] = 0
            for a in range(n_leaves):
                sums[s, anc[s, a]] += sums[0, a]
        for a in range(n_leaves):
            dist[a] = 0
        rem = need
        while rem > 0:
            best = -1
            db = 0
            for a in range(n_leaves):
                if sums[0, a] == 0:  # (a chosen leaf's free pods are 0: "used all")
                    continue
                if best < 0:
                    best, db = a, dist[a]
                    continue
                da = dist[a]
                if da > db:  # farther than the best so far: it cannot take its place
                    continue
                tighter, fits = _compare(sums, anc, tree, a, best, rem)
                # closer and "fits" (as the comparison left it), or as close and a better fit
                if (da < db and fits) or (da == db and tighter):
                    best, db = a, da
            taken = sums[0, best]
            for s in range(1, depth):
                sums[s, anc[s, best]] -= taken
            sums[0, best] = 0
            order[n_chosen] = best
            n_chosen += 1
            for a in range(n_leaves):  # hops to ``best``: 2 per level up to the common ancestor
                hops = 0
                for s in range(1, depth):
                    hops += 2
                    if anc[s, a] == anc[s, best]:
                        break
                dist[a] += hops
            rem -= taken if taken < rem else rem
        if max_leaves > 0 and n_chosen > max_leaves:  # waiting for --switches: refused
            return -1
    left = need
    for c in range(n_chosen):  # each chosen leaf's nodes in index order
        a = order[c]
        for i in range(a * leaf, (a + 1) * leaf):
            if blocked[i // 64] & (np.uint64(1) << np.uint64(i % 64)):
                continue
            take = _free_of(levels, slot, i, capacity) // g
            if take > left:
                take = left
            if take:
                out_nodes[n_out] = i
                out_pods[n_out] = take
                n_out += 1
                left -= take
            if left == 0:
                return n_out
    return n_out


_HELPERS = ("_fresh_rows", "_sorted_ends", "_blocked_by_list", "_past", "_beaten", "_beat", "_popcount", "_set_free",
            "_free_of", "_count", "_find",
            "_add_row", "_make_row", "_floor", "_keep_floor", "_forget", "_compare", "_tree_plan")


def _fresh_rows(levels, held, after):
    """As a pass begins: row 0's levels and held nodes and those of ``after`` (slot ``after``, the
    last row a pass can use) empty. (On a tree the levels are the last pass's: :func:`_pools`.)"""
    levels[0, :, :] = np.uint64(0)
    held[0, :] = np.uint64(0)
    held[after, :] = np.uint64(0)


def _sorted_ends(ev_end, prev_end, prev_order):
    """The running jobs' entries in the order of their expected ends: the last pass's order
    (``prev_order`` of ``prev_end``) with the entries that changed since taken out, sorted and
    merged back in (a start or an end changes a few entries of thousands); sorted anew if the
    arrays grew or many changed. Entries of the same end may come in any order (their GPUs are
    added to the same rows)."""
    n = ev_end.shape[0]
    if prev_end.shape[0] != n:
        return np.argsort(ev_end, kind="mergesort")
    moved = np.zeros(n, np.bool_)
    ch = np.empty(n, np.int64)
    nc = 0
    for k in range(n):
        if ev_end[k] != prev_end[k]:
            moved[k] = True
            ch[nc] = k
            nc += 1
    if nc == 0:
        return prev_order
    if nc > n // 8:
        return np.argsort(ev_end, kind="mergesort")
    ch = ch[:nc]
    ch = ch[np.argsort(ev_end[ch], kind="mergesort")]
    out = np.empty(n, np.int64)
    o = 0
    b = 0
    for x in prev_order:
        if moved[x]:
            continue
        e = ev_end[x]
        while b < nc and ev_end[ch[b]] < e:
            out[o] = ch[b]
            o += 1
            b += 1
        out[o] = x
        o += 1
    while b < nc:
        out[o] = ch[b]
        o += 1
        b += 1
    return out


def _backfill_pass(now, horizon, capacity, words, free_now, ev_end, ev_node, ev_gpus,
                   job_g, job_pods, job_runtime, tree, job_leaves, levels_buf, ipool, prev_end, prev_order):
    n_nodes = free_now.shape[0]
    # topology/tree (tree[0] > 0): the plugin's room, and whether a job waits for --switches
    leaf = tree[0]
    depth = tree.shape[0] - 1
    n_leaves = tree[depth] if leaf > 0 else 1
    node_leaf = np.empty(n_nodes if leaf > 0 else 1, np.int64)
    tree_anc = np.empty((max(depth, 1), n_leaves), np.int64)
    if leaf > 0:
        for i in range(n_nodes):
            node_leaf[i] = i // leaf
        for s in range(depth):
            for a in range(n_leaves):
                tree_anc[s, a] = a // tree[1 + s]
    tree_sums = np.empty((max(depth, 1), n_leaves), np.int64)
    tree_dist = np.empty(n_leaves, np.int64)
    tree_order = np.empty(n_leaves, np.int64)
    n_jobs = job_g.shape[0]
    n_live = 0
    for k in range(ev_end.shape[0]):
        if ev_end[k] > now:
            n_live += 1
    cap_rows = 2 + n_live + 2 * n_jobs
    # (a new row's levels and held nodes are copied whole from the row before it; every row
    # starts with no failures kept, n_corners 0)
    times = np.empty(cap_rows, np.float64)
    slots = np.empty(cap_rows, np.int64)
    # (and one slot more, ``after``: the cluster just after now, which a row made before the first
    # later one copies; row 0 still holds the GPUs of a job due to end now, as Slurm._free_at does)
    after = cap_rows
    rows = cap_rows + 1
    room = 1
    for j in range(n_jobs):
        room += min(job_pods[j], n_nodes)
    # the rows' levels on a tree and the plans are the last pass's (_pools): made anew for each
    # pass they were memory the C allocator gave back at its end and took again at the next,
    # whose pages then faulted in anew (see backfill_pass). The other row arrays are made anew,
    # and so are the levels with no topology (at most KERNEL_NODES nodes): with every row array
    # carved from a pool too, a pass took 6-8 % longer (busy base and base+topology, friendly
    # 1,000 nodes; whole runs). Every entry is written in this pass before it is read: a row's
    # levels when made, its held nodes when added, its failures kept below, and these
    if TREE and levels_buf.shape[0] >= rows and levels_buf.shape[1] == capacity + 2 \
            and levels_buf.shape[2] == words:
        levels = levels_buf
    else:
        levels = np.empty((rows + rows // 2 if TREE else rows, capacity + 2, words), np.uint64)
    held = np.empty((rows, words), np.uint64)
    # per row, up to CORNERS jobs that failed there in this pass, none no larger than another
    corner_g = np.empty((cap_rows, CORNERS), np.int64)
    corner_p = np.empty((cap_rows, CORNERS), np.int64)
    corner_r = np.empty((cap_rows, CORNERS), np.float64)
    corner_j = np.empty((cap_rows, CORNERS), np.int64)
    if ipool.shape[0] < 5 * room:
        ipool = np.empty(5 * room + 5 * room // 2, np.int64)
    # the plans; the jobs started in this pass, for the rows made later: each plan's node, GPUs, end
    out_nodes, out_pods = ipool[:room], ipool[room:2 * room]
    st_node, st_gpus = ipool[2 * room:3 * room], ipool[3 * room:4 * room]
    st_end = ipool[4 * room:5 * room].view(np.float64)
    _fresh_rows(levels, held, after)
    found_at = np.empty(n_jobs, np.float64)  # a job's start (inf: none in the window)
    res_start = np.empty(n_jobs, np.float64)  # the pass's reservations, as made
    res_end = np.empty(n_jobs, np.float64)
    res_mask = np.empty((max(n_jobs, 1), words), np.uint64)
    n_res = 0
    n_corners = np.zeros(cap_rows, np.int64)
    # per row and GPUs a pod, the pods that fit off the nodes held then, with the row's version when
    # counted ((version << 32) | count; -1: none); column 0: the row's version (_forget)
    held_pods = np.full((cap_rows + 1, capacity + 1), -1, np.int64)
    held_pods[:, 0] = 0
    stats = np.zeros(6, np.int64)
    stats[0] = 1
    # row 0: now, from the free GPUs now
    times[0] = now
    slots[0] = 0
    for i in range(n_nodes):
        _set_free(levels, 0, i, 0, free_now[i])
    n_rows = 1
    levels[after, :, :] = levels[0, :, :]
    for k in range(ev_end.shape[0]):  # (the jobs due to end by now free their GPUs just after it)
        if ev_end[k] <= now and ev_gpus[k] > 0:
            i = ev_node[k]
            old = _free_of(levels, after, i, capacity)
            _set_free(levels, after, i, old, old + ev_gpus[k])
    # one row per distinct expected end after now; the ends at or before now free their GPUs
    # from the first later row on (Slurm._free_at: expected end <= t). Only their times here: a
    # row's levels are made when a search first reaches it (_make_row; ``built``: the rows made,
    # in time order; ``ev_k``: the next end to free there). On the 6,250-node tree, making every
    # row's levels took half of each pass, and a pass's latest start was at row ~870 of ~5,600
    order = _sorted_ends(ev_end, prev_end, prev_order)
    n_ev = order.shape[0]
    ev_k = 0
    while ev_k < n_ev and ev_end[order[ev_k]] <= now:
        ev_k += 1
    for k in range(ev_k, n_ev):
        e = ev_end[order[k]]
        if e != times[n_rows - 1]:  # every running job's expected end after now is a candidate time
            held[n_rows, :] = np.uint64(0)
            times[n_rows] = e
            slots[n_rows] = n_rows
            n_rows += 1
    built = 1
    kind = np.zeros(n_jobs, np.int64)
    start = np.full(n_jobs, np.nan)  # (nan: no start)
    offsets = np.zeros(n_jobs + 1, np.int64)
    n_st = 0
    suffix = np.empty((cap_rows + 1, words), np.uint64)
    back = np.zeros(words, np.uint64)
    blocked = np.zeros(words, np.uint64)
    nz_words = np.empty(words, np.int64)  # (a reservation's words that hold its nodes)
    n_out = 0
    # up to FLOORS earlier jobs' shapes and starts (inf: none in the window), for _floor
    fl_g = np.empty(FLOORS, np.int64)
    fl_p = np.empty(FLOORS, np.int64)
    fl_r = np.empty(FLOORS, np.float64)
    fl_t = np.empty(FLOORS, np.float64)
    n_fl = 0
    for j in range(n_jobs):
        g, need, run = job_g[j], job_pods[j], job_runtime[j]
        offsets[j] = n_out
        # waiting for --switches: the tree may refuse it where its pods fit. Its failures then say
        # nothing of a plain job's, so it keeps none (no _beat, no _keep_floor); it reads the
        # others' (a job no larger failed there on its count: this one's count fails too)
        switches = 0
        if TREE and leaf > 0:  # (TREE, a constant: these branches are gone from the plain copy)
            switches = job_leaves[j]
        planned = -1
        # the rows up to the horizon; the first where the pods fit with nothing reserved
        top = _find(times, n_rows, horizon)
        while top < n_rows and times[top] <= horizon:
            top += 1
        for w in range(words):
            blocked[w] = np.uint64(0)
        # (from the latest start of an earlier job no larger: every row before it fails, _floor)
        floor = _floor(fl_g, fl_p, fl_r, fl_t, n_fl, g, need, run)
        lo, hi = 0, top
        if floor > now:
            lo = _past(times, n_rows, top, horizon, floor)
            stats[3] += 1
        # (a binary search among the rows made if the last of them fits; else a galloping one past
        # them, rows lo, lo + 1, lo + 3, ... made as it reaches them, then a binary one below)
        m = built if built < top else top
        if lo < m and _count(levels, slots[m - 1], g, capacity, blocked, words, need) >= need:
            hi = m - 1
        else:
            if lo < m:
                lo = m
            step = 1
            while lo < hi:
                p = lo + step - 1
                if p >= hi:
                    p = hi - 1
                while built <= p:
                    ev_k = _make_row(levels, times, slots, built, after, capacity, ev_end, ev_node,
                                     ev_gpus, order, ev_k, st_end, st_node, st_gpus, n_st)
                    built += 1
                if _count(levels, slots[p], g, capacity, blocked, words, need) >= need:
                    hi = p
                    break
                lo = p + 1
                step *= 2
        while lo < hi:
            mid = (lo + hi) // 2
            if _count(levels, slots[mid], g, capacity, blocked, words, need) >= need:
                hi = mid
            else:
                lo = mid + 1
        found = -1
        first = True  # (its first row with a window: see LIST_FIRST)
        if lo < top:
            # slide the window of rows [i, last] with times[last] <= times[i] + run: the front
            # [i, split) as suffix ORs, the back [split, last] as one OR (made only for the rows
            # checked). A row where an earlier job no larger failed is stepped over (_beaten)
            i = lo
            split = i
            last = i - 1
            for w in range(words):
                back[w] = np.uint64(0)
            while i < top:
                while built <= i:  # (its levels made when first reached; a helper that makes rows up to
                    # i and returns two counts cost busy base+topology ~8 % end to end)
                    ev_k = _make_row(levels, times, slots, built, after, capacity, ev_end, ev_node,
                                     ev_gpus, order, ev_k, st_end, st_node, st_gpus, n_st)
                    built += 1
                s = slots[i]
                a = _beaten(corner_g, corner_p, corner_r, corner_j, n_corners, s, g, need, run)
                if a >= 0:
                    # and at every row before job a's start (_past): the next row to test is that one
                    stats[3] += 1
                    i = _past(times, n_rows, top, horizon, found_at[a])
                    continue
                # (counted once per row and GPUs a pod until the row changes, _forget: jobs of the
                # same GPUs a pod meet the same count there; a helper call here cost 15 % a pass)
                v = held_pods[s, g]
                if (v >> 32) == held_pods[s, 0]:
                    v &= 0xFFFFFFFF
                else:
                    v = _count(levels, s, g, capacity, held[s], words, 1 << 62)
                    held_pods[s, g] = (held_pods[s, 0] << 32) | v
                if v < need:
                    # (the reservations running at this row alone leave too few pods: a failure,
                    # without the window, whose OR could only block more)
                    stats[2] += 1
                    if not TREE or switches == 0:
                        _beat(corner_g, corner_p, corner_r, corner_j, n_corners, s, g, need, run, j)
                    i += 1
                    continue
                end = times[i] + run
                by_list = False
                if i >= split:  # the front is empty: the rows [i, last] become the front
                    # (with a few reservations, fewer than the window's rows, blocked is made from
                    # them: a window of many rows costs a pass over each; with more, the front
                    # made here serves the rows after this one too)
                    far = i
                    if n_res < LIST_UPTO or (first and n_res < LIST_FIRST):
                        first = False
                        cap = i + n_res + 1
                        while far < n_rows and far < cap and times[far] <= end:
                            far += 1
                        by_list = far == cap
                    if not by_list:
                        while far < n_rows and times[far] <= end:
                            far += 1
                        last = far - 1
                        stats[4] += last + 1 - i
                        for w in range(words):
                            suffix[last + 1, w] = np.uint64(0)
                        for p in range(last, i - 1, -1):
                            r = slots[p]
                            for w in range(words):
                                suffix[p, w] = suffix[p + 1, w] | held[r, w]
                        split = last + 1
                        for w in range(words):
                            back[w] = np.uint64(0)
                else:
                    while last + 1 < n_rows and times[last + 1] <= end:
                        last += 1
                        r = slots[last]
                        for w in range(words):
                            back[w] |= held[r, w]
                if by_list:
                    _blocked_by_list(res_start, res_end, res_mask, n_res, times[i], end, blocked, words)
                else:
                    for w in range(words):
                        blocked[w] = suffix[i, w] | back[w]
                if _count(levels, s, g, capacity, blocked, words, need) >= need:
                    if not TREE or switches == 0:
                        found = i
                        break
                    planned = _tree_plan(levels, s, g, capacity, blocked, tree, need, switches, node_leaf,
                                         tree_anc, tree_sums, tree_dist, tree_order, out_nodes, out_pods, n_out)
                    if planned >= 0:
                        found = i
                        break
                    stats[2] += 1  # (its pods fit, but over more leaf switches than it waits for)
                    i += 1
                    continue
                stats[2] += 1
                if not TREE or switches == 0:
                    _beat(corner_g, corner_p, corner_r, corner_j, n_corners, s, g, need, run, j)
                i += 1
        found_at[j] = times[found] if found >= 0 else np.inf
        if not TREE or switches == 0:
            n_fl = _keep_floor(fl_g, fl_p, fl_r, fl_t, n_fl, g, need, run, found_at[j])
        if found < 0:
            kind[j] = 0
            offsets[j + 1] = n_out
            continue
        # best fit at row `found` off the blocked nodes: level by level, nodes in index order; on
        # a tree, the topology plugin's plan (which holds the job wherever its pods fit, unless
        # it waits for --switches: then made above)
        s = slots[found]
        left = need
        if TREE and leaf > 0:
            if planned < 0:
                planned = _tree_plan(levels, s, g, capacity, blocked, tree, need, 0, node_leaf, tree_anc, tree_sums,
                                     tree_dist, tree_order, out_nodes, out_pods, n_out)
            n_out = planned
            left = 0
        f = g
        while f <= capacity and left > 0:
            per = f // g
            for w in range(words):
                bits = levels[s, f, w] & ~blocked[w]
                if f < capacity:
                    bits &= ~levels[s, f + 1, w]
                while bits and left > 0:
                    low = bits & (~bits + np.uint64(1))
                    b = _popcount(low - np.uint64(1))
                    bits ^= low
                    take = per if per < left else left
                    out_nodes[n_out] = w * 64 + b
                    out_pods[n_out] = take
                    n_out += 1
                    left -= take
                if left == 0:
                    break
            f += 1
        offsets[j + 1] = n_out
        t = times[found]
        start[j] = t
        if found == 0:
            # started now: its GPUs are taken on every row before its expected end
            kind[j] = 1
            stats[5] += 1
            e = now + run
            pos, n_rows, built = _add_row(times, slots, n_rows, levels, held, held_pods, e, after, built)
            upto = min(max(pos, 1), built)  # (row 0, now, even for a job of no runtime; the rows made)
            for p in range(upto):
                _forget(held_pods, slots[p])
            for q in range(offsets[j], n_out):
                i = out_nodes[q]
                used = out_pods[q] * g
                for p in range(upto):
                    r = slots[p]
                    old = _free_of(levels, r, i, capacity)
                    _set_free(levels, r, i, old, old - used)
                if e > now:  # and just after now; the rows made later give them back at e
                    old = _free_of(levels, after, i, capacity)
                    _set_free(levels, after, i, old, old - used)
                    st_end[n_st], st_node[n_st], st_gpus[n_st] = e, i, used
                    n_st += 1
        else:
            # reserved: its nodes held on the rows it spans, [t, t + run)
            kind[j] = 2
            e = t + run
            res_start[n_res], res_end[n_res] = t, e
            res_mask[n_res, :] = np.uint64(0)
            for q in range(offsets[j], n_out):
                i = out_nodes[q]
                res_mask[n_res, i // 64] |= np.uint64(1) << np.uint64(i % 64)
            pos, n_rows, built = _add_row(times, slots, n_rows, levels, held, held_pods, e, after, built)
            n_nz = 0  # (only the words that hold its nodes: on 6,250 nodes, a few of 98)
            for w in range(words):
                if res_mask[n_res, w]:
                    nz_words[n_nz] = w
                    n_nz += 1
            p = found
            while p < pos:
                r = slots[p]
                for x in range(n_nz):
                    w = nz_words[x]
                    held[r, w] |= res_mask[n_res, w]
                _forget(held_pods, r)
                p += 1
            n_res += 1
    stats[1] = n_rows
    return (kind, start, offsets, out_nodes[:n_out].copy(), out_pods[:n_out].copy(), times[:n_rows].copy(), stats,
            ev_end.copy(), order, levels if TREE else levels_buf, ipool)
