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
import os
import signal
import stat
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from courselib.errors import InputError
from courselib.grading import checks, encode, markers, safe, variant
from courselib.grading.manifest import Manifest, Step
from courselib.grading.notebook import read_notebook_json
from courselib.grading.source import find_source, hidden_checks
from courselib.grading.sandbox import Sandbox, SandboxError, Stopped

MAX_WRITTEN_CHARS = 20_000
MANUAL = "needs manual grading"
PASSED, FAILED, HELD_BACK = "passed", "failed", "held back"


def held_back_feedback(points: int) -> str:
    """The words every output format uses for a question whose hidden checks were not run here."""
    return (f"the public checks passed; {points} point{'s' if points != 1 else ''} "
            f"{'are' if points != 1 else 'is'} held back for hidden checks your instructor runs")


@dataclass(frozen=True)
class QuestionResult:
    question: str
    points: int | None        # None: a written answer waiting for the instructor
    max_points: int
    passed: bool | None
    feedback: str = ""
    kind: str = "auto"        # auto | manual
    answer: str | None = None  # a written answer's text
    held_back: bool = False   # public checks passed; the hidden checks (and the points) are the instructor's

    @property
    def status(self) -> str:
        if self.kind == "manual":
            return MANUAL
        return HELD_BACK if self.held_back else (PASSED if self.passed else FAILED)


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
    seed: int = 0
    held_back_points: int = 0  # points of questions whose hidden checks run elsewhere (0 so far)

    def to_dict(self) -> dict:
        return {"file": self.file, "lab": self.lab, "source": self.source, "seed": self.seed, "total": self.total,
                "max": self.max_points, "manual": self.manual_points, "held_back": self.held_back_points,
                "isolation": self.isolation,
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


def _role_of(cell) -> tuple[str, str | None] | None:
    """What a student's cell says it is, from the lab's markers and metadata (not its id)."""
    meta = markers.course_meta(cell)
    q = meta.get("question") if isinstance(meta.get("question"), str) else None
    if cell.get("cell_type") == "code":
        if meta.get("answer") is True:
            return "answer", q
        if markers.CHECK_TAG in markers.tags(cell) or ("check" in meta and q):
            return "check", q
    elif meta.get("manual") is True and q:
        return "written", q
    return None


class _Submission:
    """What the grader takes from the student's notebook: answer texts, and nothing else.

    A lab cell is found by its id, as the build wrote it; when an editor gave the cells new ids (or
    none: nbformat < 4.5), by what the lab's markers and metadata say it is — an answer cell of
    question q (``course.answer``), a written answer (``course.manual``), a check cell (its tag, or its
    source exactly as the lab gives it) — in the lab's order within each question.
    """

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
        matched = self._match(nb, manifest, by_id)
        if not any(c is not None for c in matched.values()):
            self.notes.append("none of the lab's cells is in this notebook (by cell id, markers or metadata): "
                              "is it another lab?")
        elif not ids & set(by_id):
            self.notes.append("the cells were found by the lab's markers and metadata (an editor gave them new ids)")
        for step in manifest.steps:
            cell = matched.get(step.id)
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
        used = {id(c) for c in matched.values() if c is not None}
        for n, cell in enumerate(nb.cells, start=1):
            meta = markers.course_meta(cell)
            if ("question" in meta or "points" in meta) and id(cell) not in used \
                    and markers.HIDDEN_TAG not in markers.tags(cell) and meta.get("answer") is not True:
                self.notes.append(safe.text(f"cell {n} claims to be part of question {meta.get('question')!r}: "
                                            f"ignored (questions and checks come from the instructor's source)", 300))

    @staticmethod
    def _match(nb, manifest: Manifest, by_id: dict) -> dict[str, object]:
        """Each of the lab's answer, written and check steps -> the student's cell (or None)."""
        out: dict[str, object] = {}
        taken: set[int] = set()
        roles = ("answer", "written", "check")
        for step in manifest.steps:                       # 1. the same id, the same role
            cell = by_id.get(step.id)
            if step.role in roles and cell is not None and (_role_of(cell) in (None, (step.role, step.question))
                                                             or step.role == "check"):
                out[step.id] = cell
                taken.add(id(cell))
        checks = {_normal(s.source): s for s in manifest.steps if s.role == "check" and s.id not in out}
        for cell in nb.cells:                             # 2. a check cell exactly as the lab gives it
            if id(cell) in taken or cell.get("cell_type") != "code":
                continue
            step = checks.pop(_normal(str(cell.get("source", ""))), None)
            if step is not None:
                out[step.id] = cell
                taken.add(id(cell))
        by_role: dict[tuple[str, str | None], list] = {}   # 3. markers and metadata, in order
        for cell in nb.cells:
            role = _role_of(cell)
            if role is not None and id(cell) not in taken:
                by_role.setdefault(role, []).append(cell)
        for step in manifest.steps:
            if step.role in roles and step.id not in out:
                found = by_role.get((step.role, step.question), [])
                out[step.id] = found.pop(0) if found else None
        return out


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
        self.results: dict[str, QuestionResult] = {}
        self.scopes: dict[str, dict] = {}
        self.out_of_time, self.refused = False, ""

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
        """Every step of the lab in order (the grader's own loop; under nbval, the kernel calls :meth:`step`)."""
        try:
            self.begin()
            for step in self.m.steps:
                self.step(step)
        except (_OutOfTime, SandboxError) as err:
            self.stopped(err)
        except BaseException:
            self.box.close()     # every student process is gone, whatever happened here
            raise
        return self.end()

    def begin(self) -> None:
        with _alarm(self.deadline):
            self.box.start()

    def stopped(self, err: BaseException) -> None:
        """The grading cannot go on: out of time, or (fail closed) no student process could be started."""
        if isinstance(err, SandboxError):
            self.refused = safe.text(str(err))
        else:
            self.out_of_time = True

    def step(self, step: Step) -> str | None:
        """Run one step of the lab; for a check, its feedback (None: it passed, or nothing to check)."""
        results, scopes = self.results, self.scopes
        if step.role in ("demo", "written"):
            return None
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
            return None
        if step.role == "answer":
            self._send_cell(step)
            return self.answer_trouble.get(step.question) if step.id in self.disabled else None
        q = step.question
        spec = self.m.question(q)
        if q in self.sub.tampered:
            results[q] = QuestionResult(q, 0, spec.points, False, self.sub.tampered[q])
            return self.sub.tampered[q]
        if step.role == "hidden" and q in results and not results[q].passed:
            return results[q].feedback
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
        return feedback

    def end(self) -> dict[str, QuestionResult]:
        self.box.close()     # every student process is gone before a report exists
        results = self.results
        if self.refused:
            why = f"not graded: {self.refused}"
            self.notes.append(f"the student's code was not run: {self.refused}")
        elif self.out_of_time:
            why = f"not graded: the whole grading ran past its {self.time_limit:g} s limit"
            self.notes.append(f"the grading was stopped at its {self.time_limit:g} s wall-clock limit")
        else:
            why = "this check did not run"
        if self.restarts:
            self.notes.append(f"the student's process was restarted {self.restarts} time(s) after an answer "
                              f"hung or ended it")
        for q in self.m.questions:
            r = results.get(q.name)
            if r is not None and r.passed and self.m.held_back(q.name):
                results[q.name] = QuestionResult(q.name, 0, q.points, None, held_back_feedback(q.points),
                                                 held_back=True)
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


def submission_file(path: Path) -> tuple[int, int, int, int]:
    """Refuse a submission that is not the student's own regular file: a symlink (to the solutions, say),
    a hard link to another file, a FIFO or a device. Returns its identity (device, inode, size, mtime)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise InputError("no such lab", file=str(path), hint="check the path") from None
    except OSError as err:
        raise InputError(f"cannot read it: {err.strerror}", file=str(path)) from None
    if stat.S_ISLNK(st.st_mode):
        raise InputError("is a symbolic link; the grader grades only the student's own regular file",
                         file=str(path), hint="copy the notebook itself into the submission")
    if not stat.S_ISREG(st.st_mode):
        kind = ("a directory" if stat.S_ISDIR(st.st_mode) else "a named pipe" if stat.S_ISFIFO(st.st_mode)
                else "a character device" if stat.S_ISCHR(st.st_mode) else "a block device" if stat.S_ISBLK(st.st_mode)
                else "a socket")
        raise InputError(f"is {kind}, not a regular file; not graded", file=str(path),
                         hint="give the notebook file itself")
    if st.st_nlink > 1:
        raise InputError(f"is a hard link ({st.st_nlink} names for one file): it may be another file, such as a "
                         f"solution, under the student's name; not graded", file=str(path),
                         hint="copy the notebook (cp) instead of linking it")
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


@dataclass
class Prepared:
    """A grading ready to run: the notebook's path, the trusted manifest for its seed, what the student wrote."""

    path: Path
    manifest: Manifest
    sub: "_Submission"
    seed: int
    hide: list

    def runner(self, *, timeout: float, grace: float, time_limit: float, same_user) -> "_Run":
        encode.preload(s.source for s in self.manifest.steps if s.role in ("given", "check", "hidden"))
        return _Run(self.manifest, self.sub, timeout=float(timeout), grace=float(grace), time_limit=float(time_limit),
                    same_user=same_user, hide=self.hide)

    def report(self, run: "_Run", results: dict[str, QuestionResult], extra_notes=()) -> GradeReport:
        manifest, sub = self.manifest, self.sub
        # every string that may hold the student's words is escaped once, here, for every output format
        ordered = tuple(replace(results[q.name], feedback=safe.text(results[q.name].feedback),
                                answer=None if results[q.name].answer is None
                                else safe.multiline(markers.rubric(results[q.name].answer)[0]))
                        for q in manifest.questions)
        auto = [r for r in ordered if r.kind == "auto"]
        notes = tuple(safe.text(n, 600) for n in list(manifest.notes) + sub.notes + run.notes
                      + ([run.box.note] if run.box.note else []) + list(extra_notes))
        return GradeReport(str(self.path), manifest.lab,
                           manifest.origin + (f" + hidden checks from {manifest.hidden_from}" if manifest.hidden_from else ""),
                           ordered, sum(r.points for r in auto), sum(r.max_points for r in auto),
                           sum(r.max_points for r in ordered if r.kind == "manual"), run.box.isolation, notes, self.seed,
                           sum(r.max_points for r in auto if r.held_back))


def prepare(path, *, source=None, hidden=None, seed=None, lab: str | None = None,
            times: dict | None = None) -> Prepared:
    """Everything before the student's code runs: the file refused or read, the seed, the trusted manifest."""
    path = Path(path)
    for name, value in (times or {}).items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise InputError(f"{value!r} is not a time > 0 in seconds", field=name)
    before = submission_file(path)
    nb = read_notebook_json(path, "lab")
    if submission_file(path) != before:
        raise InputError("the file changed while it was read", file=str(path), hint="grade it again")
    recorded = variant.recorded_seed(nb, str(path))
    if seed is not None:
        seed = variant.seed_of(seed)
        if seed != recorded:
            raise InputError(f"this notebook is the variant for seed {recorded}, not for seed {seed}",
                             file=str(path), field="metadata.course.seed",
                             hint=f"grade it with --seed {recorded} if that is this student's seed; otherwise the "
                                  f"student works in another student's copy (`courselib labs variant` writes theirs)")
    else:
        seed = recorded
    manifest = find_source(path, None if source is None else Path(source), lab)
    if hidden is not None:
        manifest = hidden_checks(manifest, Path(hidden))
    manifest = manifest.for_seed(seed)
    hide = [Path(hidden)] if hidden is not None else []
    if manifest.origin.endswith(".ipynb"):
        hide.append(Path(manifest.origin).parent)
    return Prepared(path, manifest, _Submission(nb, manifest), seed, hide)


def grade(path, *, source=None, hidden=None, timeout: float = 30.0, grace: float = 5.0,
          time_limit: float = 600.0, same_user: bool | None = None, seed=None, lab: str | None = None) -> GradeReport:
    """Grade the lab at ``path`` against the instructor's source. Never writes ``path``.

    ``seed``: the variant to grade against (:mod:`courselib.grading.variant`); by default the seed the
    notebook's metadata records. A notebook recording another seed is refused (``InputError``).
    ``lab``: the lab to grade it as, when the file is not named after it (a submission folder).
    """
    ready = prepare(path, source=source, hidden=hidden, seed=seed, lab=lab,
                    times={"--timeout": timeout, "--grace": grace, "--time-limit": time_limit})
    run = ready.runner(timeout=timeout, grace=grace, time_limit=time_limit, same_user=same_user)
    return ready.report(run, run.run())


def format_report(report: GradeReport) -> str:
    width = max(len(r.question) for r in report.questions)
    lines = [f"{report.file}  (lab {report.lab}, checked against {report.source})"]
    for r in report.questions:
        if r.kind == "manual":
            line = f"  {r.question:<{width}}  HAND  ?/{r.max_points}  {safe.text(r.feedback)}"
        elif r.held_back:
            line = f"  {r.question:<{width}}  HELD  0/{r.max_points}  {safe.text(r.feedback)}"
        else:
            line = f"  {r.question:<{width}}  {'ok  ' if r.passed else 'FAIL'}  {r.points}/{r.max_points}"
            if r.feedback:
                line += f"  {safe.text(r.feedback)}"
        lines.append(line)
    for note in report.notes:
        lines.append(f"  note: {safe.text(note, 600)}")
    lines.append("  " + total_line(report.total, report.max_points, report.held_back_points, report.manual_points))
    return "\n".join(lines)


def total_line(total: int, maximum: int, held_back: int, manual: int) -> str:
    """The report's last line, the same words in the text report, the Markdown summary and Gradescope's."""
    line = f"total {total}/{maximum}"
    if held_back:
        line += f" so far; {held_back} point(s) held back for your instructor's hidden checks"
    if manual:
        line += (" auto-graded" if not held_back else "") + f"; {manual} more point(s) need manual grading"
    return line
