"""``make test`` in six lanes at once, each a pytest process: two real control planes' tests, the real
Slurm's and hub's, the fast tier, the labs, and everything else.

Most of a real-system test's time is waiting (a controller manager creating pods at its client rate, a
Kueue backoff, a Slurm controller's scheduling cycle, JupyterHub spawning), while the rest of the suite
(chapters executed, labs graded, property tests) keeps the cores busy. On the course's 2-core machine they
overlap: the run takes about as long as its longest lane, or as the whole suite's CPU seconds over two
cores, whichever is longer, instead of their sum.

- ``kube``: the tests on the real Kubernetes control plane without Kueue (tests/tiers.py marks them
  ``real_kube``), in file order, so the session's one control plane (tests/live_fixtures.py) is reshaped
  as before; no nbval.
- ``kueue``: the tests of the plane Kueue joins (``live_kube(kueue=True)``, tier ``kueue``), on a control
  plane of their own at other ports (``COURSE_TEST_KUBE_PORT``); no nbval.
- ``slurm``: the tests of the real Slurm and JupyterHub (``real_slurm``, ``real_hub``); no nbval.
- ``fast``: what ``make test-fast`` runs, here with every example (unit, property and CLI tests), and the
  model's runs at scale (tier ``scale`` alone).
- ``labs``: the lab tier (every lab graded, its solution under nbval, the grader attacked).
- ``rest``: everything else over tests/ and solutions/ with nbval: the chapters executed, the website,
  the real container and MPI tests.

Before them, alone (:data:`FIRST`): the real kernel tests (about 15 s), which measure what the kernel gives
a process and need the cores to themselves.

Each daemon lane proves it left nothing by its own PIDs, state directory and ports, so no lane can make
another fail. The kernel, container and MPI tests prove it by looking machine-wide for the course's
directories, cgroups, mounts and rank processes, while the labs lane runs the same experiments (Lab 1's
namespaces, Lab 3's OOM kill, Lab 4's builds): tests/lane_scope.py has them count their own lane's only
(``COURSE_TEST_LANE``, and a temporary directory for each computing lane). Each lane gets a state
directory of its own (``COURSELIB_STATE_DIR``): whatever it asks about running daemons (a chapter's
``kube.running()``) never sees another lane's, and nothing it stops is another lane's.

Until 2026-12-05 there were two lanes: the daemon tests (1,628 s in the last check: control plane 1,151
s, of which Kueue's plane 560 s; Slurm and hub 465 s) and the rest (1,533 s, the fast tier 368 s and the
lab tier 477 s of it). Each lane writes its own times file (``_build/test-times*.txt``); the lines are
printed whole as they come, prefixed with the lane's name. The run fails if any lane fails, and the tests
that did not pass are named again after the lanes' times, at the log's end, with the first lines of their
messages (each lane's JUnit report, ``_build/test-times*.junit.xml``); Ctrl-C
(SIGINT) and SIGTERM reach every lane as SIGINT, on which pytest unwinds its fixtures (they stop what they
started). ``python tests/lanes.py --serial`` runs the one process of old (``make test LANES=1``).
"""
from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from lane_scope import LANE_TMP, lane_of, tmp_entries

ROOT = Path(__file__).resolve().parents[1]
PYTEST = [sys.executable, "-m", "pytest"]
SOLUTIONS = ["solutions"] if (ROOT / "solutions").is_dir() else []
NBVAL = ["--nbval-lax", "--nbval-current-env"]

#: ``make test-fast``'s tier (the Makefile's FAST): no chapter, lab, site, real system or scale test
FAST = "not (book or site or lab or real or scale or slow)"
#: the tests of the real systems that run as daemons
DAEMONS = "real_kube or real_slurm or real_hub"
#: tests that mostly wait on the network (a package index) and look for no leftovers machine-wide: they
#: run in the slurm lane, which mostly waits too. In the rest lane the Binder test's 64 CPU s took 260 s
#: of its wall (the check of 4251b14), and the rest lane ran alone on one core for its last 180 s.
WAITS = "network and not (lab or real_kernel or real_container or real_mpi)"

#: the model's runs at the seed's size and the large property tests (tier ``scale``, nothing else costly):
#: computing only, in tests/, like the fast tier, so they run in the fast lane, moved from the rest lane,
#: which ended last: in the check of de3ab2a 83 s after the labs lane and 102 s after the fast lane,
#: alone on one of the two cores meanwhile (the scale tests: 70 s of its wall, 23 CPU s, in a later check).
MODEL = "scale and not (book or site or lab or real or network)"

#: lane -> (pytest arguments, times file, environment); the markers split the suite: every test in one lane
LANES = {
    "kube": (["tests", "-m", "real_kube and not kueue", "-p", "no:nbval", "--durations=25"],
             "_build/test-times-real.txt", {}),
    "kueue": (["tests", "-m", "real_kube and kueue", "-p", "no:nbval", "--durations=25"],
              "_build/test-times-kueue.txt", {"COURSE_TEST_KUBE_PORT": "18300"}),   # a control plane of its own
    "slurm": (["tests", "-m", f"not real_kube and (real_slurm or real_hub or ({WAITS}))", "-p", "no:nbval",
               "--durations=25"],
              "_build/test-times-slurm.txt", {}),
    "fast": (["tests", "-m", f"({FAST}) or ({MODEL})", "-p", "no:nbval", "--durations=25"],
             "_build/test-times-fast.txt", {}),
    "labs": (["tests", *SOLUTIONS, *NBVAL, "-m", f"lab and not ({DAEMONS})", "--durations=25"],
             "_build/test-times-labs.txt", {}),
    "rest": (["tests", *SOLUTIONS, *NBVAL, "-m", f"not ({DAEMONS} or lab or real_kernel or ({FAST}) or ({MODEL}) or ({WAITS}))",
              "--durations=40"], "_build/test-times.txt", {}),
}
#: run alone before the lanes: the real kernel tests measure what the kernel gives a process (a 30 % CPU
#: quota reached and throttled), which the other lanes' load on 2 cores would change
#: (beside five lanes its busy loop was throttled in 0 of 26 periods; beside six, 0.09 core off its quota)
FIRST = {
    "kernel": (["tests", "-m", f"real_kernel and not ({DAEMONS} or lab)", "-p", "no:nbval", "--durations=10"],
               "_build/test-times-kernel.txt", {}),
}
#: the lanes that run the course's experiments (chapters, labs): each gets a temporary directory of its
#: own, so its container directories are under it (tests/lane_scope.py)
COMPUTING = ("labs", "rest")
#: the lanes that compute give way (nice) to the daemons' lanes, whose tests race their daemons' timers: at
#: the same priority, beside six lanes, a Slurm job's step processes came after squeue said RUNNING and a
#: replay's polls missed the pending reasons (the check of b111d92); the kernel tests, which measure what
#: the kernel gives a process, run before the lanes (FIRST)
GIVE_WAY = ("fast", "labs", "rest")
NICE = 5
#: Linux's autogroups (sched(7)): where /proc/sys/kernel/sched_autogroup_enabled is 1 (Debian's kernels,
#: this machine's), every session is a group of its own that shares the cores equally with every other
#: session, whatever its processes' nice: a nice applies only against processes of the same session. Each
#: lane is a session (start_new_session), and so is each Jupyter kernel (jupyter_client starts one with
#: start_new_session), each daemon and each container a test starts. ``nice -n 5`` alone therefore gave
#: the computing lanes no less of the cores than the daemons (measured: a nice-19 busy loop in a session of
#: its own took 1.29 CPU s to a nice-0 one's 1.26 on one core; with its session's autogroup nice at 19,
#: 0.08 to 1.66). The lanes give way by their sessions' autogroup nice too: the lane itself at its start,
#: and every session its processes start later, found by the lane's name in their environment
#: (:func:`_give_way`).
AUTOGROUP = Path("/proc/sys/kernel/sched_autogroup_enabled")
#: how often (s) :func:`_give_way` looks for new sessions of the lanes that give way (a look at every
#: process costs about 2.5 ms of CPU per 80 processes)
GIVE_WAY_EVERY = 1.0
SERIAL = ["tests", *SOLUTIONS, *NBVAL, "--durations=40"]


#: the lines of pytest's short summary that name a test which did not pass
VERDICT = ("FAILED ", "ERROR ")


def _pump(stream, prefix: str, failures: list[str]) -> None:
    for line in iter(stream.readline, ""):
        sys.stdout.write(prefix + line)
        sys.stdout.flush()
        if line.startswith(VERDICT):
            failures.append(prefix + line.rstrip("\n"))


def _junit(times: str) -> Path:
    """A lane's JUnit XML report (pytest's --junitxml), beside its times file."""
    return ROOT / Path(times).with_suffix(".junit.xml")


def _failure_details(report: Path, most: int = 3, lines: int = 40) -> list[str]:
    """The first ``most`` failures' messages in a lane's JUnit report, ``lines`` lines each: a FAILED line
    holds only the first line of an assertion's message, and a CI log's tail is often all one sees (the
    slurm lane's failure of 2026-12-06 showed only a table's header)."""
    import xml.etree.ElementTree as ET
    try:
        cases = ET.parse(report).getroot().iter("testcase")
    except (OSError, ET.ParseError):
        return []
    out, shown = [], 0
    for case in cases:
        bad = next((c for c in case if c.tag in ("failure", "error")), None)
        if bad is None:
            continue
        if shown == most:
            out.append(f"… more failures in {report}")
            break
        shown += 1
        text = (bad.get("message") or "").splitlines() or (bad.text or "").splitlines()[-lines:]
        out.append(f"--- {case.get('classname', '')}::{case.get('name', '')} ({bad.tag}):")
        out.extend("  " + ln for ln in text[:lines])
        if len(text) > lines:
            out.append(f"  … {len(text) - lines} more lines in {report}")
    return out


def _children_cpu() -> float:
    """CPU seconds of every child reaped so far, with the children they reaped (a lane's daemons too)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _machine_ticks() -> tuple[int, int] | None:
    """(busy, total) clock ticks of every core since boot, from /proc/stat; None where there is none."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = [int(x) for x in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)          # idle + iowait
    total = sum(fields[:8])                                            # guest time is counted in user already
    return total - idle, total


def _autogroups_on() -> bool:
    try:
        return AUTOGROUP.read_text().strip() == "1"
    except OSError:
        return False


def _set_autogroup_nice(pid: int, nice: int) -> None:
    """Give ``pid``'s session's autogroup the nice ``nice`` (raising it needs no privilege); nothing where
    the process is gone or the kernel has no autogroups."""
    try:
        with open(f"/proc/{pid}/autogroup", "w", encoding="ascii") as fh:
            fh.write(str(nice))
    except OSError:
        pass


def _session_leaders() -> dict[int, str]:
    """pid -> its start time (clock ticks since boot) of every process that leads its session."""
    leaders = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # after "pid (comm)": state ppid pgrp session ... starttime (the 20th after the comm)
        if len(fields) > 19 and fields[3] == entry:
            leaders[int(entry)] = fields[19]
    return leaders


def _give_way(names: tuple[str, ...], stop: threading.Event, every: float = GIVE_WAY_EVERY) -> None:
    """Until ``stop``: every new session whose leader runs in one of the lanes ``names`` (its
    COURSE_TEST_LANE) gets the autogroup nice :data:`NICE`: a Jupyter kernel, a container, a daemon a
    chapter starts. Each session is looked at once (by pid and start time)."""
    seen: set[tuple[int, str]] = set()
    while not stop.wait(every):
        for pid, started in _session_leaders().items():
            if (pid, started) in seen:
                continue
            seen.add((pid, started))
            if lane_of(pid) in names:
                _set_autogroup_nice(pid, NICE)


def _lane_tmp(name: str) -> str:
    """A computing lane's temporary directory: world-writable as /tmp is (a grading sandbox's user makes
    its own folder in it), named in lower-case letters, digits and hyphens only: a container image's
    name is made from a path under it, and a reference may not hold "_" before "-" or at a component's
    end (mkdtemp's "…-fa4_2qx_" failed a build: "invalid reference format")."""
    import secrets
    while True:
        path = os.path.join(tempfile.gettempdir(), f"{LANE_TMP}{name}-{secrets.token_hex(4)}")
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        os.chmod(path, 0o1777)
        return path


def _mounted_under(place: str) -> list[str]:
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
            points = [line.split()[4] for line in fh]
    except OSError:
        return []
    return [m for m in points if m == place or m.startswith(place.rstrip("/") + "/")]


def run_lanes(lanes: dict | None = None) -> int:
    """Run ``lanes`` (default :data:`LANES`) at once; print each lane's exit status, wall and CPU seconds
    and how busy the machine's cores were meanwhile (is the run waiting, or short of cores?)."""
    lanes = LANES if lanes is None else lanes
    (ROOT / "_build").mkdir(exist_ok=True)
    states = {name: tempfile.mkdtemp(prefix=f"courselib-{name}-state-") for name in lanes}  # 0700, as state.private_dir wants
    tmps = {name: _lane_tmp(name) for name in lanes if name in COMPUTING}
    procs: dict[str, subprocess.Popen] = {}
    pumps = []
    failures: dict[str, list[str]] = {name: [] for name in lanes}
    started = time.monotonic()
    took: dict[str, float] = {}
    cpu: dict[str, float] = {}
    ticks = _machine_ticks()

    def forward(signum, _frame):
        # as SIGINT, whichever came: pytest unwinds on it (its fixtures stop what they started), not on SIGTERM
        for p in procs.values():
            if p.returncode is None:     # not reaped: poll() or send_signal() here would reap an ended lane
                try:                     # outside the loop below, and its CPU seconds would go uncounted
                    os.kill(p.pid, signal.SIGINT)   # (an ended, unreaped lane still holds its pid)
                except ProcessLookupError:
                    pass

    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    autogroups = _autogroups_on()
    stop_watch = threading.Event()
    giving_way = tuple(n for n in lanes if n in GIVE_WAY)
    if autogroups and giving_way:
        threading.Thread(target=_give_way, args=(giving_way, stop_watch), daemon=True).start()
    try:
        for name, (args, times, extra) in lanes.items():
            env = dict(os.environ, COURSE_TEST_TIMES=str(ROOT / times), PYTHONUNBUFFERED="1", **extra)
            env.update(COURSELIB_STATE_DIR=states[name], COURSE_TEST_LANE=name)
            if name in tmps:
                env["TMPDIR"] = tmps[name]
            nice = ["nice", "-n", str(NICE)] if name in GIVE_WAY else []
            _junit(times).unlink(missing_ok=True)     # a report left by an earlier run is never read as this one's
            # whole lines only, each lane's marked: pytest's progress dots would otherwise interleave mid-line
            procs[name] = subprocess.Popen(nice + PYTEST + args + [f"--junitxml={_junit(times)}"], cwd=ROOT, env=env,
                                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                                           start_new_session=True)   # a terminal's Ctrl-C reaches them once, from here
            if nice and autogroups:
                _set_autogroup_nice(procs[name].pid, NICE)
            t = threading.Thread(target=_pump, args=(procs[name].stdout, f"[{name}] ", failures[name]),
                                 daemon=True)
            t.start()
            pumps.append(t)
        codes = {}
        while len(codes) < len(procs):
            for name, p in procs.items():
                before = _children_cpu()
                if name not in codes and p.poll() is not None:      # reaped here: its CPU joins ours
                    codes[name] = p.returncode
                    took[name] = time.monotonic() - started
                    cpu[name] = _children_cpu() - before
            time.sleep(0.5)
        for t in pumps:
            t.join(timeout=10)
    finally:
        stop_watch.set()
        for s, h in old.items():
            signal.signal(s, h)
        for p in procs.values():
            if p.poll() is None:
                p.terminate()
                p.wait()
        for name, place in [(f"state directory of the {n} lane", d) for n, d in states.items()] + \
                           [(f"temporary directory of the {n} lane", d) for n, d in tmps.items()]:
            left = sorted(tmp_entries(place))
            mounted = _mounted_under(place)
            if left or mounted:
                print(f"lanes: left in the {name}, {place}: {left[:10]}"
                      + (f"; still mounted there, so not removed: {mounted[:5]}" if mounted else " (removed)"))
            if not mounted:               # never remove through a mount a failed test left
                shutil.rmtree(place, ignore_errors=True)
    wall = time.monotonic() - started
    now = _machine_ticks()
    busy = ""
    if ticks and now and now[1] > ticks[1]:
        busy = (f"; the machine's {os.cpu_count()} cores {100 * (now[0] - ticks[0]) / (now[1] - ticks[1]):.0f} % "
                "busy meanwhile (any process)")
    print("\nlanes: " + ", ".join(f"{n} exit {codes[n]} after {took[n]:.0f} s ({cpu[n]:.0f} CPU s)" for n in procs)
          + f"; wall {wall:.0f} s{busy} (times per test: " + ", ".join(t for _, t, _ in lanes.values()) + ")")
    # again at the very end: a CI log's tail is often all one sees, and a lane's summary scrolled past
    # long before the last lane ended (the kueue lane's failure of 2026-12-05 showed only as "exit 1")
    for name in procs:
        if codes[name] != 0:
            said = failures[name]
            print(f"lanes: the {name} lane (exit {codes[name]}): "
                  + (f"{len(said)} not passed" if said else "no FAILED or ERROR line; its output above says why"))
            for line in said[:20]:
                print("  " + line)
            if len(said) > 20:
                print(f"  … and {len(said) - 20} more above")
            for line in _failure_details(_junit(lanes[name][1])):
                print("  " + line)
    failed = next((c for c in codes.values() if c != 0), 0)
    return 128 - failed if failed < 0 else failed          # killed by signal N: 128 + N, as a shell says


def main(argv: list[str]) -> int:
    if argv == ["--serial"]:
        return subprocess.call(PYTEST + SERIAL, cwd=ROOT)
    if argv:
        print("usage: python tests/lanes.py [--serial]", file=sys.stderr)
        return 2
    first = run_lanes(FIRST)
    if first == 2:                        # pytest's "interrupted" (Ctrl-C, SIGTERM): stop here
        return first
    rest = run_lanes()
    return (0 if first == 5 else first) or rest   # 5: no kernel test here at all


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
