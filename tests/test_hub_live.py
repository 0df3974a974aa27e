"""The class server for real (issue 33): `courselib classroom hub up` starts JupyterHub and its proxy on
loopback; three students log in with headless Chromium (Debian's), open the nbgitpuller link, which clones
the course into their home and opens Lab 8; each runs the lab's first cell in JupyterLab and saves
(alice with every answer, bob untouched, carol with questions 2 and 4); the instructor's
`courselib grade --many HOMES` grades the three homes; `hub down` leaves no process, port or folder.

Skipped with the reason where Chromium, node, the proxy (.ci/build.d/20-hub.sh) or the hub extra is
missing, and where the grader cannot run the students' code as another user (not root)."""
from __future__ import annotations

import contextlib
import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from courselib.live import hub
from courselib.live.nodes import port_free

from grading_class import LAB, _answers
from site_browser import Chromium, chromium_binary

ROOT = Path(__file__).resolve().parents[1]
PORT = 18840   # not the default 18800: a hub an instructor left running is not this test's
STUDENTS = {"alice": None, "bob": set(), "carol": {"q2", "q4"}}   # which answers each one writes (None: all)
EXPECTED = {"alice": 12, "bob": 0, "carol": 4}

pytestmark = [pytest.mark.real, pytest.mark.slow]
REASON = hub.unavailable_reason() or (None if chromium_binary() else "Chromium is not installed (apt-get install chromium)")
if REASON is None and os.geteuid() != 0:
    REASON = "the grader runs the students' code as another user only as root"
if REASON is None and not (ROOT / "solutions").is_dir():
    REASON = "no solutions/ here (the student template)"
if REASON:
    pytestmark.append(pytest.mark.skip(reason=f"no class server here: {REASON}"))

KERNEL_IDLE = ("!!(window.jupyterapp && jupyterapp.shell.currentWidget && jupyterapp.shell.currentWidget.content"
               " && jupyterapp.shell.currentWidget.sessionContext.session"
               " && jupyterapp.shell.currentWidget.sessionContext.session.kernel"
               " && jupyterapp.shell.currentWidget.sessionContext.session.kernel.status === 'idle')")


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """The student template as a git repository: the labs, without solutions/."""
    repo = tmp_path_factory.mktemp("course")
    shutil.copytree(ROOT / "labs", repo / "labs")
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "instructor", "GIT_AUTHOR_EMAIL": "i@localhost",
           "GIT_COMMITTER_NAME": "instructor", "GIT_COMMITTER_EMAIL": "i@localhost"}
    for argv in (["init", "-q", "-b", "main"], ["add", "labs"], ["commit", "-q", "-m", "the labs"]):
        subprocess.run(["git", *argv], cwd=repo, check=True, env=env)
    return repo


@pytest.fixture(scope="module")
def running(course, tmp_path_factory):
    state = tmp_path_factory.mktemp("hub-state")
    state.chmod(0o700)
    old = os.environ.get(hub.STATE_ENV)
    os.environ[hub.STATE_ENV] = str(state / "hub.json")
    try:
        h = hub.up(course=str(course), port=PORT, expose_app=True, timeout=90)
        yield h
        out = hub.down()
        assert out["left"] == [] and out["kept_dir"] is None, out
        assert not h.state_dir.exists() and not (state / "hub.json").exists()
        assert hub.marked_pids(h.marks()) == []
        assert all(port_free(p) for p in (PORT, PORT + 1, PORT + 2))
    finally:
        if hub.load_hub() is not None:
            hub.down()
        if old is None:
            os.environ.pop(hub.STATE_ENV, None)
        else:
            os.environ[hub.STATE_ENV] = old


def _student_works(h: hub.Hub, user: str, answers: dict[str, str]) -> dict:
    """Log in, open the nbgitpuller link, run the first code cell, write ``answers`` (cell id -> source), save."""
    link = hub.pull_link(h.url, h.course, branch=h.branch, lab=LAB)
    with Chromium(local_prefix=h.url) as tab:
        tab.viewport(1280, 900, False)
        tab.goto(link, timeout=60)
        assert tab.js("location.pathname") == "/hub/login"      # the link asks who you are first
        tab.js(f"document.querySelector('#username_input').value = {json.dumps(user)}")
        tab.js(f"document.querySelector('#password_input').value = {json.dumps(h.password())}")
        tab.js("document.querySelector('#login_submit').closest('form').submit()")
        # spawn, nbgitpuller's clone, then JupyterLab with the lab open and its kernel started
        assert tab.wait_for(KERNEL_IDLE, timeout=240, interval=0.5), tab.js("location.href")
        where = tab.js("[location.pathname.split('/lab')[0], jupyterapp.shell.currentWidget.context.path]")
        first = tab.js("""(async () => {
            const nb = jupyterapp.shell.currentWidget.content;
            const i = nb.widgets.findIndex(c => c.model.type === 'code');
            nb.activeCellIndex = i;
            await jupyterapp.commands.execute('notebook:run-cell');
            return i; })()""", timeout=60)
        text = tab.wait_for(f"""(() => {{ const o = jupyterapp.shell.currentWidget.content.widgets[{first}].model.outputs;
            return o.length ? JSON.stringify(o.toJSON()) : ''; }})()""", timeout=60, interval=0.2)
        for cell_id, source in answers.items():
            assert tab.js(f"""(() => {{ const c = jupyterapp.shell.currentWidget.content.widgets
                .find(w => w.model.id === {json.dumps(cell_id)}); if (!c) return false;
                c.model.sharedModel.setSource({json.dumps(source)}); return true; }})()""")
        tab.js("jupyterapp.commands.execute('docmanager:save').then(() => true)", timeout=60)
        saved = tab.wait_for("!jupyterapp.shell.currentWidget.context.model.dirty", timeout=30)
        return {"where": where, "first_output": text, "saved": saved}


def test_three_students_pull_run_save_and_the_instructor_grades_their_homes(running, tmp_path):
    h = running
    _, answers, questions = _answers(ROOT)
    lab = json.loads((ROOT / "labs" / f"{LAB}.ipynb").read_text())
    source = "".join(next(c for c in lab["cells"] if c["cell_type"] == "code")["source"])
    printed = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, check=True).stdout
    seen = {}
    for user, which in STUDENTS.items():
        mine = {cid: src for cid, src in answers.items() if which is None or questions.get(cid) in which}
        seen[user] = _student_works(h, user, mine)
    for user, s in seen.items():
        assert s["where"] == [f"/user/{user}", f"{hub.TARGET}/labs/{LAB}.ipynb"]   # their server, the lab open
        assert [o.get("text") for o in json.loads(s["first_output"])] == [printed] and s["saved"]
        nb = json.loads((h.homes / user / hub.TARGET / "labs" / f"{LAB}.ipynb").read_text())
        first = next(c for c in nb["cells"] if c["cell_type"] == "code")
        assert "".join(o.get("text", "") if isinstance(o.get("text"), str)
                       else "".join(o.get("text", [])) for o in first["outputs"]) == printed
        assert (h.homes / user / hub.TARGET / ".git").is_dir()          # nbgitpuller's clone
    info = hub.status()
    assert info["up"] and info["students"] == sorted(STUDENTS)

    book = tmp_path / "grades.csv"
    r = subprocess.run([sys.executable, "-m", "courselib", "grade", "--many", str(h.homes), "--gradebook", str(book),
                        "--source", str(ROOT / "solutions"), "--lab", LAB, "--timeout", "10", "--time-limit", "180",
                        "-j", "2"], capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(book, newline="") as f:
        got = {row["student"]: row for row in csv.DictReader(f)}
    assert {s: (int(row["total"]), row["status"]) for s, row in got.items()} == \
        {s: (points, "graded") for s, points in EXPECTED.items()}


def test_sigterm_while_starting_leaves_nothing_behind(course, tmp_path):
    """Stopped half-way (the proxy up, the hub starting): everything it started is stopped by PID and its
    folder removed before it exits, with one line saying so."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    record = state / "hub.json"
    env = {**os.environ, hub.STATE_ENV: str(record)}
    proc = subprocess.Popen([sys.executable, "-m", "courselib", "classroom", "hub", "up", "--course", str(course),
                             "--port", str(PORT + 10)], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    seen = None
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(OSError, ValueError):
            seen = json.loads(record.read_text())
            if seen.get("procs"):
                break
        time.sleep(0.1)
    assert seen and seen.get("procs"), "the record never named a process"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert err.strip().splitlines()[-1].startswith("courselib: stopped by SIGTERM"), err
    assert not Path(seen["state_dir"]).exists() and not record.exists()
    def state(pid):
        try:
            return Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
    left = {p["pid"]: state(p["pid"]) for p in seen["procs"]}
    assert [pid for pid, st in left.items() if st] == [], (left, seen["procs"], err)
    assert hub.marked_pids({hub.MARKER: seen["state_dir"], hub.TOKEN_ENV: seen["token"]}) == []
    assert all(port_free(p) for p in (PORT + 10, PORT + 11, PORT + 12))


def test_a_port_in_use_is_one_line_and_starts_nothing(course, tmp_path):
    import socket

    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    with socket.socket() as s:
        s.bind(("127.0.0.1", PORT + 21))
        s.listen()
        r = subprocess.run([sys.executable, "-m", "courselib", "classroom", "hub", "up", "--course", str(course),
                            "--port", str(PORT + 20)], env={**os.environ, hub.STATE_ENV: str(state / "hub.json")},
                           cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        f"courselib: port {PORT + 21} already in use on 127.0.0.1; stop what uses them, or choose another --port"], r.stderr
    assert not (state / "hub.json").exists()
