"""Lab 8's design question (issue 32: "Lab 8 is labelled advanced but easier than Lab 7"): question 6 asks
whether `tune` should wait for a whole node (pod at a time, or with gang admission) or start now with one
tensor-parallel group split across two nodes, under a GPU budget and at both ends of a price range.

- Its hidden check computes every expected value from the student's seed with the chapter's models
  (``collective.split_link_bps`` / ``step_slowdown``, ``cost.split_placement_cost``, ``cost.gang_wait_cost``).
- A plausible wrong step fails question 6 alone, with feedback that names the mistake and gives no
  expected value (every number in the feedback is the student's own or given data).
- Seed 0's answer typed into another seed's lab fails; across seeds the choice is not always the same,
  and the budget decides it in some seeds and not in others (the constraint is real).
- Question 3: a saving written as the sum of the bills, or a "volcano" bill typed in as 0, fails it alone
  (both scored full marks: the gang bill is 0 on every real case); a bill computed another right way passes.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from courselib.grading import markers, variant
from courselib.grading.grade import grade
from lab_answers import seeded_lab

nbformat = pytest.importorskip("nbformat")
ROOT = Path(__file__).resolve().parents[1]
if not (ROOT / "solutions").is_dir():
    pytest.skip("no solutions/ here (the student template)", allow_module_level=True)
LAB = "08-gang-cost"
SOLUTION = ROOT / "solutions" / f"{LAB}.ipynb"
DESIGNS = ("split-now", "wait-pod-at-a-time", "wait-gang")


def _solution():
    return nbformat.read(SOLUTION, 4)


def _q6_source() -> str:
    (cell,) = [c for c in _solution().cells if markers.has_markers(c.source) and "split_link_gb_s =" in c.source]
    return markers.solution_source(cell.source, str(SOLUTION))


def _namespace(seed: int) -> dict:
    """Seed ``seed``'s numbers, question 6's given cell and the reference answer, run without a kernel."""
    nb = _solution()
    cells = {tag: next(c for c in nb.cells if tag in markers.tags(c)).source
             for tag in (variant.PARAMETERS_TAG, variant.VARIANT_TAG)}
    ns: dict = {"print": lambda *a, **k: None}
    exec(variant.parameters_for(cells[variant.PARAMETERS_TAG], cells[variant.VARIANT_TAG], seed, LAB), ns)  # noqa: S102
    given = next(c.source for c in nb.cells if "TUNE_DESIGNS = (" in c.source and not markers.has_markers(c.source))
    exec(given, ns)  # noqa: S102 (the course's own lab)
    exec(_q6_source(), ns)  # noqa: S102
    return ns


def _lab(seed: int, dest: Path, q6: str | None = None, **others: str) -> Path:
    """Seed ``seed``'s lab, every question answered by the reference solution, question 6 by ``q6`` if given
    (and any other question ``qN`` by ``others["qN"]``)."""
    return seeded_lab(SOLUTION, seed, dest, {**others, **({"q6": q6} if q6 is not None else {})})


def _wrong(old: str, new: str) -> str:
    src = _q6_source()
    assert src.count(old) == 1, old
    return src.replace(old, new)


# (label, the line a student gets wrong, what they wrote instead, words the feedback must contain)
WRONG = [
    ("the NICs of the bigger side", "_fewer = min(SPLIT_BIG, SPLIT_SMALL)", "_fewer = max(SPLIT_BIG, SPLIT_SMALL)",
     "the node with more of the group's GPUs"),
    ("both nodes' NICs added", "split_link_gb_s = min(_fewer * NIC_GB_S, NVLINK_GB_S)",
     "split_link_gb_s = (SPLIT_BIG + SPLIT_SMALL) * NIC_GB_S", "adds the NICs of both nodes"),
    ("the slow share added to the whole step", "split_slowdown = (1 - TP_COMM_FRACTION) + ", "split_slowdown = 1 + ",
     "does not add to the whole step"),
    ("the link's ratio as the slowdown",
     "split_slowdown = (1 - TP_COMM_FRACTION) + TP_COMM_FRACTION * NVLINK_GB_S / split_link_gb_s",
     "split_slowdown = NVLINK_GB_S / split_link_gb_s", "only the TP communication"),
    ("the whole run billed", '"split-now": TUNE_GPUS * _split_late_h,',
     '"split-now": TUNE_GPUS * TUNE_HOURS * split_slowdown,', "the whole run's GPU-hours"),
    ("the split group alone billed", '"split-now": TUNE_GPUS * _split_late_h,', '"split-now": 8 * _split_late_h,',
     "the split group alone"),
    ("every pod held while waiting", '"wait-pod-at-a-time": (TUNE_GPUS - 8) * _wait_h,',
     '"wait-pod-at-a-time": TUNE_GPUS * _wait_h,', "holds every pod's GPUs"),
    ("minutes as hours", "_wait_h = NODE_FREE_MINUTES / 60", "_wait_h = NODE_FREE_MINUTES",
     "you used the minutes as hours"),
    ("gang admission holding the last pod's GPUs", '"wait-gang": 0.0,', '"wait-gang": 8 * _wait_h,',
     "which GPUs does `tune` hold"),
    ("the late hours left out", " + _late_h[_k] * DELAY_USD_PER_HOUR", "", "the GPU dollars only"),
    ("the late hours paid from the budget", 'budget_price = GPU_BUDGET_USD / extra_gpu_hours["split-now"]',
     'budget_price = (GPU_BUDGET_USD - _split_late_h * DELAY_USD_PER_HOUR) / extra_gpu_hours["split-now"]',
     "not paid from the GPU budget"),
    ("the budget ignored", "if extra_gpu_hours[_k] * _p <= GPU_BUDGET_USD", "if True",
     "do not fit the budget"),
]
NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:e-?\d+)?")


def _expected_values(ns: dict) -> list[float]:
    """Every value question 6 checks, for this seed (what the feedback must never show)."""
    out = [ns["split_link_gb_s"], ns["split_slowdown"], ns["budget_price"]]
    out += [v for v in ns["extra_gpu_hours"].values() if v]
    out += [x for pair in ns["total_usd"].values() for x in pair]
    return [float(x) for x in out]


def _given_values(ns: dict) -> set[float]:
    return {float(v) for k, v in ns.items() if k.isupper() and isinstance(v, (int, float)) and not isinstance(v, bool)}


def _leaks(feedback: str, ns: dict) -> list[str]:
    """Numbers in the feedback that are an expected value of question 6 (and not given data)."""
    given = _given_values(ns)
    found = []
    for text in NUMBER.findall(feedback):
        try:
            x = float(text.replace(",", ""))
        except ValueError:
            continue
        if any(abs(x - g) <= 1e-9 * max(1.0, abs(g)) for g in given):
            continue
        if any(abs(x - e) <= 5e-3 * max(1.0, abs(e)) for e in _expected_values(ns) if abs(e) > 1e-9):
            found.append(text)
    return found


def test_seed_0_is_a_case_where_the_budget_decides():
    """Seed 0 (the book's lab): split at the low price; at the high price the split is still cheaper in
    total but over the budget, so the choice is to wait with gang admission."""
    ns = _namespace(0)
    assert ns["choice"] == ("split-now", "wait-gang")
    high_total = {k: ns["total_usd"][k][1] for k in DESIGNS}
    assert min(high_total, key=high_total.get) == "split-now"
    assert ns["extra_gpu_hours"]["split-now"] * ns["PRICE_HIGH"] > ns["GPU_BUDGET_USD"]
    assert ns["PRICE_LOW"] < ns["budget_price"] < ns["PRICE_HIGH"]


def test_the_seeds_choices_differ_and_the_budget_decides_in_some():
    choices, decided, numbers = set(), set(), set()
    for seed in range(1, 121):
        ns = _namespace(seed)
        choices.add(ns["choice"])
        numbers.add((ns["TUNE_GPUS"], ns["TUNE_HOURS"], ns["TP_COMM_FRACTION"], ns["SPLIT_BIG"],
                     ns["NODE_FREE_MINUTES"], ns["GPU_BUDGET_USD"]))
        unconstrained = tuple(min(DESIGNS, key=lambda k: ns["total_usd"][k][i]) for i in (0, 1))
        decided.add(unconstrained != ns["choice"])
        assert ns["extra_gpu_hours"]["wait-gang"] == 0 and ns["split_slowdown"] > 1
        assert all(ns["total_usd"]["wait-pod-at-a-time"][i] > ns["total_usd"]["wait-gang"][i] for i in (0, 1))
    assert len(choices) >= 3, choices
    assert decided == {True, False}
    assert len(numbers) >= 110


def test_every_wrong_step_is_distinct_from_the_answer_on_seed_0():
    ns = _namespace(0)
    for label, old, new, _ in WRONG:
        wrong: dict = {k: v for k, v in ns.items() if k.isupper()}
        exec(_wrong(old, new), wrong)  # noqa: S102
        assert any(wrong[k] != ns[k] for k in ("split_link_gb_s", "split_slowdown", "extra_gpu_hours", "total_usd",
                                                "budget_price", "choice")), label


@pytest.mark.parametrize("label, old, new, words", WRONG, ids=[w[0] for w in WRONG])
def test_a_plausible_wrong_step_fails_question_6_alone_and_does_not_give_the_answer(label, old, new, words, tmp_path):
    report = grade(_lab(0, tmp_path / f"{LAB}.ipynb", q6=_wrong(old, new)), source=SOLUTION)
    auto = {r.question: r for r in report.questions if r.kind == "auto"}
    assert [q for q, r in auto.items() if not r.passed] == ["q6"], {q: r.feedback for q, r in auto.items()}
    feedback = auto["q6"].feedback
    assert words in feedback, feedback
    assert not _leaks(feedback, _namespace(0)), (_leaks(feedback, _namespace(0)), feedback)


def test_the_leak_finder_finds_an_expected_value():
    ns = _namespace(0)
    assert _leaks(f"expected {ns['budget_price']:.2f} per GPU-hour", ns)
    assert _leaks(f"expected ({ns['total_usd']['wait-gang'][0]:,.0f}, …)", ns)
    assert not _leaks(f"at the high price (${ns['PRICE_HIGH']:g} per GPU-hour)", ns)


@pytest.mark.parametrize("seed", [7, pytest.param(23, marks=pytest.mark.slow)])
def test_seed_0s_answer_typed_into_another_seed_fails_question_6(seed, tmp_path):
    ns = _namespace(0)
    copied = "".join(f"{k} = {ns[k]!r}\n" for k in ("split_link_gb_s", "split_slowdown", "extra_gpu_hours",
                                                     "total_usd", "budget_price", "choice"))
    report = grade(_lab(seed, tmp_path / f"{LAB}.ipynb", q6=copied), source=SOLUTION)
    auto = {r.question: r for r in report.questions if r.kind == "auto"}
    assert report.seed == seed and [q for q, r in auto.items() if not r.passed] == ["q6"]
    (tmp_path / "own").mkdir()
    own = grade(_lab(seed, tmp_path / "own" / f"{LAB}.ipynb"), source=SOLUTION)
    assert own.total == own.max_points, [(r.question, r.feedback) for r in own.questions]


# --- questions 3 and 5 (issue 32's tester): a wrong formula that scored, a delay counted from 00:00 ---------

def _answer(marker: str, old: str, new: str) -> str:
    """The reference answer of the question whose answer cell holds ``marker``, with ``old`` replaced."""
    (cell,) = [c for c in _solution().cells if markers.has_markers(c.source) and marker in c.source]
    src = markers.solution_source(cell.source, str(SOLUTION))
    assert src.count(old) == 1, old
    return src.replace(old, new)


def test_a_delay_counted_from_00_00_fails_question_5_and_the_feedback_names_the_delay(tmp_path):
    """"Each hour train waits between its submission and its start": a student who counts the delay from
    minute 0 (BLOCKER_END_MINUTES, not BLOCKER_END_MINUTES - TRAIN_SUBMIT_MINUTES) gets feedback about the
    delay term, without the number of minutes or dollars expected."""
    wrong = _answer("weekly_cost_usd = {", "_delay = RUNS_PER_WEEK * _wait_h * DELAY_USD_PER_HOUR",
                    "_delay = RUNS_PER_WEEK * BLOCKER_END_MINUTES / 60 * DELAY_USD_PER_HOUR")
    report = grade(_lab(0, tmp_path / f"{LAB}.ipynb", q5=wrong), source=SOLUTION)
    auto = {r.question: r for r in report.questions if r.kind == "auto"}
    assert [q for q, r in auto.items() if not r.passed] == ["q5"], {q: r.feedback for q, r in auto.items()}
    feedback = auto["q5"].feedback
    assert "the delay dollars are off" in feedback and "from its submission at minute" in feedback, feedback
    ns = _namespace(0)
    late_min = ns["BLOCKER_END_MINUTES"] - ns["TRAIN_SUBMIT_MINUTES"]
    delay = ns["RUNS_PER_WEEK"] * late_min / 60 * ns["DELAY_USD_PER_HOUR"]
    shown = {float(x.replace(",", "")) for x in NUMBER.findall(feedback)}
    assert late_min not in shown and not any(abs(x - delay) < 1 for x in shown), feedback
    text = next(c.source for c in _solution().cells if c.source.startswith("## Question 5 "))
    assert "waits between its\nsubmission" in text and "starts late" not in text


# --- question 3: a wrong saving, a "volcano" bill typed in as 0 (each scored full marks) ---------------

# (label, the line a student gets wrong, what they wrote instead, words the feedback must contain). Under
# PodGroup admission the gang bill is 0 on every real case, so `saving = kube + volcano` and a "volcano" bill
# typed in as 0 both passed the old check (12/12; the fee stand-in checked only the saving). Under the
# stand-in idle_cost that adds a fee to every bill, the bill of a job that holds nothing is the fee.
Q3_WRONG = [
    ("saving as the sum of the bills", '"saving": without - with_gang', '"saving": without + with_gang',
     "the first bill minus the second"),
    ("the gang bill typed in as 0", "with_gang = idle_cost(0, wait_minutes, usd_per_gpu_hour)", "with_gang = 0",
     "not be typed in"),
    ("the dict's volcano entry typed in", '"volcano": with_gang, "saving": without - with_gang',
     '"volcano": 0, "saving": without', "not be typed in"),
]


@pytest.mark.parametrize("label, old, new, words", Q3_WRONG, ids=[w[0] for w in Q3_WRONG])
def test_a_wrong_or_typed_in_bill_fails_question_3_alone(label, old, new, words, tmp_path):
    wrong = _answer("def compare(", old, new)
    report = grade(_lab(0, tmp_path / f"{LAB}.ipynb", q3=wrong), source=SOLUTION)
    auto = {r.question: r for r in report.questions if r.kind == "auto"}
    assert [q for q, r in auto.items() if not r.passed] == ["q3"], {q: r.feedback for q, r in auto.items()}
    assert words in auto["q3"].feedback, auto["q3"].feedback
    assert report.total == report.max_points - auto["q3"].max_points


def test_a_gang_bill_computed_as_the_gpus_held_for_no_time_passes_question_3(tmp_path):
    """Under PodGroup admission the job holds its GPUs for no time: idle_cost(gpus_held, 0, price) is as right
    as idle_cost(0, wait, price), with the stand-in too (its fee is charged for either)."""
    other = _answer("def compare(", "with_gang = idle_cost(0, wait_minutes, usd_per_gpu_hour)",
                    "with_gang = idle_cost(gpus_held, 0, usd_per_gpu_hour)")
    report = grade(_lab(7, tmp_path / f"{LAB}.ipynb", q3=other), source=SOLUTION)
    assert report.seed == 7 and report.total == report.max_points, [(r.question, r.feedback) for r in report.questions]
