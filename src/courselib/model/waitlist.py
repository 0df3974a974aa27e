"""Waiting jobs indexed by what they need, so a cycle looks only at the ones that can go now.

A scheduler that walks its waiting jobs in queue order and lets each one go if one number it
needs (GPUs of quota, minResources, pods that must fit) is at most what is available, while
what is available only shrinks during the walk, lets go exactly the jobs that
:meth:`NeedIndex.first_at_most` returns one after another: a job that did not fit when the walk
passed it cannot fit later in the same walk. So the fast paths of ``kueue``, ``volcano`` and
``kube-gang`` ask "which is the first job, in queue order, whose need is at most x" instead of
walking the jobs that cannot change state (issue 23), and give each of those its reason once.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable


class NeedIndex:
    """Items in queue order (their ``key``, unique), grouped by ``need`` (one of the numbers given
    at construction): the first item whose need is at most ``x``, in O(log distinct needs).

    A list per need, kept in key order, and a segment tree of the lists' heads, each node the
    smallest (key, item) below it: a prefix of the needs is a question to the tree.
    """

    def __init__(self, needs: Iterable[int]):
        self.needs = sorted(set(needs))
        self._pos = {n: i for i, n in enumerate(self.needs)}
        self._lists: list[list[tuple]] = [[] for _ in self.needs]
        size = 1
        while size < max(1, len(self.needs)):
            size *= 2
        self._size = size
        self._tree: list[tuple | None] = [None] * (2 * size)
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def _update(self, i: int) -> None:
        lst = self._lists[i]
        k = i + self._size
        self._tree[k] = lst[0] if lst else None
        k //= 2
        tree = self._tree
        while k:
            a, b = tree[2 * k], tree[2 * k + 1]
            tree[k] = a if b is None or (a is not None and a < b) else b
            k //= 2

    def add(self, need: int, key: tuple, item) -> None:
        i = self._pos[need]
        lst = self._lists[i]
        entry = (key, item)
        insort(lst, entry)
        self._count += 1
        if lst[0] is entry:
            self._update(i)

    def remove(self, need: int, key: tuple, item) -> None:
        i = self._pos[need]
        lst = self._lists[i]
        k = bisect_left(lst, (key,))
        if k == len(lst) or lst[k][0] != key:
            raise KeyError(key)
        del lst[k]
        self._count -= 1
        if k == 0:
            self._update(i)

    def first_at_most(self, x: float) -> tuple | None:
        """(key, item) of the first item in key order whose need is ``<= x``, or None."""
        r = bisect_right(self.needs, x)
        if r == 0 or not self._count:
            return None
        best = None
        lo, hi = self._size, self._size + r  # the half-open range of leaves [lo, hi)
        tree = self._tree
        while lo < hi:
            if lo & 1:
                v = tree[lo]
                if v is not None and (best is None or v < best):
                    best = v
                lo += 1
            if hi & 1:
                hi -= 1
                v = tree[hi]
                if v is not None and (best is None or v < best):
                    best = v
            lo //= 2
            hi //= 2
        return best

    def after(self, key: tuple) -> list[tuple]:
        """Every (key, item) whose key is greater than ``key``, in key order (O(items))."""
        out = [e for lst in self._lists for e in lst[bisect_right(lst, (key, _LAST)):]]
        out.sort(key=lambda e: e[0])
        return out

    def pop_after(self, key: tuple) -> list[tuple]:
        """Remove and return what :meth:`after` returns."""
        out = []
        for i, lst in enumerate(self._lists):
            k = bisect_right(lst, (key, _LAST))
            if k < len(lst):
                out.extend(lst[k:])
                del lst[k:]
                if k == 0:
                    self._update(i)
        self._count -= len(out)
        out.sort(key=lambda e: e[0])
        return out


class _Last:
    """Greater than any item, so that ``(key, _LAST)`` sorts after every ``(key, item)``."""

    def __lt__(self, other) -> bool:
        return False

    def __gt__(self, other) -> bool:
        return True


_LAST = _Last()
