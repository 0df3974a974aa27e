"""``courselib grade LAB.ipynb``: execute a copy of a lab and score its check cells.

The student's file is only read. A copy runs in a fresh kernel of *this* Python (the one that has
courselib), in a temporary directory, with a per-cell timeout; a cell that errors does not stop the
run (every question is scored on its own). A question earns its points when its check cell ran
without an exception; otherwise it earns 0 and the exception's message is its feedback. Which
questions exist, and their points, come from the lab's own metadata (written by ``courselib labs
build``), so a deleted check cell still counts as 0 out of its points.
"""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from courselib.errors import CourseError, InputError
from courselib.grading import markers
from courselib.grading.build import read_notebook

NOT_RUN = "this check did not run"


@dataclass(frozen=True)
class QuestionResult:
    question: str
    points: int
    max_points: int
    passed: bool
    feedback: str = ""
    check_edited: bool = False  # the check cell's source is not the one the build wrote


@dataclass(frozen=True)
class GradeReport:
    file: str
    questions: tuple[QuestionResult, ...]
    total: int
    max_points: int
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict:
        return {"file": self.file, "total": self.total, "max": self.max_points,
                "questions": [asdict(q) for q in self.questions], "notes": list(self.notes)}


def _graded_cells(nb, path: str) -> tuple[dict[str, int], list[tuple[int, str]]]:
    """The lab's questions with their points, and the (cell index, question) of each check cell."""
    declared = nb.metadata.get("course", {}).get("questions", {}) if isinstance(nb.metadata.get("course"), dict) else {}
    questions: dict[str, int] = {}
    for q, pts in (declared.items() if isinstance(declared, dict) else ()):
        if isinstance(pts, int) and not isinstance(pts, bool) and pts > 0:
            questions[str(q)] = pts
    checks = []
    for i, cell in enumerate(nb.cells):
        if markers.is_check(cell):
            meta = markers.course_meta(cell)
            q, pts = str(meta["question"]), meta["points"]
            if isinstance(pts, bool) or not isinstance(pts, int) or pts <= 0:
                raise InputError(f"points {pts!r} is not a whole number > 0", file=path,
                                 field=f"cell {i + 1} course.points")
            questions.setdefault(q, pts)
            checks.append((i, q))
    if not questions:
        raise InputError("no graded questions: no cell has {\"course\": {\"question\": ..., \"points\": ...}}",
                         file=path, hint="grade a lab from labs/ (or a solution from solutions/)")
    return questions, checks


def _kernel_manager():
    """A kernel of the Python running courselib (like nbval's --nbval-current-env)."""
    import ipykernel.kernelspec
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager

    class _CurrentEnv(KernelSpecManager):
        def get_kernel_spec(self, kernel_name):
            return KernelSpec(resource_dir=ipykernel.kernelspec.RESOURCES,
                              **ipykernel.kernelspec.get_kernel_dict())

    return AsyncKernelManager(kernel_name="courselib-current-env", kernel_spec_manager=_CurrentEnv())


def _error_of(cell) -> tuple[str, str] | None:
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            return out.get("ename", "Error"), out.get("evalue", "")
    return None


def _feedback(ename: str, evalue: str) -> str:
    text = " ".join(evalue.split())
    if ename == "AssertionError":
        return text or "the check failed (it gave no message)"
    if ename == "KeyboardInterrupt":
        return "the check was stopped at the time limit"
    return f"{ename}: {text}" if text else ename


def execute(nb, workdir: Path, timeout: float) -> str | None:
    """Run every cell of ``nb`` in place; return why the run stopped early, or None."""
    try:
        from nbclient import NotebookClient
        from nbclient.exceptions import CellTimeoutError, DeadKernelError
        import ipykernel  # noqa: F401  (the kernel the lab runs in)
    except ImportError as err:
        raise CourseError(f"grading needs {err.name}, which is not installed",
                          hint="pip install 'courselib[book,test]' (make setup installs everything)") from None

    client = NotebookClient(nb, km=_kernel_manager(), timeout=timeout, allow_errors=True,
                            interrupt_on_timeout=True, startup_timeout=120,
                            resources={"metadata": {"path": str(workdir)}})
    try:
        client.execute(stderr=subprocess.DEVNULL)  # the kernel's own log lines are not the student's
    except DeadKernelError:
        return "the kernel died (out of memory? killed?) and the checks after that did not run"
    except CellTimeoutError:
        return f"a cell ran longer than {timeout:g} s and could not be interrupted"
    return None


def grade(path, timeout: float = 60.0) -> GradeReport:
    """Grade the lab at ``path``: execute a copy, score every question. Never writes ``path``."""
    path = Path(path)
    nb = read_notebook(path, "lab")
    if isinstance(timeout, bool) or not timeout or timeout <= 0:
        raise InputError(f"{timeout!r} is not a time limit > 0 in seconds", field="--timeout")
    questions, checks = _graded_cells(nb, str(path))
    notes = []
    with tempfile.TemporaryDirectory(prefix="courselib-grade-") as tmp:
        copy = Path(tmp) / path.name
        shutil.copyfile(path, copy)  # the kernel's working directory holds a copy, never the original
        nb = read_notebook(copy, "lab")
        stopped = execute(nb, Path(tmp), timeout)
    if stopped:
        notes.append(stopped)
    answer_errors: dict[str, str] = {}  # question -> what went wrong in its answer cell
    for cell in nb.cells:
        meta = markers.course_meta(cell)
        err = _error_of(cell) if meta.get("answer") else None
        if err is not None and meta.get("question") not in answer_errors:
            answer_errors[meta.get("question")] = (
                f"your answer cell was stopped at the {timeout:g} s time limit" if err[0] == "KeyboardInterrupt"
                else f"your answer cell raised {_feedback(*err)}")
    results: dict[str, QuestionResult] = {}
    for i, q in checks:
        cell = nb.cells[i]
        meta = markers.course_meta(cell)
        edited = "check" in meta and markers.checksum(cell.get("source", "")) != meta["check"]
        err = _error_of(cell)
        ran = cell.get("execution_count") is not None
        previous = results.get(q)
        if err is not None:
            feedback = _feedback(*err)
            if q in answer_errors:
                feedback = f"{answer_errors[q]}; then the check said: {feedback}"
            res = QuestionResult(q, 0, questions[q], False, feedback, edited)
        elif not ran:
            res = QuestionResult(q, 0, questions[q], False, stopped or NOT_RUN, edited)
        else:
            res = QuestionResult(q, questions[q], questions[q], True, "", edited)
        if previous is None or (previous.passed and not res.passed):
            results[q] = res  # a question with several check cells passes only if all pass
    for q, pts in questions.items():
        results.setdefault(q, QuestionResult(q, 0, pts, False, "its check cell is missing from the lab"))
        if results[q].check_edited:
            notes.append(f"{q}: the check cell was edited; restore it from a fresh `courselib labs build`")
    ordered = tuple(results[q] for q in questions)
    return GradeReport(str(path), ordered, sum(r.points for r in ordered), sum(questions.values()), tuple(notes))


def format_report(report: GradeReport) -> str:
    width = max(len(r.question) for r in report.questions)
    lines = [f"{report.file}"]
    for r in report.questions:
        mark = "ok  " if r.passed else "FAIL"
        line = f"  {r.question:<{width}}  {mark}  {r.points}/{r.max_points}"
        if r.feedback:
            line += f"  {r.feedback}"
        lines.append(line)
    for note in report.notes:
        lines.append(f"  note: {note}")
    lines.append(f"  total {report.total}/{report.max_points}")
    return "\n".join(lines)
