"""``courselib grade NB --nbval``: the graded copy runs under ``pytest --nbval``, and nbval's per-cell results
are the points (issue 33, "autograded via nbval in CI", literally).

The **graded copy** is a notebook the grader writes in a private folder: the lab's given cells and the
instructor's check and hidden cells from the trusted manifest (for the graded seed), and between them
the text of the student's answer cells — never the student's own check cells, metadata or outputs
(an ``NBVAL_`` marker in an answer is disabled, so it cannot skip or excuse a cell). ``pytest --nbval``
runs it cell by cell with the kernel :class:`GradingKernel`, courselib's grader acting as a Jupyter
kernel: it is trusted code outside the sandbox, and for each cell it does what ``courselib grade``
does (:class:`courselib.grading.grade._Run`): a given or answer cell runs in the student's sandboxed
process; a check cell runs in the kernel itself on the answers as data. A check that fails raises there,
so nbval reports that cell as failed. The kernel checks that each cell nbval sends is the next cell of
the graded copy, so cells cannot be skipped or reordered.

A question earns its points when every one of its check cells passed in nbval's report (JUnit XML);
the feedback words are the kernel's. The pytest report itself is kept (``--nbval-report``: grade.yml
shows it).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

from courselib.errors import CourseError
from courselib.grading import safe
from courselib.grading.grade import QuestionResult, SandboxError, _OutOfTime, prepare
from courselib.grading.notebook import without_the_iri_parser

PLAN_ENV = "COURSELIB_NBVAL_PLAN"
KERNEL = "courselib-grading"
_NBVAL_MARKER = re.compile(r"(#\s*)NBVAL_", re.IGNORECASE)


def pytest_command() -> list[str]:
    """The command that runs pytest for the graded copy (arguments follow): ``python -m pytest``, less
    the iri parser that nbformat's jsonschema builds for a format no notebook names (1.5-3.5 s of every
    graded copy otherwise; :data:`courselib.grading.notebook.IRI_PARSER`)."""
    return without_the_iri_parser("import pytest; sys.exit(pytest.main())")


def graded_cells(manifest, sub) -> list[dict]:
    """The graded copy's code cells, in order: (step id, role, question, source)."""
    out = []
    for step in manifest.steps:
        if step.role in ("demo", "written"):
            continue
        source = sub.answers[step.id] if step.role == "answer" else step.source
        if step.role == "answer":
            source = _NBVAL_MARKER.sub(r"\1NBVAL-disabled-", source)
        out.append({"id": step.id, "role": step.role, "question": step.question, "source": source})
    return out


def grade_with_nbval(path, *, source=None, hidden=None, timeout: float = 30.0, grace: float = 5.0,
                     time_limit: float = 600.0, same_user=None, seed=None, lab=None, report_text=None):
    """Grade ``path`` with the graded copy under ``pytest --nbval``; a GradeReport, and the pytest report's text."""

    ready = prepare(path, source=source, hidden=hidden, seed=seed, lab=lab,
                    times={"--timeout": timeout, "--grace": grace, "--time-limit": time_limit})
    cells = graded_cells(ready.manifest, ready.sub)
    with tempfile.TemporaryDirectory(prefix="courselib-nbval-") as tmp:
        work = Path(tmp)
        os.chmod(work, 0o700)
        nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {"name": KERNEL, "display_name": KERNEL,
                                                                               "language": "python"}},
              "cells": [{"cell_type": "code", "id": f"c{n}", "metadata": {"courselib": {k: c[k] for k in ("id", "role", "question")}},
                         "execution_count": None, "outputs": [], "source": c["source"]} for n, c in enumerate(cells)]}
        graded = work / f"{ready.manifest.lab}.graded.ipynb"
        graded.write_text(json.dumps(nb, indent=1))
        results = work / "results.json"
        plan = {"notebook": str(Path(path).resolve()), "source": ready.manifest.path or None,
                "hidden": None if hidden is None else str(Path(hidden).resolve()), "seed": ready.seed, "lab": ready.manifest.lab,
                "timeout": timeout, "grace": grace, "time_limit": time_limit, "same_user": same_user,
                "cells": cells, "results": str(results)}
        (work / "plan.json").write_text(json.dumps(plan))
        spec = work / "kernels" / "kernels" / KERNEL
        spec.mkdir(parents=True)
        (spec / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, "-m", "courselib.grading.nbval", "-f", "{connection_file}"],
            "display_name": "courselib's grader", "language": "python"}))
        (work / "pytest.ini").write_text("[pytest]\n")
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "HOME", "PYTHONPATH", "TMPDIR")}
        env.update({PLAN_ENV: str(work / "plan.json"), "JUPYTER_PATH": str(work / "kernels"),
                    "JUPYTER_PLATFORM_DIRS": "1", "JUPYTER_RUNTIME_DIR": str(work / "runtime"),
                    "JUPYTER_DATA_DIR": str(work / "data"), "IPYTHONDIR": str(work / "ipython"),
                    "PYTHONDONTWRITEBYTECODE": "1"})
        junit = work / "junit.xml"
        cmd = [*pytest_command(), "--nbval", str(graded), "--nbval-kernel-name", KERNEL,
               f"--nbval-cell-timeout={int(timeout + grace + 60)}", "-p", "no:cacheprovider", "-c",
               str(work / "pytest.ini"), "--rootdir", str(work), f"--junitxml={junit}", "-rA", "--tb=line", "-q"]
        try:
            done = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True,
                                  timeout=time_limit + 120, start_new_session=True)
        except subprocess.TimeoutExpired:
            raise CourseError(f"pytest --nbval did not end within {time_limit + 120:g} s") from None
        legend = "graded copy: " + ", ".join(
            f"Cell {n} {c['role']}" + (f" {c['question']}" if c["question"] and c["role"] != "given" else "")
            for n, c in enumerate(cells) if c["role"] in ("answer", "check", "hidden"))
        pytest_report = safe.multiline(done.stdout + done.stderr + "\n" + legend + "\n", 200_000)
        if not results.is_file() or not junit.is_file():
            err = work / "plan.json.err"
            why = err.read_text()[-800:] if err.is_file() else pytest_report[-600:]
            raise CourseError("pytest --nbval ran no graded copy: " + safe.text(why, 800))
        kernel = json.loads(results.read_text())
        outcomes = _junit_outcomes(junit)
    if report_text is not None:
        report_text.append(pytest_report)
    # points from nbval's per-cell results: a question passes when every one of its check cells passed
    by_question: dict[str, list[bool]] = {}
    for n, c in enumerate(cells):
        if c["role"] in ("check", "hidden"):
            by_question.setdefault(c["question"], []).append(outcomes.get(n) == "passed")
    run = _Recorded(kernel)
    results_ = {}
    for q in ready.manifest.questions:
        mine = QuestionResult(**kernel["results"][q.name])
        if mine.kind == "auto" and not mine.held_back:
            passed = bool(by_question.get(q.name)) and all(by_question[q.name])
            if passed != bool(mine.passed):
                run.notes.append(f"{q.name}: nbval's report and the kernel disagree; the question earns nothing")
                passed = False
            mine = replace(mine, passed=passed, points=q.points if passed else 0)
        results_[q.name] = mine
    return ready.report(run, results_, [f"graded under pytest --nbval: {sum(1 for v in outcomes.values() if v == 'passed')} "
                                        f"of {len(cells)} cells passed"]), pytest_report


class _Recorded:
    """What the kernel's own run left (notes, the isolation), for the report."""

    def __init__(self, kernel: dict):
        self.notes = list(kernel.get("notes", []))
        self.box = type("Box", (), {"note": kernel.get("box_note", ""), "isolation": kernel.get("isolation", "")})()


def _junit_outcomes(path: Path) -> dict[int, str]:
    """nbval's items ("Cell N") and their outcome: passed, failed, error or skipped."""
    out: dict[int, str] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        m = re.fullmatch(r"Cell (\d+)", case.get("name", ""))
        if not m:
            continue
        kinds = {child.tag for child in case}
        out[int(m.group(1))] = ("failed" if "failure" in kinds else "error" if "error" in kinds
                                else "skipped" if "skipped" in kinds else "passed")
    return out


def _kernel_main() -> None:
    """The kernel nbval starts (``python -m courselib.grading.nbval -f CONNECTION_FILE``)."""
    from ipykernel.kernelapp import IPKernelApp
    from ipykernel.kernelbase import Kernel


    class GradingKernel(Kernel):
        implementation = "courselib-grading"
        implementation_version = "1"
        language = "python"
        language_version = sys.version.split()[0]
        language_info = {"name": "python", "mimetype": "text/x-python", "file_extension": ".py"}
        banner = "courselib's grader, running a graded copy cell by cell"

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.plan = json.loads(Path(os.environ[PLAN_ENV]).read_text())
            p = self.plan
            self.ready = prepare(p["notebook"], source=p["source"], hidden=p["hidden"], seed=p["seed"], lab=p["lab"])
            self.run = self.ready.runner(timeout=p["timeout"], grace=p["grace"], time_limit=p["time_limit"],
                                         same_user=p["same_user"])
            self.steps = {s.id: s for s in self.ready.manifest.steps}
            self.next, self.begun, self.halted, self.finished = 0, False, "", False

        def _finish(self):
            if self.finished:
                return
            self.finished = True
            results = self.run.end()
            data = {"results": {q: {k: getattr(r, k) for k in ("question", "points", "max_points", "passed", "feedback",
                                                               "kind", "answer", "held_back")} for q, r in results.items()},
                    "notes": self.run.notes, "box_note": self.run.box.note, "isolation": self.run.box.isolation}
            fd = os.open(self.plan["results"], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump(data, f)

        def _reply(self, error: str | None):
            if error is None:
                return {"status": "ok", "execution_count": self.execution_count, "payload": [], "user_expressions": {}}
            content = {"ename": "AssertionError", "evalue": error, "traceback": [f"AssertionError: {error}"]}
            self.send_response(self.iopub_socket, "error", content)
            return {"status": "error", "execution_count": self.execution_count, **content}

        async def do_execute(self, code, silent, store_history=True, user_expressions=None, allow_stdin=False,
                             *, cell_meta=None, cell_id=None):
            cells = self.plan["cells"]
            if self.next >= len(cells) or code != cells[self.next]["source"]:
                self.halted = self.halted or "a cell arrived out of the graded copy's order"
                return self._reply(f"not graded: {self.halted}")
            cell = cells[self.next]
            self.next += 1
            step = self.steps[cell["id"]]
            feedback = None
            if not self.halted:
                try:
                    if not self.begun:
                        self.begun = True
                        self.run.begin()
                    feedback = self.run.step(step)
                except (_OutOfTime, SandboxError) as err:
                    self.run.stopped(err)
                    self.halted = safe.text(str(err) or "the whole grading ran past its limit")
            if self.halted and step.role in ("check", "hidden"):
                feedback = f"not graded: {self.halted}"
            if self.next == len(cells):
                self._finish()
            if step.role in ("check", "hidden") and feedback:
                return self._reply(safe.text(feedback))
            return self._reply(None)

        async def do_shutdown(self, restart):
            if not self.finished:
                self.run.stopped(_OutOfTime())
                self._finish()
            return {"status": "ok", "restart": restart}

    IPKernelApp.launch_instance(kernel_class=GradingKernel)


if __name__ == "__main__":
    try:
        _kernel_main()
    except BaseException:
        import traceback

        with open(os.environ.get(PLAN_ENV, "plan") + ".err", "a") as _f:
            _f.write(traceback.format_exc())
        raise
