"""One rank of ``courselib barrier real`` (run by ``mpirun``; see :mod:`courselib.live.mpi`).

This is **MPI** (Open MPI with ULFM), not NCCL: the same shape of collective — every rank must
take part in an all-reduce — with MPI's fault-tolerance extension instead of NCCL's revoke/shrink.

Each rank: joins a warm-up all-reduce and a barrier (everyone alive), takes the time, and enters
the measured all-reduce of step 1; rank ``--kill`` SIGKILLs itself instead, right after printing
when. A survivor's all-reduce either completes (it cannot, with a rank missing), fails with
``MPI_ERR_PROC_FAILED`` (this rank noticed the dead peer itself), or fails with ``MPI_ERR_REVOKED``
(another survivor revoked the communicator). With ``--recovery shrink`` every survivor then calls
``MPI_Comm_revoke`` and ``MPI_Comm_shrink`` (mpi4py: ``Revoke``/``Shrink``) and runs the all-reduce
again on the shrunk communicator. Every rank prints one JSON line; times are seconds on the
machine's monotonic clock (CLOCK_MONOTONIC, shared by all processes of one machine).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--kill", type=int, required=True)
    p.add_argument("--recovery", choices=("none", "shrink"), default="none")
    p.add_argument("--settle", type=float, default=0.2)
    a = p.parse_args(argv)
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    comm.Set_errhandler(MPI.ERRORS_RETURN)   # an error is returned, not fatal (ULFM needs it)
    rank, size = comm.Get_rank(), comm.Get_size()
    out: dict = {"rank": rank, "size": size, "pid": os.getpid()}

    def emit():
        print(json.dumps(out), flush=True)

    comm.allreduce(1)           # every rank alive and connected
    comm.Barrier()
    out["t_start"] = time.monotonic()
    if rank == a.kill:
        out["t_killed"] = time.monotonic()
        emit()
        os.kill(os.getpid(), signal.SIGKILL)   # a preempted pod's process: gone without a word
    time.sleep(a.settle)        # let the rank die before anyone enters the collective
    out["t_enter"] = time.monotonic()
    try:
        out["allreduce"] = comm.allreduce(rank)
        out["outcome"] = "completed"
    except MPI.Exception as err:
        cls = err.Get_error_class()
        out["outcome"] = {getattr(MPI, "ERR_PROC_FAILED", -1): "proc_failed",
                          getattr(MPI, "ERR_REVOKED", -2): "revoked"}.get(cls, "error")
        out["error"] = MPI.Get_error_string(err.Get_error_code())
    out["t_error"] = time.monotonic()
    if a.recovery == "shrink":
        try:
            comm.Revoke()
        except MPI.Exception as err:
            out["revoke_error"] = MPI.Get_error_string(err.Get_error_code())
        out["t_revoked"] = time.monotonic()
        new = comm.Shrink()
        out["t_shrunk"] = time.monotonic()
        out["shrunk_size"], out["shrunk_rank"] = new.Get_size(), new.Get_rank()
        out["shrunk_allreduce"] = new.allreduce(rank)
        out["t_after"] = time.monotonic()
    emit()
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
