"""The waiting-job index behind the fast paths (courselib.model.waitlist.NeedIndex) answers what a
scan of every waiting job answers: the first, in queue order, whose need is at most x."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from courselib.model.waitlist import NeedIndex
from budget import examples

NEEDS = [1, 2, 3, 5, 8, 13, 40]

ops = st.lists(st.one_of(
    st.tuples(st.just("add"), st.sampled_from(NEEDS), st.integers(0, 60), st.integers(0, 3)),
    st.tuples(st.just("remove"), st.integers(0, 10 ** 6)),
    st.tuples(st.just("query"), st.integers(-1, 45)),
    st.tuples(st.just("pop_after"), st.integers(0, 60), st.integers(0, 3)),
), max_size=80)


@settings(max_examples=examples(400), deadline=None)
@given(ops)
def test_the_index_answers_what_a_scan_answers(operations):
    idx, items, seq = NeedIndex(NEEDS), {}, 0  # key -> (need, item)
    for op in operations:
        if op[0] == "add":
            seq += 1
            key = (op[2], op[3], seq)  # unique, like (-priority, submit, seq)
            item = f"job{seq}"
            idx.add(op[1], key, item)
            items[key] = (op[1], item)
        elif op[0] == "remove" and items:
            key = sorted(items)[op[1] % len(items)]
            idx.remove(items[key][0], key, items[key][1])
            del items[key]
        elif op[0] == "query":
            fits = sorted(k for k, (need, _) in items.items() if need <= op[1])
            expect = (fits[0], items[fits[0]][1]) if fits else None
            assert idx.first_at_most(op[1]) == expect
        elif op[0] == "pop_after":
            cut = (op[1], op[2], 10 ** 9)
            expect = [(k, items[k][1]) for k in sorted(items) if k > cut]
            assert idx.after(cut) == expect
            assert idx.pop_after(cut) == expect
            for k, _ in expect:
                del items[k]
        assert len(idx) == len(items)


def test_removing_what_is_not_there_is_an_error():
    idx = NeedIndex([1, 2])
    idx.add(2, (0, 1), "a")
    with pytest.raises(KeyError):
        idx.remove(2, (0, 2), "b")
    assert idx.first_at_most(1) is None and idx.first_at_most(2) == ((0, 1), "a")
