"""CPU limits: kubelet's conversions, the v1/v2 table, and the real kernel throttling a busy loop."""
from __future__ import annotations

import os

import pytest
from hypothesis import given, settings, strategies as st

from courselib.errors import InputError, PrivilegeError
from courselib.live import cpu as live_cpu
from courselib.model import cpu
from courselib.model.cgroup_files import KNOBS, knob
from budget import examples


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
    """Lab 1 question 5 asks about 400m; without root it showed chapter 2's 250m recording (tester-a, 01-b).
    A limit with its own recording gets it; any other still gets the 250m run, whose limit the caller reads."""
    shown = live_cpu.source(400).recorded().value
    assert shown.recorded and shown.milli_cpu == 400 and shown.limit == {"quota_us": 40_000, "period_us": 100_000,
                                                                         "cpus": 0.4}
    assert abs(shown.mean_limited - 0.4) < 0.05
    assert shown.nr_throttled >= 0.8 * shown.nr_periods     # the rule: throttled in (nearly) every period
    assert live_cpu.source(250).recorded().value.milli_cpu == 250
    assert live_cpu.source(600).recorded().value.milli_cpu == 250      # none recorded: the caller says so


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
