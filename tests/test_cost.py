"""Cost and checkpoint formulas against FACTS §5 and the seed article's worked example."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from courselib.errors import InputError
from courselib.model import checkpoint as ckpt
from courselib.model import cost
from courselib.units import parse_duration
from budget import examples

# ---- wasted GPU-hours: the seed and the exercise --------------------------------------------


def test_seed_example_400_gpus_25_minutes():
    wasted = cost.wasted_gpu_hours(400, parse_duration("25m"))
    assert wasted == pytest.approx(400 * 25 / 60)
    assert round(wasted, 2) == 166.67
    assert round(wasted) == 167        # the seed's "~167 GPU-hours" rounds here, to whole hours
    c = cost.gang_wait_cost(cost.SEED)
    assert [round(x, 2) for x in c.cost_usd] == [333.33, 666.67]
    assert c.gang_wasted_gpu_hours == 0.0 and c.gang_cost_usd == [0.0, 0.0]
    assert cost.SEED.missing == 112


def test_the_three_spellings_of_25_minutes_agree_and_0417h_is_rounded():
    assert parse_duration("25m") == parse_duration("1500s") == 1500.0
    # 0.417 h is 25 min rounded to three decimals: it moves the answer by 0.13 GPU-hours
    assert cost.wasted_gpu_hours(400, parse_duration("0.417h")) == pytest.approx(166.8)


def test_exercise_480_gpus_40_minutes_at_3_dollars_versus_volcano():
    c = cost.gang_wait_cost(cost.EXERCISE)
    assert c.wasted_gpu_hours == pytest.approx(320.0)
    assert c.cost_usd == pytest.approx(960.0)
    assert c.gang_cost_usd == 0.0 and c.saving_usd == pytest.approx(960.0)
    assert cost.EXERCISE.missing == 32


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(0, 100_000), st.integers(0, 100_000), st.floats(0, 1e6), st.floats(0, 1e6))
def test_more_gpus_or_longer_waits_never_cost_less(g1, g2, w1, w2):
    lo_g, hi_g = sorted((g1, g2))
    lo_w, hi_w = sorted((w1, w2))
    assert cost.wasted_gpu_hours(lo_g, lo_w) <= cost.wasted_gpu_hours(hi_g, lo_w)
    assert cost.wasted_gpu_hours(lo_g, lo_w) <= cost.wasted_gpu_hours(lo_g, hi_w)
    price = cost.Price(2.0, 4.0)
    low, high = price.times(cost.wasted_gpu_hours(hi_g, hi_w))
    assert low <= high


# ---- prices ---------------------------------------------------------------------------------

def test_price_parsing():
    assert cost.Price.parse("3") == cost.Price(3.0, 3.0)
    assert not cost.Price.parse("3").is_range
    assert cost.Price.parse("2-4") == cost.Price(2.0, 4.0)
    assert cost.Price.parse("$2.5-$4") == cost.Price(2.5, 4.0)
    assert cost.Price.parse("3").times(10) == 30
    assert cost.Price.parse("2-4").times(10) == [20, 40]


@pytest.mark.parametrize("text", ["4-2", "abc", "-3", "2-", "2--4", ""])
def test_bad_prices_are_one_line_errors(text):
    with pytest.raises(InputError) as err:
        cost.Price.parse(text)
    assert "\n" not in str(err.value) and str(err.value).startswith("price: ")


def test_backwards_range_says_how_to_fix_it():
    with pytest.raises(InputError, match="backwards; write the low price first: 2-4"):
        cost.Price.parse("4-2")


@pytest.mark.parametrize("gpus,wait", [(-1, 60.0), (True, 60.0), (1.5, 60.0), (4, -1.0), (4, math.nan),
                                       (4, "25m")])
def test_bad_counts_and_waits(gpus, wait):
    with pytest.raises(InputError):
        cost.wasted_gpu_hours(gpus, wait)


def test_gang_size_smaller_than_held_is_an_error():
    with pytest.raises(InputError, match="gang-size"):
        cost.GangWait(gpus_held=400, wait_s=60, price=cost.Price(3, 3), gang_size=300)


# ---- a lost rank ----------------------------------------------------------------------------

def test_lost_rank_costs_every_gpu_the_same_wall_time():
    # 512 GPUs × (1 h since the checkpoint + 10 min timeout + 5 min restart) = 640 GPU-hours
    assert cost.lost_rank_gpu_hours(512, 3600, 600, 300) == pytest.approx(640.0)
    assert cost.lost_rank_gpu_hours(1, 3600, 0, 0) == pytest.approx(1.0)


def test_expected_failure_cost_per_failure_and_per_day():
    f = cost.expected_failure_cost(512, interval_s=3600, mtbf_s=12 * 3600, detection_s=600, restart_s=300)
    assert f.expected_lost_s_per_failure == pytest.approx(1800 + 600 + 300)
    assert f.expected_gpu_hours_per_failure == pytest.approx(512 * 2700 / 3600)
    assert f.failures_per_day == pytest.approx(2.0)
    assert f.expected_gpu_hours_per_day == pytest.approx(2 * 384.0)


def test_job_mtbf_divides_by_the_number_of_parts():
    five_years = 5 * 365 * 86400
    assert cost.job_mtbf(five_years, 512) == pytest.approx(five_years / 512)
    assert cost.job_mtbf(five_years, 512) / 86400 == pytest.approx(3.56, abs=0.01)
    with pytest.raises(InputError):
        cost.job_mtbf(0, 512)


# ---- Young and Daly (FACTS §5) ----------------------------------------------------------------

def test_young_interval():
    assert ckpt.young_interval(60, 7200) == pytest.approx(math.sqrt(2 * 60 * 7200))
    assert ckpt.young_interval(300, 86400) == pytest.approx(7200.0)


@pytest.mark.parametrize("mtbf,expected_min", [(24 * 3600, 116.69), (6 * 3600, 56.71), (15 * 60, 9.14)])
def test_daly_matches_the_papers_figures(mtbf, expected_min):
    # FACTS §5: Daly's figure captions say 117, 57 and 9.1 min for δ = 5 min; the formula gives these
    assert ckpt.daly_interval(300, mtbf) / 60 == pytest.approx(expected_min, abs=0.005)


def test_daly_when_the_checkpoint_costs_more_than_two_mtbf():
    assert ckpt.daly_interval(3 * 3600, 3600) == 3600
    assert ckpt.daly_interval(2 * 3600, 3600) == 3600   # δ = 2M: the τ = M branch


durations = st.floats(min_value=1e-3, max_value=1e7, allow_nan=False, allow_infinity=False)


@settings(max_examples=examples(300), deadline=None)
@given(durations, durations)
def test_daly_never_exceeds_the_mtbf(c, m):
    assert 0 < ckpt.daly_interval(c, m) <= m


@settings(max_examples=examples(300), deadline=None)
@given(durations, durations, durations, st.floats(0, 1e7))
def test_waste_fraction_is_a_fraction(t, c, m, r):
    w = ckpt.waste_fraction(t, c, m, r)
    assert 0.0 <= w <= 1.0
    plan = ckpt.checkpoint_plan(c, m, r)
    assert 0.0 <= plan.waste_fraction <= 1.0 and 0.0 <= plan.waste_fraction_young <= 1.0
    assert plan.clamped == (ckpt.first_order_waste(plan.daly_s, c, m, r) > 1.0)


@settings(max_examples=examples(200), deadline=None)
@given(st.floats(1, 3600), st.floats(3600, 1e6), st.floats(0.1, 10))
def test_young_minimises_the_first_order_waste(c, m, factor):
    young = ckpt.young_interval(c, m)
    assert ckpt.first_order_waste(young, c, m) <= ckpt.first_order_waste(young * factor, c, m) + 1e-12
    assert ckpt.first_order_waste(young, c, m) == pytest.approx(math.sqrt(2 * c / m))


def test_waste_is_clamped_and_says_so():
    plan = ckpt.checkpoint_plan(3600, 3600)        # a checkpoint as long as the MTBF
    assert ckpt.first_order_waste(plan.daly_s, 3600, 3600) > 1
    assert plan.waste_fraction == 1.0 and plan.clamped
    ok = ckpt.checkpoint_plan(60, 7200)
    assert not ok.clamped and ok.waste_fraction == pytest.approx(60 / ok.daly_s + ok.daly_s / 14400)


def test_restart_adds_r_over_m():
    base = ckpt.first_order_waste(900, 60, 7200)
    assert ckpt.first_order_waste(900, 60, 7200, 300) == pytest.approx(base + 300 / 7200)


@pytest.mark.parametrize("c,m", [(0, 3600), (-1, 3600), (60, 0), (60, math.inf), (True, 3600)])
def test_bad_checkpoint_inputs(c, m):
    with pytest.raises(InputError):
        ckpt.young_interval(c, m)
    with pytest.raises(InputError):
        ckpt.daly_interval(c, m)
