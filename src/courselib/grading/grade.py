"""``courselib grade LAB.ipynb``: score a student's lab against the instructor's checks.

What is trusted, and what is not:

- **Questions, points and check code** come from the instructor's source (``solutions/NAME.ipynb``, or
  the ``labs/manifest.json`` the build writes from it; :mod:`courselib.grading.manifest`). The
  student's notebook gives only the text of its answer cells (matched by cell id) and of its
  written answers. Its metadata, outputs, added cells and check cells are never believed: a check
  cell the student edited or deleted earns nothing for its question (and the report says so).
- **The student's code** (the lab's given cells, then each answer cell, in the notebook's order)
  runs in a separate process, :mod:`courselib.grading.sandbox`: clean environment, throw-away
  folder, no path to the original, its own session, an unprivileged user when the grader is root,
  SIGINT at the time limit and SIGKILL ``grace`` seconds later, everything it started killed at the end.
- **The checks** run here, in the grader, on the student's answers as *data*
  (:mod:`courselib.grading.encode`): nothing the student's code did can reach them. A check that
  must call the student's code does it through a ``@probe`` (:func:`courselib.grading.checks.probe`),
  which runs in the student's process and returns data.
- A hung answer, a killed process or an answer that ends Python costs only its own question: the
  student's process is restarted and replayed without that answer. The whole grading has a
  wall-clock limit.
- **Written answers** (graded by hand) are reported as needing manual grading, with their points and
  the student's text, never as 0 or as full marks.

The report is made only after every student process is gone; the CLI writes it after that.
"""
from __future__ import annotations

import contextlib
import io
import linecache
import signal
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from courselib.errors import CourseError, InputError
from courselib.grading import checks, encode, markers
from courselib.grading.build import read_notebook_json
from courselib.grading.manifest import Manifest, Step, find_source, hidden_checks
from courselib.grading.sandbox import Sandbox, Stopped

MAX_WRITTEN_CHARS = 20_000
MANUAL = "needs manual grading"
PASSED, FAILED = "passed", "failed"


@dataclass(frozen=True)
class QuestionResult:
    question: str
    points: int | None        # None: a written answer waiting for the instructor
    max_points: int
    passed: bool | None
    feedback: str = ""
    kind: str = "auto"        # auto | manual
    answer: str | None = None  # a written answer's text

    @property
    def status(self) -> str:
        return MANUAL if self.kind == "manual" else (PASSED if self.passed else FAILED)


@dataclass(frozen=True)
class GradeReport:
    file: str
    lab: str
    source: str
    questions: tuple[QuestionResult, ...]
    total: int                # points earned on auto-graded questions
    max_points: int           # points of the auto-graded questions
    manual_points: int = 0    # points that need manual grading
    isolation: str = ""
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict:
        return {"file": self.file, "lab": self.lab, "source": self.source, "total": self.total,
                "max": self.max_points, "manual": self.manual_points, "isolation": self.isolation,
                "questions": [{**asdict(q), "status": q.status} for q in self.questions],
                "notes": list(self.notes)}


def _feedback(ename: str, evalue: str) -> str:
    text = " ".join(str(evalue).split())
    if ename == "AssertionError":
        return text or "the check failed (it gave no message)"
    return f"{ename}: {text}" if text else ename


class StudentError(Exception):
    """Raised in a check when the student's code, run by a probe, raised (named after the student's error)."""


_ERROR_CLASSES: dict[str, type] = {}


def _student_error(ename: str, evalue: str) -> StudentError:
    name = ename if isinstance(ename, str) and ename.isidentifier() and len(ename) < 80 else "Exception"
    cls = _ERROR_CLASSES.setdefault(name, type(name, (StudentError,), {}))
    return cls(str(evalue)[:2000])


class _OutOfTime(BaseException):
    """The whole grading ran past its wall-clock limit (raised in the grader's own code)."""


@contextlib.contextmanager
def _alarm(deadline: float):
    """Raise :class:`_OutOfTime` in this thread at ``deadline`` (main thread only; else no alarm)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def ring(signum, frame):
        raise _OutOfTime

    old = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, max(0.001, deadline - time.monotonic()))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _normal(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").strip().splitlines())


class _Submission:
    """What the grader takes from the student's notebook: answer texts by cell id, and nothing else."""

    def __init__(self, nb, manifest: Manifest):
        by_id: dict[str, object] = {}
        for cell in nb.cells:
            cid = cell.get("id")
            if isinstance(cid, str) and cid not in by_id:
                by_id[cid] = cell
        self.notes: list[str] = []
        self.answers: dict[str, str] = {}     # answer cell id -> the student's source
        self.written: dict[str, str] = {}     # question -> the student's text
        self.tampered: dict[str, str] = {}    # question -> why its check does not count
        ids = {s.id for s in manifest.steps}
        if not ids & set(by_id):
            self.notes.append("none of the lab's cells is in this notebook (matched by cell id): is it "
                              "another lab, or was it saved by a Jupyter older than nbformat 4.5?")
        for step in manifest.steps:
            cell = by_id.get(step.id)
            if step.role == "answer":
                if cell is not None and cell.get("cell_type") == "code":
                    self.answers[step.id] = str(cell.get("source", ""))
                else:
                    self.answers[step.id] = step.source
                    self.notes.append(f"{step.question}: an answer cell is missing (graded as unanswered)")
            elif step.role == "written":
                text = str(cell.get("source", "")) if cell is not None else ""
                self.written[step.question] = text[:MAX_WRITTEN_CHARS]
            elif step.role == "check":
                if cell is None or cell.get("cell_type") != "code":
                    self.tampered[step.question] = (
                        "its check cell is missing from your notebook: this question earns nothing until "
                        "you restore the cell (copy it from a fresh lab)")
                elif _normal(str(cell.get("source", ""))) != _normal(step.source):
                    self.tampered[step.question] = (
                        "its check cell was edited: this question earns nothing until you restore the "
                        "cell exactly as the lab gives it")
        checks_ = {s.id for s in manifest.steps if s.role == "check"}
        for n, cell in enumerate(nb.cells, start=1):
            meta = markers.course_meta(cell)
            if ("question" in meta or "points" in meta) and cell.get("id") not in ids | checks_ \
                    and markers.HIDDEN_TAG not in markers.tags(cell):        # an instructor's notebook's own
                self.notes.append(f"cell {n} claims to be part of question {meta.get('question')!r}: ignored "
                                  f"(questions and checks come from the instructor's source)")


class _Run:
    """One grading: the student's process (replayed after a kill) and the checks here."""

    def __init__(self, manifest: Manifest, sub: _Submission, *, timeout: float, grace: float,
                 time_limit: float, same_user: bool | None, hide=()):
        self.m, self.sub = manifest, sub
        self.timeout = timeout
        self.deadline = time.monotonic() + time_limit
        self.time_limit = time_limit
        self.box = Sandbox(grace=grace, same_user=same_user, hide=hide)
        self.loaded: list[Step] = []          # steps the student's process has run (to replay them)
        self.disabled: set[str] = set()       # answer cells replaced by their stub after a kill
        self.answer_trouble: dict[str, str] = {}
        self.restarts = 0
        self.max_restarts = 3 + 2 * sum(1 for s in manifest.steps if s.role == "answer")
        self.trusted: dict = {"__name__": "__lab__"}
        self.notes: list[str] = []

    # --- the student's process ---------------------------------------------------------------------------
    def _left(self) -> float:
        return self.deadline - time.monotonic()

    def _source(self, step: Step) -> str:
        if step.role == "answer":
            return step.source if step.id in self.disabled else self.sub.answers[step.id]
        return step.source

    def _send_cell(self, step: Step) -> None:
        """Run one given or answer cell in the student's process (restarting it after a kill)."""
        if self._left() <= 0:
            raise _OutOfTime
        try:
            reply = self.box.call({"op": "run", "source": self._source(step)}, min(self.timeout, self._left()))
        except Stopped as stop:
            if self._left() <= 0:
                raise _OutOfTime from None
            if step.role == "answer":
                self._trouble(step, stop)
                self.disabled.add(step.id)
            self.loaded.append(step)
            self._restart()
            return
        self.loaded.append(step)
        err = reply.get("error")
        if err and step.role == "answer" and step.id not in self.disabled:
            ename, evalue = (list(err) + ["", ""])[:2]
            if ename == "KeyboardInterrupt":
                self.answer_trouble.setdefault(step.question, f"your answer cell was stopped at the "
                                                              f"{self.timeout:g} s time limit")
            else:
                self.answer_trouble.setdefault(step.question, f"your answer cell raised {_feedback(ename, evalue)}")

    def _trouble(self, step: Step, stop: Stopped) -> None:
        if stop.kind == "timeout":
            why = f"your answer cell was stopped at the {self.timeout:g} s time limit ({stop.detail})"
        else:
            why = f"your answer cell stopped the grading process: {stop.detail}"
        self.answer_trouble[step.question] = why

    def _restart(self) -> None:
        """A new student process, replaying every cell run so far (answers that killed it as stubs)."""
        while True:
            self.restarts += 1
            if self.restarts > self.max_restarts or self._left() <= 0:
                raise _OutOfTime
            self.box.start()
            try:
                for step in self.loaded:
                    reply = self.box.call({"op": "run", "source": self._source(step)}, min(self.timeout, self._left()))
                    del reply
                return
            except Stopped:
                # an answer that did not kill the process the first time does now: find and disable it
                bad = next((s for s in reversed(self.loaded) if s.role == "answer" and s.id not in self.disabled),
                           None)
                if bad is None:
                    raise _OutOfTime from None
                self.disabled.add(bad.id)
                self.answer_trouble.setdefault(bad.question, "your answer cell stopped the grading process "
                                                             "when it was run again")

    def _remote(self, name: str, source: str, args, kwargs):
        """A probe: run the instructor's function in the student's process, return its result as data."""
        if self._left() <= 0:
            raise _OutOfTime
        message = {"op": "probe", "name": name, "source": source,
                   "args": encode.encode(list(args)), "kwargs": encode.encode(dict(kwargs))}
        try:
            reply = self.box.call(message, min(self.timeout, self._left()))
        except Stopped as stop:
            if self._left() <= 0:
                raise _OutOfTime from None
            self._restart()
            if stop.kind == "timeout":
                raise _student_error("TimeoutError", f"your code was stopped at the {self.timeout:g} s time "
                                                     f"limit ({stop.detail})") from None
            raise _student_error("SystemExit", f"your code stopped the grading process: {stop.detail}") from None
        err = reply.get("error")
        if err:
            ename, evalue = (list(err) + ["", ""])[:2]
            if ename == "KeyboardInterrupt":
                raise _student_error("TimeoutError", f"your code was stopped at the {self.timeout:g} s time limit")
            raise _student_error(ename, evalue)
        try:
            return encode.decode(reply.get("value"))
        except (encode.DecodeError, ImportError, AttributeError) as err:
            raise _student_error("ValueError", f"your code returned something the grader cannot read ({err})") from None

    def _answers(self, q) -> dict:
        spec = self.m.question(q)
        names = list(spec.answers) + [u for u in spec.uses if u not in spec.answers]
        if not names:
            return {}
        try:
            reply = self.box.call({"op": "export", "names": names}, min(self.timeout, self._left()))
        except Stopped as stop:
            if self._left() <= 0:
                raise _OutOfTime from None
            self._restart()
            raise _student_error("TimeoutError" if stop.kind == "timeout" else "SystemExit",
                                 f"reading your answers stopped the grading process: {stop.detail}") from None
        values = reply.get("values") if isinstance(reply.get("values"), dict) else {}
        out = {}
        for name in names:
            data = values.get(name, {"$missing": True})
            if isinstance(data, dict) and data.get("$missing") is True:
                out[name] = encode.Missing(name)
                continue
            try:
                out[name] = encode.decode(data)
            except (encode.DecodeError, ImportError, AttributeError):
                out[name] = encode.StudentObject("object", "<an answer the grader cannot read>")
        return out

    # --- the checks, here --------------------------------------------------------------------------------
    def _trusted_exec(self, step: Step, ns: dict) -> None:
        filename = f"<{self.m.lab} {step.role} {step.id}>"
        linecache.cache[filename] = (len(step.source), None, step.source.splitlines(True), filename)
        code = compile(step.source, filename, "exec")
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            exec(code, ns)  # noqa: S102 — the instructor's code, from the trusted source

    def _check(self, step: Step, ns: dict) -> str | None:
        """Run one check (or hidden check) in ``ns``; None when it passes, else its feedback."""
        checks._REMOTE = self._remote
        try:
            with _alarm(self.deadline):
                self._trusted_exec(step, ns)
        except _OutOfTime:
            raise
        except StudentError as err:
            return f"your code raised {_feedback(type(err).__name__, str(err))}"
        except Exception as err:  # noqa: BLE001 — a failed check is feedback
            return _feedback(type(err).__name__, str(err))
        finally:
            checks._REMOTE = None
        return None

    def run(self) -> dict[str, QuestionResult]:
        results: dict[str, QuestionResult] = {}
        scopes: dict[str, dict] = {}
        out_of_time = False
        try:
            with _alarm(self.deadline):
                self.box.start()
            for step in self.m.steps:
                if step.role in ("demo", "written"):
                    continue
                if step.role == "given":
                    try:
                        with _alarm(self.deadline):
                            self._trusted_exec(step, self.trusted)
                    except _OutOfTime:
                        raise
                    except Exception as err:  # noqa: BLE001 — an instructor's bug: say so, go on
                        self.notes.append(f"the lab's cell {step.id} raised {type(err).__name__}: {err} in the "
                                          f"grader; tell the instructor")
                    self._send_cell(step)
                elif step.role == "answer":
                    self._send_cell(step)
                elif step.role in ("check", "hidden"):
                    q = step.question
                    spec = self.m.question(q)
                    if q in self.sub.tampered:
                        results[q] = QuestionResult(q, 0, spec.points, False, self.sub.tampered[q])
                        continue
                    if step.role == "hidden" and q in results and not results[q].passed:
                        continue
                    try:
                        if step.role == "check" or q not in scopes:
                            # the lab's given names and this question's answers only (as in the
                            # notebook, a hidden check also sees what the visible check defined)
                            scopes[q] = {**self.trusted, **self._answers(q)}
                        feedback = self._check(step, scopes[q])
                    except StudentError as err:
                        feedback = f"{err}"
                    if feedback is not None:
                        if step.role == "hidden":
                            feedback = f"an instructor's hidden check: {feedback}"
                        if q in self.answer_trouble:
                            feedback = f"{self.answer_trouble[q]}; then the check said: {feedback}"
                        results[q] = QuestionResult(q, 0, spec.points, False, feedback)
                    elif step.role == "check":
                        results[q] = QuestionResult(q, spec.points, spec.points, True)
        except _OutOfTime:
            out_of_time = True
        finally:
            self.box.close()     # every student process is gone before a report exists
        why = (f"not graded: the whole grading ran past its {self.time_limit:g} s limit"
               if out_of_time else "this check did not run")
        if out_of_time:
            self.notes.append(f"the grading was stopped at its {self.time_limit:g} s wall-clock limit")
        if self.restarts:
            self.notes.append(f"the student's process was restarted {self.restarts} time(s) after an answer "
                              f"hung or ended it")
        for q in self.m.questions:
            if q.manual:
                text = self.sub.written.get(q.name, "")
                blank = _normal(text) in ("", markers.WRITTEN_STUB)
                results[q.name] = QuestionResult(
                    q.name, None, q.points, None,
                    MANUAL + (" (not answered yet: the cell still says YOUR ANSWER HERE)" if blank
                              else " (a written answer; your instructor marks it)"),
                    kind="manual", answer=text)
            elif q.name not in results:
                results[q.name] = QuestionResult(q.name, 0, q.points, False, self.sub.tampered.get(q.name, why))
        return results


def grade(path, *, source=None, hidden=None, timeout: float = 30.0, grace: float = 5.0,
          time_limit: float = 600.0, same_user: bool | None = None) -> GradeReport:
    """Grade the lab at ``path`` against the instructor's source. Never writes ``path``."""
    path = Path(path)
    for name, value in (("--timeout", timeout), ("--grace", grace), ("--time-limit", time_limit)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise InputError(f"{value!r} is not a time > 0 in seconds", field=name)
    nb = read_notebook_json(path, "lab")
    manifest = find_source(path, None if source is None else Path(source))
    if hidden is not None:
        manifest = hidden_checks(manifest, Path(hidden))
    sub = _Submission(nb, manifest)
    hide = [Path(hidden)] if hidden is not None else []
    if manifest.origin.endswith(".ipynb"):        # the solutions: out of the student's sight
        hide.append(Path(manifest.origin).parent)
    run = _Run(manifest, sub, timeout=float(timeout), grace=float(grace), time_limit=float(time_limit),
               same_user=same_user, hide=hide)
    results = run.run()
    ordered = tuple(results[q.name] for q in manifest.questions)
    auto = [r for r in ordered if r.kind == "auto"]
    notes = tuple(list(manifest.notes) + sub.notes + run.notes + ([run.box.note] if run.box.note else []))
    return GradeReport(str(path), manifest.lab, manifest.origin + (f" + hidden checks from {manifest.hidden_from}"
                                                                   if manifest.hidden_from else ""),
                       ordered, sum(r.points for r in auto), sum(r.max_points for r in auto),
                       sum(r.max_points for r in ordered if r.kind == "manual"), run.box.isolation, notes)


def format_report(report: GradeReport) -> str:
    width = max(len(r.question) for r in report.questions)
    lines = [f"{report.file}  (lab {report.lab}, checked against {report.source})"]
    for r in report.questions:
        if r.kind == "manual":
            line = f"  {r.question:<{width}}  HAND  ?/{r.max_points}  {r.feedback}"
        else:
            line = f"  {r.question:<{width}}  {'ok  ' if r.passed else 'FAIL'}  {r.points}/{r.max_points}"
            if r.feedback:
                line += f"  {r.feedback}"
        lines.append(line)
    for note in report.notes:
        lines.append(f"  note: {note}")
    total = f"  total {report.total}/{report.max_points}"
    if report.manual_points:
        total += f" auto-graded; {report.manual_points} more point(s) need manual grading"
    lines.append(total)
    return "\n".join(lines)
