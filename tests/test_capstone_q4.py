"""The capstone's question 4 (issue 32): an answer that depends on the learner's configuration.

The old question 4 asked for the dollars of GPUs held by jobs that were not training and the job that held
the most. Every configuration that passes question 1 holds none (its idle budget of 50 GPU-hours leaves
room only for an all-or-nothing guarantee, and each of those holds 0), so the expected answer was $0 and
``None`` for every passing configuration, and a learner who typed ``0, None`` scored full marks.

Question 4 now asks what an all-or-nothing guarantee does *not* fix: the GPUs that no job held while some
job waited to start (``courselib.model.gang.free_while_waiting``), and the job that waited longest.

- ``free_while_waiting`` on a hand-sized case, worked out here by hand, and on the day's mix against a
  second way (the Gantt chart's series of free GPUs).
- For every configuration of a list that passes question 1, the reference answer of question 4 is neither 0
  nor ``None`` (the old reference answer, 0 and ``None``, fails this), and the passing configurations do
  not all share one answer.
- Graded: the reference answer passes under several configurations and a seed; ``0, None``, GPU-hours for
  dollars, every free GPU-hour of the run, a partial gang's held GPUs counted as free, and one
  configuration's answer handed in with another each fail question 4 alone.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from courselib.model.gang import free_while_waiting
from lab_answers import ReferenceGrades, fails_alone, given_namespace, graded_with, passes_hidden, reference_answer

nbformat = pytest.importorskip("nbformat")
ROOT = Path(__file__).resolve().parents[1]
if not (ROOT / "solutions").is_dir():
    pytest.skip("no solutions/ here (the student template)", allow_module_level=True)
LAB = "09-capstone"
SOLUTION = ROOT / "solutions" / f"{LAB}.ipynb"
HOUR = 3600.0

VOLCANO = {"policy": "volcano", "options": {}, "checkpoint_every_minutes": 45}
KUEUE_1_MIN = {"policy": "kueue", "options": {"timeout": 60.0}, "checkpoint_every_minutes": 40}
KUBE_DEFAULT = {"policy": "kube-default", "options": {}, "checkpoint_every_minutes": 60}
# configurations a learner may try: several pass question 1, the others fail it
CONFIGS = [VOLCANO, KUEUE_1_MIN, KUBE_DEFAULT] + [
    {"policy": p, "options": o, "checkpoint_every_minutes": 45} for p, o in [
        ("volcano", {"enqueue": False}), ("volcano", {"overcommit_factor": 1.0}), ("volcano", {"min_resources": False}),
        ("slurm", {}), ("slurm", {"bf_window": 3600}), ("slurm", {"backfill": False}),
        ("kueue", {"timeout": 30.0}), ("kueue", {"timeout": 120.0}), ("kueue", {"timeout": 300.0}), ("kueue", {}),
        ("kube-gang", {}), ("kube-gang", {"permit_timeout": 60}), ("kube-default", {"preemption": True})]]


def test_free_while_waiting_on_a_hand_sized_case():
    """4 GPUs, 12 s. `a` trains on 2 GPUs from 0 to 10 s; `b` (submitted at 2 s) holds 1 GPU idle from 4 s,
    trains on 2 from 6 s and ends at 9 s; `c` (submitted at 8 s) never starts. Someone waits from 2 to 6 s
    (b) and from 8 to 12 s (c)."""
    histories = [[(0.0, 2, True), (10.0, 0, False)],                       # a
                 [(4.0, 1, False), (6.0, 2, True), (9.0, 0, False)]]       # b
    waits = [(0.0, 0.0), (2.0, 6.0), (8.0, None)]
    # 2-4 s: a 2 held, free 2 -> 4; 4-6 s: a 2 + b 1, free 1 -> 2; 8-9 s: a 2 + b 2, free 0;
    # 9-10 s: a 2, free 2 -> 2; 10-12 s: nothing held, free 4 -> 8. Total 16 GPU-seconds.
    assert free_while_waiting(histories, waits, 4, 12.0) == 16.0
    assert free_while_waiting(histories, [(0.0, None)], 4, 12.0) == 4 * 12 - (2 * 10 + 1 * 2 + 2 * 3)
    assert free_while_waiting(histories, [(0.0, 0.0), (2.0, 6.0)], 4, 12.0) == 6.0
    assert free_while_waiting([], [], 4, 12.0) == 0.0


def test_free_while_waiting_agrees_with_the_gantt_charts_free_gpus():
    """A second way: the Gantt chart's step series of free GPUs (``plots.gang.usage``), summed over the
    steps at which a job waits, on the day's mix under three policies."""
    from courselib.plots.gang import usage
    from courselib.sim.gang import simulate

    ns = _namespace()
    for config in (VOLCANO, KUEUE_1_MIN, KUBE_DEFAULT):
        r = simulate(ns["MIX"], config["policy"], horizon=ns["HORIZON"], **config["options"])
        times, _, _, free = usage(r)
        waiting = [any(j.submit <= t and (j.start is None or t < j.start) for j in r.jobs) for t in times]
        steps = sum(f * (t1 - t0) for t0, t1, f, w in zip(times, times[1:], free, waiting) if w)
        assert free_while_waiting(r.histories.values(), [(j.submit, j.start) for j in r.jobs], r.total_gpus,
                                  r.end_time) == pytest.approx(steps), config


def _namespace(seed: int = 0) -> dict:
    """Seed ``seed``'s given cells, run without a kernel (the day's mix, run_config, the prices)."""
    return given_namespace(SOLUTION, seed, given=("cap-02",))   # cap-02: run_config


def _passes_question_1(ns: dict, config: dict) -> bool:
    return passes_hidden(SOLUTION, ns, "q1", config=config)


def _q4_reference(ns: dict, config: dict) -> dict:
    """Question 4's reference answer for ``config``: its answer names and their values."""
    return reference_answer(SOLUTION, ns, "q4", config=config)


def test_question_4s_answer_is_neither_0_nor_none_for_any_configuration_that_passes_question_1():
    ns = _namespace()
    answers = {}
    for config in CONFIGS:
        if _passes_question_1(ns, config):
            answers[repr(config)] = _q4_reference(ns, config)
    assert len(answers) >= 6, answers                            # volcano, slurm, kueue with a short timeout
    for config, answer in answers.items():
        for name, value in answer.items():
            assert value is not None and value != 0 and value != set(), (config, name, value)
    # the answer depends on the choice: the passing configurations do not all share one
    assert len({tuple(sorted((k, round(v, 6) if isinstance(v, float) else v) for k, v in a.items()))
                for a in answers.values()}) >= 2, answers


def test_the_expected_answers_differ_between_volcano_kueue_and_the_default_scheduler():
    ns = _namespace()
    got = {c["policy"]: _q4_reference(ns, c) for c in (VOLCANO, KUEUE_1_MIN, KUBE_DEFAULT)}
    price = ns["USD_PER_GPU_HOUR"]
    hours = {p: round(a["free_while_waiting_usd"] / price, 6) for p, a in got.items()}
    # Volcano leaves 404 GPU-hours free while finetune-a waits beside pretrain; Kueue also queues the evals
    # behind it; the default scheduler leaves few free, because its partial gangs hold them (608 held idle)
    assert hours == {"volcano": 404.0, "kueue": 448.0, "kube-default": 48.0}, hours
    assert {p: a["longest_waiter"] for p, a in got.items()} == \
        {"volcano": "finetune-a", "kueue": "eval-1", "kube-default": "eval-1"}


@pytest.mark.parametrize("config, seed", [(VOLCANO, 0), (KUEUE_1_MIN, 7), (KUBE_DEFAULT, 0)],
                         ids=["volcano", "kueue-1-min-seed-7", "kube-default"])
def test_the_reference_answer_passes_question_4(config, seed, tmp_path):
    q4 = graded_with(SOLUTION, tmp_path / f"{LAB}.ipynb", config, seed)["q4"]
    assert q4.passed, q4.feedback


WRONG = [   # (label, configuration, the answer handed in, words the feedback must contain)
    ("0 and None", VOLCANO, "free_while_waiting_usd, longest_waiter = 0, None", "should be the name of one of"),
    ("0 and the right job", VOLCANO, 'free_while_waiting_usd, longest_waiter = 0, "finetune-a"', "found 0"),
    ("GPU-hours for dollars", VOLCANO, 'free_while_waiting_usd, longest_waiter = 404.0, "finetune-a"',
     "that is GPU-hours"),
    ("every free GPU-hour of the run", VOLCANO,
     'free_while_waiting_usd, longest_waiter = 496 * USD_PER_GPU_HOUR, "finetune-a"', "also those when no job"),
    ("a partial gang's held GPUs counted as free", KUBE_DEFAULT,
     'free_while_waiting_usd, longest_waiter = (48 + 608) * USD_PER_GPU_HOUR, "eval-1"', "they are held"),
    ("volcano's answer under kueue", KUEUE_1_MIN,
     'free_while_waiting_usd, longest_waiter = 404 * USD_PER_GPU_HOUR, "finetune-a"', "expected the GPU-hours"),
    ("the longest waiter of volcano under kueue", KUEUE_1_MIN,
     'free_while_waiting_usd, longest_waiter = 448 * USD_PER_GPU_HOUR, "finetune-a"', "another job waited longer"),
]


@pytest.fixture(scope="module")
def right_answers(tmp_path_factory):
    """The reference answer's auto-graded results per configuration, graded once per module (several wrong
    answers share a configuration)."""
    return ReferenceGrades(SOLUTION, lambda: tmp_path_factory.mktemp("right"))


@pytest.mark.parametrize("label, config, answer, words", WRONG, ids=[w[0] for w in WRONG])
def test_a_wrong_answer_fails_question_4_alone(label, config, answer, words, tmp_path, right_answers):
    auto = graded_with(SOLUTION, tmp_path / f"{LAB}.ipynb", config, answers={"q4": answer})
    assert fails_alone(auto, right_answers(config), "q4") == {"q4"}
    assert words in auto["q4"].feedback, auto["q4"].feedback
