"""The capstone's question 2 (issue 32): an answer that depends on the learner's configuration and seed.

The old question 2 asked when ``pretrain`` starts, when the last fine-tune ends and which jobs held GPUs
without training. Every configuration that passes question 1 gave the same answer: 0.5 h, 12.5 h and the
empty set (question 1's idle budget leaves only all-or-nothing set-ups, and on the day's mix they all
start ``pretrain`` at once and end the fine-tunes at 12:30). A learner who typed ``set()`` and copied two
numbers scored full marks.

Question 2 now adds one job, ``urgent`` (8 pods of 8 GPUs, submitted at a seeded time while ``pretrain``
and ``finetune-b`` hold every GPU, training a seeded number of hours), and asks for a reading of the run:
when ``urgent`` ends, which jobs started while it waited, and when the last fine-tune ends. The order in
which waiting jobs start is the policies' mechanism: Volcano lets later evals fill the GPUs it frees
(it reserves nothing), Slurm's backfill keeps them for ``urgent`` (a reservation), and under Kueue no
8-GPU pod finds a node next to ``pretrain``'s spread pods until 12:30.

- For every configuration of a list that passes question 1, the reference answer of question 2 has an
  end, a non-empty set and a fine-tunes' end, and the passing configurations give three different
  answers (the old reference answer fails this: its ``idle_holders`` is the empty set).
- The answers of Volcano, Slurm and Kueue on seed 0, with their figures, and a second seed that changes
  each of them.
- Graded: the reference answer passes under Volcano (seed 0), Slurm (seed 7) and Kueue with a 1-minute
  timeout (seed 2); the empty set, ``urgent`` started when submitted, its start for its end, seconds for
  hours, the day without ``urgent``, another configuration's answer, another seed's answer, ``urgent``
  itself and the jobs that start with it each fail question 2 alone, with feedback that names the mistake.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from lab_answers import ReferenceGrades, fails_alone, given_namespace, graded_with, passes_hidden, reference_answer

pytest.importorskip("nbformat")
LAB = "09-capstone"
SOLUTION = Path(__file__).resolve().parents[1] / "solutions" / f"{LAB}.ipynb"
if not SOLUTION.is_file():
    pytest.skip("no solutions/ here (the student template)", allow_module_level=True)

VOLCANO = {"policy": "volcano", "options": {}, "checkpoint_every_minutes": 45}
SLURM = {"policy": "slurm", "options": {}, "checkpoint_every_minutes": 45}
KUEUE_1_MIN = {"policy": "kueue", "options": {"timeout": 60.0}, "checkpoint_every_minutes": 40}
# configurations a learner may try: several pass question 1, the others fail it
CONFIGS = [VOLCANO, SLURM, KUEUE_1_MIN] + [
    {"policy": p, "options": o, "checkpoint_every_minutes": 45} for p, o in [
        ("volcano", {"enqueue": False}), ("volcano", {"overcommit_factor": 1.0}), ("volcano", {"min_resources": False}),
        ("slurm", {"bf_window": 3600}), ("slurm", {"backfill": False}),
        ("kueue", {"timeout": 30.0}), ("kueue", {"timeout": 120.0}), ("kueue", {"timeout": 300.0}), ("kueue", {}),
        ("kube-gang", {}), ("kube-gang", {"permit_timeout": 60}), ("kube-default", {}),
        ("kube-default", {"preemption": True})]]


def _namespace(seed: int = 0) -> dict:
    """Seed ``seed``'s given cells, run without a kernel (the day, with_urgent, run_config)."""
    return given_namespace(SOLUTION, seed, given=("cap-02",))   # cap-02: run_config


def _q2(ns: dict, config: dict) -> dict:
    """Question 2's reference answer for ``config``: the ``urgent_run`` dict."""
    return reference_answer(SOLUTION, ns, "q2", config=config)


def _key(answer: dict) -> tuple:
    """An answer of question 2 (every name its check reads) as something to compare and count."""
    return tuple(sorted((name, repr(sorted(v.items(), key=str) if isinstance(v, dict) else v))
                        for name, v in answer.items()))


def test_question_2s_answer_is_not_empty_and_differs_between_configurations_that_pass_question_1():
    ns = _namespace()
    answers = {repr(c): reference_answer(SOLUTION, ns, "q2", config=c) for c in CONFIGS
               if passes_hidden(SOLUTION, dict(ns), "q1", config=c)}
    assert len(answers) >= 8, answers                   # volcano, slurm with backfill, kueue with a short timeout
    for config, answer in answers.items():
        for name, value in answer.items():                # the old lab: ('idle_holders', set())
            assert value is not None and value != set() and value != 0, (config, name, value)
            for part, v in (value.items() if isinstance(value, dict) else ()):
                assert v is not None and v != set() and v != 0, (config, name, part, v)
    # the answer depends on the choice: Volcano, Slurm and Kueue each give their own
    assert len({_key(a) for a in answers.values()}) >= 3, answers


def test_the_expected_answers_of_volcano_slurm_and_kueue():
    """Seed 0: ``urgent`` is submitted at 3.25 h and trains 5 h. Volcano starts ``eval-3`` to ``eval-6`` when
    ``finetune-b`` ends at 5:00 and ``eval-7`` (submitted at 5:15) in the GPUs they leave, so ``urgent``
    starts at 5:45; Slurm reserves the GPUs for it and starts it at 5:30; under Kueue its 8-GPU pods find
    no node until 12:30. With ``urgent`` in the day, Volcano's and Slurm's last fine-tune ends at 13:00."""
    ns = _namespace()
    assert (ns["URGENT_AT_HOURS"], ns["URGENT_HOURS"]) == (3.25, 5)
    got = {c["policy"]: _q2(ns, c)["urgent_run"] for c in (VOLCANO, SLURM, KUEUE_1_MIN)}
    assert got == {
        "volcano": {"end_hours": 10.75, "started_while_waiting": {f"eval-{k}" for k in range(3, 8)},
                    "last_finetune_end_hours": 13.0},
        "slurm": {"end_hours": 10.5, "started_while_waiting": {"eval-3", "eval-4"}, "last_finetune_end_hours": 13.0},
        "kueue": {"end_hours": 17.5, "started_while_waiting": {"finetune-a", "finetune-c"},
                  "last_finetune_end_hours": 12.5}}, got


@pytest.mark.parametrize("config", [VOLCANO, SLURM, KUEUE_1_MIN], ids=["volcano", "slurm", "kueue-1-min"])
def test_another_seed_has_another_answer(config):
    """Seeds 7 and 2 submit ``urgent`` at other times, for other lengths: each changes the answer."""
    answers = [_q2(_namespace(seed), config) for seed in (0, 7, 2)]
    assert len({_key(a) for a in answers}) == 3, answers


@pytest.mark.parametrize("config, seed", [(VOLCANO, 0), (SLURM, 7), (KUEUE_1_MIN, 2)],
                         ids=["volcano", "slurm-seed-7", "kueue-1-min-seed-2"])
def test_the_reference_answer_passes_question_2(config, seed, tmp_path):
    q2 = graded_with(SOLUTION, tmp_path / f"{LAB}.ipynb", config, seed)["q2"]
    assert q2.passed, q2.feedback


EVALS_3_TO_7_SET = {f"eval-{k}" for k in range(3, 8)}
EVALS_3_TO_7 = repr(EVALS_3_TO_7_SET)


def _answer(end, started, last) -> str:
    return f'urgent_run = {{"end_hours": {end}, "started_while_waiting": {started}, "last_finetune_end_hours": {last}}}'


WRONG = [   # (label, configuration, seed, the answer handed in, words the feedback must contain)
    ("the empty set", VOLCANO, 0, _answer(10.75, "set()", 13.0), "found no job"),
    ("urgent started when submitted", VOLCANO, 0, _answer(3.25 + 5, EVALS_3_TO_7, 13.0), "every GPU is held then"),
    ("its start for its end", VOLCANO, 0, _answer(5.75, EVALS_3_TO_7, 13.0), "that is when urgent starts"),
    ("seconds for hours", VOLCANO, 0, _answer(10.75 * 3600, EVALS_3_TO_7, 13.0), "should be hours of the day"),
    ("the fine-tunes of the day without urgent", VOLCANO, 0, _answer(10.75, EVALS_3_TO_7, 12.5),
     "that is the day without urgent"),
    ("urgent itself", VOLCANO, 0, _answer(10.75, repr(EVALS_3_TO_7_SET | {"urgent"}), 13.0),
     "names urgent itself"),
    ("the jobs that start with urgent", KUEUE_1_MIN, 0,
     _answer(17.5, repr({"finetune-a", "finetune-c"} | {f"eval-{k}" for k in range(1, 12)}), 12.5),
     "at the same time as urgent"),
    ("volcano's answer under slurm", SLURM, 0, _answer(10.75, EVALS_3_TO_7, 13.0), "urgent does not finish at 10.75 h"),
    ("slurm's set under volcano", VOLCANO, 0, _answer(10.75, repr({"eval-3", "eval-4"}), 13.0),
     "more job(s) started while urgent waited"),
    ("kueue's answer under volcano", VOLCANO, 0, _answer(17.5, repr({"finetune-a", "finetune-c"}), 12.5),
     "urgent does not finish at 17.5 h"),
    ("seed 0's answer on seed 2", VOLCANO, 2, _answer(10.75, EVALS_3_TO_7, 13.0), "urgent does not finish at 10.75 h"),
    ("seed 0's answer on seed 7", SLURM, 7, _answer(10.5, repr({"eval-3", "eval-4"}), 13.0),
     "urgent does not finish at 10.5 h"),
]


@pytest.fixture(scope="module")
def right_answers(tmp_path_factory):
    """The reference answer's auto results per configuration and seed, graded once per module."""
    return ReferenceGrades(SOLUTION, lambda: tmp_path_factory.mktemp("right"))


@pytest.mark.parametrize("label, config, seed, answer, words", WRONG, ids=[w[0] for w in WRONG])
def test_a_wrong_answer_fails_question_2_alone(label, config, seed, answer, words, tmp_path, right_answers):
    auto = graded_with(SOLUTION, tmp_path / f"{LAB}.ipynb", config, seed, answers={"q2": answer})
    assert fails_alone(auto, right_answers(config, seed), "q2") == {"q2"}
    assert words in auto["q2"].feedback, auto["q2"].feedback
