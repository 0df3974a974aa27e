"""Feedback that names the slip a learner most likely made (issue 32's tester, Labs 1 and 5), and Lab 5's
question 5 refusing a fixed script that real sbatch refuses. The hidden checks run without a kernel
(tests/lab_answers.py) on seed 0's lab; each case failed on the old lab (the old message, or a pass)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from lab_answers import given_namespace, hidden_feedback  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LAB1, LAB5 = ROOT / "solutions" / "01-namespaces-cgroups.ipynb", ROOT / "solutions" / "05-slurm.ipynb"

FIXED = """#!/bin/bash
#SBATCH --job-name=smoke
#SBATCH --gpus-per-node=8
#SBATCH --time={time}
#SBATCH --nodes=2
module load cuda
srun python train.py --steps 100
"""


def _q5(ns: dict, script: str) -> str | None:
    return hidden_feedback(LAB5, dict(ns), "q5", smoke_fixed=script, smoke_fixed_start_hours=6.0)


def test_lab_5_question_5_refuses_a_fixed_script_without_a_shebang_as_sbatch_does():
    """The tester's probe: the fix with no '#!' line scored 3/3, though real sbatch refuses it ("This does
    not look like a batch script", src/sbatch/sbatch.c L690-694 at slurm-26.05 @531c4b2e)."""
    ns = given_namespace(LAB5, 0)
    fixed = FIXED.format(time=ns["SMOKE_TIME"])
    assert _q5(ns, fixed) is None                                   # the fix as sbatch takes it
    for script, said in ((fixed.split("\n", 1)[1], "line 1 is '#SBATCH --job-name=smoke'"),
                         ("# smoke test\n" + fixed, "'#!' is on line 2")):
        feedback = _q5(ns, script)
        assert feedback == (f"sbatch cannot read your script: smoke_fixed:1: sbatch refuses this script: its first "
                            f"line must start with '#!' ({said}; sbatch: \"This does not look like a batch script\"); "
                            f"put '#!/bin/bash' on line 1, above every comment and #SBATCH line"), feedback


def test_lab_5_question_1_says_a_bare_time_is_minutes():
    ns = given_namespace(LAB5, 0)
    assert ns["SMOKE_TIME"] == "120"
    feedback = hidden_feedback(LAB5, ns, "q1", smoke_nodes=1, smoke_time_limit_minutes=2)
    assert feedback.startswith("found 2: a bare `--time` number is minutes, so `--time=120` is 120 minutes, not "
                               "120 seconds (2 is its length in hours)"), feedback
    assert hidden_feedback(LAB5, ns, "q1", smoke_nodes=1, smoke_time_limit_minutes=120) is None


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_lab_1_question_1_names_serve_py_when_one_process_is_missing(seed):
    ns = given_namespace(LAB1, seed)
    workers = ns["WORKERS"]
    first = 2 + ns["SETUP_RUNS"]
    right = dict(serve_pid=1, serve_ppid=0, worker_pids=set(range(first, first + workers)))
    feedback = hidden_feedback(LAB1, dict(ns), "q1", listed_inside=workers, **right)
    assert feedback.startswith(f"found listed_inside = {workers}: one process short; /proc lists every process of "
                               f"the new namespace, serve.py itself (PID 1) as well as each of its workers"), feedback
    assert "which processes does it show" in hidden_feedback(LAB1, dict(ns), "q1", listed_inside=40, **right)
    assert hidden_feedback(LAB1, dict(ns), "q1", listed_inside=workers + 1, **right) is None


def test_grading_a_copy_outside_the_course_suggests_the_students_manifest_first(tmp_path, monkeypatch):
    """Issue 32's tester (Lab 1, defect 3): outside the repository the error said "pass --source solutions/",
    which a student does not have; it now names labs/manifest.json first."""
    from courselib.errors import InputError
    from courselib.grading.source import find_source

    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as err:
        find_source(tmp_path / "01-namespaces-cgroups.ipynb")
    msg = str(err.value)
    assert "a student: pass --source labs/manifest.json" in msg, msg
    assert msg.index("labs/manifest.json") < msg.index("--source solutions/"), msg


def test_lab_1_question_1_names_the_setup_commands_that_ended():
    """serve.py's setup commands ended before the workers started: their PIDs are used up (the workers come
    after them), and /proc no longer lists them. Each slip gets its own feedback on seeds with setup commands;
    the reference answer passes."""
    seeds = [s for s in range(1, 40) if given_namespace(LAB1, s)["SETUP_RUNS"]][:6]
    assert len(seeds) == 6
    for seed in seeds:
        ns = given_namespace(LAB1, seed)
        setup, workers = ns["SETUP_RUNS"], ns["WORKERS"]
        right = dict(serve_pid=1, serve_ppid=0, worker_pids=set(range(2 + setup, 2 + setup + workers)),
                     listed_inside=1 + workers)
        assert hidden_feedback(LAB1, dict(ns), "q1", **right) is None
        feedback = hidden_feedback(LAB1, dict(ns), "q1", **dict(right, worker_pids=set(range(2, 2 + workers))))
        assert feedback and f"as if the {setup} setup command(s) had no PID" in feedback, (seed, feedback)
        feedback = hidden_feedback(LAB1, dict(ns), "q1", **dict(right, listed_inside=1 + workers + setup))
        assert feedback and "have ended, and /proc lists only processes that exist" in feedback, (seed, feedback)
