"""When a lost rank is noticed: the NCCL and PyTorch defaults that bound the wait, in one place.

A synchronous job notices a missing rank by one of four clocks, whichever runs out first:

- **the first barrier** — under torchrun the agents' rendezvous, "an overall timeout which causes
  the rendezvous to fail if ``min`` number of workers is never reached", ``join_timeout`` 600 s by
  default, "interpreted as non-retryable" (bibliography: ``torchrun-rendezvous``); the workers, and
  their ``ncclCommInitRank``, start only once it has completed;
- **an NCCL error** — on InfiniBand a send to a peer that is gone fails after the queue pair's
  retries: each waits 4.096 µs × 2^``NCCL_IB_TIMEOUT`` (exponent 20 by default) and there are
  ``NCCL_IB_RETRY_CNT`` (7) retries (``nccl-env``); PyTorch's watchdog polls the communicator's
  asynchronous error and, with ``TORCH_NCCL_ASYNC_ERROR_HANDLING`` = 3 (the default), tears the process
  down without aborting the communicator (``pytorch-nccl-env-vars``, ``pytorch-nccl-error-handling``);
- **the watchdog's collective timeout** — ``init_process_group(timeout=...)``, "10 minutes for NCCL",
  "the duration after which collectives will be aborted asynchronously and the process will crash"
  (``pytorch-distributed-init``): the bound when no error reaches the survivors (a hung peer);
- **the heartbeat monitor** — if the watchdog thread itself is stuck (a CUDA or NCCL call that never
  returns), the monitor kills the process after ``TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC``, 8 minutes by
  default, first dumping the flight recorder (``pytorch-heartbeat-monitor``, ``pytorch-flight-recorder``).

``TORCH_NCCL_BLOCKING_WAIT=1`` changes who waits, not how long: ``wait()`` then blocks the calling
thread for the same timeout and raises there (``pytorch-distributed-init``).
"""
from __future__ import annotations

IB_TIMEOUT_UNIT_S = 4.096e-6          # "The timeout is computed as 4.096 µs * 2 ^ timeout" (NCCL env docs)
NCCL_IB_TIMEOUT = 20                  # default exponent since NCCL 2.23 (src/transport/net_ib/connect.cc)
NCCL_IB_RETRY_CNT = 7                 # default retries (same file)
PG_NCCL_TIMEOUT_S = 600.0             # init_process_group(timeout=...) default for NCCL
RENDEZVOUS_JOIN_TIMEOUT_S = 600.0     # torchrun's rendezvous join_timeout default
HEARTBEAT_TIMEOUT_S = 480.0           # TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC default (60 * 8)
ASYNC_ERROR_HANDLING = 3              # TORCH_NCCL_ASYNC_ERROR_HANDLING default: SkipCleanUp
ASYNC_ERROR_MODES = {0: "NoHandling", 1: "TearDown", 2: "CleanUpOnly", 3: "SkipCleanUp"}


def ib_attempt_s(ib_timeout: int = NCCL_IB_TIMEOUT) -> float:
    """One InfiniBand transport attempt: 4.096 µs × 2^``NCCL_IB_TIMEOUT`` (about 4.3 s at the default 20)."""
    if isinstance(ib_timeout, bool) or not isinstance(ib_timeout, int) or not 0 <= ib_timeout <= 31:
        raise ValueError(f"NCCL_IB_TIMEOUT is an exponent from 0 to 31, not {ib_timeout!r}")
    return IB_TIMEOUT_UNIT_S * 2 ** ib_timeout


def ib_error_after_s(ib_timeout: int = NCCL_IB_TIMEOUT, retry_cnt: int = NCCL_IB_RETRY_CNT) -> float:
    """Roughly how long until a send to a vanished peer fails: the first attempt and ``retry_cnt`` retries.

    [derived] from the two NCCL defaults; the real figure also depends on the fabric, and NCCL reports
    the failure to PyTorch's watchdog, which then tears the process down.
    """
    if isinstance(retry_cnt, bool) or not isinstance(retry_cnt, int) or not 0 <= retry_cnt <= 7:
        raise ValueError(f"NCCL_IB_RETRY_CNT is a retry count from 0 to 7, not {retry_cnt!r}")
    return ib_attempt_s(ib_timeout) * (1 + retry_cnt)


NCCL_ERROR_AFTER_S = ib_error_after_s()   # about 34 s with the defaults: "roughly half a minute"
