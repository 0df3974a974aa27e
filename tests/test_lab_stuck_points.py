"""Two of issue 32's stuck points in the labs, each with a test of its own (audit32 D1, D2).

- Lab 6 question 2 said "during the 4 hours" while `WATCH_HOURS = 5`. Its text now fills in the seed's
  `WATCH_HOURS`: in every seed's student lab the hours the question's text states are the seed's
  `WATCH_HOURS` (and the parameters cell's), and an answer worked out for the hours the text states passes
  the hidden check, while one for an hour more or less fails.
- Lab 3 question 2 asks who else dies with `memory.oom.group` (`killed_with_group`) and with the kubelet's
  `singleProcessOOMKill` (`killed_single_process`): a wrong value of either, the other two answers right,
  fails the question and names the answer that is wrong, on seeds whose victims differ; graded, it costs
  question 2 alone.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

from lab_answers import given_namespace, hidden_feedback, reference_answer, seeded_lab

nbformat = pytest.importorskip("nbformat")
ROOT = Path(__file__).resolve().parents[1]
if not (ROOT / "solutions").is_dir():
    pytest.skip("no solutions/ here (the student template)", allow_module_level=True)
LAB3 = ROOT / "solutions" / "03-oom-killer.ipynb"
LAB6 = ROOT / "solutions" / "06-gang-deadlock.ipynb"
SEEDS = (0, 1, 4, 5, 7, 11)


@functools.lru_cache(maxsize=None)
def _ns(path: Path, seed: int, given: tuple[str, ...] = ()) -> dict:
    return given_namespace(path, seed, given)


def student_lab(path: Path, seed: int):
    """Seed ``seed``'s student lab as the student receives it (placeholders filled, solutions removed)."""
    from courselib.grading import build

    return nbformat.reads(build.variant_text(nbformat.read(path, 4), str(path), seed)[0], 4)


def question_text(nb, heading: str) -> str:
    """The markdown of one question: from its heading to the next question's."""
    out, inside = [], False
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.startswith("## Question"):
            inside = cell.source.startswith(heading)
        if inside and cell.cell_type == "markdown":
            out.append(cell.source)
    assert out, heading
    return "\n".join(out)


# ---- Lab 6 question 2: the hours it names are the seed's WATCH_HOURS (D1) ----------------------------

def stated_hours(nb) -> set[float]:
    """Every "N hours" Lab 6's question 2 states."""
    text = question_text(nb, "## Question 2")
    assert "{{" not in text, text
    return {float(h) for h in re.findall(r"(\d+(?:\.\d+)?)\s+hours", text)}


@pytest.mark.parametrize("seed", SEEDS)
def test_lab_6_question_2_states_the_seeds_watch_hours(seed):
    nb = student_lab(LAB6, seed)
    watch = _ns(LAB6, seed)["WATCH_HOURS"]
    assert stated_hours(nb) == {watch}, (seed, watch)
    text = question_text(nb, "## Question 2")
    assert text.count(f"`WATCH_HOURS` = {watch:g} hours") == 2, text     # the story and the task
    params = next(c.source for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    assert re.search(r"^WATCH_HOURS = (\S+)$", params, re.M).group(1) == f"{watch:g}"


def test_the_seeds_watch_different_hours():
    assert len({_ns(LAB6, s)["WATCH_HOURS"] for s in SEEDS}) >= 3


@pytest.mark.parametrize("seed", SEEDS)
def test_an_answer_for_the_hours_the_text_states_passes_and_for_others_fails(seed):
    (hours,) = stated_hours(student_lab(LAB6, seed))
    ns = _ns(LAB6, seed, ("dead-06",))   # dead-06: PAIR

    def graded(h: float) -> str | None:
        answer = reference_answer(LAB6, dict(ns, WATCH_HOURS=h), "q2")
        return hidden_feedback(LAB6, dict(ns), "q2", **answer)

    assert graded(hours) is None, graded(hours)
    for other in (hours - 1, hours + 1, 4):
        if other != hours:
            assert graded(other) is not None, (seed, other)


# ---- Lab 3 question 2: killed_with_group and killed_single_process, each checked (D2) ----------------

def lab3_right(seed: int) -> dict:
    return reference_answer(LAB3, dict(_ns(LAB3, seed)), "q2")


def lab3_wrong(seed: int) -> list[tuple[str, object]]:
    """(answer name, a wrong value of it): the usual slips of each set."""
    right = lab3_right(seed)
    victim, group = right["victim"], set(right["killed_with_group"])
    names = {t.name for t in _ns(LAB3, seed)["TASKS"]}
    others = group - {victim}
    assert others and names - group, (group, names)    # somebody dies with the victim, somebody is spared
    return [("killed_with_group", {victim}),             # the victim alone: memory.oom.group not applied
            ("killed_with_group", names),                # the -1000 process killed too
            ("killed_with_group", others),               # the victim left out
            ("killed_with_group", set()),
            ("killed_single_process", group),            # the group kill with singleProcessOOMKill
            ("killed_single_process", others),           # another process than the victim
            ("killed_single_process", set()),
            ("killed_single_process", names)]


def test_lab_3s_seeds_choose_different_victims():
    assert len({lab3_right(s)["victim"] for s in SEEDS}) >= 2


@pytest.mark.parametrize("seed", SEEDS)
def test_lab_3_question_2_checks_each_set_alone(seed):
    right = lab3_right(seed)
    assert hidden_feedback(LAB3, dict(_ns(LAB3, seed)), "q2", **right) is None
    # a list of the same names is the same answer
    same = {k: sorted(v) if isinstance(v, set) else v for k, v in right.items()}
    assert hidden_feedback(LAB3, dict(_ns(LAB3, seed)), "q2", **same) is None
    for name, value in lab3_wrong(seed):
        said = hidden_feedback(LAB3, dict(_ns(LAB3, seed)), "q2", **dict(right, **{name: value}))
        assert said is not None and f"{name} = " in said, (seed, name, value, said)


@pytest.mark.parametrize("seed", [0, 7])
def test_a_wrong_set_costs_lab_3s_question_2_alone_when_graded(seed, tmp_path):
    from courselib.grading.grade import grade

    right = lab3_right(seed)
    for name in ("killed_with_group", "killed_single_process"):
        value = next(v for n, v in lab3_wrong(seed) if n == name)
        answer = dict(right, **{name: value})
        source = "\n".join(f"{k} = {v!r}" for k, v in answer.items())
        lab = seeded_lab(LAB3, seed, tmp_path / name / LAB3.name, {"q2": source})
        auto = {r.question: r for r in grade(lab, source=LAB3).questions if r.kind == "auto"}
        assert {q for q, r in auto.items() if not r.passed} == {"q2"}, (name, {q: r.feedback for q, r in auto.items()})
        assert f"{name} = " in auto["q2"].feedback
