"""The test loop itself: Hypothesis budgets go through tests/budget.py, and tests/tiers.py's rules put
each kind of test in its tier (make test-fast, make test-topic, make test-real)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest

import budget
import tiers

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
# the pytest runs these tests start: quiet, no cache, and without nbval, whose start (Jupyter's imports)
# is most of a small run's cost: 2.6 CPU s with it against 0.5 without, per run
QUICK = ("-q", "-p", "no:cacheprovider", "-p", "no:nbval")


def test_a_count_named_without_the_helper_is_shrunk_on_the_dev_budget_only(monkeypatch):
    from hypothesis import given, settings, strategies as st

    @settings(max_examples=300, deadline=None)
    @given(st.integers())
    def bare(x):
        pass

    module = SimpleNamespace(__name__="bare_module")
    monkeypatch.setattr(tiers, "_module_source", lambda module: "@settings(max_examples=300)")
    item = SimpleNamespace(obj=bare, module=module)
    monkeypatch.setenv("COURSE_TEST_BUDGET", "dev")
    tiers._dev_budget(item)
    assert bare._hypothesis_internal_use_settings.max_examples == 30
    assert bare._hypothesis_internal_use_settings.deadline is None
    monkeypatch.setattr(tiers, "_module_source", lambda module: "max_examples=examples(300)")
    tiers._dev_budget(item)  # a module that uses the helper is left as it is
    assert bare._hypothesis_internal_use_settings.max_examples == 30


def test_the_dev_budget_shrinks_every_count_and_the_full_one_keeps_it(monkeypatch):
    monkeypatch.delenv("COURSE_TEST_BUDGET", raising=False)
    assert [budget.examples(n) for n in (8, 60, 1500)] == [8, 60, 1500]
    monkeypatch.setenv("COURSE_TEST_BUDGET", "dev")
    assert [budget.examples(n) for n in (3, 8, 60, 1500)] == [3, 5, 6, 150]
    # a test's own dev count, below the tier's, for the dev tier only
    assert [budget.examples(n, dev=2) for n in (1, 20, 1500)] == [1, 2, 2]
    with pytest.raises(ValueError, match="dev count"):
        budget.examples(20, dev=6)
    monkeypatch.delenv("COURSE_TEST_BUDGET")
    assert [budget.examples(n, dev=2) for n in (1, 20, 1500)] == [1, 20, 1500]
    monkeypatch.setenv("COURSE_TEST_BUDGET", "quick")
    with pytest.raises(ValueError, match="COURSE_TEST_BUDGET='quick'"):
        budget.examples(10)


def test_the_dev_tier_draws_the_same_examples_every_run_and_the_full_run_keeps_hypothesis_own_profile():
    """The loop's time is a figure, not a draw (an example costs 0.01 to 12 s): the dev profile is
    derandomized. The full run keeps the profile Hypothesis loads itself: random draws in `make test`,
    and under CI (the CI variable set, as .ci/run sets it) Hypothesis' built-in "ci" profile, which is
    derandomized too."""
    import os

    from hypothesis import settings as hsettings
    assert hsettings.get_profile("dev").derandomize
    assert not hsettings.get_profile("default").derandomize
    if budget.budget() == "dev":
        assert hsettings.default.derandomize
    else:
        in_ci = "CI" in os.environ or os.environ.get("TF_BUILD") == "true"
        assert hsettings.default.derandomize == hsettings.get_profile("ci" if in_ci else "default").derandomize


def test_every_tier_is_a_registered_marker():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    registered = {m.split(":")[0] for m in config["tool"]["pytest"]["ini_options"]["markers"]}
    assert set(tiers.TIERS) <= registered
    used = {t for table in (tiers.FILES, tiers.FIXTURES, tiers.CALLS, tiers.TESTS) for ts in table.values() for t in ts}
    assert used <= set(tiers.TIERS)


def test_every_file_the_tiers_name_exists():
    names = {p.name for p in TESTS.glob("test_*.py")}
    named = set(tiers.FILES) | {key.partition("::")[0] for key in tiers.TESTS}
    assert named <= names, named - names


def _item(path: str, name: str = "test_x", fixtures=(), function=None):
    return SimpleNamespace(fspath=ROOT / path, name=name, fixturenames=list(fixtures), function=function)


def test_the_rules_classify_by_file_fixture_call_and_notebook():
    def grades_a_lab(tmp_path):
        return grade(tmp_path)  # noqa: F821 (only its source is read)

    def pure():
        return 1

    def grades_by_the_cli(path):
        assert main(["grade", str(path), "--json"]) == 0  # noqa: F821 (only its source is read)

    def grades_through_a_helper(tmp_path):         # tests/lab_answers.py's helpers grade the lab they build
        return graded_with(SOLUTION, tmp_path, {})  # noqa: F821 (only its source is read)

    def grades_through_the_helpers_helper(tmp_path):
        return ReferenceGrades(SOLUTION, tmp_path)  # noqa: F821 (only its source is read)

    def builds_a_lab_only(tmp_path):
        return seeded_lab(SOLUTION, 0, tmp_path)    # noqa: F821 (only its source is read)

    assert tiers.tiers_of(_item("tests/test_kube_live.py")) == {"real_kube"}
    kueue = _item("tests/test_new.py", name="test_admits", fixtures=["live_kube"])
    kueue.get_closest_marker = lambda name: SimpleNamespace(kwargs={"kueue": True}) if name == "live_kube" else None
    assert tiers.tiers_of(kueue) == {"real_kube", "kueue"}        # Kueue joins its plane: the kueue lane
    assert tiers.tiers_of(_item("tests/test_new.py", fixtures=["live_slurm"])) == {"real_slurm"}
    assert tiers.tiers_of(_item("tests/test_new.py", function=grades_a_lab)) == {"lab"}
    assert tiers.tiers_of(_item("tests/test_new.py", function=pure)) == set()
    assert tiers.tiers_of(_item("tests/test_new.py", function=grades_by_the_cli)) == {"lab"}
    assert tiers.tiers_of(_item("tests/test_new.py", function=grades_through_a_helper)) == {"lab"}
    assert tiers.tiers_of(_item("tests/test_new.py", function=grades_through_the_helpers_helper)) == {"lab"}
    assert tiers.tiers_of(_item("tests/test_new.py", function=builds_a_lab_only)) == set()
    assert tiers._grading_helpers(("no_such_helpers.py",)) == {}      # a helper file that is not there
    assert tiers.tiers_of(_item("tests/test_hub_live.py", name="test_up")) == {"real_hub"}
    assert tiers.tiers_of(_item("tests/test_thing_real.py", name="test_up")) == {"real_kernel"}
    assert tiers.tiers_of(_item("tests/test_oom_live.py", name="test_parse")) == set()
    assert tiers.tiers_of(_item("solutions/03-oom-killer.ipynb")) == {"lab"}
    assert tiers.tiers_of(_item("notebooks/oom-playground.ipynb")) == {"book"}


def test_topics_select_a_chapters_module_page_and_lab():
    words = tiers.topic_words("oom")
    for nodeid in ("tests/test_oom_model.py::test_a", "tests/test_book.py::test_page_executes[book/03-oom-killer]",
                   "tests/test_labs.py::test_every_untouched_lab_scores_zero_on_every_question[03-oom-killer]",
                   "solutions/03-oom-killer.ipynb::Cell 2"):
        assert tiers.in_topic(nodeid, words), nodeid
    assert not tiers.in_topic("tests/test_slurm_plan.py::test_a", words)
    assert not tiers.in_topic("tests/test_classroom.py::test_the_cli_writes_the_job", words)
    assert tiers.topic_words("3") == ("03-",)
    with pytest.raises(pytest.UsageError, match="--topic nope"):
        tiers.topic_words("nope")


def test_the_makefile_runs_the_tiers():
    make = (ROOT / "Makefile").read_text()
    fast = re.search(r"^test-fast:.*\n((?:\t.*\n)+)", make, re.M).group(1)
    assert "COURSE_TEST_BUDGET=dev" in fast and '-m "$(FAST)"' in fast
    # two pytest-xdist workers: the loop's 2,200 tests are past two minutes in one process
    assert "-n $(FAST_WORKERS)" in fast and re.search(r"^FAST_WORKERS \?= 2$", make, re.M)
    assert "--dist worksteal" in fast       # a worker with its share done takes tests queued for the other
    expression = re.search(r"^FAST := (.*)$", make, re.M).group(1)
    assert expression == "not (" + " or ".join(("book", "site", "lab", "real", "scale", "slow")) + ")"
    assert re.search(r"^test-topic:", make, re.M) and "--topic" in make
    assert re.search(r"^test-real:", make, re.M) and "real_$(S)" in make


def test_make_test_and_the_loop_keep_their_compiled_modules():
    """Where PYTHONDONTWRITEBYTECODE is set (this machine's environment), make test and make test-fast
    clear it: every lane's pytest collects all of tests/, and without __pycache__ each one compiled the
    course and rewrote every test's asserts again (about 5 CPU s a process)."""
    make = (ROOT / "Makefile").read_text()
    for target, command in (("test", r"\$\(BIN\)/python tests/lanes.py"), ("test-fast", r"\$\(BIN\)/python -m pytest")):
        recipe = re.search(rf"^{target}: .*\n((?:\t.*\n)*)", make, re.M).group(1)
        assert re.search(rf"^\tPYTHONDONTWRITEBYTECODE= (\w+=\S* )*{command}", recipe, re.M), (target, recipe)


def test_nbval_leaves_out_only_pages_that_mark_no_output_for_it():
    """make test runs nbval over solutions/ only: the playgrounds are pages, executed once by the page
    test; if one ever marks an output for nbval to compare, it must go back under nbval."""
    import lanes
    make = (ROOT / "Makefile").read_text()
    assert re.search(r"^test: .*\n(?:\t.*\n)*?\t(PYTHONDONTWRITEBYTECODE= )?\$\(BIN\)/python tests/lanes.py",
                     make, re.M)
    for args in [lanes.SERIAL] + [a for a, *_ in lanes.LANES.values()]:
        assert "notebooks" not in args, args
    assert "--nbval-lax" in lanes.SERIAL and "--nbval-lax" in lanes.LANES["rest"][0]
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        assert "NBVAL_CHECK_OUTPUT" not in nb.read_text() and '"nbval' not in nb.read_text(), \
            f"{nb.name} marks an output for nbval: put notebooks/ back into make test's nbval paths"


def test_every_run_leaves_its_times_per_test_and_per_tier():
    from tiers import times_table
    text = times_table({"a::x": 2.0, "b::y": 5.0, "c::z": 1.0},
                       {"a::x": ("lab",), "b::y": ("real", "real_kube"), "c::z": ("fast",)},
                       {"a::x": 1.5, "b::y": 0.25})
    lines = text.splitlines()
    assert lines[0] == "# 3 tests, 8.0 s in tests (setup + call + teardown), 1.8 CPU s"
    assert [ln.split()[1:] for ln in lines[2:6]] == [["real", "5.0", "0.2"], ["real_kube", "5.0", "0.2"],
                                                     ["lab", "2.0", "1.5"], ["fast", "1.0", "0.0"]]
    assert [ln.split()[:2] + ln.split()[-1:] for ln in lines[7:]] == \
        [["5.00", "0.25", "b::y"], ["2.00", "1.50", "a::x"], ["1.00", "-", "c::z"]]  # slowest first


def test_each_test_s_cpu_seconds_are_measured_in_the_run(tmp_path):
    """The times file gives each test's CPU seconds, its children's included: a test that burns CPU in
    a child it waits for shows it, one that sleeps does not."""
    (tmp_path / "conftest.py").write_text(f"import sys\nsys.path.insert(0, {str(ROOT / 'tests')!r})\n"
                                          "pytest_plugins = ('tiers',)\n")
    (tmp_path / "test_cpu_probe.py").write_text(
        "import subprocess, sys, time\n"
        "BURN = 'import time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.6: pass'\n"
        "def test_burns():\n    subprocess.run([sys.executable, '-c', BURN], check=True)\n"
        "def test_sleeps():\n    time.sleep(0.6)\n")
    out = tmp_path / "times.txt"
    res = subprocess.run([sys.executable, "-m", "pytest", *QUICK,
                          "-p", "no:xdist", str(tmp_path)], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "COURSE_TEST_TIMES": str(out)}, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    rows = {ln.split()[-1].split("::")[-1]: ln.split()[:2] for ln in out.read_text().splitlines()
            if not ln.startswith("#")}
    assert float(rows["test_burns"][1]) >= 0.5 and float(rows["test_sleeps"][1]) < 0.3, rows
    assert float(rows["test_sleeps"][0]) >= 0.6, rows


def test_the_lanes_run_every_test_once():
    """make test's lanes (tests/lanes.py) split the suite by marker: whatever tiers a test has, it runs in
    exactly one lane, so nothing is lost and nothing runs twice. Each lane's ``-m`` is evaluated by pytest's
    own expression engine on every combination of tiers. The kube and kueue lanes hold only the control
    planes' tests; the slurm lane the Slurm and hub tests and those that wait on the network; the kernel, container and
    MPI tests (whose checks look for leftovers machine-wide) run in a computing lane, whose temporary
    directory and name scope those checks (tests/lane_scope.py)."""
    import itertools

    import lanes
    import live_fixtures
    from _pytest.mark.expression import Expression

    def expr(args):
        return Expression.compile(args[args.index("-m") + 1])

    compiled = {name: expr(args) for name, (args, *_) in {**lanes.FIRST, **lanes.LANES}.items()}
    assert set(compiled) == {"kernel", "kube", "kueue", "slurm", "fast", "labs", "rest"}
    fast = Expression.compile(re.search(r"^FAST := (.*)$", (ROOT / "Makefile").read_text(), re.M).group(1))
    for n in range(len(tiers.TIERS) + 1):
        for combo in itertools.combinations(tiers.TIERS, n):
            marks = set(combo)
            if any(t.startswith("real_") for t in marks):
                marks.add("real")                       # as tiers.py marks them
            if "network" in marks:
                marks.add("slow")
            lane = [name for name, e in compiled.items() if e.evaluate(lambda m, **_: m in marks)]
            assert len(lane) == 1, (sorted(marks), lane)
            lane = lane[0]
            daemons = marks & {"real_kube", "real_slurm", "real_hub"}
            if "real_kube" in marks:
                assert lane == ("kueue" if "kueue" in marks else "kube"), marks
            elif daemons:
                assert lane == "slurm", marks
            elif fast.evaluate(lambda m, **_: m in marks) or \
                    ("scale" in marks and not marks & {"book", "site", "lab", "real", "network"}):
                assert lane == "fast", marks                  # the model at scale computes only
            elif "lab" in marks:
                assert lane == "labs", marks
            elif "real_kernel" in marks:
                assert lane == "kernel", marks                # alone, before the lanes: nothing beside it
            elif "network" in marks and not marks & {"real_container", "real_mpi"}:
                assert lane == "slurm", marks                 # it waits: beside the daemons' tests
            else:
                assert lane == "rest", marks
            if marks & {"real_kernel", "real_container", "real_mpi"}:   # their checks look machine-wide:
                assert lane in lanes.COMPUTING or lane == "kernel" or daemons, marks   # tests/lane_scope.py
    assert {"real_kube", "real_slurm", "real_hub", "kueue"} < set(tiers.TIERS)
    for name, (args, *_) in {**lanes.FIRST, **lanes.LANES}.items():
        if name in ("rest", "labs"):
            assert [a for a in args if a in ("tests", "solutions")] == \
                [a for a in lanes.SERIAL if a in ("tests", "solutions")]
        else:                                           # no notebook, no nbval: its tests are in tests/
            assert [a for a in args if a in ("tests", "solutions")] == ["tests"]
            assert "no:nbval" in args and not any(a.startswith("--nbval") for a in args)
    every = {**lanes.FIRST, **lanes.LANES}
    assert len({times for _, times, *_ in every.values()}) == len(every)   # a times file each
    # two control planes at once: each lane's on ports of its own (a plane takes its first port + 0..10,
    # a test's second plane + 50..60)
    ports = [int(env.get("COURSE_TEST_KUBE_PORT", live_fixtures.KUBE_PORT)) for name, (_, _, env) in
             lanes.LANES.items() if name in ("kube", "kueue")]
    assert len(ports) == 2 and abs(ports[0] - ports[1]) > 60, ports


def test_a_lanes_leftover_checks_count_its_own_and_what_was_left(tmp_path, monkeypatch):
    """tests/lane_scope.py: a cgroup another lane's live process is making is not this lane's leftover; one
    whose maker is this lane's, or gone, is; outside the lanes everything counts, as before."""
    import os
    import subprocess
    import lane_scope
    theirs = subprocess.Popen(["sleep", "60"], env=dict(os.environ, COURSE_TEST_LANE="labs"))
    mine = subprocess.Popen(["sleep", "60"], env=dict(os.environ, COURSE_TEST_LANE="rest"))
    gone = subprocess.Popen(["true"], env=dict(os.environ, COURSE_TEST_LANE="labs"))
    gone.wait()
    try:
        paths = [tmp_path / f"courselib-oom-{p.pid}-123" for p in (theirs, mine, gone)]
        monkeypatch.setenv("COURSE_TEST_LANE", "rest")
        assert lane_scope.ours(paths) == paths[1:]            # another lane's in flight: not ours
        assert lane_scope.another_lanes(theirs.pid) and not lane_scope.another_lanes(mine.pid)
        monkeypatch.delenv("COURSE_TEST_LANE")
        assert lane_scope.ours(paths) == paths                # one process of old: every one counts
    finally:
        theirs.kill(), mine.kill(), theirs.wait(), mine.wait()


def test_the_computing_lanes_get_a_temporary_directory_a_name_and_give_way(tmp_path):
    """lanes.py: every lane knows its name (COURSE_TEST_LANE); a computing lane has a TMPDIR of its own,
    world-writable as /tmp is (a grading sandbox's user makes its folder there), runs at a lower priority
    than the daemons' lanes (its nice, and its sessions' autogroup nice), and its temporary directory is
    gone after the run."""
    import subprocess
    import sys

    import lanes as lanes_mod
    (tmp_path / "test_env.py").write_text(
        "import os, stat, tempfile\n"
        "def test_env():\n"
        "    t = tempfile.gettempdir()\n"
        "    print('ENV', os.environ['COURSE_TEST_LANE'], t, oct(stat.S_IMODE(os.stat(t).st_mode)), os.nice(0))\n"
        "def test_autogroups():\n"      # its own session's, and a session it starts later (a kernel's)
        "    import subprocess, sys\n"
        "    late = subprocess.run([sys.executable, '-c', 'import time; time.sleep(3); '\n"
        "                           'print(open(\"/proc/self/autogroup\").read().split()[-1])'],\n"
        "                          start_new_session=True, capture_output=True, text=True).stdout.split()\n"
        "    print('AG', os.environ['COURSE_TEST_LANE'], open('/proc/self/autogroup').read().split()[-1], *late)\n")
    args = [str(tmp_path / "test_env.py"), "-s", *QUICK]
    lanes = {"rest": (args, str(tmp_path / "t1.txt"), {}), "kube": (args, str(tmp_path / "t2.txt"), {})}
    driver = f"import sys; sys.path.insert(0, {str(TESTS)!r}); import lanes; sys.exit(lanes.run_lanes({lanes!r}))"
    out = subprocess.run([sys.executable, "-c", driver], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120).stdout
    seen = {ln.split()[2]: ln.split()[3:] for ln in out.splitlines() if " ENV " in ln}
    import os
    assert set(seen) == {"rest", "kube"}, out
    rest_tmp, rest_mode, rest_nice = seen["rest"]
    assert "courselib-lane-rest-" in rest_tmp and rest_mode == "0o1777", out
    assert int(rest_nice) == os.nice(0) + 5 and int(seen["kube"][2]) == os.nice(0), out   # the daemons' lane first
    assert "courselib-lane-" not in seen["kube"][0], out
    assert not Path(rest_tmp).exists(), out                   # removed after the run
    # where sessions are autogroups (sched(7)), a nice alone does not give way across sessions: the
    # lane's session and a session it starts later (a Jupyter kernel's) get the autogroup nice too
    if lanes_mod._autogroups_on():
        groups = {m[1]: [m[2], m[3]] for m in re.finditer(r"\bAG (\w+) (\S+) (\S+)", out)}
        assert groups == {"rest": [str(lanes_mod.NICE)] * 2, "kube": ["0", "0"]}, out


def test_a_failed_lanes_tests_are_named_again_at_the_end(tmp_path):
    """A CI log's tail is often all one sees: after the lanes' times, each failed lane's FAILED and ERROR
    lines are printed again, so a lane that ended early is not known only by its "exit 1"."""
    import subprocess
    import sys
    (tmp_path / "test_fails.py").write_text("def test_ok():\n    pass\n"
                                            "def test_broken():\n    assert 1 == 2, 'first line\\n' + "
                                            "'\\n'.join(f'detail {k}' for k in range(60))\n")
    (tmp_path / "test_ok.py").write_text("def test_fine():\n    pass\n")
    lanes = {"early": ([str(tmp_path / "test_fails.py"), *QUICK], str(tmp_path / "t1.txt"), {}),
             "late": ([str(tmp_path / "test_ok.py"), *QUICK], str(tmp_path / "t2.txt"), {})}
    driver = f"import sys; sys.path.insert(0, {str(TESTS)!r}); import lanes; sys.exit(lanes.run_lanes({lanes!r}))"
    run = subprocess.run([sys.executable, "-c", driver], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    tail = run.stdout[run.stdout.index("\nlanes: early exit"):]
    assert "lanes: the early lane (exit 1): 1 not passed" in tail, tail
    assert "[early] FAILED" in tail and "test_broken" in tail, tail
    # and the assertion's whole message (the FAILED line holds its first line only), 40 lines of it
    assert "detail 0" in tail and "detail 38" in tail and "detail 39" not in tail, tail
    assert "the late lane" not in tail, tail


def test_a_computing_lanes_leftover_is_named_with_the_test_it_appeared_in(tmp_path):
    """tests/leftovers.py: in a computing lane's temporary directory, what a test left is named at the end
    with that test; what a test made and removed, and what appears outside such a lane, is not."""
    import subprocess
    import sys
    tests = tmp_path / "t"
    tests.mkdir()
    (tests / "conftest.py").write_text(f"import sys\nsys.path.insert(0, {str(TESTS)!r})\n"
                                        "pytest_plugins = ('leftovers',)\n")
    (tests / "test_tmp.py").write_text(
        "import os, tempfile\n"
        "def test_tidy():\n    os.rmdir(tempfile.mkdtemp())\n"
        "def test_messy():\n    print('MADE', os.path.basename(tempfile.mkdtemp()))\n")

    def run(tmpdir):
        tmpdir.mkdir()
        return subprocess.run([sys.executable, "-m", "pytest", str(tests), "-s", *QUICK],
                              cwd=tmp_path, capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, TMPDIR=str(tmpdir))).stdout

    out = run(tmp_path / "courselib-lane-rest-0123abcd")
    made = re.search(r"MADE (\S+)", out)[1]
    assert re.search(rf"leftovers: still in .*courselib-lane-rest-0123abcd.*: {made} "
                     rf"\(.*test_tmp.py::test_messy\)$", out, re.M), out
    assert "test_tidy" not in out.split("leftovers:")[1], out
    assert "leftovers:" not in run(tmp_path / "elsewhere"), "only in a computing lane's folder"


# ----------------------------------------------------------------------------- signals and the lanes

HELD_SESSION = '''
import pathlib, time, pytest
HERE = pathlib.Path(__file__).parent
@pytest.fixture(scope="session")
def plane():                      # stands for the session's control plane
    (HERE / "up").write_text("up")
    yield
    (HERE / "down").write_text("down")
def test_waits(plane):
    time.sleep(120)
'''


def _wait_for(path: Path, proc, seconds: float = 60.0) -> None:
    import time
    end = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() < end, f"{path.name} never appeared"
        time.sleep(0.1)


def _wait_until_gone(marker: str, proc, seconds: float = 120.0) -> None:
    """Wait until no process has ``marker`` as one of its arguments."""
    import time

    from courselib.live.cleanup import cmdline

    def running() -> bool:
        return any(marker in (cmdline(int(d.name)) or []) for d in Path("/proc").iterdir() if d.name.isdigit())

    end = time.monotonic() + seconds
    while running():
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() < end, f"a process of {marker} still runs after {seconds:g} s"
        time.sleep(0.2)


@pytest.mark.parametrize("how", ["SIGTERM", "SIGHUP"])
def test_a_terminating_signal_unwinds_the_session_so_its_fixtures_stop_what_they_started(tmp_path, how):
    """SIGTERM or SIGHUP sent to pytest itself (a CI timeout, a closed terminal, ``kill``) unwinds the
    session as Ctrl-C does: the session fixture's clean-up runs. Left at the default, the process
    died where it stood and the control plane it had started ran on with parent 1."""
    import os
    import signal
    import subprocess
    import sys
    (tmp_path / "test_held.py").write_text(HELD_SESSION)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), str(ROOT / "src")]))
    # pytest as a terminal starts it, both signals at their default: a run under nohup (or a CI runner)
    # inherits SIGHUP ignored, and the hook rightly keeps an ignore it finds
    defaults = ("import signal, sys, pytest; [signal.signal(s, signal.SIG_DFL) for s in "
                "(signal.SIGTERM, signal.SIGHUP)]; sys.exit(pytest.main(sys.argv[1:]))")
    proc = subprocess.Popen([sys.executable, "-c", defaults, *QUICK, "-p", "live_fixtures",
                             str(tmp_path / "test_held.py")], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait_for(tmp_path / "up", proc)
        proc.send_signal(getattr(signal, how))
        out = proc.communicate(timeout=60)[0]
    finally:
        proc.kill()
    assert (tmp_path / "down").exists(), out
    assert proc.returncode == 2 and how in out, out          # pytest's "interrupted", naming the signal


def test_the_lanes_forward_a_signal_to_every_lane_and_report_each_lanes_cpu(tmp_path):
    """``make test``'s lanes: a SIGTERM to tests/lanes.py reaches each lane as SIGINT, on which pytest
    unwinds (the session fixture's clean-up runs); the summary gives each lane's CPU seconds (its
    daemons' included) beside its wall time, and how busy the machine's cores were."""
    import signal
    import subprocess
    import sys
    (tmp_path / "test_held.py").write_text(HELD_SESSION)
    (tmp_path / "test_busy.py").write_text(
        "import time\ndef test_burns_a_second_of_cpu():\n    while time.process_time() < 1.5:\n        pass\n")
    lanes = {"busy": ([str(tmp_path / "test_busy.py"), *QUICK], str(tmp_path / "t1.txt"), {}),
             "held": ([str(tmp_path / "test_held.py"), *QUICK], str(tmp_path / "t2.txt"), {})}
    driver = f"import sys; sys.path.insert(0, {str(TESTS)!r}); import lanes; sys.exit(lanes.run_lanes({lanes!r}))"
    proc = subprocess.Popen([sys.executable, "-c", driver], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        _wait_for(tmp_path / "up", proc)
        # the busy lane ends on its own first (on a loaded machine its 1.5 CPU s may take many seconds)
        _wait_until_gone(str(tmp_path / "test_busy.py"), proc)
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=60)[0]
    finally:
        proc.kill()
    assert (tmp_path / "down").exists(), out
    summary = re.search(r"^lanes: busy exit 0 after \d+ s \((\d+) CPU s\), held exit 2 after \d+ s "
                        r"\((\d+) CPU s\); wall \d+ s; the machine's \d+ cores \d+ % busy", out, re.M)
    assert summary, out
    assert int(summary.group(1)) >= 1, out                   # the second and a half it burned, counted
    assert proc.returncode == 2, out


def test_the_page_cache_is_keyed_on_the_builds_where_courselib_finds_them(tmp_path, monkeypatch):
    """tests/book_exec.py: a page's output depends on which real systems are built (a chapter runs the
    real one, or shows its recording), so the execution cache's key names the build steps' folder's
    contents, where courselib finds them ($COURSELIB_CACHE when set): a component built there keys anew."""
    import book_exec
    monkeypatch.setenv("COURSELIB_CACHE", str(tmp_path))
    key = getattr(book_exec.source_key, "__wrapped__", book_exec.source_key)
    before = key()
    (tmp_path / "kube-v1.37.2").mkdir()
    assert key() != before


def test_a_sessions_leftover_check_knows_its_processes_by_start_time_not_pid_alone():
    """tests/live_fixtures.py's proof that `down` left nothing: a process of ours still running counts; a
    PID that another process took after ours ended (the same PID, another start time) does not; one
    stopped and reaped does not. With a PID alone, the kube lane's check of 2026-12-06 failed on a PID
    that `down` had stopped and another lane's process had taken."""
    import subprocess
    from live_fixtures import _record, still_running
    from courselib.live.daemons import Daemon
    p = subprocess.Popen(["sleep", "30"])
    try:
        ours = Daemon.started("sleeper", p.pid, ["sleep", "30"])
        started: list = []
        _record(started, [ours])
        _record(started, [ours])                     # recorded once, however often a plane is reshaped
        assert [d.pid for d in started] == [p.pid]
        assert still_running(started) == [p.pid]
        reused = Daemon("sleeper", p.pid, [], ours.start_ticks - 1, ours.boot_id)   # the PID, not ours
        assert still_running([reused]) == []
    finally:
        p.kill()
        p.wait()
    assert still_running(started) == []


def test_a_failed_lanes_messages_are_cut_to_the_first_three_failures_of_forty_lines(tmp_path):
    """tests/lanes.py's failure details at the log's end stay short: the first 3 failures (or errors) of a
    lane's JUnit report, 40 lines of each message, then where to read the rest; a report that is not
    there (a lane that died before pytest wrote it) or not XML gives none."""
    import lanes
    cases = "".join(f'<testcase classname="t" name="c{k}"><failure message="{m}">tb</failure></testcase>'
                    for k, m in enumerate(["one", "&#10;".join(f"l{i}" for i in range(50)), "three", "four"]))
    report = tmp_path / "r.junit.xml"
    report.write_text(f'<testsuites><testsuite><testcase classname="t" name="ok"/>{cases}</testsuite></testsuites>')
    out = lanes._failure_details(report)
    assert [ln for ln in out if ln.startswith("---")] == [f"--- t::c{k} (failure):" for k in range(3)], out
    assert "  l39" in out and "  l40" not in out and any("10 more lines" in ln for ln in out), out
    assert out[-1].startswith("… more failures in") and "four" not in "".join(out), out
    assert lanes._failure_details(tmp_path / "none.xml") == []
    (tmp_path / "bad.xml").write_text("not xml")
    assert lanes._failure_details(tmp_path / "bad.xml") == []
