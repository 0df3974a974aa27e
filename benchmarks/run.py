"""``make bench``: every benchmark, one table of ratios measured side by side in this run.

    .venv/bin/python benchmarks/run.py [--quick] [--only accasim|floor|scale|busy|traces|course|book|grade|import]

Runs the peer and floor comparison (``bench_accasim.py``), the scale of the gang policies
(``bench_scale.py``), the busy-cluster sweep (``bench_busy.py``; ``BENCH_BUSY_FULL=1`` for 10,000 jobs a
cell) and the course experience (``bench_course.py``); prints one
table; writes the same figures, the machine and the details to ``_build/bench/results.json``.
``--quick`` makes every part short (2,000 trace jobs, the quick scale grid, one lab, no book
build). Absolute seconds depend on the machine and on what else runs on it: the table says
which machine and its load average; the ratios are the results.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = ROOT / "_build" / "bench" / "results.json"
sys.path.insert(0, str(HERE))

REQUIRED = ("accasim_speedup_fifo", "accasim_speedup_easy", "fifo_start_times_identical",
            "easy_start_times_identical", "heapq_floor_ratio", "volcano_100k_jobs_s",
            "volcano_100k_peak_mib", "cold_book_build_s", "warm_book_build_s", "grade_lab_max_s",
            "import_s")
PARTS = {"accasim": "accasim", "floor": "accasim", "scale": "scale", "busy": "busy", "traces": "traces",
         "course": "course",
         "book": "course", "grade": "course", "import": "course"}


def machine() -> dict:
    model = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {"cores": os.cpu_count(), "cpu_model": model, "python": platform.python_version(),
            "platform": platform.platform(), "load_average_1m_at_start": load[0] if load else None,
            "date_utc": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def run_scale(quick: bool) -> dict:
    import bench_scale
    return bench_scale.run(quick=quick)


def bench_busy_met(row: dict):
    import bench_busy
    return bench_busy.met(row)


def _s(x, digits=3) -> str:
    if x is None:
        return "-"
    if x >= 100:
        return f"{x:.0f} s"
    if x >= 1:
        return f"{x:.1f} s"
    if x >= 0.01:
        return f"{x:.{digits}f} s"
    return f"{x * 1000:.1f} ms"


def _x(ratio: float) -> str:
    """A ratio with a decimal where rounding could hide which side of a target it is on."""
    return f"{ratio:.0f}x" if ratio >= 100 else f"{ratio:.1f}x"


def _met(ok) -> str:
    return "-" if ok is None else ("yes" if ok else "NO")


def table(res: dict) -> list[tuple[str, str, str, str, str, str]]:
    """Rows: (what, courselib, reference, ratio, target, met)."""
    a, sc, c = res["details"].get("accasim", {}), res["details"].get("scale", {}), res["details"].get("course", {})
    rows = []
    if "accasim_speedup_fifo" in a:
        n = a["jobs"]
        for pol in ("fifo", "easy"):
            sp = a[f"accasim_speedup_{pol}"]
            rows.append((f"peer: AccaSim {pol.upper()}, Lublin-256, {n:,} jobs",
                         _s(a[f"courselib_{pol}_s"]),
                         f"{_s(a[f'accasim_{pol}_s'])} ({a[f'accasim_{pol}_shape']})",
                         f"{_x(sp)} wall, {_x(a[f'accasim_speedup_{pol}_cpu'])} CPU",
                         ">= 50x" if not res["quick"] else ">= 50x (full trace)",
                         _met(sp >= 50) if not res["quick"] else "-"))
        rows.append(("schedules: FIFO start times", f"{a['fifo_jobs_same_start']:,}/{n:,} identical", "AccaSim",
                     "", "identical", _met(a["fifo_start_times_identical"])))
        rows.append(("schedules: EASY start times", f"{a['easy_jobs_same_start']:,}/{n:,} identical", "AccaSim",
                     "", "identical or explained",
                     _met(a["easy_start_times_identical"] or a["easy_differences_explained"])))
        rows.append(("  AccaSim's rules (no protected reservation)",
                     f"reproduce {n if a['easy_differences_explained'] else 'NOT all'} of {n:,}",
                     f"{a['accasim_easy_heads_delayed']} of {a['accasim_easy_heads']} heads late", "", "", ""))
        rows.append(("  EASY mean / max wait", f"{a['courselib_easy_mean_wait_s'] / 3600:.1f} h / "
                     f"{a['courselib_easy_max_wait_s'] / 3600:.0f} h",
                     f"{a['accasim_easy_mean_wait_s'] / 3600:.1f} h / {a['accasim_easy_max_wait_s'] / 3600:.0f} h",
                     "", "", ""))
    if "heapq_floor_ratio" in a:
        r = a["heapq_floor_ratio"]
        rows.append(("floor: FIFO replay vs bare heapq", _s(a["courselib_fifo_replay_only_s"]),
                     _s(a["heapq_floor_s"]), f"{r:.2f}x", "<= 5x", _met(r <= 5)))
        re_ = a["heapq_floor_ratio_easy"]
        rows.append(("floor: EASY replay vs bare heapq", _s(a["courselib_easy_replay_only_s"]),
                     _s(a["heapq_floor_s"]), f"{re_:.2f}x", "<= 2x", _met(re_ <= 2)))
    v, m = res.get("volcano_100k_jobs_s"), res.get("volcano_100k_peak_mib")
    if "scale" in res["details"]:
        rows.append(("scale: volcano, 100,000 jobs, 6,250 nodes",
                     f"{_s(v)}, {m:.0f} MiB" if v is not None and m is not None else "null",
                     "", "", "<= 30 s, <= 1 GiB", _met(None if v is None or m is None else (v <= 30 and m <= 1024))))
    for row in sc.get("rows", []):
        kind = "overloaded, " if row.get("kind") == "overloaded" else ""
        what = f"  {row['policy']}, {kind}{row['nodes']:,} nodes, {row['jobs']:,} jobs"
        # (issue 35: every cell of the grid, friendly and overloaded, under every policy)
        target, met = ("<= 30 s, <= 1 GiB", _met(row.get("seconds") is not None and row["seconds"] <= 30
                                                  and row["peak_mib"] <= 1024))
        if row.get("seconds") is None:
            rows.append((what, row.get("note", "not run"), "", "", target, met))
        else:
            rows.append((what, f"{_s(row['seconds'])} ({_s(row['cpu_seconds'])} CPU), {row['peak_mib']:.0f} MiB",
                         "heapq floor" if row.get("floor_ratio") else "",
                         f"{row['us_per_job']:.0f} us/job" + (f", {_x(row['floor_ratio'])}" if row.get("floor_ratio") else ""),
                         target, met))
    for row in res["details"].get("busy", {}).get("rows", []):
        what = f"  busy {row['cell']}, {row['policy']}, {row['jobs']:,} jobs"
        verdict = bench_busy_met(row)
        target, met = ("<= 10 s, <= 1 GiB", _met(verdict)) if verdict is not None else ("", "")
        if row.get("seconds") is None:
            rows.append((what, row.get("note", "not run"), "", "", target, met))
        else:
            rows.append((what, f"{_s(row['seconds'])} ({_s(row['cpu_seconds'])} CPU), {row['peak_mib']:.0f} MiB",
                         "heapq floor" if row.get("floor_ratio") else "",
                         _x(row["floor_ratio"]) if row.get("floor_ratio") else "", target, met))
    tr = res["details"].get("traces", {})
    for row in tr.get("rows", []):
        what = f"  trace {row['trace'].split('__')[-1]}, {row['policy']}"
        if row.get("seconds") is None:
            rows.append((what, row.get("note", "not run"), "", "", "<= 60 s", "NO"))
        else:
            rows.append((what, f"{_s(row['seconds'])} ({_s(row['cpu_seconds'])} CPU), {row['peak_mib']:.0f} MiB, "
                         f"{row['jobs']:,} jobs on {row['cluster']}", "heapq floor",
                         f"{row['us_per_job']:.0f} us/job, {_x(row['floor_ratio'])}", "<= 60 s",
                         _met(row["seconds"] <= 60)))
    if tr.get("note"):
        res["notes"].append(tr["note"])
    targets = (("cold_book_build_s", "course: cold book build (every chapter)", 300, "<= 5 min"),
               ("warm_book_build_s", "course: warm rebuild, no change", 30, "<= 30 s"),
               ("grade_lab_max_s", "course: courselib grade, slowest lab", 20, "<= 20 s"),
               ("import_s", "course: import courselib", 0.3, "<= 0.3 s"))
    for key, what, limit, target in targets:
        x = c.get(key)
        if x is None and key not in c and "course" in res["details"]:
            rows.append((what, "not run", "", "", target, "-"))
        elif x is not None:
            ok = c.get(key.replace("_s", "_ok"), True)
            rows.append((what, _s(x) + ("" if ok else " (build FAILED)"), "", "", target,
                         _met(x <= limit and ok)))
    for r in c.get("grade_rows", []):
        rows.append((f"  {r['lab']} ({r['as']})", _s(r["seconds"]), "", r.get("points", ""), "", ""))
    if "cli_help_s" in c:
        rows.append(("  courselib --help (interpreter start included)", _s(c["cli_help_s"]), "", "", "", ""))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a short run of every part")
    ap.add_argument("--only", choices=sorted(PARTS), help="run one part")
    args = ap.parse_args(argv)
    res: dict = {"machine": machine(), "quick": args.quick, "only": args.only, "details": {}, "notes": []}
    t0 = time.perf_counter()
    want = {PARTS[args.only]} if args.only else {"accasim", "scale", "busy", "traces", "course"}
    if "accasim" in want:
        print("peer and floor (AccaSim 1.1.3, heapq) ...", file=sys.stderr, flush=True)
        import bench_accasim
        res["details"]["accasim"] = bench_accasim.run(quick=args.quick, peer=args.only != "floor")
    if "scale" in want:
        print("scale (gang policies) ...", file=sys.stderr, flush=True)
        res["details"]["scale"] = run_scale(args.quick)
    if "busy" in want:
        import bench_busy
        full = bench_busy.full_requested()
        print(f"busy cluster sweep ({'full' if full else 'short; BENCH_BUSY_FULL=1 for the full'}) ...",
              file=sys.stderr, flush=True)
        res["details"]["busy"] = bench_busy.run(full=full and not args.quick)
    if "traces" in want:
        print("real traces (corpus) under every policy ...", file=sys.stderr, flush=True)
        import bench_traces
        res["details"]["traces"] = bench_traces.run(quick=args.quick)
    if "course" in want:
        print("course experience ...", file=sys.stderr, flush=True)
        import bench_course
        sub = args.only if args.only in ("book", "grade", "import") else None
        res["details"]["course"] = bench_course.run(quick=args.quick, only=sub)
    for part in res["details"].values():
        for k in REQUIRED:
            if k in part and k not in res:
                res[k] = part[k]
        for k in ("note", "book_note", "grade_note"):
            if part.get(k):
                res["notes"].append(part[k])
    for k in REQUIRED:
        res.setdefault(k, None)
    a = res["details"].get("accasim", {})
    for k in ("easy_differences_explained", "accasim_fifo_s", "accasim_easy_s", "courselib_fifo_s",
              "courselib_easy_s", "accasim_speedup_fifo_cpu", "accasim_speedup_easy_cpu"):
        if k in a:
            res[k] = a[k]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    res["machine"]["load_average_1m_at_end"] = load
    res["total_s"] = time.perf_counter() - t0

    mc = res["machine"]
    print(f"\nAll or Nothing benchmarks{' (--quick)' if args.quick else ''} - {mc['date_utc']} - {mc['cpu_model']}, "
          f"{mc['cores']} cores, Python {mc['python']}, load average {mc['load_average_1m_at_start']:.1f} at start, "
          f"{load:.1f} at end")
    print("Ratios are measured side by side in this run; absolute seconds depend on the machine and "
          "on what else runs on it.\n")
    rows = [("benchmark", "courselib", "reference", "ratio", "target", "met")] + table(res)
    widths = [max(len(r[i]) for r in rows) for i in range(6)]
    for n, r in enumerate(rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))
    growth = (res["details"].get("scale", {}).get("table") or "").partition("growth exponents")[2]
    if growth:
        print("\nscale: growth exponents" + growth)
    for note in res["notes"]:
        print(f"note: {note}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(res, indent=2, default=str) + "\n")
    print(f"\n{OUT.relative_to(ROOT)} written ({res['total_s']:.0f} s in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
