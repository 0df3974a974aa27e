"""How a Slurm job ends when it runs out of time or memory: states, signals, exit codes.

- **TIMEOUT** — "When the time limit is reached, each task in each job step is sent SIGTERM followed
  by SIGKILL"; the gap is ``KillWait``, "default value is 30 seconds" (``slurm-sbatch``, ``slurm-conf``);
  the job's state is TIMEOUT, "terminated due to reaching the time limit" (``slurm-job-state-codes``).
  A process that does not catch SIGTERM dies of it (a shell reports 128 + 15 = 143); one that ignores
  it dies of the SIGKILL (128 + 9 = 137). Slurm shows the signal after the exit code, ``0:15`` or
  ``0:9`` (``slurm-job-exit-code``).
- **OUT_OF_MEMORY** — "experienced out of memory error": with ``task/cgroup`` and
  ``ConstrainRAMSpace=yes`` the job's memory cgroup holds it to what it asked for (``slurm-cgroup-conf``),
  and the kernel's OOM killer SIGKILLs a process inside it, as in any memory cgroup (chapter 3).
  Without that plugin (the course's local Slurm runs ``TaskPlugin=task/none``) nothing enforces ``--mem``.
"""
from __future__ import annotations

from dataclasses import dataclass

KILL_WAIT_S = 30.0      # slurm.conf KillWait default
#: slurm.conf SchedulerTimeSlice default: seconds per slice of gang time-slicing (PreemptMode=SUSPEND,GANG);
#: "The default value is 30 seconds" (slurm.conf(5), doc/man/man5/slurm.conf.5 at SchedMD/slurm 284c3b95)
SCHEDULER_TIME_SLICE_S = 30.0
SIGTERM, SIGKILL = 15, 9
TIMEOUT, OUT_OF_MEMORY = "TIMEOUT", "OUT_OF_MEMORY"


@dataclass(frozen=True)
class JobEnd:
    state: str
    limit_s: float
    kill_wait_s: float
    sigterm_at_s: float
    sigkill_at_s: float | None     # None: the process died of SIGTERM
    signal: int

    @property
    def exit_code(self) -> int:
        """What a shell reports for the killed process: 128 + the signal."""
        return 128 + self.signal

    @property
    def slurm_exit_code(self) -> str:
        """``scontrol show job`` / ``sacct``'s ExitCode: exit status, then the signal after a colon."""
        return f"0:{self.signal}"


def slurm_time_limit_end(limit_s: float, *, kill_wait_s: float = KILL_WAIT_S,
                         ignores_sigterm: bool = True) -> JobEnd:
    """The end of a job that reaches ``limit_s`` (``--time``): SIGTERM at the limit, SIGKILL ``KillWait`` later."""
    if not limit_s > 0 or kill_wait_s < 0:
        raise ValueError("the time limit must be > 0 s and KillWait >= 0 s")
    if ignores_sigterm:
        return JobEnd(TIMEOUT, limit_s, kill_wait_s, limit_s, limit_s + kill_wait_s, SIGKILL)
    return JobEnd(TIMEOUT, limit_s, kill_wait_s, limit_s, None, SIGTERM)


@dataclass(frozen=True)
class TimeSlicing:
    """Two jobs time-sliced on the same resources by Slurm's gang scheduler."""

    slice_s: float                 # each turn (SchedulerTimeSlice)
    cycle_s: float                 # both turns: one job's suspension to its next
    suspensions_per_hour: float    # of each job
    wall_s: float                  # when the job that waits first has had ``compute_s`` of turns


def gang_time_slicing(compute_s: float, *, slice_s: float = SCHEDULER_TIME_SLICE_S) -> TimeSlicing:
    """Two jobs allocated to the same resources (``PreemptMode=SUSPEND,GANG``, ``OverSubscribe=FORCE:2``).

    The gang scheduler suspends the new job until the running one has had a ``SchedulerTimeSlice``, then
    suspends the running one and lets the new one run a slice, and so on until one ends (``slurm-gang``):
    each runs one slice in two. The new job's k-th turn ends at ``k × 2 × slice``; its last, partial turn
    of ``r`` seconds ends ``r`` after that turn begins.
    """
    if not (compute_s > 0 and slice_s > 0):
        raise ValueError("compute and the slice must be > 0 s")
    cycle = 2 * slice_s
    turns = -(-compute_s // slice_s)                      # ceil: the last turn may be partial
    last = compute_s - (turns - 1) * slice_s
    return TimeSlicing(slice_s, cycle, 3600 / cycle, (turns - 1) * cycle + slice_s + last)


# Why a job is PENDING (``squeue``'s NODELIST(REASON), ``scontrol show job``'s Reason=), what it means
# (doc/html/job_reason_codes.shtml, bibliography ``slurm-job-reason-codes``) and what to look at next.
# "only the reason that was encountered by the attempted scheduling method will be displayed".
PENDING_REASONS: dict[str, tuple[str, str]] = {
    "Resources": ("the resources requested by the job are not available (e.g. already used by other jobs)",
                  "`scontrol show job` StartTime (backfill's estimate) and NumNodes/TRES against `sinfo -N -o '%N %T %G %f'`"),
    "Priority": ("one or more higher-priority jobs exist for the partition",
                 "the job ahead of it (`squeue -p PART --sort=-p`); `sprio -j ID` for the priority factors"),
    "PartitionNodeLimit": ("the job asks for more nodes than the partition's MaxNodes (or fewer than MinNodes)",
                           "`scontrol show partition` MaxNodes; reduce -N or pick another partition"),
    "PartitionTimeLimit": ("the job's --time exceeds the partition's MaxTime",
                           "`scontrol show partition` MaxTime; it may stay pending indefinitely"),
    "ReqNodeNotAvail": ("a node the job needs is down, drained or reserved",
                        "`sinfo -R` for the nodes' reasons; `scontrol show reservation`"),
    "BadConstraints": ("no node can ever satisfy the job's --constraint and counts",
                       "the Features of the nodes (`sinfo -o '%N %f'`) against --constraint"),
    "Dependency": ("the job waits for another job (--dependency)", "`scontrol show job` Dependency="),
    "BeginTime": ("the job's earliest start (--begin) is in the future", "`scontrol show job` EligibleTime"),
    "PartitionDown": ("the partition is down", "`sinfo` STATE of the partition; `scontrol update partition`"),
}


def explain_reason(reason: str) -> tuple[str, str]:
    """(what the pending reason means, what to check next); QOS and association limits by prefix."""
    if reason in PENDING_REASONS:
        return PENDING_REASONS[reason]
    if reason.startswith(("QOSMax", "QOSGrp", "AssocMax", "AssocGrp")):
        return ("a QOS or association limit (a cap on jobs, nodes or TRES for the user, account or QOS) is reached",
                "`sacctmgr show assoc` / `sacctmgr show qos` for the limit named in the reason")
    return ("see the Slurm job reason codes", "`scontrol show job ID`")
