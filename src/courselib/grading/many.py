"""``courselib grade --many DIR -j N --gradebook FILE.csv``: a folder of submissions, graded N at a time.

A submission is a child of DIR: ``DIR/alice.ipynb``, or a folder ``DIR/alice/`` holding the student's lab
notebooks (``labs/08-gang-cost.ipynb``, or any notebook named after a lab of the course). Each
notebook is graded by its own ``courselib grade`` process — its own sandbox, the same isolation as one
grading — with a wall-clock cap: a submission that hangs, crashes the grader or attacks it costs only
its own points, and everything it started is gone before its report exists. A path that leaves DIR
(a symlinked folder, a link to the solutions) is refused, like a symlinked notebook.

What is written: one JSON and one text report per submission and lab in the reports folder (the
submission's SHA-256 inside), and the gradebook: one CSV row per student and lab — points per question,
the auto-graded total, the points held back and those that need manual grading, and why a submission
was not graded. It is **resumable**: a report whose submission has not changed since is kept, so a run
stopped half-way (a deadline, a reboot) goes on where it stopped. Per-student seeds come from
``--roster`` (a CSV with ``student,seed``), else from each notebook's metadata.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from courselib.errors import InputError
from courselib.grading import safe
from courselib.grading.files import atomic_write, check_folder
from courselib.grading.manifest import read_all
from courselib.grading.source import find_source
from courselib.io.policy import read_text

MARGIN_S = 60.0     # past the grading's own --time-limit, before its process is killed from here


@dataclass(frozen=True)
class Job:
    student: str
    lab: str
    path: Path
    seed: str | None = None


@dataclass
class Outcome:
    job: Job
    report: dict | None
    why: str = ""
    seconds: float = 0.0
    reused: bool = False
    extra: dict = field(default_factory=dict)


def _safe_name(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in text)[:120] or "_"


def find_jobs(folder: Path, labs: set[str], lab: str | None, roster: dict[str, str]) -> tuple[list[Job], list[Outcome]]:
    """The notebooks to grade under ``folder``, and the submissions refused outright (with why)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError("no such folder", file=str(folder), field="--many", hint="give the folder of submissions")
    top = folder.resolve()
    jobs: list[Job] = []
    refused: list[Outcome] = []
    for entry in sorted(folder.iterdir()):
        student = entry.stem if entry.suffix == ".ipynb" else entry.name
        if student.startswith("."):
            continue
        if entry.is_symlink() or not str(entry.resolve()).startswith(str(top) + os.sep):
            refused.append(Outcome(Job(student, lab or "?", entry), None,
                                   "not graded: the submission is a symbolic link (or leaves the folder)"))
            continue
        if entry.is_file() and entry.suffix == ".ipynb":
            candidates = [entry]
        elif entry.is_dir():
            candidates = sorted(p for p in entry.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
        else:
            continue
        wanted = [p for p in candidates if (lab and p.stem == lab) or (not lab and p.stem in labs)]
        if lab and not wanted and len(candidates) == 1:
            wanted = candidates                         # one notebook, whatever its name: it is the lab
        if not wanted:
            refused.append(Outcome(Job(student, lab or "?", entry), None,
                                   f"not graded: no notebook named after {'lab ' + lab if lab else 'a lab of the course'}"))
            continue
        seen: set[str] = set()
        for path in wanted:
            name = lab or path.stem
            if name in seen:
                refused.append(Outcome(Job(student, name, path), None, f"not graded: two notebooks for lab {name}"))
                continue
            seen.add(name)
            jobs.append(Job(student, name, path, roster.get(student)))
    return jobs, refused


def read_roster(path: Path | None) -> dict[str, str]:
    if path is None:
        return {}

    rows = list(csv.DictReader(io.StringIO(read_text(path, "text"))))
    if rows and not {"student", "seed"} <= set(rows[0]):
        raise InputError("a roster needs the columns student and seed", file=str(path), line=1, field="--roster")
    return {r["student"].strip(): r["seed"].strip() for r in rows if r.get("student")}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _grade_one(job: Job, reports: Path, options: list[str], cap: float, stop: threading.Event) -> Outcome:
    stem = f"{_safe_name(job.student)}.{_safe_name(job.lab)}"
    json_path, text_path = reports / f"{stem}.json", reports / f"{stem}.txt"
    digest = _sha256(job.path)
    try:
        old = json.loads(json_path.read_text())
        if old.get("submission_sha256") == digest and old.get("lab") == job.lab:
            return Outcome(job, old, old.get("not_graded", ""), reused=True)
    except (OSError, ValueError):
        pass
    if stop.is_set():
        return Outcome(job, None, "not graded: the run was stopped")
    cmd = [sys.executable, "-m", "courselib", "grade", str(job.path), "--lab", job.lab, "--json-file",
           str(json_path), *options, *(["--seed", job.seed] if job.seed else [])]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, text=True)
    try:
        out, err = proc.communicate(timeout=cap)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)          # the grader, its sandbox and everything in it
        proc.communicate()
        why = f"not graded: its grading did not end within {cap:g} s and was stopped"
        return _record(job, None, why, json_path, text_path, digest, time.monotonic() - start)
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        line = safe.text(" ".join((err or out).strip().splitlines()[-1:]) or f"exit status {proc.returncode}", 400)
        return _record(job, None, f"not graded: {line}", json_path, text_path, digest, seconds)
    try:
        report = json.loads(json_path.read_text())
    except (OSError, ValueError):
        return _record(job, None, "not graded: the grader wrote no report", json_path, text_path, digest, seconds)
    return _record(job, report, "", json_path, text_path, digest, seconds, text=out)


def _record(job, report, why, json_path, text_path, digest, seconds, text="") -> Outcome:
    data = dict(report) if report else {"lab": job.lab, "file": str(job.path), "total": 0, "questions": [],
                                        "not_graded": why}
    data["submission_sha256"] = digest
    data["student"] = job.student
    atomic_write(json_path, json.dumps(data, indent=2) + "\n")
    atomic_write(text_path, (text or f"{job.path}\n  {why}\n"))
    return Outcome(job, data, why, seconds)


def run(folder: Path, *, gradebook: Path, jobs: int = 1, lab: str | None = None, source=None, hidden=None,
        timeout: float = 30.0, time_limit: float = 600.0, roster: Path | None = None,
        reports: Path | None = None, echo=print) -> list[Outcome]:
    """Grade every submission in ``folder`` (see the module docstring); write the reports and the gradebook."""

    if not isinstance(jobs, int) or isinstance(jobs, bool) or not 1 <= jobs <= 64:
        raise InputError(f"{jobs!r} is not a number of parallel gradings from 1 to 64", field="-j")
    if gradebook.suffix.lower() != ".csv":
        raise InputError("the gradebook is not a .csv file", file=str(gradebook), field="--gradebook")
    check_folder(gradebook.parent if str(gradebook.parent) else Path("."), "the gradebook", "--gradebook")
    reports = reports or gradebook.with_name(gradebook.stem + "-reports")
    reports.mkdir(mode=0o700, parents=True, exist_ok=True)
    check_folder(reports, "the reports", "--reports")
    # the course's labs (which notebook names to grade) and their questions, from the trusted source
    if source is not None and Path(source).is_file() and Path(source).suffix == ".json":
        labs = read_all(Path(source))
    elif source is not None and Path(source).is_dir() and not (Path(source) / "manifest.json").is_file():
        labs = {p.stem: None for p in Path(source).glob("*.ipynb")}
    elif source is not None and Path(source).is_dir():
        labs = read_all(Path(source) / "manifest.json")
    else:
        labs = {p.stem: None for p in Path("solutions").glob("*.ipynb")} or (
            read_all(Path("labs") / "manifest.json") if Path("labs/manifest.json").is_file() else {})
    if lab:
        labs = {lab: labs.get(lab)}
    found, refused = find_jobs(folder, set(labs), lab, read_roster(roster))
    options = ["--timeout", str(timeout), "--time-limit", str(time_limit)]
    if source is not None:
        options += ["--source", str(source)]
    if hidden is not None:
        options += ["--hidden", str(hidden)]
    cap = time_limit + MARGIN_S
    stop = threading.Event()
    outcomes: list[Outcome] = list(refused)
    done_count = [0]
    lock = threading.Lock()

    def one(job: Job) -> Outcome:
        outcome = _grade_one(job, reports, options, cap, stop)
        with lock:
            done_count[0] += 1
            r = outcome.report or {}
            what = outcome.why or f"{r.get('total', 0)}/{r.get('max', 0)}"
            echo(f"[{done_count[0]}/{len(found)}] {job.student} {job.lab}: {what}"
                 + (" (kept from an earlier run)" if outcome.reused else f" ({outcome.seconds:.1f} s)"))
        return outcome

    try:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            outcomes += list(pool.map(one, found))
    except KeyboardInterrupt:
        stop.set()
        raise
    names = {}
    for lab_name in sorted({o.job.lab for o in outcomes}):
        spec = labs.get(lab_name)
        if spec is None and lab_name != "?":
            try:
                spec = find_source(Path(f"{lab_name}.ipynb"), None if source is None else Path(source), lab_name)
            except InputError:
                spec = None
        names[lab_name] = [q.name for q in spec.questions] if spec is not None else []
    atomic_write(gradebook, gradebook_csv(outcomes, names))
    return outcomes


def gradebook_csv(outcomes: list[Outcome], questions: dict[str, list[str]]) -> str:
    """One row per student and lab: points per question, totals, and why a submission was not graded."""
    columns = sorted({q for qs in questions.values() for q in qs}, key=lambda q: (len(q), q))
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["student", "lab", "seed", "total", "max", "held_back", "manual_points", *columns, "status"])
    for o in sorted(outcomes, key=lambda o: (o.job.student, o.job.lab)):
        r = o.report or {}
        points = {q.get("question"): q.get("points") for q in r.get("questions", [])}
        status = o.why or ("graded" if r.get("questions") else "not graded")
        w.writerow([_cell(o.job.student), o.job.lab, r.get("seed", ""), r.get("total", 0), r.get("max", ""),
                    r.get("held_back", 0), r.get("manual", ""),
                    *["" if points.get(q) is None else points[q] for q in columns], _cell(status)])
    return out.getvalue()


def _cell(text: str) -> str:
    """A CSV cell a spreadsheet will not run as a formula (=, +, -, @ first)."""
    text = safe.text(text, 400)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text
