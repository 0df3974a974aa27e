"""Lab 6's topology question (issue 29): the learner predicts, from a small topology and a queue, which
job waits under Kueue's Topology-Aware Scheduling and why — the free nodes per rack and per block,
the block best fit gives the first job, N of Kueue's "allows to fit only N" for the second, and when
it is admitted. The case is given as numbers, not as a workload: no simulator can be handed it as is.

The instructor's hidden check (it runs the course's Kueue model on its own copy of the case) passes
the reference solution for every seed and refuses the usual mistakes with their own feedback, the
stubbed answer, and seed 0's answer copied into another seed's lab.
"""
from __future__ import annotations

import pytest

from courselib.grading import markers, variant

nbformat = pytest.importorskip("nbformat")
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SOLUTION = ROOT / "solutions" / "06-gang-deadlock.ipynb"
if not SOLUTION.is_file():
    pytest.skip("no solutions/ here (the student template)", allow_module_level=True)


def cells() -> dict[str, str]:
    nb = nbformat.read(SOLUTION, 4)
    out = {}
    for c in nb.cells:
        tags = markers.tags(c)
        if variant.PARAMETERS_TAG in tags:
            out["parameters"] = c.source
        elif variant.VARIANT_TAG in tags:
            out["variant"] = c.source
        elif c.get("id") == "dead-20":
            out["answer"] = markers.solution_source(c.source, SOLUTION.name)
            out["stub"] = markers.stub_source(c.source, SOLUTION.name)[0]
        elif c.get("id") == "dead-21h":
            out["hidden"] = c.source
    return out


CELLS = cells()


def run(seed: int, answer: str) -> dict:
    """The seed's parameters, an answer, then the instructor's hidden check, in one namespace."""
    ns: dict = {}
    exec(variant.parameters_for(CELLS["parameters"], CELLS["variant"], seed, "lab 6"), ns)  # noqa: S102
    exec(answer, ns)  # noqa: S102
    exec(CELLS["hidden"], ns)  # noqa: S102  (raises when the answer is wrong)
    return ns


def fails(seed: int, answer: str) -> str:
    with pytest.raises(AssertionError) as err:      # a check's failure: AssertionError(feedback)
        run(seed, answer)
    return str(err.value)


def test_the_question_is_predict_and_its_solution_calls_no_simulator():
    assert "simulate(" not in CELLS["answer"] and "simulate(" in CELLS["hidden"]
    assert "Question 6 (3 points): predict which job waits" in SOLUTION.read_text()


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 7, 11, 19, 42, 123, 2026])
def test_the_reference_answer_passes_the_hidden_check_for_every_seed(seed):
    ns = run(seed, CELLS["answer"])
    # the story of every variant: train waits although the free nodes are enough in all
    assert ns["fits_only"] < ns["TRAIN_PODS"] <= sum(ns["free_per_rack"]) - ns["EVAL_PODS"]
    assert ns["train_starts_hours"] == ns["EVAL_HOURS"] > 0


def test_the_unsolved_question_fails():
    assert "still `...`" in fails(0, CELLS["stub"])


def test_the_usual_mistakes_fail_with_their_own_feedback():
    right = run(0, CELLS["answer"])
    base = {k: right[k] for k in ("free_per_rack", "free_per_block", "eval_block", "fits_only", "train_starts_hours")}

    def answer(**change):
        return "\n".join(f"{k} = {v!r}" for k, v in (base | change).items())

    assert base == {"free_per_rack": [3, 2], "free_per_block": [1, 2, 1, 1], "eval_block": "block0",
                    "fits_only": 2, "train_starts_hours": 2}
    assert "those are GPUs" in fails(0, answer(free_per_rack=[12, 8]))
    assert "the block with the most free nodes" in fails(0, answer(eval_block="block1"))
    assert "ties" in fails(0, answer(eval_block="block2"))              # fewest free, but not the first name
    assert "all of train's pods" in fails(0, answer(fits_only=3))
    assert "found 0 h" in fails(0, answer(train_starts_hours=0))


def test_seed_zeros_answer_copied_into_another_seeds_lab_fails():
    copied = "\n".join(f"{k} = {v!r}" for k, v in {"free_per_rack": [3, 2], "free_per_block": [1, 2, 1, 1],
                                                     "eval_block": "block0", "fits_only": 2,
                                                     "train_starts_hours": 2}.items())
    for seed in (1, 7, 42):
        fails(seed, copied)
