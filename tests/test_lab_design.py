"""What the labs ask of a learner (issue 32): a question that claims prediction needs the mechanism,
and the capstone's policy options are written where a learner looks.

- The reference solution of every "predict" question works the case out: it calls no simulator of
  ``courselib.sim`` (``simulate``, ``simulate_barrier``) on the lab's own inputs, by any route: the
  test follows the call graph of the notebook's code (aliases, modules, ``getattr``, helper functions
  and lambdas, ``partial``), and each route is planted (``EVASIONS``) and seen to fail it, where the
  first version of the test, which looked for a direct call by name, let every one of them pass. Where
  running the simulator is the point (the capstone's questions 2 and 4), the question says so in its
  heading and asks for a reading of the run, not a prediction.
- ``simulate``'s docstring and the capstone's question 1 name every option of every policy, read from
  the policies' own signatures.
- Labs with per-student variants (issue 33) carry a ``parameters`` and a ``variant`` cell.
- A lab asks only for what the chapters up to its own teach (the learning path is chapter N, then lab N):
  a question that needs a later chapter's fact or courselib name states the fact itself and links the
  chapter (``LATER_ALLOWED``); what each chapter teaches is read from what its reader sees.
"""
from __future__ import annotations

import ast
import importlib.util
import inspect
import re
from pathlib import Path

import pytest

from courselib import course as course_table
from courselib.grading import markers, variant
from courselib.model.policies import policy_class, policy_names
from courselib.sim.gang import simulate

nbformat = pytest.importorskip("nbformat")
ROOT = Path(__file__).resolve().parents[1]
if not (ROOT / "solutions").is_dir():
    pytest.skip("no solutions/ here (the student template)", allow_module_level=True)
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))
HEADING = re.compile(r"^## Question (\d+) \([^)]*\): (.*)$", re.M)
# issue 32's list: the questions that claimed prediction and were answered with the simulator
NAMED = {("06-gang-deadlock", "q2"), ("06-gang-deadlock", "q4"), ("08-gang-cost", "q4"), ("08-gang-cost", "q5"),
         ("09-capstone", "q3")}
# predict questions added since, listed so that a heading reworded without "predict" keeps them checked
LATER_PREDICT = {("08-gang-cost", "q3"),   # two gangs under kube-default, by hand (issue 32, difficulty that rises)
                 # issue 32's tester: Lab 5's questions 1-4 ("read scripts and predict what Slurm does") and
                 # Lab 7's question 3 (the bill the barrier model reports)
                 ("05-slurm", "q1"), ("05-slurm", "q2"), ("05-slurm", "q3"), ("05-slurm", "q4"),
                 ("07-barrier", "q3")}
READ_THE_RUN = {("09-capstone", "q2"), ("09-capstone", "q4")}
WITH_VARIANTS = {"01-namespaces-cgroups", "03-oom-killer", "04-images", "05-slurm", "06-gang-deadlock",
                 "07-barrier", "08-gang-cost", "09-capstone"}   # every lab


def questions(path: Path) -> dict[str, dict]:
    """Each question's heading, Markdown text and reference-solution source (its answer regions)."""
    nb = nbformat.read(path, 4)
    out: dict[str, dict] = {}
    current = None
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            m = HEADING.search(cell.source)
            if m:
                current = f"q{m.group(1)}"
                out[current] = {"heading": m.group(2), "text": cell.source, "solution": ""}
            elif current:
                out[current]["text"] += "\n" + cell.source
        elif current and markers.has_markers(cell.source):
            out[current]["solution"] += markers.solution_source(cell.source, path.name) + "\n"
    return out


def simulator_names(path: Path) -> set[str]:
    """Every name the notebook binds to something of ``courselib.sim`` (``simulate``, ``simulate_barrier``)."""
    names = set()
    for cell in nbformat.read(path, 4).cells:
        if cell.cell_type != "code":
            continue
        src = markers.solution_source(cell.source, path.name) if markers.has_markers(cell.source) else cell.source
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("courselib.sim"):
                names.update(a.asname or a.name for a in node.names)
    return names


def calls(source: str) -> set[str]:
    return {n.func.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}


def old_check_flags(path: Path, solution: str, given: str = "") -> set[str]:
    """The first version of the predict test: direct calls, by name, of a name imported from courselib.sim
    (in the notebook, the added cell or the solution) or named ``simulate``/``simulate_barrier``."""
    names = simulator_names(path) | {"simulate", "simulate_barrier"}
    for src in (given, solution):
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("courselib.sim"):
                names.update(a.asname or a.name for a in node.names)
    return calls(solution) & names


# --- who runs a simulator: the call graph of a reference solution ----------------------------------
#
# The first version of this test looked only for calls of a simulator by its imported name, so
# `s = simulate; s(W)`, `gang.simulate(W)`, a helper that calls one, or `getattr(gang, "simulate")(W)`
# passed it. `SimulatorCalls` follows what each name is bound to through the notebook's cells up to the
# answer (imports, aliases, assignments, `getattr`, `importlib.import_module`, `__import__`,
# `functools.partial`) and into the functions and lambdas the answer calls, wherever they are defined.

SIM_PACKAGE = "courselib.sim"
SIMULATORS = {"simulate", "simulate_barrier"}   # bare names the old test knew: still simulators
_IS_MODULE: dict[str, bool] = {}


def _is_module(path: str) -> bool:
    if path not in _IS_MODULE:
        try:
            _IS_MODULE[path] = importlib.util.find_spec(path) is not None
        except (ImportError, ValueError, AttributeError):
            _IS_MODULE[path] = False
    return _IS_MODULE[path]


def _under_sim(path: str) -> bool:
    return path == SIM_PACKAGE or path.startswith(SIM_PACKAGE + ".")


class SimulatorCalls:
    """Runs code cells' statements symbolically, binding each name to what it refers to as far as
    simulators go: ``("module", "courselib.sim.gang")``, ``("sim", "courselib.sim.gang.simulate")``, a
    function or lambda (``("def", node)``), one of the builtins that reach an attribute by name, or
    ``None`` (anything else). ``scan(source, record=True)`` lists the calls in ``source`` that run a
    simulator: directly, through an alias or a module, by ``getattr``, or through a function that does,
    and calls that hand a simulator to another function (``map``, ``partial``)."""

    BUILTINS = {"getattr": ("getattr",), "__import__": ("__import__",)}
    FROM = {("importlib", "import_module"): ("import_module",), ("functools", "partial"): ("partial",)}

    def __init__(self):
        self.env: dict[str, object] = {}
        self.found: list[str] = []
        self._busy: set[int] = set()

    # -- expressions --------------------------------------------------------------------------------
    def value(self, node, env):
        if isinstance(node, ast.Name):
            if node.id in env:
                return env[node.id]
            if node.id in SIMULATORS:
                return ("sim", node.id)
            return self.BUILTINS.get(node.id)
        if isinstance(node, ast.Attribute):
            return self._attribute(self.value(node.value, env), node.attr)
        if isinstance(node, ast.Lambda):
            return ("def", node)
        if isinstance(node, ast.Call):
            fn = self.value(node.func, env)
            args = node.args
            if fn == ("getattr",) and len(args) >= 2:
                base = self.value(args[0], env)
                if isinstance(args[1], ast.Constant) and isinstance(args[1].value, str):
                    return self._attribute(base, args[1].value)
                if base and base[0] in ("module", "sim") and _under_sim(base[1]):
                    return ("sim", f"{base[1]}.<computed>")      # a name built at run time: assume the worst
                return None
            if fn in (("import_module",), ("__import__",)) and args and isinstance(args[0], ast.Constant) \
                    and isinstance(args[0].value, str):
                return ("module", args[0].value)
            if fn == ("partial",) and args:
                return self.value(args[0], env)
        return None

    def _attribute(self, base, attr):
        if not base:
            return None
        if base[0] == "module":
            path = f"{base[1]}.{attr}"
            if base[1] == "importlib" and attr == "import_module":
                return ("import_module",)
            if base[1] == "functools" and attr == "partial":
                return ("partial",)
            if _is_module(path):
                return ("module", path)
            return ("sim", path) if _under_sim(path) else None
        if base[0] == "sim":
            return ("sim", f"{base[1]}.{attr}")
        return None

    def runs_simulator(self, target, env) -> bool:
        """Does calling ``target`` (a value) run a simulator?"""
        if not target:
            return False
        if target[0] == "sim":
            return True
        if target[0] == "def":
            node = target[1]
            if id(node) in self._busy:               # recursion: decided by its other paths
                return False
            self._busy.add(id(node))
            try:
                local = dict(env)
                params = node.args
                for a in params.posonlyargs + params.args + params.kwonlyargs + [params.vararg, params.kwarg]:
                    if a is not None:
                        local[a.arg] = None
                body = [ast.Return(node.body)] if isinstance(node, ast.Lambda) else node.body
                return self._block(body, local, record=False)
            finally:
                self._busy.discard(id(node))
        return False

    def _calls_in(self, node, env, record: bool) -> bool:
        """The calls in an expression (not inside lambdas, which run only when called)."""
        hit = False
        todo = [node]
        while todo:
            n = todo.pop()
            if isinstance(n, ast.Lambda):
                continue
            if isinstance(n, ast.Call):
                handed = [a.value if isinstance(a, ast.Starred) else a for a in n.args] + [k.value for k in n.keywords]
                if self.runs_simulator(self.value(n.func, env), env) or \
                        any(self.runs_simulator(self.value(a, env), env) for a in handed):
                    hit = True
                    if record:
                        self.found.append(ast.unparse(n)[:80])
            todo.extend(ast.iter_child_nodes(n))
        return hit

    # -- statements ---------------------------------------------------------------------------------
    def _bind(self, target, value, env):
        if isinstance(target, ast.Name):
            env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            values = value if isinstance(value, list) and len(value) == len(target.elts) else [None] * len(target.elts)
            for t, v in zip(target.elts, values):
                self._bind(t, v, env)

    def _block(self, stmts, env, record: bool) -> bool:
        hit = False
        for st in stmts:
            if isinstance(st, ast.Import):
                for a in st.names:
                    if a.asname:
                        env[a.asname] = ("module", a.name)
                    else:
                        top = a.name.split(".")[0]
                        env[top] = ("module", top)
            elif isinstance(st, ast.ImportFrom):
                for a in st.names:
                    full = f"{st.module}.{a.name}"
                    if (st.module, a.name) in self.FROM:
                        v = self.FROM[(st.module, a.name)]
                    elif _is_module(full):
                        v = ("module", full)
                    else:
                        v = ("sim", full) if _under_sim(st.module or "") else None
                    env[a.asname or a.name] = v
            elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                env[st.name] = ("def", st)
                for d in st.decorator_list:
                    hit |= self._calls_in(d, env, record)
            elif isinstance(st, ast.ClassDef):
                env[st.name] = None
            elif isinstance(st, ast.Assign):
                hit |= self._calls_in(st.value, env, record)
                v = ([self.value(e, env) for e in st.value.elts] if isinstance(st.value, (ast.Tuple, ast.List))
                     else self.value(st.value, env))
                for t in st.targets:
                    self._bind(t, v, env)
            elif isinstance(st, (ast.AnnAssign, ast.AugAssign)):
                if st.value is not None:
                    hit |= self._calls_in(st.value, env, record)
                self._bind(st.target, self.value(st.value, env) if isinstance(st, ast.AnnAssign) and st.value else None, env)
            else:
                for field, child in ast.iter_fields(st):
                    if isinstance(child, list) and child and isinstance(child[0], ast.stmt):
                        hit |= self._block(child, env, record)
                    elif isinstance(child, list):
                        for c in child:
                            if isinstance(c, ast.expr):
                                hit |= self._calls_in(c, env, record)
                            elif isinstance(c, ast.withitem):
                                hit |= self._calls_in(c.context_expr, env, record)
                            elif isinstance(c, ast.excepthandler):
                                hit |= self._block(c.body, env, record)
                    elif isinstance(child, ast.expr):
                        hit |= self._calls_in(child, env, record)
        return hit

    def scan(self, source: str, record: bool = False) -> list[str]:
        before = len(self.found)
        self._block(ast.parse(source).body, self.env, record)
        return self.found[before:]


def _parse_safe(source: str) -> str:
    """A cell's source without IPython's magics and shell lines (which are not Python)."""
    return "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in source.splitlines())


def simulator_calls(path: Path, question: str, solution: str | None = None, given: str = "") -> list[str]:
    """The calls of ``question``'s reference solution (or of ``solution``, put in place of its answer) that
    run a simulator, following the notebook's cells before and within the question's answer (and
    ``given``, code added just before it)."""
    walker = SimulatorCalls()
    current, found, seen = None, [], False
    for cell in nbformat.read(path, 4).cells:
        if cell.cell_type == "markdown":
            m = HEADING.search(cell.source)
            current = f"q{m.group(1)}" if m else current
            if seen and current != question:
                break                       # the question's answers are all read
            continue
        if cell.cell_type != "code":
            continue
        if markers.has_markers(cell.source) and current == question:
            if not seen and given:
                walker.scan(given)
            if solution is None:
                found += walker.scan(_parse_safe(markers.solution_source(cell.source, path.name)), record=True)
            elif not seen:
                found += walker.scan(solution, record=True)
            seen = True
        else:
            src = markers.solution_source(cell.source, path.name) if markers.has_markers(cell.source) else cell.source
            walker.scan(_parse_safe(src))
    assert seen, f"{path.name} has no answer cell for {question}"
    return found


def predict_questions() -> list[tuple[str, str]]:
    out = []
    for path in SOLUTIONS:
        for q, info in questions(path).items():
            if (path.stem, q) in NAMED | LATER_PREDICT or "predict" in info["heading"].lower():
                out.append((path.stem, q))
    return out


def test_the_named_predict_questions_are_found():
    found = set(predict_questions())
    assert NAMED <= found and len(found) >= len(NAMED) + 1, found


@pytest.mark.parametrize("lab, question", predict_questions(), ids=lambda x: str(x))
def test_a_predict_questions_reference_solution_calls_no_simulator(lab, question):
    path = ROOT / "solutions" / f"{lab}.ipynb"
    info = questions(path)[question]
    assert info["solution"].strip(), (lab, question)
    used = simulator_calls(path, question)
    assert not used, f"{lab} {question} ({info['heading']}): the reference solution runs a simulator: {used}"


# Ways a reference solution could run the simulator on Lab 8 question 4's own inputs (`W`) that the first
# version of the predict test did not see: (label, a cell added before the answer, the answer).
EVASIONS = [
    ("an alias", "", "from courselib.sim.gang import simulate\ns = simulate\n"
                     "kube_idle_gpu_hours = s(W, 'kube-default').job('train').wasted_gpu_hours"),
    ("a module alias", "", "from courselib.sim import gang as g\n"
                           "kube_idle_gpu_hours = g.simulate(W, 'kube-default').job('train').wasted_gpu_hours"),
    ("the dotted module", "", "import courselib.sim.gang\n"
                              "run = courselib.sim.gang.simulate(W, 'kube-default')"),
    ("a helper in the answer", "", "from courselib.sim import gang\n"
                                   "def _run(policy):\n    return gang.simulate(W, policy)\n"
                                   "kube_idle_gpu_hours = _run('kube-default').job('train').wasted_gpu_hours"),
    ("a helper in an earlier cell", "from courselib.sim.gang import simulate\n"
                                    "def kube_run(w):\n    return simulate(w, 'kube-default')\n",
     "kube_idle_gpu_hours = kube_run(W).job('train').wasted_gpu_hours"),
    ("helpers calling each other, defined out of order", "",
     "import courselib.sim.gang as g\n"
     "def _outer(p):\n    return _inner(p)\n"
     "def _inner(p):\n    return g.simulate(W, p)\n"
     "held = _outer('volcano')"),
    ("a lambda", "", "from courselib.sim import gang\nrun = lambda p: gang.simulate(W, p)\nkube = run('kube-default')"),
    ("getattr with the name", "", "from courselib.sim import gang\n"
                                  "kube = getattr(gang, 'simulate')(W, 'kube-default')"),
    ("getattr with a name built at run time", "", "import courselib.sim.gang as g\n"
                                                  "f = getattr(g, 'simu' + 'late')\nkube = f(W, 'kube-default')"),
    ("importlib", "", "import importlib\n"
                      "kube = importlib.import_module('courselib.sim.gang').simulate(W, 'kube-default')"),
    ("__import__", "", "kube = __import__('courselib.sim.gang', fromlist=['simulate']).simulate(W, 'kube-default')"),
    ("functools.partial", "", "from functools import partial\nfrom courselib.sim.gang import simulate\n"
                              "kube = partial(simulate, W)('kube-default')"),
    ("map", "", "from courselib.sim.gang import simulate as run\n"
                "(kube,) = list(map(run, [W], ['kube-default']))"),
]
# What runs no simulator: the new test must let it pass (the last one failed the first version, which
# counted a call inside a function that is never called).
HONEST = [
    ("a hand derivation", "", "free = W.cluster.total_gpus - W.jobs[0].gpus\nidle = free * 35 / 60"),
    ("the cost model", "", "from courselib.model.cost import GangWait, Price, gang_wait_cost\n"
                           "bill = gang_wait_cost(GangWait(8, 60.0, Price(1.0, 1.0)))"),
    ("a name that only sounds like it", "", "simulated = {'a': 1}\nx = simulated['a']\nimport math\ny = math.ceil(2.5)"),
    ("a module's other function", "", "import courselib.model.cost as c\nx = c.gpu_hours(8, 3600.0)"),
    ("a helper defined and never called", "", "from courselib.sim.gang import simulate\n"
                                              "def _afterwards(w):\n    return simulate(w, 'volcano')\nx = 3"),
]
LAB8 = ROOT / "solutions" / "08-gang-cost.ipynb"


@pytest.mark.parametrize("label, given, answer", EVASIONS, ids=[e[0] for e in EVASIONS])
def test_each_planted_route_to_the_simulator_fails_the_new_test_and_passed_the_old(label, given, answer):
    assert not old_check_flags(LAB8, answer, given), f"{label}: the first version already caught it"
    assert simulator_calls(LAB8, "q4", answer, given), f"{label}: the call graph missed it"


@pytest.mark.parametrize("label, given, answer", HONEST, ids=[e[0] for e in HONEST])
def test_an_answer_that_runs_no_simulator_passes(label, given, answer):
    assert simulator_calls(LAB8, "q4", answer, given) == [], label


def test_the_planted_answers_run_as_python_on_lab_8():
    """Every planted answer is real code on Lab 8's question 4 (so each route is a real one): each runs,
    and the evasions do run the simulator (counted by wrapping ``courselib.sim.gang.simulate``)."""
    import courselib.sim.gang as gang
    from courselib.model.workload import ClusterSpec, Job, Workload

    real, runs = gang.simulate, []

    def counting(*args, **kw):
        runs.append(args[1:2])
        return real(*args, **kw)

    W = Workload(ClusterSpec(nodes=8, gpus_per_node=8), [Job("blocker", pods=2, gpus_per_pod=8, duration=600.0),
                                                         Job("train", pods=64, gpus_per_pod=1, submit=60.0,
                                                             duration=600.0)])
    gang.simulate = counting
    try:
        for label, given, answer in EVASIONS + HONEST:
            before = len(runs)
            exec(given + "\n" + answer, {"W": W})  # noqa: S102 (our own planted code)
            assert (len(runs) > before) is ((label, given, answer) in EVASIONS), label
    finally:
        gang.simulate = real


def test_a_question_that_runs_the_simulator_says_so_and_asks_for_a_reading():
    for lab, q in READ_THE_RUN:
        info = questions(ROOT / "solutions" / f"{lab}.ipynb")[q]
        assert "predict" not in info["heading"].lower(), info["heading"]
        assert "running the simulator is the point" in info["text"], (lab, q)


# --- the setup gives no answer away ------------------------------------------------------------------
#
# Lab 4's setup cell imported `history_rebuilds` and `fewest_rebuilds` (and lab 1's `unshare_pid` and the
# whole `courselib.model.cpu`): the functions the hidden checks call to compute the expected values, so
# question 2 or 3 was one call away (tester-a, 04-b). A function is flagged when the lab's given cells
# import it (directly, or as an attribute of a module they import), an instructor's hidden check calls it
# (whether or not it imports it too), and neither the given cells nor any reference answer use it. Classes and
# constants are not flagged: they build the lab's data.

#: labs that still hand the learner a simulator their hidden checks use, with why; an entry that no longer
#: matches what is found fails the test (remove it when the lab is fixed)
SETUP_LEFT = {
    "06-gang-deadlock": ({"simulate"}, "the setup gives courselib.sim.gang.simulate (labs 6-9: another owner)"),
    "09-capstone": ({"simulate_barrier", "pretrain_with_oom", "run_config"},
                    "question 3 predicts what the setup's barrier simulator computes (labs 6-9: another owner); "
                    "the lab's own helpers: run_config runs the learner's configuration (questions 2 and 4 read "
                    "the run), pretrain_with_oom builds question 3's story"),
}


def _names_used(source: str) -> set[str]:
    """Names and ``module.attr`` read in ``source``."""
    out = set()
    for n in ast.walk(ast.parse(source)):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
            out.add(f"{n.value.id}.{n.attr}")
    return out


#: what a function the given cells define themselves is bound to (the lab's own helper, e.g. Lab 5's old
#: ``lab_workload``, "used by the checks": one call gave the model's input for questions 2-4)
DEFINED_IN_LAB = object()


def _defined(source: str) -> dict[str, object]:
    return {n.name: DEFINED_IN_LAB for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)}


def _imports(source: str) -> dict[str, object]:
    """What each name a cell imports is bound to (the imported object itself)."""
    out = {}
    for n in ast.walk(ast.parse(source)):
        if isinstance(n, ast.ImportFrom):
            mod = importlib.import_module(n.module)
            for a in n.names:
                out[a.asname or a.name] = getattr(mod, a.name, None) or importlib.import_module(f"{n.module}.{a.name}")
        elif isinstance(n, ast.Import):
            for a in n.names:
                out[a.asname or a.name.split(".")[0]] = importlib.import_module(a.asname and a.name or a.name.split(".")[0])
    return out


def answer_functions_in_setup(path: Path, given_extra: str = "", hidden_extra: str = "") -> set[str]:
    """The functions ``path``'s given cells (and ``given_extra``) hand the learner that its hidden checks
    (and ``hidden_extra``) call to compute a graded answer (see above)."""
    from courselib.grading.source import from_solution

    steps = from_solution(path).steps
    given = [s.source for s in steps if s.role == "given"] + ([given_extra] if given_extra else [])
    handed: dict[str, object] = {}
    used: set[str] = set()
    for src in given:
        handed.update(_imports(src))
        handed.update(_defined(src))
        used |= _names_used(src)
    for q in questions(path).values():
        used |= _names_used(_parse_safe(q["solution"]))
    found = set()
    for source in [s.source for s in steps if s.role == "hidden"] + ([hidden_extra] if hidden_extra else []):
        for n in ast.walk(ast.parse(source)):
            if not isinstance(n, ast.Call):
                continue
            f = n.func
            if isinstance(f, ast.Name) and f.id in handed:
                obj, name = handed[f.id], f.id
            elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in handed \
                    and inspect.ismodule(handed[f.value.id]):
                obj, name = getattr(handed[f.value.id], f.attr, None), f"{f.value.id}.{f.attr}"
            else:
                continue
            if (inspect.isfunction(obj) or inspect.isbuiltin(obj) or obj is DEFINED_IN_LAB) and name not in used:
                found.add(name)
    return found


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_a_labs_setup_hands_over_no_function_that_computes_a_graded_answer(path):
    found = answer_functions_in_setup(path)
    left, why = SETUP_LEFT.get(path.stem, (set(), ""))
    assert found == left, (f"{path.stem}: the given cells import {sorted(found - left)}, which the hidden checks "
                           f"call to compute an answer and no reference answer uses: import it in the hidden "
                           f"check instead" if found - left else
                           f"{path.stem}: SETUP_LEFT lists {sorted(left - found)} ({why}), no longer found: "
                           f"remove the entry")


def test_the_setup_check_finds_lab_4s_and_lab_1s_old_imports():
    """The check above fails on what the labs' setup cells imported before issue 32's fix."""
    assert answer_functions_in_setup(ROOT / "solutions" / "04-images.ipynb",
                                     "from courselib.model.layers import fewest_rebuilds, history_rebuilds, "
                                     "rebuild_plan\n") == {"fewest_rebuilds", "history_rebuilds", "rebuild_plan"}
    assert answer_functions_in_setup(ROOT / "solutions" / "01-namespaces-cgroups.ipynb",
                                     "from courselib.model import cpu\nfrom courselib.model.namespaces import "
                                     "unshare_pid\n") >= {"unshare_pid", "cpu.milli_cpu_to_quota",
                                                           "cpu.milli_cpu_to_shares"}
    # issue 32's tester: Lab 7's setup imported the barrier simulator (question 3 was one call away), and
    # Lab 5's defined `lab_workload` (the model's input for questions 2-4, "used by the checks")
    assert answer_functions_in_setup(ROOT / "solutions" / "07-barrier.ipynb",
                                     "from courselib.sim.barrier import simulate as simulate_barrier\n") \
        == {"simulate_barrier"}
    assert answer_functions_in_setup(ROOT / "solutions" / "05-slurm.ipynb", LAB5_OLD_HELPER,
                                     "w = lab_workload()\nresult = simulate(lab_workload(), 'slurm')\n") \
        == {"lab_workload"}


LAB5_OLD_HELPER = '''from courselib.io.sbatch import to_job
from courselib.model.workload import Workload


def lab_workload():
    """The four scripts as sbatch reads them, on CLUSTER, in submission order (used by the checks)."""
    return Workload(CLUSTER, [to_job(parse_sbatch(text, file=name)) for name, text in SCRIPTS.items()])
'''


# --- predict first, run after (issue 32's tester: Labs 1, 5 and 7) ----------------------------------------

def _intro(path: Path) -> str:
    """A lab's Markdown before its first question."""
    out = []
    for cell in nbformat.read(path, 4).cells:
        if cell.cell_type == "markdown":
            if HEADING.search(cell.source):
                break
            out.append(cell.source)
    return "\n".join(out)


@pytest.mark.parametrize("lab, question", predict_questions(), ids=lambda x: str(x))
def test_a_predict_question_says_to_work_it_out_by_hand(lab, question):
    """A lab that asks for a prediction says so in plain words, in its introduction or the question: the
    learner works it out by hand, and runs a model (if at all) only to compare. Lab 5 said "predict" and
    named the simulator's call; Lab 7's question 3 said "Predict what the model reports" beside a setup
    that imported the model."""
    path = ROOT / "solutions" / f"{lab}.ipynb"
    text = " ".join((_intro(path) + " " + questions(path)[question]["text"]).split())
    assert "by hand" in text, f"{lab} {question}: neither the introduction nor the question says 'by hand'"


RUN_AFTER = "# Run after answering"


def _demo_cells(path: Path) -> list[tuple[str, str]]:
    return [(c.get("id"), c.source) for c in nbformat.read(path, 4).cells
            if c.cell_type == "code" and markers.DEMO_TAG in markers.tags(c)]


def demo_shows_an_answer(path: Path, source: str) -> bool:
    """Whether a demo cell runs a real system (``courselib.live``: what the learner predicted, observed) or
    calls a function the lab's hidden checks call to compute an answer."""
    from courselib.grading.source import from_solution

    tree = ast.parse(source)
    if any(isinstance(n, (ast.Import, ast.ImportFrom)) and any(
            (m or "").startswith("courselib.live") for m in ([n.module] if isinstance(n, ast.ImportFrom)
                                                             else [a.name for a in n.names])) for n in ast.walk(tree)):
        return True
    handed = _imports(source)
    hidden = {f.id for s in from_solution(path).steps if s.role == "hidden"
              for f in (c.func for c in ast.walk(ast.parse(s.source)) if isinstance(c, ast.Call))
              if isinstance(f, ast.Name)}
    return any(inspect.isfunction(handed[n]) for n in hidden & set(handed) & _names_used(source))


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_a_demo_that_shows_an_answer_says_to_run_it_after_answering(path):
    """Lab 1's live run after question 2 printed question 1's answers (and the model's, from
    ``unshare_pid``) with nothing to say so; the labs' other live runs were unlabelled too. Such a cell
    now begins with "# Run after answering" and the question(s) it shows."""
    for cid, source in _demo_cells(path):
        if demo_shows_an_answer(path, source):
            assert source.startswith(RUN_AFTER), f"{path.stem} cell {cid}: a demo that shows an answer, unlabelled"


def test_the_demo_rule_sees_lab_1s_old_live_run_and_lab_7s_model_run():
    lab1, lab7 = ROOT / "solutions" / "01-namespaces-cgroups.ipynb", ROOT / "solutions" / "07-barrier.ipynb"
    assert demo_shows_an_answer(lab1, "from courselib.live import unshare\nrun = unshare.recorded_run()")
    assert demo_shows_an_answer(lab7, "from courselib.sim.barrier import simulate as simulate_barrier\n"
                                      "print(simulate_barrier(STORY).lost_gpu_hours)")
    assert not demo_shows_an_answer(lab7, "done, _ = run_training(AllReduce, lost=(5, 3))")


def _options() -> dict[str, list[str]]:
    return {name: [p for p in inspect.signature(policy_class(name).__init__).parameters
                   if p not in ("self", "workload", "seed")] for name in policy_names()}


def test_simulates_docstring_and_the_capstone_name_every_policy_option():
    doc = inspect.getdoc(simulate)
    lab = questions(ROOT / "solutions" / "09-capstone.ipynb")["q1"]["text"]
    for policy, options in _options().items():
        line = next((ln for ln in doc.split("\n- ") if ln.startswith(f"``{policy}``")), "")
        row = next((ln.strip() for ln in lab.splitlines() if ln.strip().startswith(f"| `{policy}` |")), "")
        for option in options:
            assert f"``{option}``" in line, f"simulate's docstring: {policy} lacks {option}"
            assert f"`{option}`" in row, f"the capstone's question 1: {policy} lacks {option}"


@pytest.mark.parametrize("lab", sorted(WITH_VARIANTS))
def test_labs_with_variants_carry_both_cells(lab):
    nb = nbformat.read(ROOT / "solutions" / f"{lab}.ipynb", 4)
    tags = [markers.tags(c) for c in nb.cells]
    assert sum(variant.PARAMETERS_TAG in t for t in tags) == 1 and sum(variant.VARIANT_TAG in t for t in tags) == 1


@pytest.mark.slow   # two gradings per lab
@pytest.mark.parametrize("lab", sorted(WITH_VARIANTS))
def test_a_seeds_solved_variant_scores_full_marks_and_its_untouched_variant_zero(lab, tmp_path):
    """Issue 33 for every lab (test_grading_variants does 20 seeds of Lab 8): seed 7's numbers differ from
    seed 0's, its solved copy earns every auto-graded point, its untouched copy none."""
    import json
    import subprocess
    import sys

    from courselib.grading.grade import grade

    outs = {}
    for kind in ("solved", "untouched"):
        out = tmp_path / kind / f"{lab}.ipynb"
        out.parent.mkdir()
        done = subprocess.run([sys.executable, "-m", "courselib", "labs", "variant", lab, "--seed", "7", "-o", str(out)]
                              + (["--solution"] if kind == "solved" else []),
                              cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        outs[kind] = out
    nb = json.loads(outs["untouched"].read_text())
    params = next(c for c in nb["cells"] if variant.PARAMETERS_TAG in c["metadata"].get("tags", []))
    seed0 = next(c for c in nbformat.read(ROOT / "labs" / f"{lab}.ipynb", 4).cells
                 if variant.PARAMETERS_TAG in markers.tags(c))
    assert "".join(params["source"]) != seed0.source, "seed 7 should change the lab's numbers"
    solved = grade(outs["solved"], source=ROOT / "solutions")
    assert solved.seed == 7 and solved.total == solved.max_points, [(q.question, q.feedback) for q in solved.questions]
    assert grade(outs["untouched"], source=ROOT / "solutions").total == 0


# --- a count's message says why it is whole, in its own lab's terms (issue 32's tester, Lab 6 Q2) -----------

# the kernel's labs: PIDs, cgroup counters, badness points and exit statuses are the kernel's integers, so
# whole()'s default reason is theirs; every other lab gives its own reason.
KERNEL_LABS = {"01-namespaces-cgroups", "03-oom-killer"}


def _whole_calls(path: Path) -> list[ast.Call]:
    calls = []
    for cell in nbformat.read(path, 4).cells:
        if cell.cell_type == "code" and (markers.is_check(cell) or markers.HIDDEN_TAG in markers.tags(cell)):
            for node in ast.walk(ast.parse(cell.source)):
                if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "whole":
                    calls.append(node)
    return calls


def test_whole_keeps_the_kernel_labs_reason_and_takes_a_labs_own():
    from courselib.grading.checks import whole

    with pytest.raises(AssertionError, match=r"^`exit_code` should be a whole number \(the kernel counts in "
                                             r"integers\); found 137\.5$"):
        whole("exit_code", 137.5)
    with pytest.raises(AssertionError) as err:
        whole("held_by_pretrain", 160.5, "a count of GPUs")
    assert str(err.value) == "`held_by_pretrain` should be a whole number (a count of GPUs); found 160.5"
    assert whole("n", 3.0, "a count of pods") == 3


@pytest.mark.parametrize("path", SOLUTIONS, ids=[p.stem for p in SOLUTIONS])
def test_a_count_outside_the_kernel_labs_says_why_it_is_whole(path):
    """Lab 6 Q2 answered 1600.5 GPU-hours was told "the kernel counts in integers" (a message of the OOM lab)."""
    calls = _whole_calls(path)
    if path.stem in KERNEL_LABS:
        return
    bare = [ast.unparse(c) for c in calls if len(c.args) + len(c.keywords) < 3]
    assert not bare, f"{path.name}: whole() without a reason of this lab's own: {bare}"
    text = path.read_text()
    assert "kernel counts in integers" not in text


def test_the_capstone_says_where_each_policys_options_are_explained():
    """Issue 32's tester: Lab 9 listed about 11 Kueue options with no word on what they do. Question 1 points
    to simulate's docstring, to each policy's module (whose docstring explains its options) and to the
    chapter sections of the mechanisms; every section it names exists."""
    import importlib

    lab = questions(ROOT / "solutions" / "09-capstone.ipynb")["q1"]["text"]
    assert "help(simulate)" in lab and "help(courselib.model.policies.kueue)" in lab
    for policy in policy_names():
        module = policy.replace("-", "_")
        assert f"`{module}`" in lab or f"policies.{module})" in lab, policy
        assert importlib.import_module(f"courselib.model.policies.{module}").__doc__
    named = [" ".join(title.split()) for title in re.findall(r"“([^”]+)”", lab)]
    books = " ".join((ROOT / "book" / f).read_text() for f in ("05-slurm.md", "06-gang-deadlock.md",
                                                               "06-native-gang-and-failures.md"))
    assert len(named) >= 5
    for title in named:
        assert f"## {title}\n" in books, title


# --- a lab asks only for what the chapters before it teach (issue 32's review) ------------------------------
#
# The learning path is chapter N, then lab N (`courselib.course.LABS`). Lab 6's question 7 asked what a split
# placement costs "(chapter 8)", and Lab 7's question 4 needed the interval where the waste is smallest,
# Young's sqrt(2CM), and named `courselib.model.checkpoint`: both are taught only in chapter 8, after those labs.
#
# What a chapter teaches is read from the book. A courselib name is taught by the first chapter, in the
# learning path's order, whose code a reader sees uses it (cells tagged remove-cell or remove-input do not
# count), or whose prose spells it out (`courselib.x.y`). A name the book never shows counts as taught with its
# module. What a lab asks is read from what its learner reads and is handed: the student's lab (labs/, seed 0):
# its text, with its chapter references and the courselib names in its inline code, and its given code; the
# reference answers (solutions/); and the chapter references in the words of the hidden checks' feedback.
# The hidden checks' own code is the grader's and may use any chapter's model.
#
# A question may use something from a later chapter only if it states the fact in its own text, so that
# chapters 1..N suffice, and links the chapter that teaches it in full. Each such question is listed here.

#: (lab, question) -> (what it takes from a later chapter, the fact its text states, why); an entry that no
#: longer matches what is found fails the test
LATER_ALLOWED = {
    ("06-gang-deadlock", "q7"): ({"book/08-cost"}, "`(1 − f) + f × r`",
                                 "the step slowdown of a tensor-parallel group split across a slow link "
                                 "(chapter 8, Bill three), which the written answer prices"),
    ("07-barrier", "q4"): ({"book/08-cost", "courselib.model.checkpoint.first_order_waste"}, "`T = sqrt(2CM)`",
                           "Young's interval, where the first-order waste the question states is smallest "
                           "(chapter 8, How often to checkpoint)"),
}
BOOK_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```", re.M | re.S)
CHAPTER_ORDER = [c.doc for c in course_table.CHAPTERS]


def courselib_names(source: str, env: dict[str, str]) -> set[str]:
    """The courselib names ``source`` imports or uses, fully qualified (``courselib.model.cost.job_mtbf``);
    ``env`` maps the names bound so far to what they stand for, and is updated with this source's imports."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("courselib"):
            for a in n.names:
                env[a.asname or a.name] = f"{n.module}.{a.name}"
                out.add(f"{n.module}.{a.name}")
        elif isinstance(n, ast.Import):
            for a in n.names:
                if a.name.startswith("courselib"):
                    env[a.asname or "courselib"] = a.name if a.asname else "courselib"
                    out.add(a.name)
    for n in ast.walk(tree):
        chain = []
        while isinstance(n, ast.Attribute):
            chain.append(n.attr)
            n = n.value
        if isinstance(n, ast.Name) and n.id in env:
            out.add(".".join([env[n.id], *reversed(chain)]))
    return out


def _book(doc: str) -> str:
    return (ROOT / f"{doc}.md").read_text()


def taught_in() -> dict[str, str]:
    """Each courselib name the book shows -> the first chapter (doc name) that shows it to a reader."""
    first: dict[str, str] = {}
    for doc in CHAPTER_ORDER:
        text, env = _book(doc), {}
        for m in BOOK_CELL.finditer(text):
            options = re.match(r"(?::[\w-]+:.*\n)*", m.group(1)).group(0)
            names = courselib_names(m.group(1)[len(options):], env)   # aliases count wherever they are bound
            if not re.search(r"remove-(cell|input)", options):
                for name in names:
                    first.setdefault(name, doc)
        for name in re.findall(r"`(courselib\.[\w.]*\w)", BOOK_CELL.sub("", text)):
            first.setdefault(name, doc)
    return first


def chapter_of(name: str, taught: dict[str, str]) -> str | None:
    """The chapter that teaches ``name``: its own first showing, else its module's (``None``: never shown)."""
    parts = name.split(".")
    for k in range(len(parts), 1, -1):
        if ".".join(parts[:k]) in taught:
            return taught[".".join(parts[:k])]
    return None


def chapters_named(text: str) -> set[str]:
    """The chapters ``text`` sends a reader to: "chapter 8", "chapters 7 and 8", ``book/08-cost.md``,
    a {ref} to a chapter's label."""
    by_number: dict[int, str] = {}
    for doc in CHAPTER_ORDER:
        by_number.setdefault(int(Path(doc).name[:2]), doc)      # "chapter 6" is the first of the two
    labels = {label: doc for doc in CHAPTER_ORDER for label in re.findall(r"^\(([\w-]+)\)=$", _book(doc), re.M)}
    out = {f"book/{m}" for m in re.findall(r"book/(\d\d-[\w-]+)\.md", text) if f"book/{m}" in CHAPTER_ORDER}
    for m in re.finditer(r"\b[Cc]hapters? (\d+)((?:(?:,| and| or|–|-) ?\d+)*)", text):
        out |= {by_number[int(n)] for n in [m.group(1), *re.findall(r"\d+", m.group(2))] if int(n) in by_number}
    out |= {labels[m] for m in re.findall(r"\{ref\}`(?:[^`<]*<)?([\w-]+)>?`", text) if m in labels}
    return out


def lab_material(stem: str) -> dict[str, dict]:
    """Per question ("intro" before question 1): the text the learner reads (``text``), the courselib names
    of the code it is handed and of the reference answer (``names``), the hidden checks' feedback words
    (``feedback``), and the aliases the lab's code binds (``env``, shared by the whole lab)."""
    out: dict[str, dict] = {}
    env: dict[str, str] = {}

    def at(q):
        return out.setdefault(q, {"text": "", "names": set(), "feedback": "", "env": env})

    q = "intro"
    for cell in nbformat.read(ROOT / "labs" / f"{stem}.ipynb", 4).cells:
        m = HEADING.search(cell.source) if cell.cell_type == "markdown" else None
        q = f"q{m.group(1)}" if m else q
        if cell.cell_type == "markdown":
            at(q)["text"] += cell.source + "\n"
        else:
            at(q)["names"] |= courselib_names(cell.source, env)
    q = "intro"
    for cell in nbformat.read(ROOT / "solutions" / f"{stem}.ipynb", 4).cells:
        m = HEADING.search(cell.source) if cell.cell_type == "markdown" else None
        q = f"q{m.group(1)}" if m else q
        if cell.cell_type != "code":
            continue
        if markers.HIDDEN_TAG in markers.tags(cell):
            strings = [n.value for n in ast.walk(ast.parse(cell.source))
                       if isinstance(n, ast.Constant) and isinstance(n.value, str)]
            at(markers.course_meta(cell).get("question", q))["feedback"] += "\n".join(strings) + "\n"
        elif markers.has_markers(cell.source):
            at(q)["names"] |= courselib_names(markers.solution_source(cell.source, stem), dict(env))
    return out


def from_later_chapters(stem: str, material: dict[str, dict], taught: dict[str, str]) -> dict[str, set[str]]:
    """Per question, what it takes from a chapter after its lab's: chapter docs and courselib names."""
    lab = next(lab for lab in course_table.LABS if lab.doc == f"labs/{stem}")
    after = set(CHAPTER_ORDER[CHAPTER_ORDER.index(lab.chapter) + 1:])
    found: dict[str, set[str]] = {}
    for q, m in material.items():
        names = set(m["names"])
        for span in re.findall(r"`([A-Za-z_][\w.]*)", m["text"]):
            head = span.split(".")[0]
            if span.startswith("courselib."):
                names.add(span)
            elif head in m["env"] and "." in span:
                names.add(m["env"][head] + span[len(head):])
        items = {n for n in names if chapter_of(n, taught) in after}
        items |= (chapters_named(m["text"]) | chapters_named(m["feedback"])) & after
        if items:
            found[q] = items
    return found


def path_problems(stem: str, material: dict[str, dict], taught: dict[str, str]) -> list[str]:
    """What in lab ``stem`` a learner who has read only the chapters up to its own cannot do, as sentences."""
    problems = []
    found = from_later_chapters(stem, material, taught)
    for q, items in sorted(found.items()):
        allowed, fact, _ = LATER_ALLOWED.get((stem, q), (set(), None, ""))
        later = {i: (i if i.startswith("book/") else chapter_of(i, taught)) for i in items}
        if items - allowed:
            used = ", ".join(i if i == c else f"{i} (taught in {c})" for i, c in sorted(later.items()) if i not in allowed)
            problems.append(f"{stem} {q} uses {used}, after the lab's chapter: state the fact in the question and "
                            f"list it in LATER_ALLOWED, reword the question, or move it to a later lab")
            continue
        if fact not in material[q]["text"]:
            problems.append(f"{stem} {q} uses {sorted(items)} but does not state {fact} in its text")
        for doc in sorted(set(later.values())):
            if f"../{doc}.md" not in material[q]["text"]:
                problems.append(f"{stem} {q} uses {doc} but does not link ../{doc}.md, where it is taught in full")
    for (lab, q), (allowed, _, why) in LATER_ALLOWED.items():
        if lab == stem and found.get(q, set()) != allowed:
            problems.append(f"LATER_ALLOWED lists {lab} {q} with {sorted(allowed)} ({why}); found "
                            f"{sorted(found.get(q, set()))}: update or remove the entry")
    return problems


@pytest.fixture(scope="module")
def taught():
    return taught_in()


@pytest.mark.parametrize("stem", [Path(lab.doc).name for lab in course_table.LABS])
def test_a_lab_asks_only_for_what_the_chapters_before_it_teach(stem, taught):
    assert path_problems(stem, lab_material(stem), taught) == []


def test_what_a_chapter_teaches_is_read_from_what_its_reader_sees(taught):
    """Spot checks of the map the test above uses, each against the page."""
    assert chapter_of("courselib.model.collective.split_link_bps", taught) == "book/05-slurm"
    assert chapter_of("courselib.model.collective.step_slowdown", taught) == "book/08-cost"   # same module, later
    assert chapter_of("courselib.model.checkpoint.young_interval", taught) == "book/08-cost"
    assert chapter_of("courselib.model.recovery.rung", taught) == "book/07-nccl-barrier"   # by its module
    assert chapter_of("courselib.sim.barrier.simulate", taught) == "book/07-nccl-barrier"
    assert chapter_of("courselib.grading.checks.expect", taught) is None                   # the labs' own tool
    # a name only in cells the reader never sees is not taught there
    assert "courselib.plots.cost.waste_curve" not in taught and "waste_curve(60, 2 * H)" in _book("book/08-cost")
    assert chapters_named("see (book/08-cost.md) and chapters 5 and 7; {ref}`split-gang-cost`") == \
        {"book/08-cost", "book/05-slurm", "book/07-nccl-barrier"}
    assert chapters_named("chapter 6") == {"book/06-gang-deadlock"}


#: what the labs said before the fix (issue 32's review), each planted in today's lab
OLD = {
    ("06-gang-deadlock", "q7", "text"): (
        "## Question 7 (2 points, graded by your instructor): headcount fits, topology does not\n\nIn the cell "
        "below, explain in your own words (4–6 sentences) why `train` waits under Kueue although the cluster has "
        "enough free nodes, and why Kueue's best fit put `eval` where it did. Then say what the default "
        "Kubernetes scheduler would do with the same `train` job, and what that placement would cost a "
        "tensor-parallel job for its whole run (chapter 8).\n"),
    ("07-barrier", "q4", "text"): (
        "## Question 4 (3 points): choose the checkpoint interval under a constraint\n\nThe first-order waste "
        "of an interval `T` is `W(T) = C/T + T/(2M) + R/M` (`C` the checkpoint cost, `M` the job's MTBF, `R` "
        "detection + restart; `courselib.model.checkpoint.first_order_waste`).\n"),
    ("07-barrier", "intro", "text"): (
        "This lab goes with the chapters [*One missing rank stops them all*](../book/07-nccl-barrier.md) and "
        "[*What a missing rank costs*](../book/08-cost.md). … they run `courselib.sim.barrier` and "
        "`courselib.model.checkpoint`, and verify your claim against what the model does.\n"),
    ("07-barrier", "q3", "feedback"): (
        "see “What a missing rank costs” (book/08-cost.md), section “Bill two: a lost rank”, and “One missing "
        "rank stops them all” (book/07-nccl-barrier.md), on how a loss is detected"),
}


@pytest.mark.parametrize("lab, question, part", sorted(OLD), ids=lambda x: str(x))
def test_the_path_check_fails_on_what_labs_6_and_7_said_before(lab, question, part, taught):
    material = lab_material(lab)
    material[question] = {**material[question], part: OLD[lab, question, part]}
    problems = path_problems(lab, material, taught)
    assert any(p.startswith(f"{lab} {question} ") for p in problems), problems


# ----------------------------------------------------------------------------- a chapter's practice problems

#: (chapter, problem topic) -> {a later chapter's name the problem's solver uses: why the reader has it already}
PRACTICE_LATER_ALLOWED = {
    ("book/03-oom-killer", "oom"): {
        "courselib.model.restart.terminated_by_oom": "OOMKilled and exit code 137, which chapter 3's prose teaches; "
                                                     "chapter 7 first shows the function"},
    ("book/06-gang-deadlock", "gang"): {
        "courselib.model.cost.gpu_hours": "GPUs held times hours, the arithmetic chapter 6 does in its prose"},
    ("book/06-native-gang-and-failures", "gang"): {
        "courselib.model.cost.gpu_hours": "the same"},
}


def practice_from_later_chapters(taught: dict[str, str]) -> dict[tuple[str, str], set[str]]:
    """(chapter, topic) -> the names from a later chapter that the topic's problem module uses."""
    out = {}
    for chapter in course_table.CHAPTERS:
        for topic in chapter.practice:
            source = (ROOT / "src" / "courselib" / "problems" / f"{topic}.py").read_text()
            later = {n for n in courselib_names(source, {})
                     if (c := chapter_of(n, taught)) and CHAPTER_ORDER.index(c) > CHAPTER_ORDER.index(chapter.doc)}
            if later:
                out[(chapter.doc, topic)] = later
    return out


def test_a_chapter_practises_only_what_it_and_the_chapters_before_it_teach(taught):
    """A chapter's practice problems (course.CHAPTERS' ``practice``, offered at the chapter's end) use only
    what the reader has met: chapter 7 once offered `courselib problem checkpoint`, whose solutions are
    Young's and Daly's intervals from chapter 8."""
    found = practice_from_later_chapters(taught)
    unexplained = {key: names - set(PRACTICE_LATER_ALLOWED.get(key, {})) for key, names in found.items()}
    assert {k: v for k, v in unexplained.items() if v} == {}
    stale = {key: set(names) - found.get(key, set()) for key, names in PRACTICE_LATER_ALLOWED.items()}
    assert {k: v for k, v in stale.items() if v} == {}, "PRACTICE_LATER_ALLOWED lists what is no longer used"


def test_the_practice_check_fails_on_chapter_7s_old_checkpoint_problems(taught, monkeypatch):
    """Planted: chapter 7 practising checkpoint again, as it did before."""
    import dataclasses
    old = [dataclasses.replace(c, practice=c.practice + ("checkpoint",)) if c.doc == "book/07-nccl-barrier" else c
           for c in course_table.CHAPTERS]
    monkeypatch.setattr(course_table, "CHAPTERS", old)
    found = practice_from_later_chapters(taught)
    assert "courselib.model.checkpoint.checkpoint_plan" in found[("book/07-nccl-barrier", "checkpoint")]
