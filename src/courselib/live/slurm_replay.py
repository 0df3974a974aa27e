"""Replay a workload on the real local Slurm, and compare what it did with courselib's model.

A replay submits every job of a :class:`~courselib.model.workload.Workload` with a real
``sbatch`` (nodes or tasks, GPUs, ``--time``, ``--constraint``, ``--exclusive``,
``--priority``), lets the real ``slurmctld`` schedule them, and records from ``squeue`` the
start order, start times and pending reasons. :func:`compare` runs courselib's ``slurm``
policy (:func:`courselib.sim.gang.simulate`) on exactly what was submitted and counts where
the two agree.

**Time scaling.** ``--time`` has a resolution of one minute (FACTS §3.4), and backfill plans
with time limits, so the limits keep their exact proportions: one ``--time`` minute stands for
``unit`` seconds of the workload, the greatest common divisor of the jobs' limits. The jobs
themselves only ``sleep`` — ``seconds_per_minute`` real seconds per ``unit`` of duration (and
of submit time) — so a replay takes seconds, and jobs end well before their limits. The model
is run on the workload *as submitted* (durations in real seconds, limits in ``--time`` minutes
× 60, submit times as measured), the very input the real scheduler saw.

**Determinism.** Jobs submitted at time 0 are queued while the partition is ``DOWN`` (reason
``PartitionDown``), in the model's priority order, then the partition is set ``UP``: the first
scheduling pass sees all of them at once, as the model's first cycle does. Later batches (jobs
with one submit time) go the same way, each only once the scheduler has looked at every earlier
job, so a submission never overtakes a decision the model makes before it. A job's pending
reason is read ``settle`` seconds after its submission (the main scheduler and one backfill
pass have run; ``bf_interval=1``) and compared with the model's reason right after its
submission cycle.
"""
from __future__ import annotations

import calendar
import math
import time
from dataclasses import asdict, dataclass, field, replace
from fractions import Fraction
from pathlib import Path

from courselib.errors import CourseError, InputError
from courselib.live.slurm import PARTITION, Cluster, ClusterShape
from courselib.model.workload import ClusterSpec, Job, Workload

#: Reasons a job shows before the scheduler has looked at it.
TRIVIAL_REASONS = {"None", "PartitionDown", "BeginTime", "(null)", ""}
#: Reasons that mean "this job can never start as submitted".
NEVER_REASONS = {"PartitionNodeLimit", "BadConstraints", "PartitionTimeLimit", "ReqNodeNotAvail"}
FINAL_STATES = {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY",
                "PREEMPTED", "BOOT_FAIL", "DEADLINE"}
MIN_SLEEP = 2.0  # s: the shortest job, so ~1 s of scheduler latency cannot reorder events
REASON_PATIENCE = 10.0  # s: how long to wait for the main scheduler's first look at a job
MIN_SUBMIT_GAP = 1.0
MAX_JOB_SLEEP = 30.0  # s: the longest job, when spreading submit times would need more  # s: between distinct submit times, for the same reason
MAX_MINUTES = 1440  # bf_window's default: every reservation must fall inside it


# ----------------------------------------------------------------------------- planning

@dataclass(frozen=True)
class Submission:
    """One job as it goes to ``sbatch``: the arguments and the scaled times."""
    name: str
    args: tuple[str, ...]
    time_minutes: int
    sleep: float
    submit_at: float
    priority: int | None


@dataclass(frozen=True)
class ReplayPlan:
    """What a replay submits, and the workload the model must be given to see the same."""
    workload: Workload
    as_submitted: Workload
    shape: ClusterShape
    unit: float  # workload seconds per --time minute
    seconds_per_minute: float  # real seconds of sleep per --time minute of duration
    submissions: tuple[Submission, ...]
    notes: tuple[str, ...] = ()

    def describe(self) -> str:
        return (f"1 --time minute = {_fmt_s(self.unit)} of the workload; jobs sleep "
                f"{self.seconds_per_minute:g} s per such minute "
                f"(x{self.unit / self.seconds_per_minute:g} faster than the workload)")


def _fmt_s(seconds: float) -> str:
    from courselib.units import format_duration
    return format_duration(seconds)


def shape_for(spec: ClusterSpec, base_port: int | None = None) -> ClusterShape:
    """The local cluster that emulates ``spec``: same nodes, GPUs and per-node features."""
    by_feature: dict[str, list[int]] = {}
    for node in spec.node_list():
        for f in sorted(node.features):
            by_feature.setdefault(f, []).append(node.index + 1)
    feats = []
    for name, ks in sorted(by_feature.items()):
        if len(ks) == spec.nodes:
            feats.append((name, None))
        elif ks == list(range(1, len(ks) + 1)):
            feats.append((name, len(ks)))
        else:
            feats.append((name, tuple(ks)))
    kw = {} if base_port is None else {"base_port": base_port}
    return ClusterShape(nodes=spec.nodes, gpus_per_node=spec.gpus_per_node, features=tuple(feats),
                        **kw)


def model_order(jobs) -> list[Job]:
    """Slurm's priority order as the model uses it: priority, then submit time, then listing."""
    indexed = list(enumerate(jobs))
    indexed.sort(key=lambda p: (-p[1].priority, p[1].submit, p[0]))
    return [j for _, j in indexed]


def plan_replay(workload: Workload, *, seconds_per_minute: float | None = None,
                file: str | None = None) -> ReplayPlan:
    """Scale ``workload`` for a real replay (see the module docstring) and build the sbatch lines."""
    jobs = workload.jobs
    notes = []
    limits = [Fraction(j.planned_runtime).limit_denominator(1000) for j in jobs]
    if any(lim <= 0 for lim in limits):
        raise InputError("every job needs a duration or time_limit above 0", file=file)
    unit = limits[0]
    for lim in limits[1:]:
        unit = Fraction(math.gcd(unit.numerator * lim.denominator, lim.numerator * unit.denominator),
                        unit.denominator * lim.denominator)
    minutes = [int(lim / unit) for lim in limits]
    if sum(minutes) > MAX_MINUTES:
        # Proportions cannot all be kept inside one bf_window: round to a coarser unit.
        unit = Fraction(math.ceil(sum(limits) / MAX_MINUTES))
        minutes = [max(1, round(lim / unit)) for lim in limits]
        notes.append(f"time limits rounded to whole multiples of {_fmt_s(float(unit))}")
    unit_f = float(unit)
    durations = [j.duration / unit_f for j in jobs]  # in --time minutes
    positive = [d for d in durations if d > 0]
    submits = sorted({j.submit / unit_f for j in jobs})
    gaps = [b - a for a, b in zip(submits, submits[1:]) if b > a]
    if seconds_per_minute is None:
        shortest = min(positive) if positive else 1.0
        longest = max(positive) if positive else 1.0
        seconds_per_minute = min(60.0, max(0.25, MIN_SLEEP / shortest))
        if gaps:
            spread = MIN_SUBMIT_GAP / min(gaps)
            if spread > seconds_per_minute and longest * spread <= MAX_JOB_SLEEP:
                seconds_per_minute = min(60.0, spread)
    if seconds_per_minute <= 0 or seconds_per_minute > 60:
        raise InputError(f"{seconds_per_minute:g} seconds per minute: choose more than 0 and at most 60",
                         field="--seconds-per-minute", hint="60 replays in real time")
    s = float(seconds_per_minute)
    if gaps and min(gaps) * s < MIN_SUBMIT_GAP:
        notes.append(f"submit times {_fmt_s(min(gaps) * unit_f)} apart are {min(gaps) * s:.2f} s "
                     "apart in the replay: those jobs reach the scheduler almost together")
    if positive and min(positive) * s < 1.0:
        notes.append(f"the shortest job sleeps {min(positive) * s:.2f} s: scheduler latency "
                     "(about 1 s) may reorder events; raise --seconds-per-minute")
    order = model_order(jobs)
    explicit = any(j.priority for j in jobs)
    prio = {j.name: 1_000_000 - 10 * k for k, j in enumerate(order)} if explicit else {}
    gpn = workload.cluster.gpus_per_node
    subs = []
    for j, tmin, d in zip(jobs, minutes, durations):
        args = ["-J", j.name, "-p", PARTITION, f"--time={tmin}", "--cpus-per-task=1"]
        if j.gpus_per_pod == gpn and gpn > 0:
            # a pod per whole node: the seed's `--nodes=N --gpus-per-node=8` shape
            args += [f"--nodes={j.pods}", "--ntasks-per-node=1", f"--gpus-per-node={gpn}"]
        else:
            args += [f"--ntasks={j.pods}"]
            if j.gpus_per_pod:
                args += [f"--gpus-per-task={j.gpus_per_pod}"]
        if j.constraint:
            args += [f"--constraint={j.constraint}"]
        if j.exclusive:
            args += ["--exclusive"]
        if explicit:
            args += [f"--priority={prio[j.name]}"]
        subs.append(Submission(j.name, tuple(args), tmin, round(d * s, 3),
                               round(j.submit / unit_f * s, 3), prio.get(j.name)))
    if any(j.memory_per_pod for j in jobs) or workload.cluster.memory_per_node:
        notes.append("memory is not replayed (the local Slurm counts CPUs and GPUs only)")
    if any(j.min_member != j.pods for j in jobs):
        notes.append("min_member < pods is not a Slurm notion: Slurm allocates every task")
    as_submitted = workload.replace_jobs(
        replace(j, duration=sub.sleep, submit=sub.submit_at, time_limit=sub.time_minutes * 60.0)
        for j, sub in zip(jobs, subs))
    return ReplayPlan(workload, as_submitted, shape_for(workload.cluster), unit_f, s,
                      tuple(subs), tuple(notes))


# ----------------------------------------------------------------------------- the run

@dataclass
class RealJob:
    """What the real Slurm did with one job."""
    name: str
    job_id: int | None = None
    submitted: float | None = None  # s after release
    rejected: str | None = None  # sbatch's error when Slurm refused the job outright
    start: float | None = None  # Slurm's StartTime, s after release (1 s resolution)
    end: float | None = None
    state: str = "PENDING"
    nodes: str = ""
    reason: str | None = None  # pending reason `settle` s after submission (None: running)
    reasons: list = field(default_factory=list)  # [(t, reason)] every change seen while pending


@dataclass
class ReplayResult:
    plan: ReplayPlan
    jobs: list[RealJob]
    release_epoch: float
    wall_seconds: float
    squeue_at_settle: str = ""  # the real squeue lines when reasons were read (evidence)

    def job(self, name: str) -> RealJob:
        return next(j for j in self.jobs if j.name == name)

    def as_submitted(self) -> Workload:
        """The workload as it really reached Slurm: the plan's scaled jobs, submitted when they were."""
        subs = {rj.name: rj.submitted for rj in self.jobs}
        return self.plan.as_submitted.replace_jobs(
            replace(j, submit=round(subs[j.name], 2) if subs.get(j.name) is not None else j.submit)
            for j in self.plan.as_submitted.jobs)

    def start_order(self) -> list[str]:
        started = [j for j in self.jobs if j.start is not None]
        return [j.name for j in sorted(started, key=lambda j: (j.start, j.job_id or 0))]


def _epoch(text: str) -> float | None:
    if not text or text in ("N/A", "Unknown", "None"):
        return None
    try:
        return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


def _squeue(cluster: Cluster) -> list[dict]:
    env_out = cluster.run("squeue", "-h", "-t", "all", "-p", PARTITION, "-o", "%i|%j|%T|%r|%S|%e|%N",
                          timeout=15)
    rows = []
    for line in env_out.splitlines():
        parts = line.split("|")
        if len(parts) == 7 and parts[0].isdigit():
            rows.append({"id": int(parts[0]), "name": parts[1], "state": parts[2], "reason": parts[3],
                         "start": _epoch(parts[4]), "end": _epoch(parts[5]), "nodes": parts[6]})
    return rows


def clear_jobs(cluster: Cluster, timeout: float = 30.0) -> None:
    """Cancel every job in the partition and wait until none is left running."""
    cluster.run("scancel", f"--partition={PARTITION}", check=False, timeout=15)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        live = [r for r in _squeue(cluster) if r["state"] not in FINAL_STATES]
        if not live:
            return
        time.sleep(0.2)
    raise CourseError("jobs of an earlier replay did not stop", hint="run `courselib slurm down`")


def run_replay(cluster: Cluster, plan: ReplayPlan, *, settle: float = 2.0, poll: float = 0.25,
               timeout: float | None = None, until_end: bool = False,
               say=lambda msg: None) -> ReplayResult:
    """Submit ``plan`` to the running ``cluster`` and watch until every job has started.

    With ``until_end``, watch until every job has also ended (else jobs still running when the
    last one starts are cancelled: their end changes nothing that is compared). Jobs that can
    never start (reason ``PartitionNodeLimit`` …) are cancelled once nothing else is running.
    The partition is left ``UP`` and empty, whatever happens.
    """
    if not cluster.shape.same_nodes(plan.shape):
        raise CourseError(f"the local Slurm is {cluster.shape.describe()}, the workload needs "
                          f"{plan.shape.describe()}",
                          hint=f"run `courselib slurm down` then `courselib slurm up "
                               f"{plan.shape.cli_args()}`")
    clear_jobs(cluster)
    jobdir = cluster.state_dir / "replay"
    jobdir.mkdir(exist_ok=True)
    script = jobdir / "job.sh"
    script.write_text("#!/bin/sh\n# a training job, scaled: it only sleeps its duration\n"
                      "exec sleep \"$1\"\n")
    script.chmod(0o755)
    horizon = sum(s.sleep for s in plan.submissions) + max(s.submit_at for s in plan.submissions)
    timeout = timeout if timeout is not None else 60.0 + 3 * horizon
    real = {s.name: RealJob(s.name) for s in plan.submissions}
    by_id: dict[int, RealJob] = {}
    order = {j.name: k for k, j in enumerate(model_order(plan.workload.jobs))}
    first = sorted([s for s in plan.submissions if s.submit_at == 0], key=lambda s: order[s.name])
    later = sorted([s for s in plan.submissions if s.submit_at > 0],
                   key=lambda s: (s.submit_at, order[s.name]))

    def submit(sub: Submission, now: float) -> None:
        out = cluster.run("sbatch", "--parsable", f"--output={jobdir}/%x-%j.out",
                          f"--chdir={jobdir}", *sub.args, str(script), f"{sub.sleep:g}",
                          check=False, timeout=15)
        rj = real[sub.name]
        rj.submitted = round(now, 2)
        text = out.strip().split(";")[0]
        if text.isdigit():
            rj.job_id = int(text)
            by_id[rj.job_id] = rj
        else:
            rj.rejected = _sbatch_error(cluster, sub, jobdir, script)
            rj.state = "REJECTED"
            say(f"{sub.name}: sbatch refused it: {rj.rejected}")

    settle_snapshots: list[str] = []
    try:
        cluster.run("scontrol", "update", f"partitionname={PARTITION}", "state=down")
        for sub in first:
            submit(sub, 0.0)
        say(f"submitted {len(first)} job(s) while the partition was DOWN; releasing")
        cluster.run("scontrol", "update", f"partitionname={PARTITION}", "state=up")
        release = time.time()
        t0 = time.monotonic()
        pending_reads = {rj.name: 0.0 + settle for rj in real.values() if rj.job_id is not None}
        quiet_since = None
        while True:
            now = time.monotonic() - t0
            if later and later[0].submit_at <= now and (
                    _scheduler_has_looked(by_id.values()) or now > later[0].submit_at + REASON_PATIENCE):
                # The next batch (same submit time) arrives together, as in the model: queued
                # while the partition is DOWN, then released in one step. It is sent only once
                # the scheduler has looked at every earlier job, so no earlier decision is
                # pre-empted by a submission that came "too soon" after it.
                at = later[0].submit_at
                batch = [later.pop(0)]
                while later and later[0].submit_at == at:
                    batch.append(later.pop(0))
                cluster.run("scontrol", "update", f"partitionname={PARTITION}", "state=down")
                for sub in batch:
                    submit(sub, now)
                    if real[sub.name].job_id is not None:
                        pending_reads[sub.name] = now + settle
                cluster.run("scontrol", "update", f"partitionname={PARTITION}", "state=up")
            rows = _squeue(cluster)
            lines = []
            for row in rows:
                rj = by_id.get(row["id"])
                if rj is None:
                    continue
                rj.state = row["state"]
                rj.nodes = row["nodes"] or rj.nodes
                if row["state"] == "PENDING":
                    if not rj.reasons or rj.reasons[-1][1] != row["reason"]:
                        rj.reasons.append((round(now, 2), row["reason"]))
                elif row["start"] is not None and rj.start is None:
                    rj.start = row["start"] - math.floor(release)
                if row["state"] in FINAL_STATES and row["end"] is not None:
                    rj.end = row["end"] - math.floor(release)
                lines.append(f"{row['id']:>5} {row['name']:<12} {row['state']:<10} "
                             f"{row['reason']:<20} {row['nodes']}")
            due = []
            for name, t in list(pending_reads.items()):
                rj = real[name]
                if t > now:
                    continue
                latest = rj.reasons[-1][1] if rj.reasons else None
                if rj.state == "PENDING" and latest in TRIVIAL_REASONS and \
                        now < t + REASON_PATIENCE:
                    continue  # the main scheduler has not looked at it yet: read it when it has
                rj.reason = None if rj.state != "PENDING" else latest
                del pending_reads[name]
                due.append(name)
            if due:
                settle_snapshots.append(f"# t={now:.1f}s after release (reasons read for "
                                        f"{', '.join(due)})\n" + "\n".join(lines))
            live = [rj for rj in by_id.values() if rj.state not in FINAL_STATES]
            if not until_end:  # every start is known: the jobs still running only sleep
                live = [rj for rj in live if rj.start is None]
            running = [rj for rj in live if rj.state != "PENDING"]
            stuck = [rj for rj in live if rj.state == "PENDING" and rj.reasons
                     and rj.reasons[-1][1] in NEVER_REASONS]
            if not later and not pending_reads and not running and len(stuck) == len(live):
                if not live:
                    break
                quiet_since = quiet_since if quiet_since is not None else now
                if now - quiet_since >= settle:
                    say(f"never startable here: {', '.join(rj.name for rj in stuck)}; cancelling")
                    break
            else:
                quiet_since = None
            if now > timeout:
                raise CourseError(f"the replay did not finish within {timeout:.0f} s",
                                  hint=f"see `squeue` with SLURM_CONF={cluster.conf}")
            time.sleep(poll)
        wall = time.monotonic() - t0
    finally:
        try:
            clear_jobs(cluster)
        finally:
            cluster.run("scontrol", "update", f"partitionname={PARTITION}", "state=up", check=False)
    jobs = [real[s.name] for s in plan.submissions]
    return ReplayResult(plan, jobs, release, round(wall, 2), "\n\n".join(settle_snapshots))


def _scheduler_has_looked(jobs) -> bool:
    """Every job submitted so far has started or carries a reason the scheduler gave it."""
    return all(rj.start is not None or rj.state != "PENDING"
               or (rj.reasons and rj.reasons[-1][1] not in TRIVIAL_REASONS) for rj in jobs)


def _sbatch_error(cluster: Cluster, sub: Submission, jobdir: Path, script: Path) -> str:
    """sbatch's own error line for a refused job (it is re-run with --test-only to read it)."""
    import subprocess
    res = subprocess.run(["sbatch", "--test-only", *sub.args, str(script), "1"], env=cluster.env(),
                         capture_output=True, text=True, timeout=15)
    lines = [ln for ln in (res.stderr + res.stdout).splitlines() if "error" in ln.lower()]
    msg = lines[-1] if lines else (res.stderr or res.stdout).strip()
    return msg.split("error:", 1)[-1].strip()


# ----------------------------------------------------------------------------- comparison

@dataclass
class JobComparison:
    name: str
    real_start: float | None
    model_start: float | None
    real_reason: str | None
    model_reason: str | None
    real_state: str
    started_agrees: bool
    reason_agrees: bool | None  # None: not compared (the model has no reason for it)


@dataclass
class Comparison:
    """Where the real Slurm and courselib's ``slurm`` policy agree, job by job."""
    workload: str
    jobs: list[JobComparison]
    real_order: list[str]
    model_order: list[str]
    order_pairs: int
    order_agree: int
    order_disagreements: list[tuple[str, str]]
    started_checks: int
    started_agree: int
    reason_checks: int
    reason_agree: int
    max_start_error: float | None  # s, over jobs both started
    as_written_order: list[str] = field(default_factory=list)

    @property
    def checks(self) -> int:
        return self.started_checks + self.order_pairs + self.reason_checks

    @property
    def agreed(self) -> int:
        return self.started_agree + self.order_agree + self.reason_agree

    @property
    def agreement(self) -> float:
        return self.agreed / self.checks if self.checks else 1.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["checks"], d["agreed"], d["agreement"] = self.checks, self.agreed, self.agreement
        return d


def model_run(workload: Workload):
    """courselib's ``slurm`` policy on ``workload`` (the simulator's :class:`Result`)."""
    from courselib.sim.gang import simulate
    return simulate(workload, "slurm")


def model_reasons_at_submit(workload: Workload) -> dict[str, str | None]:
    """The model's pending reason of each job right after the scheduling cycle at its submit time.

    Obtained by running the simulator with ``horizon`` = that submit time (events at the
    horizon are processed, so the submission's cycle has run).
    """
    from courselib.sim.gang import simulate
    out: dict[str, str | None] = {}
    for t in sorted({j.submit for j in workload.jobs}):
        res = simulate(workload, "slurm", horizon=t)
        for j in workload.jobs:
            if j.submit == t:
                jr = res.job(j.name)
                out[j.name] = None if jr.start is not None else jr.pending_reason
    return out


def compare(result: ReplayResult, *, name: str = "", tolerance: float = 1.5) -> Comparison:
    """Compare a real replay with the model run on the same (as-submitted) workload.

    Checks: (1) each job started in both or in neither; (2) for every pair of jobs the model
    starts at clearly different times (more than ``tolerance`` s apart), the real Slurm started
    them in the same order; (3) each job's pending reason right after its submission, where
    the model gives one. A job sbatch refused counts as pending with no reason.
    """
    plan = result.plan
    submitted = result.as_submitted()
    model = model_run(submitted)
    reasons = model_reasons_at_submit(submitted)
    rows = []
    for sub in plan.submissions:
        rj = result.job(sub.name)
        mj = model.job(sub.name)
        real_reason = rj.reason if rj.rejected is None else f"rejected: {rj.rejected}"
        m_reason = reasons.get(sub.name)
        started_ok = (rj.start is not None) == (mj.start is not None)
        reason_ok = None if m_reason is None and real_reason is None else (m_reason == real_reason)
        rows.append(JobComparison(sub.name, rj.start, mj.start, real_reason, m_reason, rj.state,
                                  started_ok, reason_ok))
    both = [r for r in rows if r.real_start is not None and r.model_start is not None]
    pairs = agree = 0
    bad = []
    for a in both:
        for b in both:
            if a.model_start + tolerance < b.model_start:
                pairs += 1
                if a.real_start < b.real_start:
                    agree += 1
                else:
                    bad.append((a.name, b.name))
    errs = [abs(r.real_start - r.model_start) for r in both]
    m_order = [j.name for j in sorted((j for j in model.jobs if j.start is not None),
                                      key=lambda j: j.start)]
    written = model_run(plan.workload)
    w_order = [j.name for j in sorted((j for j in written.jobs if j.start is not None),
                                      key=lambda j: j.start)]
    reason_rows = [r for r in rows if r.reason_agrees is not None]
    return Comparison(
        workload=name, jobs=rows, real_order=result.start_order(), model_order=m_order,
        order_pairs=pairs, order_agree=agree, order_disagreements=bad,
        started_checks=len(rows), started_agree=sum(r.started_agrees for r in rows),
        reason_checks=len(reason_rows), reason_agree=sum(bool(r.reason_agrees) for r in reason_rows),
        max_start_error=round(max(errs), 2) if errs else None, as_written_order=w_order)


def format_comparison(c: Comparison) -> str:
    """The comparison as a table a learner can read, ending in the agreement figure."""
    def t(x):
        return "-" if x is None else f"{x:.0f}s" if float(x).is_integer() else f"{x:.1f}s"
    lines = [f"{'job':<12} {'real start':>10} {'model start':>11}  {'real reason':<20} "
             f"{'model reason':<20} agree"]
    for r in c.jobs:
        ok = r.started_agrees and r.reason_agrees is not False
        lines.append(f"{r.name:<12} {t(r.real_start):>10} {t(r.model_start):>11}  "
                     f"{(r.real_reason or '-')[:20]:<20} {(r.model_reason or '-'):<20} "
                     f"{'yes' if ok else 'NO'}")
    lines.append(f"start order  real: {' '.join(c.real_order) or '-'}")
    lines.append(f"             model: {' '.join(c.model_order) or '-'}")
    if c.order_disagreements:
        lines.append("  out of order: " + ", ".join(f"{a} before {b}" for a, b in c.order_disagreements))
    lines.append(f"agreement: {c.agreed}/{c.checks} checks = {100 * c.agreement:.0f}% "
                 f"(started {c.started_agree}/{c.started_checks}, order {c.order_agree}/{c.order_pairs}, "
                 f"reasons {c.reason_agree}/{c.reason_checks}); largest start-time gap "
                 f"{t(c.max_start_error)}")
    return "\n".join(lines)


def replay_to_dict(result: ReplayResult) -> dict:
    plan = result.plan
    return {
        "shape": plan.shape.describe(),
        "scaling": plan.describe(),
        "unit_seconds": plan.unit,
        "seconds_per_minute": plan.seconds_per_minute,
        "notes": list(plan.notes),
        "submissions": [{"name": s.name, "sbatch": "sbatch " + " ".join(s.args),
                         "sleep": s.sleep, "submit_at": s.submit_at} for s in plan.submissions],
        "jobs": [asdict(j) for j in result.jobs],
        "start_order": result.start_order(),
        "wall_seconds": result.wall_seconds,
        "squeue_at_settle": result.squeue_at_settle,
    }


def format_replay(result: ReplayResult) -> str:
    plan = result.plan
    lines = [f"cluster: {plan.shape.describe()}", f"scaling: {plan.describe()}"]
    lines += [f"note: {n}" for n in plan.notes]
    for s in plan.submissions:
        rj = result.job(s.name)
        lines.append(f"  sbatch {' '.join(s.args)}  # sleeps {s.sleep:g}s, submitted at {s.submit_at:g}s")
    lines.append(f"{'job':<12} {'id':>5} {'submitted':>9} {'start':>6} {'end':>6} {'state':<10} "
                 f"{'reason after submit':<22} nodes")
    for rj in result.jobs:
        def t(x):
            return "-" if x is None else f"{x:g}"
        lines.append(f"{rj.name:<12} {rj.job_id or '-':>5} {t(rj.submitted):>9} {t(rj.start):>6} "
                     f"{t(rj.end):>6} {rj.state:<10} {(rj.rejected and 'rejected') or rj.reason or '-':<22} "
                     f"{rj.nodes}")
    lines.append(f"start order: {' '.join(result.start_order())}   ({result.wall_seconds:g} s)")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- recorded runs

RECORDED_BY = "courselib slurm replay --record"


def slurm_version(cluster: Cluster | None = None) -> str:
    import subprocess
    try:
        out = subprocess.run(["slurmctld", "-V"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.strip() or "unknown"


def record(result: ReplayResult, path, *, workload_text: str, workload_file: str) -> Path:
    """Write a replay as JSON (the chapter's recorded run). Only overwrites files it wrote itself."""
    import json
    import platform

    from courselib.io.policy import read_text

    path = Path(path)
    if path.exists():
        try:
            ours = json.loads(read_text(path, "record")).get("recorded_by") == RECORDED_BY
        except (ValueError, AttributeError, RecursionError, CourseError):
            ours = False
        if not ours:
            raise CourseError(f"{path} exists and was not written by a replay; not overwriting it",
                              hint="choose another file")
    data = {
        "recorded_by": RECORDED_BY,
        "recorded_on": f"{platform.system()} {platform.release()}, {slurm_version()}",
        "recorded_at": time.strftime("%Y-%m-%d", time.gmtime(result.release_epoch)),
        "workload_file": workload_file,
        "workload_text": workload_text,
        "seconds_per_minute": result.plan.seconds_per_minute,
        "replay": replay_to_dict(result),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path


@dataclass
class Recorded:
    """A replay read back from JSON, with where and when it was recorded."""
    result: ReplayResult
    recorded_on: str
    recorded_at: str
    workload_file: str


def load_recorded(name_or_path) -> Recorded:
    """A recorded replay: ``seed-512`` (shipped in ``courselib/data/recorded/slurm-seed-512.json``)
    or a path. The plan is rebuilt from the workload text stored in the file."""
    import json
    from importlib import resources

    from courselib.io.workload import parse_workload
    from courselib.io.yamlfile import load_all_text

    from courselib.io.policy import read_text

    p = Path(str(name_or_path))
    if p.suffix == ".json":
        text = read_text(p, "record")
    else:
        text = resources.files("courselib.data").joinpath(f"recorded/slurm-{name_or_path}.json").read_text()
    data = json.loads(text)
    workload = parse_workload(load_all_text(data["workload_text"], file=data["workload_file"])[0],
                              file=data["workload_file"])
    plan = plan_replay(workload, seconds_per_minute=data["seconds_per_minute"])
    rep = data["replay"]
    jobs = [RealJob(**{**j, "reasons": [tuple(r) for r in j["reasons"]]}) for j in rep["jobs"]]
    result = ReplayResult(plan, jobs, 0.0, rep["wall_seconds"], rep.get("squeue_at_settle", ""))
    return Recorded(result, data["recorded_on"], data["recorded_at"], data["workload_file"])


def live_or_recorded(name: str, workload_path) -> tuple[ReplayResult, str | None]:
    """Replay ``workload_path`` on the local Slurm if one of the right shape is up; else the
    recorded run ``name``. Returns the result and, for a recorded one, the label to show."""
    from courselib.io.workload import load_workload
    from courselib.live import slurm

    plan = plan_replay(load_workload(workload_path))
    why = slurm.unavailable_reason()
    if why is None:
        cluster = slurm.load_cluster()
        if cluster is not None and cluster.procs and all(slurm.is_ours(p) for p in cluster.procs) \
                and cluster.shape.same_nodes(plan.shape):
            return run_replay(cluster, plan), None
        why = (f"no local Slurm of this shape is up (`courselib slurm up {plan.shape.cli_args()}` "
               "starts one)")
    rec = load_recorded(name)
    return rec.result, (f"RECORDED run ({rec.recorded_on}, {rec.recorded_at}), shown because "
                        f"{why}")


def slurm_port_base() -> int:
    """The first port a local cluster uses (slurmctld; node K listens on this + K)."""
    from courselib.live.slurm import BASE_PORT
    return BASE_PORT
