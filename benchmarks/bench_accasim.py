"""Peer and floor: courselib's FIFO and EASY replays of the Lublin-256 SWF trace against AccaSim
1.1.3 replaying the same trace with the same policies, and against a bare ``heapq`` replay.

Run alone: ``.venv/bin/python benchmarks/bench_accasim.py [--quick]`` (``make bench`` runs it
with the others). The trace is read from ``../shared/corpus/traces`` (never copied here); without
it the benchmark says so and reports nothing. AccaSim is installed into the running interpreter
from ``benchmarks/requirements.txt`` when missing — a benchmark-only dependency, not courselib's.

What is compared, side by side in one run:

- **Wall time** from the trace file to every job's start time: courselib
  (``read_trace`` + ``courselib.model.replay.replay``, median of several runs) and AccaSim
  (``Simulator`` + ``start_simulation``, one run each, in a subprocess of its own).
- **Schedules**: every job's start time. FIFO must be identical. For EASY, AccaSim's
  ``EASYBackfilling`` backfills through ``allocating_method(..., reserved_nodes=[])``, so its
  ``_compute_reservation_overlaps`` never excludes a node: any queued job that fits now starts,
  even if it delays the blocked head job past its reservation; and the head is retried only
  from its reservation time on. :func:`accasim_ebf_rules` restates exactly those rules on a pool
  of cores; when it reproduces AccaSim's start times job for job, every difference from
  courselib's textbook EASY is explained by that one policy detail.
- **Floor**: a heap that pushes every job's submit and end event (with the start times courselib
  found) and pops them all — the cost any event-driven replay pays, with no scheduling at all.

Running the peer on Python >= 3.10 (harness only): AccaSim imports ``Mapping`` from
``collections``, which is aliased here from ``collections.abc``; its system config takes
``groups``/``resources`` keys; the trace has no requested times (field 9 = -1), so the copy
handed to AccaSim gives each job its run time as requested time (the estimate courselib uses
too) and a requested memory of 1 (AccaSim's EASY divides by requested resources).
"""
from __future__ import annotations

import argparse
import heapq
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT.parent / "shared" / "corpus" / "traces" / "DIR-LAB__deep-batch-scheduler__data__lublin_256.swf"
CORES = 256
QUICK_JOBS = 2000
# AccaSim machine shapes: the trace's own machine (256 one-processor nodes, as AccaSim's SWF
# reader maps one processor to one node request) and, for EASY, 32 x 8 cores, where AccaSim's
# EASY runs fastest of the shapes tried (its FIFO is fastest at 256 x 1). The headline ratio
# uses the fastest AccaSim run per policy.
SHAPES = {"fifo": [(256, 1)], "easy": [(256, 1), (32, 8)]}
REQUIREMENTS = Path(__file__).resolve().parent / "requirements.txt"


def ensure_accasim() -> str | None:
    """Install the peer from benchmarks/requirements.txt if it is missing; a note if that fails."""
    if importlib.util.find_spec("accasim") is not None:
        return None
    print(f"installing the peer: pip install -r {REQUIREMENTS.relative_to(ROOT)}", file=sys.stderr)
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "-r", str(REQUIREMENTS)],
                       capture_output=True, text=True)
    if r.returncode != 0 or importlib.util.find_spec("accasim") is None:
        return "AccaSim could not be installed: " + (r.stderr.strip().splitlines() or ["?"])[-1]
    return None


def peer_input(src: Path, dst: Path, limit: int | None) -> Path:
    """A copy of the trace for AccaSim: requested time := run time, requested memory := 1."""
    n = 0
    with open(src) as f, open(dst, "w") as g:
        for line in f:
            if line.startswith(";") or not line.strip():
                g.write(line)
                continue
            if limit is not None and n >= limit:
                break
            p = line.split()
            if p[8] == "-1":
                p[8] = p[3]
            if p[9] == "-1":
                p[9] = "1"
            g.write(" ".join(p) + "\n")
            n += 1
    return dst


def run_peer(swf: Path, policy: str, shape: tuple[int, int], workdir: Path) -> dict:
    """One AccaSim run in a subprocess: {"wall_s", "cpu_s", "starts": {job id: start}}."""
    out = workdir / f"accasim-{policy}-{shape[0]}x{shape[1]}.json"
    cmd = [sys.executable, __file__, "--peer", policy, "--swf", str(swf),
           "--shape", f"{shape[0]}x{shape[1]}", "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"AccaSim {policy} failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(out.read_text())


def _peer_main(policy: str, swf: str, shape: str, out: str) -> None:
    """Inside the subprocess: run AccaSim once and write its timing and start times."""
    import collections
    import collections.abc
    for name in ("Mapping", "MutableMapping", "Sequence", "Iterable", "Callable"):
        setattr(collections, name, getattr(collections.abc, name))
    from accasim.base.additional_data import AdditionalData
    from accasim.base.allocator_class import FirstFit
    from accasim.base.scheduler_class import EASYBackfilling, FirstInFirstOut
    from accasim.base.simulator_class import Simulator

    class Starts(AdditionalData):
        """Records each job's start time as it completes (AccaSim's own hook)."""

        def __init__(self, event_manager=None):
            super().__init__(event_manager)
            self.starts = {}

        def exec_before_dispatching(self, job_dict, queued_jobs): pass
        def exec_after_dispatching(self, job_dict, to_dispatch_jobs, rejected_jobs): pass
        def exec_before_submission(self, *a, **k): pass
        def exec_after_submission(self, *a, **k): pass
        def exec_before_completion(self, *a, **k): pass
        def stop(self): pass

        def exec_after_completion(self, removed_jobs):
            for job in removed_jobs:
                self.starts[job.id] = job.start_time

    nodes, per = (int(x) for x in shape.split("x"))
    work = Path(tempfile.mkdtemp(prefix="accasim-"))
    config = work / "system.config"
    config.write_text(json.dumps({"groups": {"g": {"core": per, "mem": 1 << 30}},
                                  "resources": {"g": nodes},
                                  "equivalence": {"processor": {"core": 1}}, "start_time": 0}))
    t0, c0 = time.perf_counter(), time.process_time()
    dispatcher = FirstInFirstOut(FirstFit()) if policy == "fifo" else EASYBackfilling(FirstFit())
    sim = Simulator(swf, str(config), dispatcher, additional_data=[Starts],
                    RESULTS_FOLDER_PATH=str(work / "results"), scheduling_output=False,
                    statistics_output=False, show_statistics=False, LOG_LEVEL="WARNING")
    sim.start_simulation()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    starts = sim.mapper.additional_data[0].starts
    Path(out).write_text(json.dumps({"wall_s": wall, "cpu_s": cpu, "starts": starts,
                                     "rejected": sim.rejected_jobs}))


def accasim_ebf_rules(jobs, cores: int):
    """AccaSim 1.1.3's ``EASYBackfilling`` + ``FirstFit`` as its source reads, on a pool of cores.

    Start heads in queue order while they fit; the first that does not is *blocked* and gets a
    reservation time R (the first expected end at which enough cores are free). While blocked,
    every later job that fits now starts (``reserved_nodes=[]``: nothing is protected); the
    head is tried again only at times >= R. Returns (start times, {head: R}).
    """
    n = len(jobs)
    submit = [j.submit for j in jobs]
    order = sorted(range(n), key=submit.__getitem__)
    start: list[float | None] = [None] * n
    ends: list = []
    expected: dict[int, float] = {}
    free, queue, arrived, blocked, R = cores, [], 0, None, None
    reservations: dict[int, float] = {}
    inf = float("inf")
    while arrived < n or queue:
        t = submit[order[arrived]] if arrived < n else inf
        if ends and ends[0][0] < t:
            t = ends[0][0]
        while ends and ends[0][0] <= t:
            _, i = heapq.heappop(ends)
            free += jobs[i].procs
            del expected[i]
        while arrived < n and submit[order[arrived]] <= t:
            queue.append(order[arrived])
            arrived += 1
        if not queue:
            continue

        def go(i):
            nonlocal free
            free -= jobs[i].procs
            start[i] = t
            heapq.heappush(ends, (t + jobs[i].run, i))
            expected[i] = t + jobs[i].estimate

        rest, reached = queue, False
        if blocked is not None and R <= t:
            reached, rest = True, queue[1:]
            if jobs[queue[0]].procs <= free:
                go(queue[0])
                blocked = R = None
        if blocked is None and rest:
            k = 0
            while k < len(rest) and jobs[rest[k]].procs <= free:
                go(rest[k])
                k += 1
            fill = []
            if k < len(rest):
                blocked, avail = rest[k], free
                for e, i in sorted((e, i) for i, e in expected.items()):
                    avail += jobs[i].procs
                    if avail >= jobs[blocked].procs:
                        R = e
                        break
                reservations[blocked] = R
                fill = rest[k + 1:]
        else:
            fill = rest if reached else queue[1:]
        for i in fill:
            if jobs[i].procs <= free:
                go(i)
        queue = [i for i in queue if start[i] is None]
    return start, reservations


def heapq_floor(jobs, start) -> float:
    """Seconds to push every submit and end event of the schedule through a heap and pop them."""
    t0 = time.perf_counter()
    heap: list = []
    push, pop = heapq.heappush, heapq.heappop
    for k, (j, s) in enumerate(zip(jobs, start)):
        push(heap, (j.submit, 1, k))
        if s is not None:
            push(heap, (s + j.run, 0, k))
    while heap:
        pop(heap)
    return time.perf_counter() - t0


def _median_time(fn, repeat: int) -> tuple[float, float, object]:
    """Median wall and CPU seconds of ``repeat`` calls, and the last result."""
    walls, cpus, out = [], [], None
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus), out


def run(quick: bool = False, peer: bool = True) -> dict:
    """Every figure of the peer and floor comparison, as a dict (see run.py for the keys);
    ``peer=False``: courselib and the floor only (no AccaSim)."""
    from courselib.io.traces import read_trace
    from courselib.model.replay import from_trace_jobs, replay

    if not TRACE.is_file():
        return {"note": f"skipped: the Lublin-256 trace is not at {TRACE} (it lives in ../shared/corpus)"}
    limit = QUICK_JOBS if quick else None
    repeat = 3 if quick else 7
    with tempfile.TemporaryDirectory(prefix="bench-accasim-") as tmp:
        # Both simulators read the same file: the trace (or its first QUICK_JOBS jobs) with
        # field 9 filled in, which changes no estimate (courselib uses the run time when absent).
        swf = peer_input(TRACE, Path(tmp) / TRACE.name, limit)

        def load():
            return from_trace_jobs(read_trace(swf).jobs)[0]

        jobs = load()
        out: dict = {"trace": TRACE.name, "jobs": len(jobs), "cores": CORES, "repeat": repeat}
        ours = {}
        for policy in ("fifo", "easy"):
            wall, cpu, sched = _median_time(lambda: replay(load(), CORES, policy), repeat)
            only, _, _ = _median_time(lambda: replay(jobs, CORES, policy), repeat)
            ours[policy] = sched
            out[f"courselib_{policy}_s"] = wall
            out[f"courselib_{policy}_cpu_s"] = cpu
            out[f"courselib_{policy}_replay_only_s"] = only
        floor, _, _ = _median_time(lambda: heapq_floor(jobs, ours["fifo"].start), repeat)
        out["heapq_floor_s"] = floor
        out["heapq_floor_ratio"] = out["courselib_fifo_replay_only_s"] / floor
        out["heapq_floor_ratio_easy"] = out["courselib_easy_replay_only_s"] / floor

        if not peer:
            return out
        note = ensure_accasim()
        if note:
            out["note"] = note
            return out
        ids = [j.id for j in jobs]
        for policy, shapes in SHAPES.items():
            runs = []
            for shape in shapes:
                print(f"  AccaSim {policy} on {shape[0]} x {shape[1]} cores ...", file=sys.stderr, flush=True)
                r = run_peer(swf, policy, shape, Path(tmp))
                runs.append({"shape": f"{shape[0]}x{shape[1]}", "wall_s": r["wall_s"], "cpu_s": r["cpu_s"],
                             "starts": [r["starts"].get(i) for i in ids]})
            best = min(runs, key=lambda r: r["wall_s"])
            mine = list(ours[policy].start)
            same = sum(1 for a, b in zip(mine, best["starts"]) if b is not None and a == b)
            out[f"accasim_{policy}_runs"] = [{k: v for k, v in r.items() if k != "starts"} for r in runs]
            out[f"accasim_{policy}_s"] = best["wall_s"]
            out[f"accasim_{policy}_cpu_s"] = best["cpu_s"]
            out[f"accasim_{policy}_shape"] = best["shape"]
            out[f"accasim_speedup_{policy}"] = best["wall_s"] / out[f"courselib_{policy}_s"]
            out[f"accasim_speedup_{policy}_cpu"] = best["cpu_s"] / out[f"courselib_{policy}_cpu_s"]
            out[f"{policy}_start_times_identical"] = same == len(ids)
            out[f"{policy}_jobs_same_start"] = same
            out[f"accasim_{policy}_shapes_agree"] = all(r["starts"] == runs[0]["starts"] for r in runs)
            if policy == "easy":
                rules, res = accasim_ebf_rules(jobs, CORES)
                out["easy_differences_explained"] = rules == best["starts"]
                delays = [rules[h] - r for h, r in res.items() if rules[h] > r]
                out["accasim_easy_heads_delayed"] = len(delays)
                out["accasim_easy_heads"] = len(res)
                out["accasim_easy_max_head_delay_s"] = max(delays, default=0.0)
                waits = [s - j.submit for j, s in zip(jobs, best["starts"]) if s is not None]
                out["accasim_easy_mean_wait_s"] = sum(waits) / len(waits)
                out["accasim_easy_max_wait_s"] = max(waits)
                summ = ours["easy"].summary()
                out["courselib_easy_mean_wait_s"] = summ["mean_wait_s"]
                out["courselib_easy_max_wait_s"] = summ["max_wait_s"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=f"the first {QUICK_JOBS} jobs only")
    ap.add_argument("--peer", help=argparse.SUPPRESS)
    ap.add_argument("--swf", help=argparse.SUPPRESS)
    ap.add_argument("--shape", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.peer:
        _peer_main(args.peer, args.swf, args.shape, args.out)
        return
    print(json.dumps(run(args.quick), indent=2))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
