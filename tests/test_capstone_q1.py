"""The capstone's question 1, its checkpoint interval (issue 32, audit32 C2): the hidden check takes an
interval whose first-order waste (chapter 8, ``courselib.model.checkpoint.first_order_waste``) is at most a
quarter above the least possible, at Young's interval, with R = the restart plus NCCL's error timeout.

The band of accepted intervals is computed here from the seed's own CHECKPOINT_COST_S, JOB_MTBF_HOURS and
RESTART_MINUTES with courselib's functions, and the hidden check must accept exactly it, to the minute at
both edges, on seeds whose bands differ; the feedback names the side of the trade-off. One interval just
outside the band, handed in through the grader, costs question 1 alone.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from courselib.model.checkpoint import first_order_waste, young_interval
from courselib.sim.barrier import NCCL_ERROR_AFTER_S
from lab_answers import fails_alone, given_namespace, graded_with, hidden_feedback

ROOT = Path(__file__).resolve().parents[1]
if not (ROOT / "solutions").is_dir():
    pytest.skip("no solutions/ here (the student template)", allow_module_level=True)
LAB = "09-capstone"
SOLUTION = ROOT / "solutions" / f"{LAB}.ipynb"
HOUR, MINUTE = 3600.0, 60.0
VOLCANO = {"policy": "volcano", "options": {}}   # passes question 1's constraints on every seed
#: seeds whose (CHECKPOINT_COST_S, JOB_MTBF_HOURS) differ: (120, 8), (180, 12), (60, 6), (90, 10), (120, 8)
#: with another restart (seed 15), and (60, 12)
SEEDS = (0, 7, 6, 9, 15, 23)
SHORT, LONG = "the writes cost more than they save", "each failure loses too much work"


def _namespace(seed: int) -> dict:
    return given_namespace(SOLUTION, seed, given=("cap-02",))   # cap-02: run_config


def band(ns: dict) -> tuple[int, int]:
    """The whole minutes from 10 to 240 whose first-order waste is within a quarter of the least possible,
    for the seed's checkpoint cost, MTBF and restart: (first, last)."""
    c, m = ns["CHECKPOINT_COST_S"], ns["JOB_MTBF_HOURS"] * HOUR
    r = ns["RESTART_MINUTES"] * MINUTE + NCCL_ERROR_AFTER_S
    least = first_order_waste(young_interval(c, m), c, m, r)
    inside = [k for k in range(10, 241) if first_order_waste(k * MINUTE, c, m, r) <= 1.25 * least]
    assert inside == list(range(inside[0], inside[-1] + 1))         # one band, Young's interval in it
    assert inside[0] <= young_interval(c, m) / MINUTE <= inside[-1]
    return inside[0], inside[-1]


def feedback(ns: dict, minutes: float) -> str | None:
    return hidden_feedback(SOLUTION, ns, "q1", config=dict(VOLCANO, checkpoint_every_minutes=minutes))


def test_the_bands_follow_the_seeds_checkpoint_cost_and_mtbf():
    bands = {seed: band(_namespace(seed)) for seed in SEEDS}
    params = {seed: (_namespace(seed)["CHECKPOINT_COST_S"], _namespace(seed)["JOB_MTBF_HOURS"]) for seed in SEEDS}
    assert len(set(params.values())) >= 5 and len(set(bands.values())) == len(SEEDS), (params, bands)
    # the dearest checkpoint and longest MTBF (seed 7) ask for the longest intervals, the cheapest and
    # shortest (seed 6) for the shortest; seeds 0 and 15 share C and M, and their restarts move the band
    assert max(SEEDS, key=lambda s: params[s][0] * params[s][1]) == max(SEEDS, key=lambda s: bands[s]) == 7
    assert min(SEEDS, key=lambda s: params[s][0] * params[s][1]) == min(SEEDS, key=lambda s: bands[s]) == 6
    assert params[0] == params[15] and bands[0] != bands[15]


@pytest.mark.parametrize("seed", SEEDS)
def test_question_1_takes_exactly_the_seeds_band_of_intervals(seed):
    ns = _namespace(seed)
    first, last = band(ns)
    for inside in (first, round(young_interval(ns["CHECKPOINT_COST_S"], ns["JOB_MTBF_HOURS"] * HOUR) / MINUTE), last):
        assert feedback(ns, inside) is None, (seed, inside, feedback(ns, inside))
    for outside, why in ((10, SHORT), (first - 1, SHORT), (last + 1, LONG), (240, LONG)):
        said = feedback(ns, outside)
        assert said is not None and "more than a quarter above the least possible" in said, (seed, outside, said)
        assert why in said and f"every {outside:g} min" in said, (seed, outside, said)


def test_seed_0_keeps_the_audits_finding():
    """audit32 E2 (Volcano, seed 0): 10, 20 and 240 min fail; 30 to 90 min pass."""
    ns = _namespace(0)
    assert [k for k in (10, 20, 30, 45, 60, 75, 90, 240) if feedback(ns, k) is None] == [30, 45, 60, 75, 90]


def test_an_interval_right_for_one_seed_is_wrong_for_another():
    a, b = _namespace(0), _namespace(7)
    (a0, a1), (b0, b1) = band(a), band(b)
    assert a0 < b0 and a1 < b1
    assert feedback(a, b0 - 1) is None and feedback(b, b0 - 1) is not None   # in seed 0's band, below seed 7's
    assert feedback(b, a1 + 1) is None and feedback(a, a1 + 1) is not None   # in seed 7's band, above seed 0's


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 7])
def test_an_interval_just_outside_the_band_fails_question_1_alone_when_graded(seed, tmp_path):
    first, last = band(_namespace(seed))
    right = graded_with(SOLUTION, tmp_path / "right" / f"{LAB}.ipynb",
                        dict(VOLCANO, checkpoint_every_minutes=first), seed)
    for k, minutes in enumerate((first - 1, last + 1)):
        wrong = graded_with(SOLUTION, tmp_path / f"wrong{k}" / f"{LAB}.ipynb",
                            dict(VOLCANO, checkpoint_every_minutes=minutes), seed)
        assert fails_alone(wrong, right, "q1") == {"q1"}, (seed, minutes)
        assert "more than a quarter above the least possible" in wrong["q1"].feedback
