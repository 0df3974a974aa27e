"""EASY backfilling on a pool of cores, compiled with numba: :func:`courselib.model.replay.replay`'s
``easy`` for long traces (the ``fast`` extra; without numba the Python path makes the same
decisions). The same rules as the Python fast path ``replay._easy`` and the reference
``replay_reference`` (proven equal by ``tests/test_replay.py``), on arrays:

- **Events.** At each instant the jobs that end free their cores, then the jobs submitted join the
  queue, then one pass: the queue's heads start in order while they fit. A job of no run time ends
  at the instant it starts, so the next instant is the same one, and the queue is scanned again.
- **The head's reservation.** When the head does not fit, the running jobs are walked by expected
  end (kept sorted as jobs start and end) until enough cores are free for it: the shadow time; the
  cores free then beyond its need are the extra cores.
- **Backfill.** A later job starts now if it fits now and ends (by its estimate) by the shadow
  time, or uses no more than the extra cores. At an instant where nothing ended and no head
  started, only the jobs that arrived since the last pass are tried: every job tried before
  fails again (free and extra cores have only fallen, the shadow is the same, the clock has
  moved on), as in ``replay._easy``.

Compiled on first use (a few seconds, or well under a second from numba's disk cache:
:mod:`courselib.model.compiled`), hence only for traces of thousands of
jobs (``replay.KERNEL_FROM``). The model's only I/O is numba's cache.
"""
from __future__ import annotations

import numpy as np

from courselib.model.compiled import compile_pass

_KERNEL = None
#: False runs the replay as plain Python (the same code, uncompiled: the tests plant slips in it)
COMPILED = True


def kernel():
    """The compiled replay (compiled, or read from the cache, on the first call)."""
    global _KERNEL
    if _KERNEL is None:
        _KERNEL = compile_pass(globals(), _HELPERS, _easy)
    return _KERNEL


def warm() -> None:
    """Compile the replay (or load it from numba's cache) now: two jobs on one core."""
    easy([0.0, 0.0], [1.0, 1.0], [1, 1], [1.0, 1.0], 1)


def easy(submit, run, procs, est, cores: int) -> list:
    """Start times of the jobs (in queue order: by submit time, ties by index; each at most
    ``cores`` wide) under EASY on ``cores`` cores."""
    fn = kernel() if COMPILED else _easy
    out = fn(np.asarray(submit, np.float64), np.asarray(run, np.float64), np.asarray(procs, np.int64),
             np.asarray(est, np.float64), int(cores))
    return out.tolist()


def _insert(keys, ranks, lo, n, key, rank):
    """Put (key, rank) into ``keys[lo:n]``/``ranks[lo:n]``, sorted by (key, rank); returns n + 1."""
    p = n
    while p > lo and (keys[p - 1] > key or (keys[p - 1] == key and ranks[p - 1] > rank)):
        keys[p] = keys[p - 1]
        ranks[p] = ranks[p - 1]
        p -= 1
    keys[p] = key
    ranks[p] = rank
    return n + 1


def _remove(keys, ranks, n, key, rank):
    """Take (key, rank) out of ``keys[:n]``/``ranks[:n]`` (sorted by (key, rank)); returns n - 1."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if keys[mid] < key or (keys[mid] == key and ranks[mid] < rank):
            lo = mid + 1
        else:
            hi = mid
    for p in range(lo, n - 1):
        keys[p] = keys[p + 1]
        ranks[p] = ranks[p + 1]
    return n - 1


def _shadow(exp_key, exp_rank, n_exp, procs, free, need):
    """The head's shadow time and extra cores: the running jobs walked by expected end until
    ``need`` cores are free, then every job that ends at that same time too."""
    avail = free
    shadow = np.inf
    for p in range(n_exp):
        e = exp_key[p]
        if avail >= need and e > shadow:
            break
        avail += procs[exp_rank[p]]
        if avail >= need and shadow == np.inf:
            shadow = e
    return shadow, avail - need


def _first_new(queue, n_q, scanned):
    """The first place in the queue (after the head) of a rank that arrived since the last pass
    (ranks below ``scanned`` were tried then); ``n_q`` if none."""
    first = n_q
    while first > 1 and queue[first - 1] >= scanned:
        first -= 1
    return first


_HELPERS = ("_insert", "_remove", "_shadow", "_first_new")


def _easy(submit, run, procs, est, cores):
    n = submit.shape[0]
    start = np.full(n, np.nan)
    # running jobs sorted by actual end (popped from the front, ``head``) and by expected end
    end_key = np.empty(n, np.float64)
    end_rank = np.empty(n, np.int64)
    head = 0
    n_end = 0
    exp_key = np.empty(n, np.float64)
    exp_rank = np.empty(n, np.int64)
    n_exp = 0
    queue = np.empty(n, np.int64)  # waiting ranks, in order
    n_q = 0
    free = cores
    arrived = 0
    full = True  # the next pass recomputes the head's reservation and tries every waiting job
    scanned = 0  # ranks below this were tried by the last pass (and failed)
    shadow = 0.0
    extra = 0
    while arrived < n or n_q > 0:
        t = submit[arrived] if arrived < n else np.inf
        if head < n_end and end_key[head] < t:
            t = end_key[head]
        if t == np.inf:  # (never with a consistent state: a waiting job fits once nothing runs)
            break
        while head < n_end and end_key[head] <= t:
            r = end_rank[head]
            head += 1
            free += procs[r]
            n_exp = _remove(exp_key, exp_rank, n_exp, start[r] + est[r], r)
            full = True
        while arrived < n and submit[arrived] <= t:
            queue[n_q] = arrived
            n_q += 1
            arrived += 1
        # the heads in order while they fit
        h = 0
        while h < n_q and procs[queue[h]] <= free:
            r = queue[h]
            free -= procs[r]
            start[r] = t
            n_end = _insert(end_key, end_rank, head, n_end, t + run[r], r)
            n_exp = _insert(exp_key, exp_rank, 0, n_exp, t + est[r], r)
            h += 1
            full = True
        if h:
            for k in range(h, n_q):
                queue[k - h] = queue[k]
            n_q -= h
        if n_q < 2 or free == 0:
            continue
        if full:
            shadow, extra = _shadow(exp_key, exp_rank, n_exp, procs, free, procs[queue[0]])
            first = 1
            full = False
        else:
            first = _first_new(queue, n_q, scanned)
        # backfill: fits now, and ends by the shadow time or stays within the extra cores
        kept = first
        k = first
        while k < n_q:
            r = queue[k]
            p = procs[r]
            go = False
            if p <= free:
                if t + est[r] <= shadow:
                    go = True
                elif p <= extra:
                    extra -= p
                    go = True
            if go:
                free -= p
                start[r] = t
                n_end = _insert(end_key, end_rank, head, n_end, t + run[r], r)
                n_exp = _insert(exp_key, exp_rank, 0, n_exp, t + est[r], r)
            else:
                queue[kept] = r
                kept += 1
            k += 1
            if free == 0:
                while k < n_q:
                    queue[kept] = queue[k]
                    kept += 1
                    k += 1
        n_q = kept
        scanned = arrived
    return start
