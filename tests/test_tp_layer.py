"""The precise version of "a split gang halves MFU" (issue 29, chapter 8): one Megatron layer's four
tensor-parallel all-reduces of b × s × h values, beside its GEMMs, on NVLink and across nodes."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from courselib.model import collective as cl
from courselib.model import cost
from budget import examples


def test_the_layer_of_chapter_8_megatrons_39b_gpt_on_h100s():
    fast = cl.tp_layer(1, 2048, 8192, 8, cl.NVLINK_H100_BPS, efficiency=0.44)
    assert fast.message_bytes == 2048 * 8192 * 2                    # b s h bf16 values: 32 MiB
    assert fast.allreduce_s == pytest.approx(2 * 7 / 8 * 2048 * 8192 * 2 / 450e9)
    assert fast.comm_s == 4 * fast.allreduce_s
    # 72 b s h^2 (1 + s/6h) = three quarters of Narayanan et al.'s (3) for one layer, no vocabulary term
    assert cl.layer_flops(1, 2048, 8192) == pytest.approx(96 * 2048 * 8192 ** 2 * (1 + 2048 / (6 * 8192)) * 3 / 4)
    assert fast.compute_s == pytest.approx(cl.layer_flops(1, 2048, 8192) / 8 / (990e12 * 0.44))
    assert round(100 * fast.comm_fraction, 1) == 15.0
    assert round(cl.step_slowdown(fast.comm_fraction, cl.NVLINK_H100_BPS, cl.IB_PER_GPU_BPS), 2) == 2.20


@settings(max_examples=examples(80), deadline=None)
@given(b=st.integers(1, 8), s=st.sampled_from([512, 2048, 8192]), h=st.sampled_from([1024, 4096, 8192, 12288]),
       tp=st.sampled_from([2, 4, 8]), eff=st.floats(0.1, 1.0))
def test_the_step_formula_is_the_layer_timed_on_the_slow_link(b, s, h, tp, eff):
    """(1 - f) + f r, with f read on NVLink, equals the layer's time on the slow link over its time on
    NVLink: the course's split slowdown, computed a second way."""
    fast = cl.tp_layer(b, s, h, tp, cl.NVLINK_H100_BPS, efficiency=eff)
    slow = cl.tp_layer(b, s, h, tp, cl.IB_PER_GPU_BPS, efficiency=eff)
    timed = (slow.compute_s + slow.comm_s) / (fast.compute_s + fast.comm_s)
    assert cl.step_slowdown(fast.comm_fraction, cl.NVLINK_H100_BPS, cl.IB_PER_GPU_BPS) == pytest.approx(timed)
    assert slow.comm_fraction > fast.comm_fraction


def test_mfu_halves_exactly_at_one_over_r_minus_one_and_the_run_pays_for_it():
    for link in (cl.NVLINK_H100_BPS, cl.NVLINK5_BPS):
        f = cl.halving_comm_fraction(link, cl.IB_PER_GPU_BPS)
        assert cl.step_slowdown(f, link, cl.IB_PER_GPU_BPS) == pytest.approx(2.0)
    bill = cost.split_placement_cost(512, 30 * 86400.0, 2.0, cost.Price(2.0, 4.0))
    assert bill["extra_gpu_hours"] == pytest.approx(512 * 30 * 24) and bill["cost_usd"] == pytest.approx([737280, 1474560])


@pytest.mark.parametrize("bad", [dict(tp=0), dict(efficiency=0), dict(efficiency=1.5), dict(flops_per_s=0)])
def test_a_layer_refuses_what_has_no_meaning(bad):
    args = dict(micro_batch=1, seq=2048, hidden=8192, tp=8, link_bps=cl.NVLINK_H100_BPS) | bad
    with pytest.raises(ValueError):
        cl.tp_layer(**args)
