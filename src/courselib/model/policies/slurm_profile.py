"""Slurm's availability profile, what the fast twin (``slurm_fast.py``) plans plain jobs from.

For every node and free-GPU level, the time the node gets there (see :class:`Availability`); node
sets are bit masks, one Python int each (bit i = node i).
"""
from __future__ import annotations

import math
from bisect import bisect_left, bisect_right, insort

import numpy as np

from courselib.model.workload import Job


def _mask(indexes, n: int) -> int:
    """Node indexes as the bits of one Python int (bit i = node i)."""
    if not len(indexes):
        return 0
    if len(indexes) <= 48:  # (a few nodes: cheaper bit by bit than through an array)
        m = 0
        for i in indexes:
            m |= 1 << int(i)
        return m
    a = np.zeros(n, dtype=bool)
    a[np.asarray(indexes, dtype=np.int64)] = True
    return int.from_bytes(np.packbits(a, bitorder="little").tobytes(), "little")


def _indexes(m: int, n: int) -> list[int]:
    """The set bits of the mask ``m`` (< 2 ** n), in rising order: :func:`_mask` undone."""
    bits = np.unpackbits(np.frombuffer(m.to_bytes((n + 7) // 8, "little"), np.uint8), bitorder="little")
    return np.flatnonzero(bits).tolist()


def _bits(m: int):
    """The set bits of the mask ``m``, in rising order, one at a time (for the first few)."""
    while m:
        low = m & -m
        yield low.bit_length() - 1
        m ^= low


class Availability:
    """Slurm's availability profile for plain jobs, kept up to date as jobs start and finish.

    For every node ``i`` and every level ``f`` (1 … GPUs per node), ``when[f][i]`` is the earliest
    time the node has at least ``f`` free GPUs: ``-inf`` if it has them now, else the expected end
    (start + ``--time``) of the running job whose release brings it there. Each level also keeps
    those times sorted, so the question backfill asks over and over — how many pods of ``g`` GPUs
    fit at time ``t`` — is a few binary searches, and "did anything free up for ``g``-GPU pods
    between ``t0`` and ``t1``" two per level; no pass replans from every running job. A node's
    column is recomputed only when a job starts or ends on it (marked by :meth:`touch`, applied
    at the next use). Which nodes have exactly ``f`` free GPUs at ``t`` (for a plan's best fit)
    comes as bit masks, one Python int per level, and reservations as masks of whole nodes.
    :meth:`plan` decides what :meth:`Slurm.plan` decides on arrays (tests/test_gang_fastpath.py).
    """

    def __init__(self, cluster, expected_end: dict):
        self.cluster, self.expected_end = cluster, expected_end
        n, top = len(cluster.nodes), cluster.capacity
        self.n, self.top = n, top
        self.when = np.full((top + 2, n), -np.inf)
        self.when[top + 1] = np.inf  # no node ever has more than all its GPUs free
        self.sorted = [None] + [[-math.inf] * n for _ in range(top)]
        self.dirty: set[int] = set(range(n)) if cluster.free_gpus != cluster.total_gpus else set()
        self._whole: dict[int, float] = {}  # dirty node -> what touch() was told it holds
        self.now = None
        self._levels: dict[float, list[int]] = {}
        self._resv: list = [None]
        self._masks: dict[int, tuple] = {}  # id(reservation) -> (it, its nodes' mask)
        self._curves: list = [None, {}]  # reserved, (t, g) -> curve (see curve())
        #: t -> [the change it was last brought up to, then by level f the nodes with at least f
        #: free GPUs at t as a mask] (free_mask); a change of few nodes is applied to the masks
        #: kept, when next asked, instead of packing them again (_changes, _catch_up)
        self._free_masks: dict[float, list] = {}
        self._changes: list = []  # (changed nodes' mask, by level f: (their times there, sorted; masks), the span of t it changes: lo, hi)
        self._change = 0  # changes made: the last is _changes[-1]
        self._full = (1 << n) - 1
        #: (blocked-nodes mask, g) -> the blocked nodes' times at the levels of g, sorted (_out_of)
        self._blocked_times: dict[tuple, list[float]] = {}
        #: the last blocked() asked and its answer: a failed plan asks it again for its next fit
        self._last_blocked: tuple = (None, 0, 0.0, 0.0, 0)
        self._last_out: tuple = (None, 0, [])  # the last _out_of: (mask, g, its times)
        self.last_plan: tuple = (None, 0)  # the last plan made and its nodes' mask (keep_mask)
        self._when_lists: list = [None]  # [the change they are of, by level g + 1: when[g] as a list] (reach)

    def touch(self, nodes, whole: float | None = None) -> None:
        """Mark the nodes changed. ``whole``: the caller knows what each now holds, one job on all
        its GPUs until that time (a start on whole nodes), or nothing at all (-inf: such a job
        ended early): their columns need not be worked out from the jobs on them."""
        self.dirty.update(nodes)
        if whole is None:
            for i in nodes:
                self._whole.pop(i, None)
        else:
            self._whole.update(dict.fromkeys(nodes, whole))

    def forget_now(self) -> None:
        """Drop the levels read from the cluster's buckets (a job ended now, on time)."""
        self._levels = {}

    def refresh(self, now: float) -> None:
        """Recompute the columns of the nodes changed since the last use. When many changed (a
        job on many nodes started or ended), each level's times are sorted again at once instead
        of moved one node at a time."""
        if now != self.now:
            self.now, self._levels = now, {}
        if not self.dirty:
            return
        self._levels, self._blocked_times, self._last_out = {}, {}, (None, 0, [])
        self._curves = [None, {}]
        cluster, when, top, ends = self.cluster, self.when, self.top, self.expected_end
        free, jobs_on, alloc = cluster.free, cluster.jobs_on, cluster.alloc
        dirty, neg, whole = sorted(self.dirty), -math.inf, self._whole
        # a node with no job, or one job that holds every GPU not free, is free from level
        # f + 1 up at that job's end (one numpy step for all of them); others one by one
        frees, at, other = [], [], []
        told = len(whole) == len(dirty)  # (each node's column told by touch(): no job to look at)
        if told:
            at = [whole[i] for i in dirty]  # (every level of a node: the same time)
        whole.clear()
        dirty_told = () if told else dirty
        for k, i in enumerate(dirty_told):
            f, jobs = free[i], jobs_on[i]
            if not jobs:
                frees.append(top)
                at.append(neg)
            elif len(jobs) == 1:
                (name,) = jobs
                if f + alloc[name][i].gpus != top:
                    other.append(k)
                frees.append(f)
                at.append(ends[name])
            else:
                other.append(k)
                frees.append(f)
                at.append(neg)
        cols = np.broadcast_to(np.array(at), (top, len(dirty))) if told else \
            np.where(np.arange(1, top + 1)[:, None] > np.array(frees)[None, :], np.array(at)[None, :], neg)
        for k in other:
            i = dirty[k]
            f, col = free[i], [neg] * (top + 1)
            for e, gp in sorted((ends[name], alloc[name][i].gpus) for name in jobs_on[i]):
                col[f + 1:f + gp + 1] = [e] * gp
                f += gp
            cols[:, k] = col[1:]
        self.dirty.clear()
        self._note_change(dirty, cols)
        if len(dirty) * 8 >= self.n:
            when[1:top + 1, dirty] = cols
            self.sorted[1:] = np.sort(when[1:top + 1], axis=1).tolist()
            return
        for i, col in zip(dirty, cols.T.tolist()):
            for level in range(1, top + 1):
                old, e = when[level, i], col[level - 1]
                if old != e:
                    lst = self.sorted[level]
                    del lst[bisect_left(lst, old)]
                    insort(lst, e)
                    when[level, i] = e

    def _note_change(self, nodes: list[int], cols) -> None:
        """Keep what changed for the free masks already packed (:meth:`free_mask`): ``nodes``
        (sorted) now reach level f at ``cols[f - 1]``. A mask of f at t is then the old one
        without those nodes, with those of them that have f free by t (one OR per distinct time).
        Many nodes changed (a job on many): the masks are packed again when asked."""
        self._change += 1
        if len(nodes) > 64:
            self._free_masks, self._changes = {}, []
            return
        # a node is in the mask of f at t when it reaches f by t: a node's change from ``old`` to
        # ``new`` at f moves it in or out only at the t in [min, max) of the two; no mask at a time
        # outside the span of all of them changes (lo, hi): the usual case for the rows after a
        # started job's end or an early-ended job's old end, caught up without a look
        old = self.when[1:self.top + 1, nodes]
        moved = old != cols
        if moved.any():
            lo, hi = float(np.minimum(old, cols)[moved].min()), float(np.maximum(old, cols)[moved].max())
        else:
            lo, hi = math.inf, -math.inf
        bits = [1 << i for i in nodes]
        out = 0
        for b in bits:
            out |= b
        by_level = [None]
        for col in cols.tolist():
            times, masks, m = [], [], 0
            for e, b in sorted(zip(col, bits)):
                m |= b
                if times and times[-1] == e:
                    masks[-1] = m
                else:
                    times.append(e)
                    masks.append(m)
            by_level.append((times, masks))
        self._changes.append((out, by_level, lo, hi))
        if len(self._changes) > 32:  # (a time not asked for that long is packed again)
            del self._changes[:16]

    def _catch_up(self, ms: list) -> None:
        """Bring the masks ``ms`` of one time (see :meth:`free_mask`) up to the last change."""
        behind, t = self._change - ms[0], ms[-1]
        changes = self._changes
        if behind > len(changes):
            ms[1:-1] = [None] * self.top
        else:
            asked = None
            for out, by_level, lo, hi in changes[len(changes) - behind:]:
                if t < lo or t >= hi:  # (no node of it moved in or out of a mask at t)
                    continue
                if asked is None:
                    asked = [f for f in range(1, self.top + 1) if ms[f] is not None]
                keep = ~out
                for f in asked:
                    times, masks = by_level[f]
                    k = bisect_right(times, t)
                    ms[f] = (ms[f] & keep) | masks[k - 1] if k else ms[f] & keep
        ms[0] = self._change

    def reach(self, nodes, g: int) -> float:
        """The first time at which one of ``nodes`` has ``g`` GPUs free (-inf: one has now; inf:
        none ever): before it none of them holds a pod of ``g`` GPUs, whatever is reserved."""
        if not len(nodes) or g > self.top:
            return math.inf
        rows = self._when_lists
        if rows[0] != self._change:  # (the columns changed since: read them again)
            rows[:] = [self._change] + [None] * (self.top + 1)
        row = rows[g + 1]
        if row is None:
            row = rows[g + 1] = self.when[g].tolist()
        return min([row[i] for i in nodes])

    def fit(self, t: float, g: int) -> int:
        """Pods of ``g`` GPUs that fit at time ``t`` (> now) on all nodes, reservations aside."""
        if 2 * g > self.top:  # one level
            return bisect_right(self.sorted[g], t)
        return sum(bisect_right(self.sorted[f], t) for f in range(g, self.top + 1, g))

    def free_at(self, t: float):
        """Free GPUs per node at ``t`` (> now), as an int array: the levels each node has reached
        by then (what :meth:`Slurm._free_at` adds up from the running jobs that end by ``t``)."""
        return np.count_nonzero(self.when[1:self.top + 1] <= t, axis=0)

    def free_mask(self, t: float, f: int) -> int:
        """The nodes with at least ``f`` free GPUs at ``t`` (what :meth:`fit` counts at level
        ``f``), as a mask; packed once per time and level, and brought up to date when a start or
        an end changed few nodes since (:meth:`_note_change`)."""
        ms = self._free_masks.get(t)
        if ms is None:
            ms = self.record(t)
        elif ms[0] != self._change:
            self._catch_up(ms)
        m = ms[f]
        if m is None:
            m = ms[f] = int.from_bytes(np.packbits(self.when[f] <= t, bitorder="little").tobytes(), "little")
        return m

    def record(self, t: float) -> list:
        """The masks kept for the time ``t`` (> now), up to date (:meth:`free_mask`): [the change
        they were brought up to, by level f the nodes with at least f free GPUs at t (None: not
        packed yet), t]. A pass's :class:`Timeline` reads its rows' levels from it directly."""
        ms = self._free_masks.get(t)
        if ms is None:
            if len(self._free_masks) > 4096:  # (a pass's rows ask a few hundred times)
                self._free_masks.clear()
            ms = self._free_masks[t] = [self._change] + [None] * self.top + [t]
        elif ms[0] != self._change:
            self._catch_up(ms)
        return ms

    def fit_outside(self, t: float, g: int, blocked: int) -> int:
        """:meth:`fit` on the nodes not in ``blocked`` only: at each level of ``g`` (g, 2g, ...),
        the nodes free enough at ``t`` less the blocked ones, by a count of bits."""
        free_mask, keep = self.free_mask, ~blocked
        if 2 * g > self.top:  # one level
            return (free_mask(t, g) & keep).bit_count()
        return sum((free_mask(t, f) & keep).bit_count() for f in range(g, self.top + 1, g))

    def first_fit_outside(self, reserved: list, t: float, t1: float, g: int, pods: int,
                          times: list[float]) -> float:
        """The first of ``times`` (sorted; after ``t`` > now) at which ``pods`` pods of ``g`` GPUs
        fit on the nodes that no reservation overlapping ``[t, t1]`` holds (inf if none): each
        time a node reaches another multiple of ``g`` free GPUs one more pod fits on it, and
        those times are running jobs' expected ends, which are all in ``times``."""
        mask = self.blocked(reserved, t, t1)
        rows = self.sorted[g:self.top + 1:g]
        if len(rows) * (self.n - mask.bit_count()) < pods:
            return math.inf
        # the same count with the blocked nodes' times taken out: all nodes' counts come from the
        # sorted lists (binary searches), the blocked nodes' from their own few sorted times
        out_of = self._out_of(mask, g)
        lo, hi = bisect_right(times, t), len(times)  # every crossing time is a candidate time
        if len(rows) == 1:  # pods of more than half a node: one level, one binary search each
            row = rows[0]
            while lo < hi:
                mid = (lo + hi) // 2
                x = times[mid]
                if bisect_right(row, x) - bisect_right(out_of, x) >= pods:
                    hi = mid
                else:
                    lo = mid + 1
        else:
            while lo < hi:
                mid = (lo + hi) // 2
                x = times[mid]
                if sum(bisect_right(lst, x) for lst in rows) - bisect_right(out_of, x) >= pods:
                    hi = mid
                else:
                    lo = mid + 1
        return times[lo] if lo < len(times) else math.inf

    def _out_of(self, mask: int, g: int) -> list[float]:
        """The times at which the nodes of ``mask`` reach the levels of ``g`` (g, 2g, ...), sorted
        (a Python list, for bisect): what the sorted levels count that ``mask`` takes out. The same
        blocked nodes come back often within a pass (a failed plan, then its next fit)."""
        last = self._last_out  # the same mask object as the last call's: no hash of a long int
        if last[0] is mask and last[1] == g:
            return last[2]
        key = (mask, g)
        out = self._blocked_times.get(key)
        if out is None:
            bits = np.unpackbits(np.frombuffer(mask.to_bytes((self.n + 7) // 8, "little"), np.uint8),
                                 count=self.n, bitorder="little").view(bool)
            when = self.when[g] if 2 * g > self.top else self.when[g:self.top + 1:g]
            out = when[..., bits].ravel()  # a copy: boolean indexing
            out.sort()
            out = out.tolist()
            if len(self._blocked_times) > 512:
                self._blocked_times.clear()
            self._blocked_times[key] = out
        self._last_out = (mask, g, out)
        return out

    def level(self, t: float, f: int) -> int:
        """The nodes with exactly ``f`` free GPUs at ``t``, as a mask (bit i = node i); each level
        is computed when first asked, once per time until the profile changes (a job of ``g``
        GPUs a pod asks only the levels from ``g`` up: most plans need one or two of them)."""
        lv = self._levels.get(t)
        if lv is None:
            lv = self._levels[t] = [None] * (self.top + 1)
        m = lv[f]
        if m is None:
            if t <= self.now:  # now: exactly what the cluster's buckets say
                m = _mask(self.cluster.bucket(f), self.n)
            else:  # at least f free, and not f + 1
                m = self.free_mask(t, f) & ~self.free_mask(t, f + 1) if f < self.top else self.free_mask(t, f)
            lv[f] = m
        return m

    def levels(self, t: float) -> list[int]:
        """Masks by free GPUs at ``t``: bit i of ``levels[f]`` is set when node i has f free."""
        return [self.level(t, f) for f in range(self.top + 1)]

    def _sorted(self, reserved: list) -> list:
        """The pass's reservations sorted by start: [reserved, how many, starts, (end, nodes'
        mask) in the same order, the longest one's length], brought up to date."""
        resv = self._resv
        if resv[0] is not reserved:
            resv = self._resv = [reserved, 0, [], [], 0.0]
        _, done, starts, rows, longest = resv
        if done < len(reserved):
            for r in reserved[done:]:
                k = bisect_right(starts, r[0])
                starts.insert(k, r[0])
                rows.insert(k, (r[1], self._mask_of(r)))
                longest = max(longest, r[1] - r[0])
            resv[1], resv[4] = len(reserved), longest
        return resv

    def _mask_of(self, r: tuple) -> int:
        """The nodes' mask of the reservation ``r`` (start, end, nodes), kept while ``r`` is."""
        known = self._masks.get(id(r))
        if known is None or known[0] is not r:
            if len(self._masks) > 4096:
                self._masks.clear()
            known = self._masks[id(r)] = (r, _mask(r[2], self.n))
        return known[1]

    def still_free(self, r: tuple, t: float, t1: float, reserved: list) -> bool:
        """Whether every node of ``r`` has all its GPUs free at ``t`` (> now) and no reservation
        of ``reserved`` overlapping [t, t1] holds it."""
        m = self._mask_of(r)
        return m & self.level(t, self.top) & ~self.blocked(reserved, t, t1) == m

    def curve(self, reserved: list, t: float, g: int) -> list:
        """What :meth:`plan` counts at ``t`` for pods of ``g`` GPUs (t > now, or now itself when no
        running job is due to end now: the profile's times then say what is free), for every runtime at
        once: the nodes that the reservations overlapping ``[t, t + runtime]`` hold grow with the
        runtime one reservation start at a time, so one curve per (t, g) answers every job of the
        pass that asks there until a reservation is added or the profile changes (issue 23).
        A reservation added to ``reserved`` since a curve was made is taken into it when next
        asked: one that ends by ``t`` changes nothing, one over ``t`` joins every mask, one that
        starts later drops only the masks from its place on.
        [pods that fit with no reservation, the starts after t of the reservations that overlap
        some runtime from t, sorted, their masks in the same order, blocked masks by how many of
        those are included (the first: those over t), pods that fit then, reservations taken in]."""
        book = self._curves
        if book[0] is not reserved:
            book = self._curves = [reserved, {}]
        c = book[1].get((t, g))
        if c is None:
            _, _, starts, rows, longest = self._sorted(reserved)
            base, hi = 0, bisect_right(starts, t)
            for k in range(bisect_left(starts, t - longest - 1.0), hi):  # (as blocked() looks)
                e, m = rows[k]
                if t < e:
                    base |= m
            c = book[1][t, g] = [self.fit(t, g), starts[hi:], [m for _, m in rows[hi:]], [base], [None],
                                 len(reserved)]
        elif c[5] < len(reserved):
            _, later, masks, prefix, counts, done = c
            for r in reserved[done:]:
                if r[1] <= t:
                    continue
                m = self._mask_of(r)
                if r[0] <= t:  # over t: in every mask
                    prefix[:], counts[:] = [prefix[0] | m], [None]
                else:
                    k = bisect_right(later, r[0])
                    later.insert(k, r[0])
                    masks.insert(k, m)
                    del prefix[k + 1:], counts[k + 1:]
            c[5] = len(reserved)
        return c

    def curve_at(self, c: list, t: float, t1: float, g: int) -> tuple[int, int]:
        """(blocked mask, pods that fit outside it) for a job at ``t`` until ``t1`` > ``t``, from
        the curve ``c`` of (t, g): what blocked() and plan() would compute."""
        fit, later, masks, prefix, counts, _ = c
        k = bisect_right(later, t1)  # the reservations starting in (t, t1] count too (closed end)
        while len(prefix) <= k:
            prefix.append(prefix[-1] | masks[len(prefix) - 1])
            counts.append(None)
        m, n = prefix[k], counts[k]
        if n is None:
            n = counts[k] = self.fit_outside(t, g, m) if m else fit
        return m, n

    def blocked(self, reserved: list, t: float, t1: float) -> int:
        """The nodes of every reservation that overlaps ``[t, t1]``, as a mask: closed at ``t1``, as
        :meth:`Slurm._blocked` (one that begins when the job would end keeps its nodes). The pass's
        reservations are kept sorted by start, with the longest one's length: only those that
        start in ``(t - longest, t1]`` can overlap."""
        last = self._last_blocked
        if last[0] is reserved and last[1] == len(reserved) and last[2] == t and last[3] == t1:
            return last[4]
        _, _, starts, rows, longest = self._sorted(reserved)
        out, full = 0, self._full
        # (a second's margin: ``longest`` is a difference of floats, the test on ``e`` is exact)
        for k in range(bisect_left(starts, t - longest - 1.0), bisect_right(starts, t1)):
            e, m = rows[k]
            if t < e:
                out |= m
                if out == full:  # every node blocked: no more to learn
                    break
        self._last_blocked = (reserved, len(reserved), t, t1, out)
        return out

    def plan(self, job: Job, t: float, reserved: list, blocked: int | None = None) -> list | None:
        """:meth:`Slurm.plan` for a plain job: best fit at ``t`` (fewest free GPUs, then node
        index) on nodes no overlapping reservation holds, or None if too few pods fit.
        ``blocked``: those nodes' mask, when the caller knows it (curve_at) and that they fit."""
        g, need, top = job.gpus_per_pod, job.pods, self.top
        if blocked is None and t > self.now:
            blocked = 0
            fit = self.fit(t, g)
            if fit < need:  # too few even with no reservation at all
                return None
            if reserved:
                blocked = self.blocked(reserved, t, t + job.planned_runtime)
                # too few on the nodes left, counted from the sorted levels without building the
                # masks by free GPUs at t (most plans fail here; the next fit asks the same)
                if blocked and self.fit_outside(t, g, blocked) < need:
                    return None
        elif blocked is None:
            blocked = self.blocked(reserved, t, t + job.planned_runtime) if reserved else 0
        level = self.level
        fit, masks = 0, []
        for f in range(g, top + 1):
            m = level(t, f)
            if m and blocked:
                m &= ~blocked
            masks.append(m)
            if m:
                fit += (f // g) * m.bit_count()
        if fit < need:
            return None
        out, taken = [], 0  # (taken: the plan's nodes as a mask, kept for its reservation)
        for f, m in zip(range(g, top + 1), masks):
            if not m:
                continue
            per = f // g
            # the nodes in index order: many at once through numpy, a few bit by bit
            nodes = _indexes(m, self.n) if -(-need // per) > 32 else _bits(m)
            for i in nodes:
                if per >= need:
                    out.append((i, need))
                    self.last_plan = (out, taken | (m & ((2 << i) - 1)))
                    return out
                out.append((i, per))
                need -= per
            taken |= m
        return None  # pragma: no cover - fit >= need above

    def keep_mask(self, r: tuple, plan: list) -> None:
        """Take the nodes' mask of the reservation ``r``, made from ``plan``, from the plan itself
        when :meth:`plan` made it (its mask is known: no packing of ``r``'s nodes)."""
        last = self.last_plan
        if last[0] is plan:
            if len(self._masks) > 4096:
                self._masks.clear()
            self._masks[id(r)] = (r, last[1])


#: From this many rows (candidate times) at a pass's first search on, its Timeline goes by runs of
#: rows (:meth:`Timeline.earliest`): the 6,250-node tree's ~5,600, friendly 1,000 nodes' ~960; a busy
#: queue's rows (`base` ~40, `sizes=small` ~270, a tenth over 580) change their held nodes at almost
#: every row, and looking for runs there cost up to a tenth of its progress
RUNS_FROM = 768


class Timeline:
    """One backfill pass's capacity over its candidate times, for the search of a plain job (issue 35).

    A row per candidate time ``t`` (now, the running jobs' expected ends, the reservations' ends:
    the pass's ``times``, kept in step with them), and for each row the nodes a reservation of the
    pass holds there (start <= t < end), as a mask (``held``). Every reservation starts and ends at
    a candidate time, so the nodes that the reservations overlapping ``[t, t + runtime]`` (closed at
    its end, as :meth:`Slurm._blocked`) hold are exactly those held at some row of that span, the
    rows from ``t`` to ``t + runtime`` inclusive, the OR of their masks; what
    :meth:`Availability.plan` counts there is the pods that fit on the other nodes, from the
    profile's masks of the nodes with at least f free GPUs at ``t`` (:meth:`Availability.free_mask`;
    now: the cluster's buckets). No row of the span can hold more pods than that row alone, with
    its own held nodes left out (:meth:`cap`, kept per row and GPUs a pod until the row changes): a
    job's start needs every row of its span to hold its pods, so a walk over the rows that steps
    past each row that cannot (no start whose span contains it can succeed) leaves the few times
    worth counting exactly, in order; the first where the pods fit is the reference's start (its
    plan comes from :meth:`Availability.plan` there, with the span's held nodes). Conservative
    backfill makes each job look past most of the reservations made before it: this answers that
    walk with a few operations on Python ints a row, and a reservation costs an OR on the rows it
    spans (tests/test_gang_fastpath.py)."""

    def __init__(self, avail: Availability, now: float, now_free, reserved: list, version, times: list[float]):
        self.avail, self.now, self.reserved = avail, now, reserved
        self.times: list[float] = list(times)
        self._have: set[float] = set(times)
        self.held: list[int] = [0] * len(times)
        #: the times after now at which a reservation taken in starts or ends, sorted: between two
        #: of them every row holds the same nodes (a run of rows, see :meth:`earliest`)
        self._edges: list[float] = []
        self.jumped = 0  # rows a search passed over by runs without counting them (tests)
        self.by_runs = len(times) >= RUNS_FROM  # (rows only grow in a pass: kept for it)
        #: g -> per row, the pods of g GPUs that fit there on the nodes the row does not hold (None:
        #: not counted since the row or the free GPUs changed)
        self._caps: dict[int, list] = {}
        self._lv: list = []  # per row, its masks by level (_row), once asked
        self.done = 0  # reservations taken in
        self.ok = bool(times) and times[0] == now  # False: the caller searches as before
        self.refree(now_free, version)

    def refree(self, now_free, version) -> None:
        """The free GPUs of every row again (a job started now: fewer free until its end)."""
        self.version = version
        self._caps, self._lv = {}, [None] * len(self.times)

    def _row(self, r: int) -> list[int]:
        """Row ``r``'s masks by level: ``[f]`` holds the nodes with at least f free GPUs (1 <= f <=
        top); after now the profile's (:meth:`Availability.free_mask`), now the cluster's buckets
        (what :meth:`Availability.level` reads now). Kept until the free GPUs change."""
        avail, top = self.avail, self.avail.top
        if r:  # the profile's record of the row's time, its masks kept from pass to pass; each
            # level packed when first asked (_level): most searches ask one or two. (No start
            # or end changes the profile while the free GPUs are this version's: see refree.)
            lv = avail.record(self.times[r])
        else:
            lv, m = [0] * (top + 1), 0
            for f in range(top, 0, -1):
                m |= avail.level(self.now, f)
                lv[f] = m
        self._lv[r] = lv
        return lv

    def _level(self, r: int, f: int) -> int:
        """Row ``r``'s mask of the nodes with at least ``f`` free GPUs (see :meth:`_row`)."""
        lv = self._lv[r] or self._row(r)
        m = lv[f]
        if m is None:
            m = lv[f] = self.avail.free_mask(self.times[r], f)
        return m

    def count(self, r: int, g: int, blocked: int) -> int:
        """Pods of ``g`` GPUs that fit at row ``r`` on the nodes not in ``blocked``: a node with at
        least k * g free holds k pods, so one pod for each level g, 2g, ... it reaches."""
        lv, keep, n = self._lv[r] or self._row(r), ~blocked, 0
        for f in range(g, self.avail.top + 1, g):
            m = lv[f]
            if m is None:  # (_level, inline: a busy pass counts tens of millions of rows)
                m = self._level(r, f)
            n += (m & keep).bit_count()
        return n

    def cap(self, r: int, g: int) -> int:
        """:meth:`count` at row ``r`` with only the row's own held nodes left out (kept)."""
        caps = self._caps.get(g)
        if caps is None:
            caps = self._caps[g] = [None] * len(self.times)
        c = caps[r]
        if c is None:
            c = caps[r] = self.count(r, g, self.held[r])
        return c

    def _insert(self, t: float) -> None:
        """A row for the new time ``t`` (> now). No reservation taken in starts or ends between
        the row before it and ``t`` (they all do at rows): the nodes held are the row before's;
        and no running job is due to end between (their ends are rows): past now, its free GPUs,
        so the two rows share one list of levels, each packed when either first asks (_level)."""
        k = bisect_left(self.times, t)
        self.times.insert(k, t)
        self.held.insert(k, self.held[k - 1])
        self._lv.insert(k, self._lv[k - 1] if k > 1 else None)
        for caps in self._caps.values():
            caps.insert(k, None)
        self._have.add(t)

    def sync(self, times: list[float], now_free, version) -> None:
        """Take in the rows and reservations added since the last use (times only grow in a pass),
        and the free GPUs again if a job started since (``version``: the policy's count of starts)."""
        if not self.ok:
            return
        n = len(self.times)
        if len(times) != n:
            have = self._have
            # the usual new times: the ends of the reservations made since (found in ``times``)
            new = sorted({r[1] for r in self.reserved[self.done:] if r[1] not in have})
            if len(new) + n != len(times) or not all(_has(times, t) for t in new):
                new = [t for t in times if t not in have]
            if len(new) + n != len(times) or (new and new[0] <= self.now):
                self.ok = False  # (a time gone, or one not after now: not a pass's growth)
                return
            for t in new:
                self._insert(t)
        if version != self.version:
            self.refree(now_free, version)
        reserved, times, held, n = self.reserved, self.times, self.held, len(self.times)
        while self.done < len(reserved):
            r = reserved[self.done]
            s, e = r[0], r[1]
            if e <= s:  # a job of no runtime, reserved: it blocks only the spans around its time,
                self.ok = False  # t < s < t + runtime, and no row says that (the caller searches as before)
                return
            k0 = bisect_left(times, s)
            if s > self.now and (k0 == n or times[k0] != s):
                self.ok = False  # a start off the rows: the spans would miss it
                return
            k1 = bisect_left(times, e)
            if e > self.now and (k1 == n or times[k1] != e):
                self.ok = False  # an end off the rows (a new row's copy of the one before would be wrong)
                return
            self.done += 1
            if k1 > k0:  # (its nodes are held on the rows it spans; their counts go)
                m = self.avail._mask_of(r)
                if not self.by_runs or k1 - k0 <= 32:  # (a few rows: one OR each)
                    held[k0:k1] = [h | m for h in held[k0:k1]]
                if not self.by_runs:
                    self._blank(k0, k1)
                    continue
                edges = self._edges  # (where the held nodes may change: its first row, the row at its end)
                for t in (times[k0] if k0 else None, times[k1] if k1 < n else None):
                    if t is not None:
                        x = bisect_left(edges, t)
                        if x == len(edges) or edges[x] != t:
                            edges.insert(x, t)
                # else a run at a time: its rows share one mask (one OR, the same int on every row)
                x, a = bisect_right(edges, times[k0]), (k0 if k1 - k0 > 32 else k1)
                while a < k1:
                    b = bisect_left(times, edges[x], a) if x < len(edges) else n
                    if b > k1:
                        b = k1
                    held[a:b] = [held[a] | m] * (b - a)
                    a, x = b, x + 1
                self._blank(k0, k1)

    def _blank(self, k0: int, k1: int) -> None:
        """Forget the counts of rows ``k0`` .. ``k1`` - 1 (their held nodes changed)."""
        if self._caps:
            blank = [None] * (k1 - k0)
            for c in self._caps.values():
                c[k0:k1] = blank

    def earliest(self, g: int, pods: int, runtime: float, k: int, hi: int):
        """The first row from ``k`` up to (not with) ``hi`` at which ``pods`` pods of ``g`` GPUs
        fit on nodes that no reservation overlapping ``[t, t + runtime]`` holds (runtime > 0),
        and those reservations' nodes (a mask); or None. The span's rows are a window that only
        moves forward: its OR is kept as two stacks (the rows taken in since the last split, ORed
        as they come; the older ones, ORed from the back once), so each row is ORed a few times
        a search, not once per start tried. Rows go by runs (issue 35): between two times at
        which a reservation taken in starts or ends (``_edges``) every row holds the same nodes,
        and after now a row's count never falls with time (a node's free GPUs only grow in the
        profile), so the first row of a run that holds the pods answers for the rest of the run,
        and the first of a run's rows that does is a gallop and a binary search (a whole-node job
        on the 6,250-node tree spans thousands of rows, in a few tens of runs; from RUNS_FROM rows)."""
        top = self.avail.top
        if g > top:
            return None
        times, held, level, lvs = self.times, self.held, self._level, self._lv
        # the rows' counts are kept (cap) and shared by the pass's searches of pods this wide (a
        # busy pass searches hundreds of whole-node jobs over the same rows); one pod on a level
        # below half a node is one popcount of that level, kept apart (under -g)
        one = 2 * g > top or pods == 1  # one level decides: the nodes with at least g free
        # (one pod below half a node: kept apart, as its count is not cap's over every level of g)
        key = -g if 2 * g <= top and pods == 1 else g
        caps = self._caps.get(key)
        if caps is None:
            caps = self._caps[key] = [None] * len(times)
        if one:  # :meth:`cap`'s count, one popcount (a row's count is read from ``caps`` inline,
            # counted here when not kept: a busy pass reads tens of millions of rows)
            def fill(r):
                lv = lvs[r]
                m = lv[g] if lv is not None else None
                c = caps[r] = ((level(r, g) if m is None else m) & ~held[r]).bit_count()
                return c
        else:
            def fill(r):
                return self.cap(r, g)
        n = len(times)
        run_end, run_start, runs = self._run_end, self._run_start, self.by_runs
        j = j1 = k  # the window: rows j .. j1 - 1
        # ORs of the older rows by runs: (a, held[a] | ... | held[split - 1]), a falling; the last
        # is row j's (rows a .. the one before's a, or split, share it: one run of held)
        front: list[tuple[int, int]] = []
        back, split = 0, 0  # OR of rows split .. j1 - 1
        while j < hi:
            if j1 <= j:  # (an empty window: start it at j)
                c = caps[j]
                if c is None:
                    c = fill(j)
                if c < pods:  # not even alone: no span that contains this row
                    j += 1
                    if runs and 1 < j < hi - 4 and held[j + 3] is held[j - 1]:  # (row j - 1 after now, likely in a
                        # long run: a run's rows share one mask) the first of the rest that holds them:
                        # rows j, j + 1, j + 3, j + 7, ... until one does, then a binary search
                        top_j = min(run_end(j - 1), hi)
                        short, p, step = j - 1, j, 1
                        while p < top_j:
                            c = caps[p]
                            if c is None:
                                c = fill(p)
                            if c >= pods:
                                break
                            short, p, step = p, p + step, 2 * step
                        lo, p = short + 1, min(p, top_j)
                        while lo < p:
                            mid = (lo + p) >> 1
                            c = caps[mid]
                            if c is None:
                                c = fill(mid)
                            if c < pods:
                                lo = mid + 1
                            else:
                                p = mid
                        self.jumped += lo - j
                        j1 = j = lo
                        continue
                    while j < hi and (c := caps[j]) is not None and c < pods:  # (counted short)
                        j += 1
                    j1 = j
                    continue
                j1, front, back = j + 1, [], held[j]
            end = times[j] + runtime
            while j1 < n and times[j1] <= end:  # (closed: a row at the job's end is in its span)
                c = caps[j1]
                if c is None:
                    c = fill(j1)
                if c < pods:
                    break
                h = held[j1]
                back |= h
                j1 += 1
                if runs and j1 + 3 < n and held[j1 + 3] is h:  # (likely a long run: a run's rows share one mask)
                    # the rest of row j1 - 1's run holds the same nodes and at least as many free:
                    # its count is no lower (after now, where free GPUs never fall with time)
                    nxt = min(run_end(j1 - 1), bisect_right(times, end, j1))
                    if nxt > j1:
                        self.jumped += nxt - j1
                        j1 = nxt
            else:
                blocked = (front[-1][1] | back) if front else back
                if blocked == held[j] or self.count(j, g, blocked) >= pods:
                    return j, blocked
                # row j leaves the window
                if not front:  # split: the rows j + 1 .. j1 - 1 become the older stack, a run at a time
                    acc, x, split = 0, j1 - 1, j1
                    while x > j:
                        a = run_start(x) if runs and x > 4 and held[x - 4] is held[x] else x  # (see above)
                        if a <= j:
                            a = j + 1
                        acc |= held[x]
                        front.append((a, acc))
                        x = a - 1
                    back = 0
                    j += 1
                else:
                    j += 1
                    if j >= (front[-2][0] if len(front) > 1 else split):
                        front.pop()
                continue
            j = j1 + 1  # every start from j to row j1 has row j1 in its span: a new window after it
            j1 = j
        return None

    def _run_end(self, r: int) -> int:
        """The first row after row ``r`` at which the held nodes may differ from row ``r``'s (a
        reservation taken in starts or ends there), or the number of rows."""
        edges, times = self._edges, self.times
        x = bisect_right(edges, times[r])
        return bisect_left(times, edges[x]) if x < len(edges) else len(times)

    def _run_start(self, r: int) -> int:
        """The first row of row ``r``'s run: the row of the last start or end of a reservation
        taken in at or before its time (0: none)."""
        edges = self._edges
        x = bisect_right(edges, self.times[r])
        return bisect_left(self.times, edges[x - 1]) if x else 0

    def plan(self, r: int, blocked: int, job: Job) -> list | None:
        """:meth:`Slurm.plan`'s best fit at row ``r`` (fewest free GPUs, then node index) on the
        nodes not in ``blocked`` (from :meth:`earliest`): :meth:`Availability.plan` there."""
        return self.avail.plan(job, self.times[r], self.reserved, blocked)


def _has(sorted_list: list[float], t: float) -> bool:
    k = bisect_left(sorted_list, t)
    return k < len(sorted_list) and sorted_list[k] == t
