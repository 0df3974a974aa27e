"""CPU limits: kubelet's conversions, the v1/v2 table, and the real kernel throttling a busy loop."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from courselib.errors import InputError, PrivilegeError
from courselib.live import cpu as live_cpu
from courselib.model import cpu
from courselib.model.cgroup_files import KNOBS, knob
from budget import examples

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("q,milli", [("250m", 250), ("1", 1000), ("1.5", 1500), (2, 2000), ("0.1", 100), ("1.0001", 1001)])
def test_parse_cpu(q, milli):
    assert cpu.parse_cpu(q) == milli


@pytest.mark.parametrize("bad", ["one", "-1", "250M", None, True, "1Gi"])
def test_parse_cpu_rejects(bad):
    with pytest.raises(InputError):
        cpu.parse_cpu(bad)


def test_kubelet_quota_and_shares():
    """kubelet milliCPUToQuota / MilliCPUToShares (pkg/kubelet/kuberuntime, pkg/kubelet/cm helpers_linux.go)."""
    assert cpu.milli_cpu_to_quota(250) == 25_000
    assert cpu.milli_cpu_to_quota(1500) == 150_000
    assert cpu.milli_cpu_to_quota(5) == 1_000          # floor: minQuotaPeriod
    assert cpu.milli_cpu_to_quota(0) is None           # no limit
    assert cpu.milli_cpu_to_shares(1000) == 1024
    assert cpu.milli_cpu_to_shares(500) == 512
    assert cpu.milli_cpu_to_shares(0) == 2 and cpu.milli_cpu_to_shares(1) == 2
    assert cpu.milli_cpu_to_shares(10_000_000) == 262_144


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(min_value=1, max_value=512_000), st.integers(min_value=1, max_value=512_000))
def test_more_cpu_never_less_quota_or_shares(a, b):
    lo, hi = sorted((a, b))
    assert cpu.milli_cpu_to_quota(lo) <= cpu.milli_cpu_to_quota(hi)
    assert cpu.milli_cpu_to_shares(lo) <= cpu.milli_cpu_to_shares(hi)


def test_limit_files_round_trip():
    lim = cpu.CpuLimit(25_000)
    assert cpu.parse_cpu_max(lim.v2_files()["cpu.max"]) == lim
    v1 = lim.v1_files()
    assert cpu.parse_cfs(v1["cpu.cfs_quota_us"], v1["cpu.cfs_period_us"]) == lim
    assert cpu.parse_cpu_max("max 100000").cpus is None
    assert cpu.parse_cfs("-1", "100000").cpus is None


def test_expected_usage():
    assert cpu.CpuLimit(25_000).expected_usage(1.0, 8) == 0.25
    assert cpu.CpuLimit(400_000).expected_usage(8.0, 2) == 2      # cannot exceed the machine
    assert cpu.CpuLimit(None).expected_usage(1.0, 8) == 1.0


def test_knob_table_is_complete():
    assert knob("memory hard limit").v2 == "memory.max"
    assert knob("memory hard limit").v1 == "memory.limit_in_bytes"
    assert len({k.what for k in KNOBS}) == len(KNOBS)
    with pytest.raises(KeyError):
        knob("gpu")


def test_recorded_throttle_run_is_labelled_and_sane():
    run = live_cpu.recorded_run()
    assert run.recorded and run.recorded_on
    assert run.limit["cpus"] == pytest.approx(run.milli_cpu / 1000)
    assert abs(run.mean_limited - run.limit["cpus"]) < 0.05


def test_lab_1s_fallback_shows_a_run_recorded_under_the_limit_its_question_names():
    """Lab 1 question 5 draws its loop's limit per seed; without root the cell shows a recording. One run was
    recorded (on the course's CI machine, with the cell's own call) at every limit the variant can draw, so
    every seed sees its own limit's run, labelled with its machine and date (chapter 2's 250m cell too).
    Each run had a CPU free for its quota (its unlimited control loop got enough: ``quiet``), and held it."""
    import nbformat

    from courselib.grading import markers, variant

    if not (ROOT / "solutions").is_dir():
        pytest.skip("no solutions/ here (the student template)")
    lab = nbformat.read(ROOT / "solutions" / "01-namespaces-cgroups.ipynb", 4)
    params = next(c.source for c in lab.cells if "parameters" in markers.tags(c))
    drawn = next(c.source for c in lab.cells if variant.VARIANT_TAG in markers.tags(c))
    limits = {cpu.parse_cpu(variant.values_for(params, drawn, seed, "lab 1")["Q5_LIMIT_CPU"]) for seed in range(300)}
    assert limits <= set(live_cpu.LAB1_LIMITS) and len(limits) > 100, sorted(limits - set(live_cpu.LAB1_LIMITS))
    from courselib.live import recorded

    table = recorded.load(live_cpu.LAB1_RECORDING)
    busy = [r["milli_cpu"] for r in table["runs"] if not live_cpu.quiet(r)]
    assert table["not_quiet"] == busy, busy     # the file names each run made with no CPU free for its quota
    assert [r["milli_cpu"] for r in table["runs"]] == list(live_cpu.LAB1_LIMITS)
    for milli in live_cpu.LAB1_LIMITS:
        shown = live_cpu.source(milli).recorded()
        run = shown.value
        assert run.recorded and run.milli_cpu == milli, (milli, run.milli_cpu)
        assert run.limit == {"quota_us": milli * 100, "period_us": 100_000, "cpus": milli / 1000}
        if milli not in busy:        # a CPU was free: the loop held its quota (the cell says so of a busy one)
            assert abs(run.mean_limited - milli / 1000) < 0.05, (milli, run.limited_cpus)
            assert run.nr_throttled > 0, milli   # it used its quota up: the cell says in how many periods
        label = shown.label("no root here")
        assert "Linux" in label and re.search(r"\b20\d\d-\d\d-\d\d\b", label), label   # machine and date
    assert live_cpu.recorded_run().milli_cpu == 250       # no limit asked: chapter 2's first recording
    assert live_cpu.source(1200).recorded().value.milli_cpu == 900    # none recorded: the nearest; the cell says so
    assert live_cpu.source(152).recorded().value.milli_cpu == 150


@pytest.mark.real
def test_real_kernel_holds_a_busy_loop_to_its_quota():
    if os.geteuid() != 0:
        pytest.skip("creating a cgroup needs root here")
    try:
        run = live_cpu.run_throttle(300, seconds=2.0, interval=0.5)
    except PrivilegeError as err:
        pytest.skip(str(err))
    assert abs(run.mean_limited - 0.3) < 0.06          # the quota, within clock-tick resolution
    assert run.nr_throttled >= run.nr_periods * 0.8     # a busy loop hits its quota nearly every period
    assert run.mean_unlimited > run.mean_limited        # the control was not held back
    # nothing left behind
    from pathlib import Path
    import lane_scope
    assert not lane_scope.ours(Path("/sys/fs/cgroup").rglob("courselib-cpu-*"))   # not another lane's in flight


def test_burst_uses_the_quota_n_times_faster():
    """sched-bwc.rst: the quota is CPU time summed over CPUs, so 4 busy threads exhaust 1 CPU in 25 ms."""
    assert cpu.CpuLimit(100_000).burst(4) == (25_000, 75_000)
    assert cpu.CpuLimit(100_000).burst(1) == (100_000, 0)
    assert cpu.CpuLimit(250_000).burst(2) == (100_000, 0)      # 2.5 CPUs never throttle 2 threads
    assert cpu.CpuLimit(None).burst(8) == (100_000, 0)


@pytest.mark.real
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_cpu_throttle_cleans_up_on_sigterm_and_sighup(sig):
    """Ended by a signal other than Ctrl-C, the command still stops both busy loops and removes its cgroup."""
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path
    if os.geteuid() != 0:
        pytest.skip("creating a cgroup needs root here")
    try:
        live_cpu.find_cpu_place()
    except PrivilegeError as err:
        pytest.skip(str(err))
    p = subprocess.Popen([sys.executable, "-m", "courselib", "live", "cpu-throttle", "--seconds", "30s"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    children: list[str] = []
    deadline = time.monotonic() + 30
    while len(children) < 2 and time.monotonic() < deadline:  # both busy loops started
        time.sleep(0.05)
        try:
            children = Path(f"/proc/{p.pid}/task/{p.pid}/children").read_text().split()
        except OSError:
            break
    assert len(children) == 2, "the experiment did not start its two busy loops"
    p.send_signal(getattr(signal, sig))
    _, err = p.communicate(timeout=30)
    assert p.returncode == 128 + getattr(signal, sig), err
    assert f"stopped by {sig}" in err
    for pid in children:
        assert not Path(f"/proc/{pid}").exists() or \
            Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    assert not [c for c in Path("/sys/fs/cgroup").rglob(f"courselib-cpu-{p.pid}-*")]


def test_lab_1s_question_5_cell_without_root_shows_the_seeds_own_limit(monkeypatch):
    """The cell after Lab 1 question 5, where it may not create a cgroup (Binder): each seed's recording is
    made under the seed's own limit and says so, with no NOTE; a limit with no recording gets the nearest
    one and a NOTE that names both limits and what the run does not show."""
    import contextlib
    import io
    import sys

    import nbformat

    from courselib.grading import markers

    if not (ROOT / "solutions").is_dir():
        pytest.skip("no solutions/ here (the student template)")
    sys.path.insert(0, str(Path(__file__).parent))
    from lab_answers import given_namespace

    lab = ROOT / "solutions" / "01-namespaces-cgroups.ipynb"
    cell = next(c.source for c in nbformat.read(lab, 4).cells
                if "demo" in markers.tags(c) and "live_cpu.source" in c.source)

    def refused(*a, **k):
        raise PrivilegeError("no root in this test")

    monkeypatch.setattr(live_cpu, "run_throttle", refused)

    def shown(ns) -> str:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(cell, dict(ns, print=print))  # noqa: S102 (the course's own lab)
        return out.getvalue()

    from courselib.live import recorded

    busy = recorded.load(live_cpu.LAB1_RECORDING)["not_quiet"]
    for seed in (0, 1, 2, 3, 7, 11):
        ns = given_namespace(lab, seed)
        text = shown(ns)
        assert text.startswith(f"RECORDED run (not this machine) under {ns['Q5_LIMIT_CPU']}:"), text
        assert "2026-" in text and "Linux" in text and "NOTE: no run was recorded" not in text, text
        assert ("NOTE: the machine was busy" in text) is (cpu.parse_cpu(ns["Q5_LIMIT_CPU"]) in busy), text
    if not busy:   # every run quiet (the table was re-recorded on a quiet machine): plant a busy one
        table, runs = live_cpu._lab1_runs()
        planted = [dict(r, unlimited_cpus=[0.5] * len(r["unlimited_cpus"])) if r["milli_cpu"] == 700 else r
                   for r in runs]
        monkeypatch.setattr(live_cpu, "_lab1_runs", lambda: (table, planted))
        busy = [700]
    for milli in busy[:3]:
        text = shown(dict(given_namespace(lab, 0), Q5_LIMIT_CPU=f"{milli}m", Q5_QUOTA_MS=milli / 10))
        assert "NOTE: the machine was busy when this run was recorded" in text, text
    text = shown(dict(given_namespace(lab, 0), Q5_LIMIT_CPU="1200m", Q5_QUOTA_MS=120))
    assert "under 900m" in text and "NOTE: no run was recorded under question 5's 1200m" in text, text
    assert "CpuLimit.expected_usage" in text, text


def test_a_recorded_run_is_quiet_when_both_loops_got_what_an_idle_machine_gives():
    """The control loop got the limit plus a tenth of a CPU (or nearly a whole one), and the limited loop its
    quota to within 0.05 CPU; otherwise another process held a CPU, and the run is not quiet."""
    def run(cpus, control, limited=None):
        return {"limit": {"cpus": cpus}, "unlimited_cpus": [control] * 4, "limited_cpus": [limited or cpus] * 4}
    assert live_cpu.quiet(run(0.3, 0.41)) and not live_cpu.quiet(run(0.3, 0.39))
    assert live_cpu.quiet(run(0.9, 0.96)) and not live_cpu.quiet(run(0.9, 0.94))
    assert live_cpu.quiet(run(0.6, 0.8, 0.64)) and not live_cpu.quiet(run(0.6, 0.8, 0.54))
