"""Read cluster traces: the Standard Workload Format and the GPU-trace CSVs researchers publish.

* **SWF** (Feitelson's Parallel Workloads Archive): ``;`` header comments (``; MaxNodes: 256``),
  then 18 whitespace-separated fields per job (any whitespace, CRLF allowed, ``-1`` = unknown):
  job, submit, wait, run time, allocated processors, avg CPU, used memory, requested processors,
  requested time, requested memory, status, user, group, executable, queue, partition,
  preceding job, think time.
* GPU traces, recognised by their header: Tiresias (``job_id,num_gpu,submit_time,...``),
  Alibaba PAI 2023 pods (``gpu_milli``), the ubccr Slurm simulator (``sim_job_id``), Gavel's
  legacy 7-field tab-separated ``.trace``; and the non-job tables next to them (cluster specs,
  node lists, runtimes only, 10-minute aggregates, schema headers) are recognised and described
  rather than mistaken for jobs.

``read_trace(path)`` returns a :class:`TraceReading`; ``trace_to_jobs`` (in this module) turns
its jobs into the gang scheduler's ``courselib.model.workload.Job`` objects.
"""
from __future__ import annotations

import csv
import gzip
import io
import math
import tarfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from courselib.errors import InputError
from courselib.io.policy import FILE_LIMITS, read_bytes, read_text
from courselib.model.workload import Job

#: The largest machine (processors or nodes) a trace header may give; the largest machine in the
#: Parallel Workloads Archive has about a million cores.
MAX_MACHINE = 10 ** 9

SWF_FIELDS = ("job", "submit", "wait", "run_time", "alloc_procs", "avg_cpu", "used_mem",
              "req_procs", "req_time", "req_mem", "status", "user", "group", "executable",
              "queue", "partition", "preceding_job", "think_time")


@dataclass(frozen=True)
class TraceJob:
    """One job of a trace, in seconds from the trace's start; ``None`` where the trace is silent."""

    id: str
    submit: float
    duration: float | None
    gpus: float | None            # may be fractional (GPU sharing: gpu_milli / 1000)
    procs: int | None             # SWF processors / Slurm tasks
    requested_time: float | None  # seconds
    status: str | None = None
    queue: str | None = None
    user: str | None = None
    line: int | None = None


@dataclass(frozen=True)
class TraceReading:
    """A trace file, read: its format, what kind of table it is, and its jobs (if any)."""

    file: str | None
    format: str          # "swf", "tiresias", "alibaba-2023-pods", "slurm-sim", "gavel-legacy", ...
    kind: str            # "jobs", "cluster", "durations", "aggregate", "schema"
    jobs: tuple[TraceJob, ...]
    header: tuple[tuple[str, str], ...] = ()
    columns: tuple[str, ...] = ()
    rows: int = 0
    cluster: tuple[tuple[str, float], ...] = ()
    notes: tuple[str, ...] = ()
    skipped: tuple[tuple[int, str], ...] = ()

    def summary(self) -> dict:
        """What ``courselib trace load`` prints: counts, span, sizes, GPU-hours."""
        out: dict = {"file": self.file, "format": self.format, "kind": self.kind,
                     "rows": self.rows, "jobs": len(self.jobs)}
        if self.header:
            out["header"] = dict(self.header)
        if self.columns:
            out["columns"] = list(self.columns)
        if self.cluster:
            out["cluster"] = dict(self.cluster)
        if self.jobs:
            submits = [j.submit for j in self.jobs]
            durs = [j.duration for j in self.jobs if j.duration is not None]
            gpus = [j.gpus for j in self.jobs if j.gpus is not None]
            procs = [j.procs for j in self.jobs if j.procs is not None]
            out["span_s"] = max(submits) - min(submits)
            out["duration_s"] = _stats(durs)
            if gpus:
                out["gpus"] = _stats(gpus)
                out["multi_gpu_jobs"] = sum(1 for g in gpus if g > 1)
                gh = sum(j.gpus * j.duration for j in self.jobs
                         if j.gpus is not None and j.duration is not None) / 3600
                out["gpu_hours"] = round(gh, 3)
            if procs:
                out["procs"] = _stats(procs)
        if self.notes:
            out["notes"] = list(self.notes)
        if self.skipped:
            out["skipped"] = [{"line": ln, "reason": r} for ln, r in self.skipped[:10]]
            out["skipped_total"] = len(self.skipped)
        return out


def _stats(xs) -> dict | None:
    if not xs:
        return None
    s = sorted(xs)
    n = len(s)
    return {"n": n, "min": s[0], "median": s[n // 2], "max": s[-1],
            "mean": round(sum(s) / n, 3)}


def _num(text: str, *, file, line, fld) -> float:
    try:
        v = float(text)
    except ValueError:
        raise InputError(f"{text!r} is not a number", file=file, line=line, field=fld) from None
    if not math.isfinite(v):
        raise InputError(f"{text!r} is not a finite number", file=file, line=line, field=fld)
    return v


# ----------------------------------------------------------------------------------------------

def parse_swf(text: str, *, file: str | None = None) -> TraceReading:
    """The Standard Workload Format: ``;`` header, 18 fields per line, ``-1`` unknown."""
    header: list[tuple[str, str]] = []
    jobs: list[TraceJob] = []
    skipped: list[tuple[int, str]] = []
    rows = 0
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith(";"):
            key, colon, value = line[1:].partition(":")
            if colon and key.strip() and " " not in key.strip():
                header.append((key.strip(), value.strip()))
            continue
        rows += 1
        parts = line.split()
        if len(parts) < 18:
            if len(parts) >= 5:
                parts = parts + ["-1"] * (18 - len(parts))
                skipped.append((n, f"only {len(line.split())} of 18 fields; the rest read as -1"))
            else:
                raise InputError(f"an SWF record has 18 fields, this line has {len(parts)}",
                                 file=file, line=n, hint="check the separator is whitespace")
        try:                                   # fast path; the located error below if not
            vals = list(map(float, parts[:18]))
            ok = all(map(math.isfinite, vals))
        except ValueError:
            ok = False
        if not ok:
            vals = [_num(p, file=file, line=n, fld=SWF_FIELDS[i] if i < 18 else "extra")
                    for i, p in enumerate(parts[:18])]
        run = vals[3]
        alloc = vals[4] if vals[4] >= 0 else vals[7]
        jobs.append(TraceJob(
            id=parts[0], submit=vals[1], duration=run if run >= 0 else None, gpus=None,
            procs=int(alloc) if alloc >= 0 else None,
            requested_time=vals[8] if vals[8] >= 0 else None,
            status=str(int(vals[10])) if vals[10] >= 0 else None,
            queue=str(int(vals[14])) if vals[14] >= 0 else None,
            user=str(int(vals[11])) if vals[11] >= 0 else None, line=n))
    cluster = []
    notes = [] if header else ["no ';' header: machine size unknown"]
    for key in ("MaxNodes", "MaxProcs"):
        v = dict(header).get(key)
        if v:
            try:
                size = float(v.split()[0])
            except (ValueError, IndexError):
                size = math.nan
            if math.isfinite(size) and size.is_integer() and 1 <= size <= MAX_MACHINE:
                cluster.append((key, size))
            else:
                notes.append(f"header {key}: {v[:40]!r} is not a machine size (a whole number from 1 to "
                             f"{MAX_MACHINE:,}); ignored")
    return TraceReading(file, "swf", "jobs", tuple(jobs), tuple(header), SWF_FIELDS, rows,
                        tuple(cluster), tuple(notes), tuple(skipped))


def _csv_rows(text: str, delimiter: str = ",", file: str | None = None):
    reader = csv.reader(io.StringIO(text.replace("\r\n", "\n")), delimiter=delimiter)
    out = []
    try:
        for row in reader:
            if row and any(c.strip() for c in row):
                out.append((reader.line_num, [c.strip() for c in row]))
    except csv.Error as err:
        raise InputError(f"not valid CSV: {err}", file=file, line=reader.line_num) from None
    return out


def _opt_num(text: str, *, file, line, fld) -> float | None:
    if text in ("", "NA", "NaN", "nan", "None", "-1"):
        return None
    return _num(text, file=file, line=line, fld=fld)


def parse_csv_trace(text: str, *, file: str | None = None) -> TraceReading:
    """A CSV trace, recognised by its header (see the module docstring)."""
    rows = _csv_rows(text, file=file)
    if not rows:
        raise InputError("the file is empty", file=file)
    first_line, head = rows[0]
    cols = tuple(head)
    body = rows[1:]
    s = set(cols)
    jobs: list[TraceJob] = []
    if not body:
        return TraceReading(file, "schema", "schema", (), columns=cols, rows=0,
                            notes=("a header (column names) only; the data file is separate",))

    def col(row, name):  # an optional column the file lacks reads as empty
        i = cols.index(name) if name in s else len(row)
        return row[i] if i < len(row) else ""

    def check(n, row):
        if len(row) != len(cols):
            raise InputError(f"{len(row)} columns where the header has {len(cols)}",
                             file=file, line=n, hint="a field with a comma must be quoted")

    if {"job_id", "num_gpu", "submit_time", "duration"} <= s:
        for n, row in body:
            check(n, row)
            jobs.append(TraceJob(col(row, "job_id"),
                                 _num(col(row, "submit_time"), file=file, line=n, fld="submit_time"),
                                 _num(col(row, "duration"), file=file, line=n, fld="duration"),
                                 _num(col(row, "num_gpu"), file=file, line=n, fld="num_gpu"),
                                 None, None, line=n))
        return TraceReading(file, "tiresias", "jobs", tuple(jobs), columns=cols, rows=len(body),
                            notes=("duration is seconds of run time on the requested GPUs",))
    if {"name", "num_gpu", "gpu_milli", "creation_time", "deletion_time"} <= s:
        shared = 0
        for n, row in body:
            check(n, row)
            g = _num(col(row, "num_gpu"), file=file, line=n, fld="num_gpu")
            milli = _opt_num(col(row, "gpu_milli"), file=file, line=n, fld="gpu_milli")
            if g == 1 and milli is not None and milli < 1000:
                g = milli / 1000
                shared += 1
            start = _num(col(row, "creation_time"), file=file, line=n, fld="creation_time")
            end = _opt_num(col(row, "deletion_time"), file=file, line=n, fld="deletion_time")
            jobs.append(TraceJob(col(row, "name"), start,
                                 None if end is None else max(0.0, end - start), g, None, None,
                                 status=col(row, "pod_phase") or None, queue=col(row, "qos") or None,
                                 line=n))
        return TraceReading(file, "alibaba-2023-pods", "jobs", tuple(jobs), columns=cols,
                            rows=len(body),
                            notes=(f"{shared} pods share a GPU (gpu_milli < 1000): gpus is a fraction",
                                   "one row per pod: no gang (job) grouping in this table"))
    if {"sim_job_id", "sim_submit_ts", "sim_duration", "sim_tasks"} <= s:
        t0 = None
        for n, row in body:
            check(n, row)
            ts = _num(col(row, "sim_submit_ts"), file=file, line=n, fld="sim_submit_ts")
            t0 = ts if t0 is None else min(t0, ts)
        for n, row in body:
            ts = _num(col(row, "sim_submit_ts"), file=file, line=n, fld="sim_submit_ts")
            gres = col(row, "sim_gres") if "sim_gres" in s else ""
            gpus = None
            if gres.startswith("gpu"):
                parts = gres.split(":")
                if len(parts) > 1 and not parts[-1].isdigit():
                    raise InputError(f"sim_gres {gres!r}: the GPU count is not a whole number",
                                     file=file, line=n, field="sim_gres", hint="e.g. gpu:2")
                gpus = float(parts[-1]) if len(parts) > 1 else 1.0
            wcl = _opt_num(col(row, "sim_wclimit"), file=file, line=n, fld="sim_wclimit")
            jobs.append(TraceJob(col(row, "sim_job_id"), ts - t0,
                                 _num(col(row, "sim_duration"), file=file, line=n, fld="sim_duration"),
                                 gpus, int(_num(col(row, "sim_tasks"), file=file, line=n, fld="sim_tasks")),
                                 None if wcl is None else wcl * 60,
                                 queue=col(row, "sim_partition") or None,
                                 user=col(row, "sim_username") or None, line=n))
        return TraceReading(file, "slurm-sim", "jobs", tuple(jobs), columns=cols, rows=len(body),
                            notes=("sim_wclimit is minutes, sim_duration seconds",))
    cluster_keys = {"num_node_p_switch", "num_gpu_p_node"}
    if cluster_keys <= s and body:
        n, row = body[0]
        check(n, row)
        values = tuple((c, _num(v, file=file, line=n, fld=c)) for c, v in zip(cols, row))
        d = dict(values)
        nodes = d.get("num_switch", 1) * d["num_node_p_switch"]
        return TraceReading(file, "tiresias-cluster", "cluster", (), columns=cols, rows=len(body),
                            cluster=values + (("nodes", nodes),
                                              ("gpus", nodes * d["num_gpu_p_node"])))
    if {"sn", "gpu", "model"} <= s or {"machine", "cap_gpu"} <= s:
        gcol = "gpu" if "gpu" in s else "cap_gpu"
        total = 0.0
        for n, row in body:
            check(n, row)
            total += _opt_num(col(row, gcol), file=file, line=n, fld=gcol) or 0
        return TraceReading(file, "node-list", "cluster", (), columns=cols, rows=len(body),
                            cluster=(("nodes", float(len(body))), ("gpus", total)))
    if cols == ("runtime",):
        for n, row in body:
            _num(row[0], file=file, line=n, fld="runtime")
        return TraceReading(file, "runtimes", "durations", (), columns=cols, rows=len(body),
                            notes=("run times only (seconds): no submit times or sizes, so no "
                                   "workload for the scheduler",))
    if "time" in s and any(c.startswith("submit_") for c in cols):
        return TraceReading(file, "aggregate", "aggregate", (), columns=cols, rows=len(body),
                            notes=("counts per time bucket, not individual jobs",))
    if len(cols) == 2 and cols[0] == "" and body:
        total = sum(_num(r[1], file=file, line=n, fld=cols[1]) for n, r in body if len(r) > 1)
        return TraceReading(file, "vc-config", "cluster", (), columns=cols, rows=len(body),
                            cluster=(("virtual_clusters", float(len(body))), ("nodes", total)))
    raise InputError("unrecognised CSV trace: columns " + ", ".join(cols[:8]), file=file,
                     line=first_line,
                     hint="supported: SWF, Tiresias, Alibaba 2023 pods, Slurm-simulator, Gavel")


def parse_gavel(text: str, *, file: str | None = None) -> TraceReading:
    """Gavel's legacy 7-field tab-separated trace: job_type, command, num_steps_arg,
    needs_data_dir, total_steps, arrival_time, scale_factor (= GPUs)."""
    jobs = []
    rows = 0
    for n, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        rows += 1
        parts = raw.rstrip("\r").split("\t")
        if len(parts) not in (7, 10):
            raise InputError(f"a Gavel trace line has 7 (legacy) or 10 tab-separated fields, "
                             f"this one has {len(parts)}", file=file, line=n)
        arrival = _num(parts[5], file=file, line=n, fld="arrival_time")
        scale = _num(parts[6], file=file, line=n, fld="scale_factor")
        jobs.append(TraceJob(str(rows - 1), arrival, None, scale, None, None,
                             queue=parts[0], line=n))
    return TraceReading(file, "gavel-legacy", "jobs", tuple(jobs), rows=rows,
                        columns=("job_type", "command", "num_steps_arg", "needs_data_dir",
                                 "total_steps", "arrival_time", "scale_factor"),
                        notes=("durations are given as training steps, not seconds",))


def parse_trace_text(text: str, *, file: str | None = None, name: str = "") -> TraceReading:
    """Pick the reader by name and content."""
    if "\x00" in text:
        raise InputError("this is a binary file, not a trace", file=file, line=1)
    lower = name.lower()
    stripped = text.lstrip()
    if lower.endswith(".swf") or stripped.startswith(";"):
        return parse_swf(text, file=file)
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    if lower.endswith(".trace") or first.count("\t") >= 6:
        return parse_gavel(text, file=file)
    if "," in first:
        return parse_csv_trace(text, file=file)
    if first and all(_isnum(p) for p in first.split()) and len(first.split()) >= 5:
        return parse_swf(text, file=file)
    if first.strip() and "," not in first and len(text.splitlines()) > 1:
        return parse_csv_trace(text, file=file)
    raise InputError("not a trace this course reads", file=file, line=1,
                     hint="supported: SWF (.swf), CSV GPU traces, Gavel .trace")


def _isnum(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


def read_trace(path) -> TraceReading:
    """Read the trace at ``path``; a ``.tar.gz`` holding one CSV is read in memory."""
    p = Path(path)
    name = p.name
    if name.endswith((".tar.gz", ".tgz")):
        cap = FILE_LIMITS["trace"]
        packed = read_bytes(path, "trace")
        try:
            # Unpacked in memory with the same cap: a small archive can expand a thousandfold.
            with gzip.GzipFile(fileobj=io.BytesIO(packed)) as gz:
                raw = gz.read(cap.value + 1)
            if len(raw) > cap.value:
                raise InputError(f"unpacks to more than {cap.show(cap.value)}, more than courselib reads "
                                 f"of {cap.what}", file=str(path), hint=cap.hint())
            with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tar:
                members = [m for m in tar.getmembers() if m.isfile()]
                if len(members) != 1:
                    raise InputError(f"expected one file in the archive, found {len(members)}",
                                     file=str(path))
                data = tar.extractfile(members[0]).read()
        except (tarfile.TarError, OSError, EOFError, zlib.error) as err:
            raise InputError(f"cannot read the archive: {err}", file=str(path)) from None
        text = data.decode("utf-8", errors="replace")
        inner = f"{path}!{members[0].name}"
        # headerless PAI machine table: name the columns from its published schema
        first = text.splitlines()[0] if text else ""
        if members[0].name.endswith("pai_machine_spec.csv") and not first.startswith("machine,"):
            text = "machine,gpu_type,cap_cpu,cap_mem,cap_gpu\n" + text
        return parse_trace_text(text, file=inner, name=members[0].name)
    text = read_text(path, "trace")
    return parse_trace_text(text, file=str(path), name=name)


# ----------------------------------------------------------------------------------------------
# to the gang scheduler's model

def split_gang(gpus: int, gpus_per_node: int) -> tuple[int, int]:
    """``(pods, gpus_per_pod)`` for a job of ``gpus`` GPUs on nodes of ``gpus_per_node``:
    one pod if it fits a node, else the fewest equal pods that each fit a node."""
    if gpus <= gpus_per_node:
        return 1, gpus
    for per in range(gpus_per_node, 0, -1):
        if gpus % per == 0:
            return gpus // per, per
    return gpus, 1  # pragma: no cover - per == 1 always divides


def trace_to_jobs(reading: TraceReading, *, gpus_per_node: int = 8, procs_per_gpu: int = 1,
                  limit: int | None = None):
    """The trace's jobs as ``courselib.model.workload.Job`` s (submit times start at 0).

    GPU traces keep their GPU counts (a shared fraction such as ``gpu_milli`` 460 rounds up to one
    GPU); SWF and Slurm-simulator traces count ``procs_per_gpu`` processors as one GPU. A job needs
    a run time to be simulated: jobs without one (Gavel's step counts) are left out, as are
    jobs asking for nothing.
    """
    if reading.kind != "jobs":
        raise InputError(f"this {reading.format} table has no jobs ({reading.kind})", file=reading.file)
    if gpus_per_node < 1 or procs_per_gpu < 1:
        raise InputError("gpus_per_node and procs_per_gpu must be at least 1", file=reading.file)
    usable = [j for j in reading.jobs if j.duration is not None]
    if not usable:
        raise InputError("no job in this trace has a run time in seconds", file=reading.file,
                         hint="Gavel traces give training steps; convert them with a throughput first")
    t0 = min(j.submit for j in usable)
    out = []
    seen: set[str] = set()
    for j in usable:
        if j.gpus is not None:
            gpus = math.ceil(j.gpus) if j.gpus > 0 else 0
        elif j.procs is not None:
            gpus = math.ceil(j.procs / procs_per_gpu)
        else:
            continue
        if gpus < 1:
            continue
        pods, per = split_gang(gpus, gpus_per_node)
        name = f"job{j.id}" if j.id.isdigit() else j.id
        if name in seen:
            name = f"job{j.id}@{j.line}"
        seen.add(name)
        out.append(Job(name=name, pods=pods, gpus_per_pod=per, submit=j.submit - t0,
                       duration=j.duration, time_limit=j.requested_time or None,
                       queue=j.queue or "default"))
        if limit is not None and len(out) >= limit:
            break
    return tuple(out)
