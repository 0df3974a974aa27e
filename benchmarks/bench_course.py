"""The course as a learner meets it: a cold book build, a warm rebuild, grading each lab, and
``import courselib``.

Run alone: ``.venv/bin/python benchmarks/bench_course.py [--quick] [--only book|grade|import]``.

- **Cold build**: ``jupyter-book build`` of the whole course with the flags of ``make book``,
  executing every chapter, into a fresh temporary output directory with its own empty execution
  cache (a copy of ``_config.yml`` whose ``execute.cache`` points there) — ``_build/`` is not
  touched. **Warm**: the same command again, nothing changed.
- **Grading**: ``courselib grade LAB`` for every ``labs/*.ipynb`` (found by glob, so renamed labs
  are still measured); the figure is the slowest lab.
- **Import**: ``import courselib`` timed inside a fresh interpreter, median of several; the whole
  ``courselib --help`` (interpreter start, console script, argument parser) is reported beside it.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
JB_FLAGS = ["-W", "-n", "--keep-going"]          # as `make book`


def _timed(cmd, **kw) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, **kw)
    return time.perf_counter() - t0, r


def _last_line(r: subprocess.CompletedProcess) -> str:
    lines = (r.stderr.strip() or r.stdout.strip()).splitlines()
    return lines[-1][:200] if lines else f"exit {r.returncode}"


def book(out: dict) -> None:
    import yaml

    jb = BIN / "jupyter-book"
    if not jb.exists():
        out["book_note"] = f"skipped: {jb} not installed (make setup)"
        return
    with tempfile.TemporaryDirectory(prefix="bench-book-") as tmp:
        cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
        cfg.setdefault("execute", {})["cache"] = str(Path(tmp) / ".jupyter_cache")
        # the copy lives outside the repository: make its repository-relative paths absolute
        ext = cfg.get("sphinx", {}).get("local_extensions") or {}
        for name, path in ext.items():
            ext[name] = str(ROOT / path)
        cfg["bibtex_bibfiles"] = [str(ROOT / b) for b in cfg.get("bibtex_bibfiles", [])]
        config = Path(tmp) / "_config.yml"
        config.write_text(yaml.safe_dump(cfg, sort_keys=False))
        cmd = [str(jb), "build", str(ROOT), "--path-output", str(Path(tmp) / "out"),
               "--config", str(config), *JB_FLAGS]
        print("  cold book build (every chapter executed) ...", file=sys.stderr, flush=True)
        cold, r = _timed(cmd)
        out["cold_book_build_s"] = cold
        out["cold_book_build_ok"] = r.returncode == 0
        if r.returncode:
            out["book_note"] = f"the cold build exited {r.returncode}: {_last_line(r)}"
        print("  warm book build (nothing changed) ...", file=sys.stderr, flush=True)
        warm, r = _timed(cmd)
        out["warm_book_build_s"] = warm
        out["warm_book_build_ok"] = r.returncode == 0
        out["chapters_executed"] = len(list((Path(tmp) / "out" / "_build" / "jupyter_execute").rglob("*.ipynb")))


def grade(out: dict, quick: bool) -> None:
    """Each lab as handed out (answers are stubs) and, when solutions/ has it, fully answered."""
    labs = sorted((ROOT / "labs").glob("*.ipynb"))
    if quick:
        labs = labs[:1]
    if not labs:
        out["grade_note"] = "skipped: no labs/*.ipynb"
        return
    rows = []
    for lab in labs:
        answered = ROOT / "solutions" / lab.name
        for kind, nb in (("handed out", lab), ("answered", answered)):
            if not nb.is_file() or (quick and kind == "answered"):
                continue
            print(f"  courselib grade {nb.relative_to(ROOT)} ...", file=sys.stderr, flush=True)
            secs, r = _timed([str(BIN / "courselib"), "grade", str(nb), "--json"])
            row = {"lab": lab.name, "as": kind, "seconds": secs, "exit": r.returncode}
            try:
                doc = json.loads(r.stdout)
                row["points"] = f"{doc['total']}/{doc['max']}"
            except (json.JSONDecodeError, KeyError):
                row["note"] = _last_line(r)
            rows.append(row)
    out["grade_rows"] = rows
    out["grade_lab_max_s"] = max(r["seconds"] for r in rows)
    out["grade_labs"] = len(labs)


def imports(out: dict, quick: bool) -> None:
    n = 3 if quick else 7
    code = "import time; t = time.perf_counter(); import courselib; print(time.perf_counter() - t)"
    times = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                  check=True).stdout) for _ in range(n)]
    out["import_s"] = statistics.median(times)
    cli = [_timed([str(BIN / "courselib"), "--help"])[0] for _ in range(n)]
    out["cli_help_s"] = statistics.median(cli)
    heavy = subprocess.run([sys.executable, "-c", "import sys, courselib; print(','.join(m for m in "
                            "('numpy', 'matplotlib', 'simpy', 'yaml', 'ipywidgets') if m in sys.modules))"],
                           capture_output=True, text=True, check=True).stdout.strip()
    out["import_pulls_in"] = heavy or None


def run(quick: bool = False, only: str | None = None) -> dict:
    out: dict = {}
    if only in (None, "import"):
        imports(out, quick)
    if only in (None, "grade"):
        grade(out, quick)
    if only in (None, "book"):
        if quick and only != "book":
            out["book_note"] = "skipped in --quick (run: benchmarks/run.py --only book)"
        else:
            book(out)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one lab as handed out, fewer repeats, no book build")
    ap.add_argument("--only", choices=("book", "grade", "import"))
    args = ap.parse_args()
    print(json.dumps(run(args.quick, args.only), indent=2))


if __name__ == "__main__":
    main()
