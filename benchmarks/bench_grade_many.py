"""`courselib grade --many` on a class of 30 submissions of Lab 8 (tests/grading_class.py: solved,
untouched, half-done, re-saved, one hanging, one ending its process, one not a notebook, one attacking
the grader, one symlinked), graded one at a time and two at a time, in the same run; prints both wall
times and their ratio, with the machine's cores and load. Run it as root (the sandbox's separate user)
and alone on the machine: `flock /work/heavy.lock .venv/bin/python benchmarks/bench_grade_many.py`.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from grading_class import LAB, make_class  # noqa: E402


def run(folder: Path, jobs: int, out: Path) -> float:
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "courselib", "grade", "--many", str(folder), "--gradebook",
                           str(out / f"grades-j{jobs}.csv"), "--source", str(ROOT / "solutions"), "--lab", LAB,
                           "--timeout", "4", "--time-limit", "120", "-j", str(jobs)],
                          cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(done.stderr)
    return time.monotonic() - start


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="bench-grade-many-") as tmp:
        folder = Path(tmp) / "submissions"
        folder.mkdir()
        make_class(ROOT, folder)
        load0 = os.getloadavg()[0]
        serial = run(folder, 1, Path(tmp))
        parallel = run(folder, 2, Path(tmp))
        figures = {"submissions": 30, "serial_s": round(serial, 1), "j2_s": round(parallel, 1),
                   "ratio_j2_over_serial": round(parallel / serial, 3), "cores": os.cpu_count(),
                   "load_at_start": round(load0, 2), "load_at_end": round(os.getloadavg()[0], 2)}
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
