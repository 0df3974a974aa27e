"""Test tiers: every test is marked by what it costs and which real system it needs, by rule, not by hand.

A pytest plugin (``pytest_plugins`` in conftest.py). The markers (registered in pyproject.toml):

=============  =====================================================================================
``book``       executes a chapter or a playground (tests/test_book.py's page runs, nbval over notebooks/)
``site``       builds the website or opens it in a browser (test_site*, test_binder, test_lab_redirects)
``lab``        grades a lab: a kernel or the grader's sandbox runs a notebook (nbval over solutions/ too)
``real``       touches a real system; always with one of ``real_kube``, ``real_slurm``,
               ``real_kernel``, ``real_container``, ``real_mpi``, ``real_hub`` (``make test-real S=kube``)
``scale``      a model run at the seed's size (hundreds of nodes), or a property test over large inputs
``slow``       more than a few seconds for any other reason
``network``    downloads from a package index, so it mostly waits (always also ``slow``; test_binder)
=============  =====================================================================================

The rules classify a test by its file, by the fixtures it asks for and by what its function calls, so a
test another helper adds to a file, or that asks for ``live_kube``, falls into its tier by itself:

- :data:`FILES`: a file's tiers (a whole file of live tests, of site checks); a new
  ``test_<what>_live.py`` or ``test_<what>_real.py`` is ``real`` with the system its name says;
- :data:`FIXTURES`: a fixture's tiers (``live_kube`` -> ``real_kube``);
- :data:`CALLS`: a name the test function's source calls (``grade(`` -> ``lab``), a test helper of
  :data:`HELPERS` that grades a lab among them (``graded_with(`` -> ``lab``);
- :data:`TESTS`: a few named tests (file::name prefix, parameters included) the rules above cannot see;
- a notebook collected by nbval: ``notebooks/`` is ``book``, ``solutions/`` is ``lab``;
- a test marked ``real`` by hand gets its system from its file, else from its name.

Every run writes its times, per test and per tier, to ``_build/test-times.txt`` (:data:`TIMES`).

``make test-fast`` runs ``-m "not (book or site or lab or real or scale or slow)"`` with
``COURSE_TEST_BUDGET=dev`` (tests/budget.py); ``make test-topic T=oom`` passes ``--topic oom`` (a
chapter's module tests, its page, its lab and its solution; no site, no real system); ``make test-real
S=kube`` runs ``-m real_kube``. tests/test_test_loop.py checks these rules.
"""
from __future__ import annotations

import functools
import inspect
import re
from pathlib import Path

import pytest

import budget

SYSTEMS = ("kube", "slurm", "kernel", "container", "mpi", "hub")
TIERS = ("book", "site", "lab", "real", "scale", "slow") + tuple(f"real_{s}" for s in SYSTEMS) + ("kueue", "network")

#: test file (name) -> its tiers
FILES: dict[str, tuple[str, ...]] = {
    "test_kube_live.py": ("real_kube",),
    "test_kueue_live.py": ("real_kube",),
    "test_gang_gate_live.py": ("real_kube",),
    "test_kueue_config_real.py": ("real_kube",),
    "test_slurm_live.py": ("real_slurm",),
    "test_oom_real.py": ("real_kernel",),
    "test_container_live.py": ("real_container",),
    "test_rebuild_live.py": ("real_container",),
    "test_mpi_real.py": ("real_mpi",),
    "test_site.py": ("site",),
    "test_site_links.py": ("site",),
    "test_lab_redirects.py": ("site",),
    "test_student_edition.py": ("site",),
    "test_binder.py": ("site", "slow", "network"),
    # every reader under thousands of generated hostile files, in child processes: about a minute even on
    # the dev budget; test_hostile_cases.py keeps the cases in the fast loop
    "test_fuzz_hostile.py": ("slow",),
    "test_grading_attacks.py": ("lab",),
    "test_grading_integrity.py": ("lab",),
    "test_grading_many.py": ("lab",),
    "test_grading_nbval.py": ("lab",),
    "test_grading_variants.py": ("lab",),
    # seed A's answers graded in seed B's lab: 24 gradings, about 40 s
    "test_lab_classmate.py": ("lab",),
    "test_grading_formats.py": ("lab",),
    "test_grading_resaved.py": ("lab",),
}

#: a file named test_<what>_live.py or test_<what>_real.py is a real system's (its system from NAMES),
#: unless FILES gives it its tiers or it is one of these (they test the live code on recordings and fakes)
LIVE_FILE = re.compile(r"test_\w+_(live|real)\.py")
NOT_REAL = ("test_oom_live.py", "test_cli_live.py")

#: fixture -> the tiers of every test that asks for it
FIXTURES: dict[str, tuple[str, ...]] = {
    "live_kube": ("real_kube",),
    "live_slurm": ("real_slurm",),
    "site": ("site",),
    "crawl": ("site",),
    "browser": ("site",),
}

#: a call in the test function's own source -> its tiers (the grader runs a notebook; a kernel runs a page)
CALLS: dict[str, tuple[str, ...]] = {
    r"\bgrade\(": ("lab",),
    r"\bgrade_many\(": ("lab",),
    r"\brun_grader\(": ("lab",),
    r"\bmain\(\[\"grade\",[^\n]*\) == 0": ("lab",),  # `courselib grade` run to the end
    r"\bNotebookClient\(": ("book",),
    r"\bexecuted_page\(": ("book",),
}

#: the test helpers that grade a lab for the tests that call them (a helper's call is not in the test's own
#: source): the top-level functions and classes of these files that call ``grade(``, or such a helper
HELPERS = ("lab_answers.py",)


def _grading_helpers(files=HELPERS) -> dict[str, tuple[str, ...]]:
    """``CALLS`` rules for the helpers of ``files`` that grade a lab, directly or through one another."""
    import ast

    bodies: dict[str, str] = {}
    for name in files:
        path = Path(__file__).parent / name
        if not path.is_file():         # (a copy of tests/ without it: its tests are gone with it)
            continue
        text = path.read_text()
        for node in ast.parse(text).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                bodies[node.name] = ast.get_source_segment(text, node) or ""
    grading = {n for n, body in bodies.items() if any(
        re.search(pattern, body) for pattern, tiers in CALLS.items() if "lab" in tiers)}
    while True:                    # a helper that calls a grading helper grades too
        more = {n for n, body in bodies.items() if n not in grading
                and any(re.search(rf"\b{g}\(", body) for g in grading)}
        if not more:
            return {rf"\b{n}\(": ("lab",) for n in sorted(grading)}
        grading |= more


CALLS.update(_grading_helpers())

#: tests the rules above cannot see: "file::prefix of the test's name (with its parameters)" -> tiers
TESTS: dict[str, tuple[str, ...]] = {
    # a hand-rolled grading loop over a lab's cells in a kernel
    "test_labs.py::test_every_solution_scores_full_marks": ("lab",),
    "test_labs.py::test_every_untouched_lab_scores_zero": ("lab",),
    "test_labs.py::test_an_untouched_lab_fails_on_every_check_cell": ("lab",),
    "test_labs.py::test_a_kernel_killed_mid_lab": ("lab",),
    "test_labs.py::test_the_images_labs_answer_holds_on_a_real_builder": ("lab", "real_container"),
    "test_labs.py::test_the_slurm_labs_answers_agree_with_the_real_slurm": ("lab", "real_slurm"),
    "test_lab7_recovery.py::": ("lab",),
    # `courselib grade` of an untouched lab, as a student types it (about 2 s)
    "test_lab_grade_command.py::test_the_headers_command_grades": ("lab",),
    # Jupyter Book builds two student labs and the bibliography (about 10 s)
    "test_lab_citations.py::test_a_tiny_website_of_the_labs_cites_with_the_bibliography": ("site",),
    "test_labs.py::test_a_hung_answer_is_stopped": ("lab",),
    "test_gang_fastpath.py::test_fast_path_matches_the_reference_on_crowded_workloads": ("scale",),
    # three planted slips, each run over nine workloads at full size: 19-27 s apiece in the two-minute loop
    "test_gang_fastpath.py::test_the_timeline_passes_over_runs_of_rows_and_planted_slips_fail": ("scale",),
    # the website's barrier views against sixteen runs of the 512-rank barrier model: 7-10 s on the course machine
    "test_steps.py::test_the_static_barrier_views_embed_the_models_steps": ("slow",),
    # fifty generated barrier problems, each simulated and solved: 20 s apiece on the course machine
    "test_problems.py::test_fifty_seeds_fifty_different_problems_all_solvable[barrier-medium]": ("scale",),
    "test_problems.py::test_fifty_seeds_fifty_different_problems_all_solvable[barrier-hard]": ("scale",),
    "test_problems.py::test_difficulty_changes_the_size_not_only_the_numbers[barrier]": ("scale",),
}

#: a word in a real test's name -> its system (when its file does not say)
NAMES = (("kube", "kube"), ("kueue", "kube"), ("jobset", "kube"), ("slurm", "slurm"),
         ("builder", "container"), ("docker", "container"), ("container", "container"), ("mpi", "mpi"),
         ("hub", "hub"))

#: make test-topic T=...: a topic -> the words its tests carry in their ids (a chapter's module, page, lab)
TOPICS: dict[str, tuple[str, ...]] = {
    "namespaces": ("namespace", "01-", "unshare", "container-is-a-process"),
    "cgroups": ("cgroup", "02-", "cpu", "memcg"),
    "oom": ("oom", "03-"),
    "images": ("image", "04-", "dockerfile", "rebuild", "container"),
    "slurm": ("slurm", "sbatch", "05-", "backfill"),
    "gang": ("gang", "06-", "kube", "kueue", "jobset", "manifest"),
    "barrier": ("barrier", "07-", "nccl", "recovery", "mpi"),
    "cost": ("cost", "08-"),
    "capstone": ("capstone", "09-", "choosing"),
}


def pytest_addoption(parser):
    parser.addoption("--topic", default=None, metavar="T",
                     help=f"only the tests of one topic (a chapter's module, page and lab): {', '.join(TOPICS)}, "
                          "or a chapter number (03)")


@functools.lru_cache(maxsize=None)
def _source(function) -> str:
    try:
        return inspect.getsource(function)
    except (OSError, TypeError):
        return ""


def tiers_of(item) -> set[str]:
    """The tiers the rules give ``item`` (without the ones it was marked with by hand)."""
    path = Path(str(item.fspath))
    found: set[str] = set()
    if path.suffix == ".ipynb":
        return {"lab"} if path.parent.name == "solutions" else {"book"}
    found.update(FILES.get(path.name, ()))
    if path.name not in FILES and path.name not in NOT_REAL and LIVE_FILE.fullmatch(path.name):
        found.add(f"real_{_system(item, path)}")
    for name in getattr(item, "fixturenames", ()):
        found.update(FIXTURES.get(name, ()))
    plane = item.get_closest_marker("live_kube") if hasattr(item, "get_closest_marker") else None
    if plane is not None and plane.kwargs.get("kueue"):
        found.add("kueue")       # the control plane with Kueue joined: a lane of its own (tests/lanes.py)
    function = getattr(item, "function", None)
    if function is not None:
        body = _source(function)
        for pattern, tiers in CALLS.items():
            if re.search(pattern, body):
                found.update(tiers)
        for key, tiers in TESTS.items():
            file, _, prefix = key.partition("::")
            if path.name == file and item.name.startswith(prefix):
                found.update(tiers)
    return found


def _system(item, path: Path) -> str:
    name = item.name.lower()
    for word, system in NAMES:
        if word in name or word in path.name:
            return system
    return "kernel"


def topic_words(topic: str) -> tuple[str, ...]:
    if re.fullmatch(r"\d\d?", topic):
        return (f"{int(topic):02d}-",)
    if topic not in TOPICS:
        raise pytest.UsageError(f"--topic {topic}: choose one of {', '.join(TOPICS)} or a chapter number (03)")
    return TOPICS[topic]


def in_topic(nodeid: str, words: tuple[str, ...]) -> bool:
    """Whether a test id carries one of the words at the start of a word ("oom" is in test_oom_model and
    03-oom-killer, not in classroom)."""
    nodeid = nodeid.lower()
    return any(re.search(r"(?<![a-z])" + re.escape(w), nodeid) for w in words)


def _dev_budget(item) -> None:
    """On the dev budget, a property test whose module names its count without tests/budget.py's
    ``examples(N)`` gets ``examples(N)`` all the same (the full run keeps every count as written)."""
    test = getattr(item, "obj", None)
    given = getattr(test, "_hypothesis_internal_use_settings", None)
    module = getattr(item, "module", None)
    if given is None or module is None or "examples(" in _module_source(module):
        return
    from hypothesis import settings
    test._hypothesis_internal_use_settings = settings(given, max_examples=budget.examples(given.max_examples))


@functools.lru_cache(maxsize=None)
def _module_source(module) -> str:
    try:
        return inspect.getsource(module)
    except (OSError, TypeError):
        return ""


def pytest_collection_modifyitems(session, config, items):
    dev = budget.budget() == "dev"
    for item in items:
        if dev:
            _dev_budget(item)
        tiers = tiers_of(item)
        path = Path(str(item.fspath))
        if item.get_closest_marker("real") is not None and not any(t.startswith("real_") for t in tiers):
            tiers.add(f"real_{_system(item, path)}")
        if any(t.startswith("real_") for t in tiers):
            tiers.add("real")
        if "network" in tiers:
            tiers.add("slow")
        for tier in sorted(tiers - {m.name for m in item.iter_markers()}):
            item.add_marker(getattr(pytest.mark, tier))
    topic = config.getoption("topic")
    if topic:
        words = topic_words(topic)
        keep = [item for item in items if in_topic(item.nodeid, words)]
        config.hook.pytest_deselected(items=[item for item in items if not in_topic(item.nodeid, words)])
        items[:] = keep


# ----------------------------------------------------------------------------- the run's times

#: Every run leaves its times here (``COURSE_TEST_TIMES=FILE`` elsewhere): each test's setup + call +
#: teardown, slowest first, with its tiers, and the total per tier, so the next cut starts from figures.
TIMES = Path(__file__).resolve().parents[1] / "_build" / "test-times.txt"
_times: dict[str, float] = {}
_tiers: dict[str, tuple[str, ...]] = {}


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    for item in session.items:
        _tiers[item.nodeid] = tuple(sorted({m.name for m in item.iter_markers()} & set(TIERS))) or ("fast",)


_cpu: dict[str, float] = {}


def _cpu_now() -> float:
    """CPU seconds of this process and of the children it has waited for (a daemon a fixture keeps
    running counts only once it is stopped, in the test that stops it)."""
    import resource
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    item._course_cpu = _cpu_now()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    now = _cpu_now()
    # each phase's CPU (since the last phase ended), carried on the report so xdist forwards it
    outcome.get_result().user_properties.append(("cpu_s", now - getattr(item, "_course_cpu", now)))
    item._course_cpu = now


def pytest_runtest_logreport(report):
    _times[report.nodeid] = _times.get(report.nodeid, 0.0) + report.duration
    cpu = dict(report.user_properties).get("cpu_s")
    if cpu is not None:
        _cpu[report.nodeid] = _cpu.get(report.nodeid, 0.0) + cpu


def times_table(times: dict[str, float], tiers: dict[str, tuple[str, ...]],
                cpu: dict[str, float] | None = None) -> str:
    """The run's times as text: the total per tier (a test counts in each of its tiers), then every test,
    each with its wall seconds and, where measured, its CPU seconds (the test's process and the children
    it waited for: on a machine whose cores are all busy, the CPU is what a cut saves)."""
    cpu = cpu or {}
    per: dict[str, list] = {}
    for nodeid, seconds in times.items():
        for tier in tiers.get(nodeid, ("fast",)):
            row = per.setdefault(tier, [0.0, 0.0])
            row[0] += seconds
            row[1] += cpu.get(nodeid, 0.0)
    lines = [f"# {len(times)} tests, {sum(times.values()):.1f} s in tests (setup + call + teardown), "
             f"{sum(cpu.values()):.1f} CPU s", "# per tier:          wall s    CPU s"]
    lines += [f"#   {tier:14s} {s:8.1f} {c:8.1f}" for tier, (s, c) in sorted(per.items(), key=lambda kv: -kv[1][0])]
    lines += ["#  wall s    CPU s  tiers                   test"]
    lines += [f"{s:8.2f} {cpu[n]:8.2f}  {' '.join(tiers.get(n, ('fast',))):22s}  {n}" if n in cpu else
              f"{s:8.2f} {'-':>8}  {' '.join(tiers.get(n, ('fast',))):22s}  {n}"
              for n, s in sorted(times.items(), key=lambda kv: -kv[1])]
    return "\n".join(lines) + "\n"


def pytest_sessionfinish(session, exitstatus):
    if not _times or hasattr(session.config, "workerinput"):
        return
    import os
    path = Path(os.environ.get("COURSE_TEST_TIMES") or TIMES)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(times_table(_times, _tiers, _cpu))
    except OSError:
        pass
