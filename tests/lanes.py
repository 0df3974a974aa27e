"""``make test`` in two lanes at once: the real daemons' tests in one pytest process, everything else in another.

Most of a real-system test's time is waiting (a controller manager creating pods at its client rate, a
Slurm controller's scheduling cycle, an image build's network-less steps, JupyterHub spawning), while the
rest of the suite (chapters executed, labs graded, property tests) keeps a core busy. On the course's
2-core machine the two overlap: the run takes about as long as its longer lane instead of their sum.

- ``real``: the tests on the real systems that run as daemons (tests/tiers.py marks them ``real_kube``,
  ``real_slurm``, ``real_hub``), in file order, so the session's one control plane and one Slurm
  (tests/live_fixtures.py) are reshaped as before; no nbval. Each proves it left nothing by its own
  PIDs, state directory and ports, so the other lane cannot make it fail.
- ``rest``: everything else over tests/ and solutions/ with nbval, as ``make test`` ran it before. The
  real kernel, container and MPI tests stay here, one at a time beside the chapters and labs that run the
  same experiments live: their "nothing left behind" checks look for any ``courselib-container-*``
  directory, ``courselib-oom-*`` cgroup or rank process on the machine (the first two-lane run, with them
  in the real lane, failed on a chapter's container directory). The lane gets a state directory of its
  own (``COURSELIB_STATE_DIR``): whatever it asks about running daemons (a chapter's ``kube.running()``)
  never sees the real lane's, and nothing it stops is the real lane's.

Each lane writes its own times file (``_build/test-times.txt``, ``_build/test-times-real.txt``); the real
lines are printed whole as they come, prefixed ``[real]`` or ``[rest]``. The run fails if either lane fails;
Ctrl-C (SIGINT) and SIGTERM reach both lanes as SIGINT, on which pytest unwinds its fixtures (they stop
what they started).
``python tests/lanes.py --serial`` runs the one process of old (``make test LANES=1``).
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

ROOT = Path(__file__).resolve().parents[1]
PYTEST = [sys.executable, "-m", "pytest"]
SOLUTIONS = ["solutions"] if (ROOT / "solutions").is_dir() else []
NBVAL = ["--nbval-lax", "--nbval-current-env"]

#: the real systems whose tests run in the real lane (their daemons are waited on, not computed)
DAEMONS = ("kube", "slurm", "hub")
REAL = " or ".join(f"real_{s}" for s in DAEMONS)

#: lane -> (pytest arguments, times file)
LANES = {
    "real": (["tests", "-m", REAL, "-p", "no:nbval", "--durations=25"], "_build/test-times-real.txt"),
    "rest": (["tests", *SOLUTIONS, *NBVAL, "-m", f"not ({REAL})", "--durations=40"], "_build/test-times.txt"),
}
SERIAL = ["tests", *SOLUTIONS, *NBVAL, "--durations=40"]


def _pump(stream, prefix: str) -> None:
    for line in iter(stream.readline, ""):
        sys.stdout.write(prefix + line)
        sys.stdout.flush()


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


def run_lanes(lanes: dict | None = None) -> int:
    """Run ``lanes`` (default :data:`LANES`) at once; print each lane's exit status, wall and CPU seconds
    and how busy the machine's cores were meanwhile (is the run waiting, or short of cores?)."""
    lanes = LANES if lanes is None else lanes
    (ROOT / "_build").mkdir(exist_ok=True)
    state = tempfile.mkdtemp(prefix="courselib-rest-state-")   # mode 0700, as state.private_dir wants
    procs: dict[str, subprocess.Popen] = {}
    pumps = []
    started = time.monotonic()
    took: dict[str, float] = {}
    cpu: dict[str, float] = {}
    ticks = _machine_ticks()

    def forward(signum, _frame):
        # as SIGINT, whichever came: pytest unwinds on it (its fixtures stop what they started), not on SIGTERM
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGINT)

    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        for name, (args, times) in lanes.items():
            env = dict(os.environ, COURSE_TEST_TIMES=str(ROOT / times), PYTHONUNBUFFERED="1")
            if name == "rest":
                env["COURSELIB_STATE_DIR"] = state
            # whole lines only, each lane's marked: pytest's progress dots would otherwise interleave mid-line
            procs[name] = subprocess.Popen(PYTEST + args, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                           stderr=subprocess.STDOUT, text=True, bufsize=1,
                                           start_new_session=True)   # a terminal's Ctrl-C reaches them once, from here
            t = threading.Thread(target=_pump, args=(procs[name].stdout, f"[{name}] "), daemon=True)
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
        for s, h in old.items():
            signal.signal(s, h)
        for p in procs.values():
            if p.poll() is None:
                p.terminate()
                p.wait()
        left = sorted(os.listdir(state))
        if left:
            print(f"lanes: the rest lane left {left} in its state directory {state} (removed)")
        shutil.rmtree(state, ignore_errors=True)
    wall = time.monotonic() - started
    now = _machine_ticks()
    busy = ""
    if ticks and now and now[1] > ticks[1]:
        busy = (f"; the machine's {os.cpu_count()} cores {100 * (now[0] - ticks[0]) / (now[1] - ticks[1]):.0f} % "
                "busy meanwhile (any process)")
    print("\nlanes: " + ", ".join(f"{n} exit {codes[n]} after {took[n]:.0f} s ({cpu[n]:.0f} CPU s)" for n in procs)
          + f"; wall {wall:.0f} s{busy} (times per test: " + ", ".join(t for _, t in lanes.values()) + ")")
    failed = next((c for c in codes.values() if c != 0), 0)
    return 128 - failed if failed < 0 else failed          # killed by signal N: 128 + N, as a shell says


def main(argv: list[str]) -> int:
    if argv == ["--serial"]:
        return subprocess.call(PYTEST + SERIAL, cwd=ROOT)
    if argv:
        print("usage: python tests/lanes.py [--serial]", file=sys.stderr)
        return 2
    return run_lanes()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
