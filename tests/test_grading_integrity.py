"""`courselib grade` cannot be gamed (issue 20): each attack a student could try, written as a notebook
(tests/grading_attacks.py), earns nothing it did not solve; the student's code cannot reach the
grader's environment, output, original file or report; a SIGINT-ignoring answer is stopped within a
minute; the whole grading has a wall-clock limit. Plus the pieces: answers cross as data only, probes
run the student's code in the student's process, the sandbox's isolation.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from courselib.grading import build, encode, markers
from courselib.grading.sandbox import Sandbox, processes

import grading_attacks as A

nbformat = pytest.importorskip("nbformat")

ROOT = Path(__file__).resolve().parents[1]
if not (ROOT / "solutions").is_dir():
    pytest.skip("no solutions/ here (the student template): the attacks are graded against solutions/",
                allow_module_level=True)
TARGET = "08-gang-cost"          # the lab every attack is written against (it has function answers)
SOLUTION = ROOT / "solutions" / f"{TARGET}.ipynb"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    out = tmp_path_factory.mktemp("labs")
    build.build_all(ROOT / "solutions", out)
    return nbformat.read(out / f"{TARGET}.ipynb", 4)


def _points() -> dict[str, int]:
    _, questions = build.build_lab(nbformat.read(SOLUTION, 4), str(SOLUTION))
    return {q.name: q.points for q in questions if not q.manual}


def _marked_processes() -> list[int]:
    found = []
    for p in processes():
        try:
            with open(f"/proc/{p.pid}/cmdline", "rb") as f:
                if A.MARK.encode() in f.read():
                    found.append(p.pid)
        except OSError:
            pass
    return found


def grade_cli(path: Path, *extra, env=None, timeout=300) -> tuple[subprocess.CompletedProcess, float]:
    """`courselib grade` as its own process (as CI runs it), with a secret in its environment."""
    env = dict(os.environ if env is None else env, **{A.SECRET_ENV: A.SECRET})
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "courselib", "grade", str(path), "--source", str(SOLUTION),
                           "--json-file", str(path.parent / "report.json"), *extra],
                          cwd=path.parent, env=env, capture_output=True, text=True, timeout=timeout)
    return done, time.monotonic() - start


#: The SIGINT-ignoring answer is graded with short limits (the same path: interrupted at --timeout, killed
#: --grace later); with the CLI's defaults it would hold the grader their sum, checked below to stay under
#: a minute, without waiting 35 s for it.
SIGINT_TIMES = ("--timeout", "4", "--grace", "2")


def _grade_defaults() -> tuple[float, float]:
    from courselib.cli.main import build_parser
    args = build_parser().parse_args(["grade", "lab.ipynb"])
    return args.timeout, args.grace


@pytest.mark.slow   # one grading each (about 5 s; the SIGINT one about 10 s)
@pytest.mark.parametrize("attack", sorted(A.ATTACKS))
def test_an_attack_earns_nothing_it_did_not_solve(lab, attack, tmp_path):
    solution = nbformat.read(SOLUTION, 4)
    path = tmp_path / f"{TARGET}.ipynb"
    A.write(A.ATTACKS[attack](lab, solution), path)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    done, elapsed = grade_cli(path, *(SIGINT_TIMES if attack == "ignores_sigint" else ()))
    assert done.returncode == 0, done.stderr
    report_text = (tmp_path / "report.json").read_text()
    report = json.loads(report_text)
    points = _points()
    honest = {q: (points[q] if attack in A.HONEST_Q1 and q == "q1" else 0) for q in points}
    assert {q["question"]: q["points"] for q in report["questions"] if q["kind"] == "auto"} == honest, done.stdout
    assert report["max"] == sum(points.values()) and report["total"] == sum(honest.values())
    # what the student's code tried to reach
    everything = done.stdout + done.stderr + report_text
    assert A.SECRET not in everything                                   # the grader's environment
    assert "FORGED" not in done.stdout + done.stderr and "999/999" not in done.stdout   # its output
    assert path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == before   # the original
    assert _marked_processes() == []                                   # nothing left running
    if attack == "rewrites_the_report_later":
        time.sleep(6)                                                   # the forger would have written by now
        assert (tmp_path / "report.json").read_text() == report_text
    if attack == "ignores_sigint":
        assert elapsed < 40, f"the SIGINT-ignoring answer held the grader {elapsed:.0f} s (--timeout 4 --grace 2)"
        assert "ignored the interrupt and was killed 2 s later" in report["questions"][0]["feedback"]
        timeout, grace = _grade_defaults()
        assert timeout + grace < 60, (timeout, grace)   # with the defaults: stopped within a minute
    if attack in ("edited_checks", "deleted_checks"):
        assert all("earns nothing until you restore" in q["feedback"] for q in report["questions"] if q["kind"] == "auto")
    if attack == "fake_check_cell":
        assert [q["question"] for q in report["questions"] if q["kind"] == "auto"] == list(points)
        assert any("claims to be part of question 'q99'" in n for n in report["notes"])


@pytest.mark.slow
def test_the_whole_grading_has_a_wall_clock_limit(lab, tmp_path):
    """Every answer hangs and ignores SIGINT: the grading still ends at its limit, with every question 0."""
    path = tmp_path / f"{TARGET}.ipynb"
    stuck = nbformat.reads(nbformat.writes(lab), 4)
    for cell in stuck.cells:
        if markers.course_meta(cell).get("answer"):
            cell.source = A.IGNORE_SIGINT
    A.write(stuck, path)
    done, elapsed = grade_cli(path, "--timeout", "20", "--time-limit", "12")
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["total"] == 0 and elapsed < 45, elapsed
    assert any("wall-clock limit" in n for n in report["notes"]), report["notes"]
    assert _marked_processes() == []


# --- the pieces ----------------------------------------------------------------------------------------

def test_answers_cross_as_data_and_nothing_else():
    from courselib.model.workload import Job

    value = {"a": [1, 2.5, float("inf"), None, True, ...], ("t", 1): {frozenset({1}), 2},
             "job": Job("llm", pods=4, gpus_per_pod=2, duration=60.0)}
    assert encode.decode(encode.encode(value)) == value

    def f():
        return 1

    class Sneaky(float):
        def __eq__(self, other):
            return True

    out = encode.decode(encode.encode({"f": f, "cls": Sneaky, "x": Sneaky(2.0)}))
    assert isinstance(out["f"], encode.StudentCallable) and "function" in repr(out["f"])
    assert out["x"] == 2.0 and type(out["x"]) is float      # a float subclass arrives as a plain float
    with pytest.raises(TypeError, match="@probe"):
        out["f"]()
    for bad in ({"$dataclass": "os:system", "fields": {}}, {"$dataclass": "courselib.units:PAGE_SIZE", "fields": {}},
                {"$pickle": "gASV"}, {"$object": 1}):
        with pytest.raises(encode.DecodeError):
            encode.decode(bad)
    invalid = encode.decode({"$dataclass": "courselib.model.workload:Job",
                             "fields": {"name": "x", "pods": -3, "gpus_per_pod": 1, "duration": 1.0}})
    assert isinstance(invalid, encode.StudentObject) and "invalid Job" in repr(invalid)
    deep: list = []
    for _ in range(100):
        deep = [deep]
    assert isinstance(encode.decode(encode.encode(deep)), encode.StudentObject)


def test_a_probe_runs_the_students_code_in_the_students_process(tmp_path):
    """The same @probe: in the notebook a plain call; under the grader, a call in the sandbox."""
    from courselib.grading import checks

    src = "@probe\ndef _twice(x):\n    return helper(x) * 2\n"
    local = {"probe": checks.probe, "helper": lambda x: x + 1}
    exec(compile(src, "<local>", "exec"), local)
    assert local["_twice"](3) == 8
    with Sandbox() as box:
        box.start()
        assert box.call({"op": "run", "source": "import os\ndef helper(x):\n    return x + os.getpid() * 0 + 1"},
                        30)["error"] is None
        reply = box.call({"op": "probe", "name": "_twice", "source": "def _twice(x):\n    return helper(x) * 2\n",
                          "args": encode.encode([3]), "kwargs": encode.encode({})}, 30)
        assert encode.decode(reply["value"]) == 8


def test_the_students_process_is_isolated(tmp_path, monkeypatch):
    monkeypatch.setenv(A.SECRET_ENV, A.SECRET)
    with Sandbox() as box:
        box.start()
        code = ("import os\nuid, cwd, env, files = os.getuid(), os.getcwd(), dict(os.environ), os.listdir('.')\n"
                "sid, pgid = os.getsid(0), os.getpgid(0)")
        assert box.call({"op": "run", "source": code}, 30)["error"] is None
        got = box.call({"op": "export", "names": ["uid", "cwd", "env", "files", "sid", "pgid"]}, 30)["values"]
        got = {k: encode.decode(v) for k, v in got.items()}
        assert A.SECRET_ENV not in got["env"] and set(got["env"]) <= {
            "PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED",
            "PYTHONNOUSERSITE", "MPLBACKEND"}
        # its own session: seen from inside its PID namespace the session's leader (the sandbox's process
        # outside it) has no number (0); seen from here, every process of the student's is in that session
        assert got["files"] == [] and got["sid"] == got["pgid"] in (0, box.proc.pid)
        students = [p for p in processes() if p.pid != box.proc.pid and box.proc.pid in (p.sid, p.ppid)]
        assert students and all(p.sid == box.proc.pid != os.getsid(0) for p in students)
        if os.geteuid() == 0 and box.uid is not None:
            assert got["uid"] == box.uid != 0 and "separate unprivileged user" in box.isolation
        pid = box.proc.pid
    assert not any(p.pid == pid and not p.zombie for p in processes())


def test_an_interrupt_ignored_is_followed_by_sigkill_after_the_grace(tmp_path):
    with Sandbox(grace=1.0) as box:
        box.start()
        start = time.monotonic()
        from courselib.grading.sandbox import Stopped

        with pytest.raises(Stopped, match="ignored the interrupt"):
            box.call({"op": "run", "source": A.IGNORE_SIGINT}, 2.0)
        assert time.monotonic() - start < 10
        assert box.proc.poll() is not None
