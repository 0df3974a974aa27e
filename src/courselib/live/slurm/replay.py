"""Run a Slurm replay: submit the plan to the real local Slurm and record what it did.

A replay submits every job of a :class:`~courselib.live.slurm.plan.ReplayPlan` with a real
``sbatch`` (nodes or tasks, GPUs, ``--time``, ``--constraint``, ``--exclusive``,
``--priority``), lets the real ``slurmctld`` schedule them, and records from ``squeue`` the
start order, start times and pending reasons (:mod:`courselib.live.slurm.result` compares them
with the model).

**Determinism.** Jobs submitted at time 0 are queued while the partition is ``DOWN`` (reason
``PartitionDown``), in the model's priority order, then the partition is set ``UP``: the first
scheduling pass sees all of them at once, as the model's first cycle does. Later batches (jobs
with one submit time) go the same way, each only once the scheduler has looked at every earlier
job, so a submission never overtakes a decision the model makes before it. A job's pending
reason is read ``settle`` seconds after its submission (the main scheduler and one backfill
pass have run; ``bf_interval=1``), with the states squeue showed just before and when that
reason first appeared (:attr:`RealJob.reason_state`): :func:`courselib.live.slurm.result.compare` asks the model for its
reason in that state.
"""
from __future__ import annotations

import calendar
import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from courselib.errors import CourseError
from courselib.live.replays import JobsResult
from courselib.live.slurm.cluster import PARTITION, Cluster, node_states
from courselib.live.slurm.plan import ReplayPlan, Submission, model_order
from courselib.model.workload import Workload

#: Reasons a job shows before the scheduler has looked at it.
TRIVIAL_REASONS = {"None", "PartitionDown", "BeginTime", "(null)", ""}
#: Reasons that mean "this job can never start as submitted".
NEVER_REASONS = {"PartitionNodeLimit", "BadConstraints", "PartitionTimeLimit", "ReqNodeNotAvail"}
FINAL_STATES = {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY",
                "PREEMPTED", "BOOT_FAIL", "DEADLINE"}
REASON_PATIENCE = 10.0  # s: how long to wait for the main scheduler's first look at a job


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
    #: every job's [state, nodes] in the poll before and in the poll that first showed ``reason``:
    #: the scheduler pass that gave it ran between the two; None in replays recorded before
    reason_state: list | None = None
    #: the same two polls around the first reason the scheduler gave (not one of TRIVIAL_REASONS):
    #: for a job that started before its reason was read, the verdict compared is that one
    verdict_state: list | None = None

    @property
    def verdict(self) -> str | None:
        """The reason Slurm gave this job while it waited: the one read ``settle`` s after its
        submission; for a job that started before that read, the first reason squeue showed for
        it that is not one of :data:`TRIVIAL_REASONS` (None: it showed none)."""
        if self.reason is not None:
            return self.reason
        return next((r for _, r in self.reasons if r not in TRIVIAL_REASONS), None)


@dataclass
class ReplayResult(JobsResult):
    plan: ReplayPlan
    jobs: list[RealJob]
    release_epoch: float
    wall_seconds: float
    squeue_at_settle: str = ""  # the real squeue lines when reasons were read (evidence)

    def as_submitted(self) -> Workload:
        """The workload as it really reached Slurm: the plan's scaled jobs, submitted when they were."""
        subs = {rj.name: rj.submitted for rj in self.jobs}
        return self.plan.as_submitted.replace_jobs(
            replace(j, submit=round(subs[j.name], 2) if subs.get(j.name) is not None else j.submit)
            for j in self.plan.as_submitted.jobs)


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


#: the states (sinfo's %T) of a node free for the next replay, as the model has every node at its start
#: (``planned``: idle, and planned by the last backfill pass for a job that may since have gone)
FREE_NODE_STATES = {"idle", "planned"}


def clear_jobs(cluster: Cluster, timeout: float = 30.0) -> None:
    """Cancel every job in the partition and wait until none is left running and every node is free:
    a node still completing a job (its epilog, or its slurmd slow to answer on a loaded machine) would
    make the next replay start on a cluster the model does not see."""
    cluster.run("scancel", f"--partition={PARTITION}", check=False, timeout=15)
    deadline = time.monotonic() + timeout
    busy: list[dict] = []
    while time.monotonic() < deadline:
        live = [r for r in _squeue(cluster) if r["state"] not in FINAL_STATES]
        if not live:
            busy = [n for n in node_states(cluster) if n["state"] not in FREE_NODE_STATES]
            if not busy:
                return
        time.sleep(0.2)
    if busy:
        raise CourseError("nodes of the local Slurm are not free after the last replay: " + ", ".join(
            f"{n['node']} {n['state']}" for n in busy), hint="see `courselib slurm status`; `courselib slurm down` "
            "then `up` starts afresh")
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
        change_state: dict[str, list] = {}  # job -> every job's [state, nodes] around its reason's last change
        last_seen: dict = {}
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
            changed = []
            for row in rows:
                rj = by_id.get(row["id"])
                if rj is None:
                    continue
                rj.state = row["state"]
                rj.nodes = row["nodes"] or rj.nodes
                if row["state"] == "PENDING":
                    if not rj.reasons or rj.reasons[-1][1] != row["reason"]:
                        rj.reasons.append((round(now, 2), row["reason"]))
                        changed.append(rj.name)
                elif row["start"] is not None and rj.start is None:
                    rj.start = row["start"] - math.floor(release)
                if row["state"] in FINAL_STATES and row["end"] is not None:
                    rj.end = row["end"] - math.floor(release)
                lines.append(f"{row['id']:>5} {row['name']:<12} {row['state']:<10} "
                             f"{row['reason']:<20} {row['nodes']}")
            seen = {by_id[row["id"]].name: [row["state"], row["nodes"]] for row in rows
                    if row["id"] in by_id}
            change_state.update({name: [last_seen, seen] for name in changed})
            for name in changed:
                rj = real[name]
                if rj.verdict_state is None and rj.reasons[-1][1] not in TRIVIAL_REASONS:
                    rj.verdict_state = [last_seen, seen]
            last_seen = seen
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
                rj.reason_state = change_state.get(name) if rj.reason is not None else None
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
    res = cluster.run_full("sbatch", "--test-only", *sub.args, str(script), "1", check=False, timeout=15)
    lines = [ln for ln in (res.stderr + res.stdout).splitlines() if "error" in ln.lower()]
    msg = lines[-1] if lines else (res.stderr or res.stdout).strip()
    return msg.split("error:", 1)[-1].strip()
