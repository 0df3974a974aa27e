"""The recovery ladder: what one lost rank of N costs under each way of recovering, in 2026.

One rank of a synchronous job is lost (its pod preempted, its process killed). Every survivor
blocks in the collective that rank never joins (FACTS §4.1) until something **detects** the loss;
then the job **recovers** on one of six rungs, each named as the CLI names it:

============  ======================================================================================
``restart``   every rank restarts from the last checkpoint: torchrun "all workers are stopped and
              restarted" (FACTS §4.3), a JobSet's Recreate (``courselib.model.jobset``): the pods are
              deleted, scheduled again, started, and the state is reloaded
``in-place``  every container restarts where it is — JobSet ``InPlaceRestart`` (KEP-467) on
              Kubernetes' ``RestartAllContainers`` (KEP-5532): no deletion, no scheduling, no image
              pull; still back to the checkpoint. A *preempted* pod is gone, so its rank needs a new
              pod elsewhere (KEP-467: healthy pods restart in place, failed pods are recreated)
``requeue``   Slurm 25.11's expedited requeue (``--requeue=expedite``): the job is requeued at the
              highest priority and its nodes are held for it; it restarts from the checkpoint once
              a node replaces the lost one
``shrink``    ``ncclCommRevoke`` (NCCL 2.28) then ``ncclCommShrink`` (2.27): the survivors drop the
              lost rank and go on at N−1 ranks from the step they were in, with the global batch
              adjusted; the lost rank's share of sharded state is read back
``grow``      ``shrink``, then ``ncclCommGrow`` (2.29) adds a hot spare in the lost rank's place; the
              spare loads the lost rank's share of the state; back to N ranks
``per-step``  torchft's per-step fault tolerance: the replica group holding the lost rank drops out
              of the step's quorum, the others commit without it; the group restarts and heals from
              a healthy replica while the others train
============  ======================================================================================

For each rung :func:`ladder` gives the **detection** time, the **recovery** time, the **work lost**
(GPU-hours that did no useful work because of the loss: redone work plus GPUs held while nothing
trains), the **GPUs idle while recovering**, and the **capacity afterwards** (ranks training when
recovery is over). Every default below names its source; a figure that depends on the model's size
(how much state is reloaded, re-sharded or sent to a spare) is computed from :class:`LadderInputs`
— and so are the few times no source measures (a stated assumption, named ``…_s`` in the inputs,
which a reader changes).

Sources (book/references.bib keys in brackets):

- detection: an NCCL transport error after ``NCCL_IB_TIMEOUT``'s retries, ≈34 s with the defaults,
  or — when nothing reports the loss — PyTorch's 10-minute watchdog (:mod:`courselib.model.nccl`);
  torchft's ``Manager`` times collectives out after ``timeout`` = 60 s (``torchft/manager.py`` L158,
  [torchft-manager]).
- ``restart``: recreating every pod of a JobSet took "about 2 minutes and 10 seconds" on a 5,000-node
  cluster, and in-place restart cut that by 92 % [daocloud-jobset-inplace-2026]; KEP-467 describes
  the same as "several minutes" against "seconds" [jobset-kep-467].
- ``shrink``: NCCL shrink latency 2.03 s at 512 ranks (1.38–2.03 s from 32 to 1,024)
  [nemo-rl-nccl-shrink]; ``grow``: ``ncclCommGrow`` 2.17 s at 512 (1.73–4.19 s from 32 to 1,024)
  [nemo-rl-nccl-grow]. API versions: ``ncclCommShrink`` NCCL 2.27.3 [nccl-2273], ``ncclCommRevoke``
  2.28.7 [nccl-2287], ``ncclCommGrow`` 2.29.2 [nccl-2292].
- ``requeue``: Slurm 25.11 release notes: "Expedited requeue jobs are eligible to restart
  immediately, are treated as the highest priority job in the system, and their previously allocated
  set of nodes will be prevented from launching other work" [slurm-25-11-news].
- ``per-step``: torchft "per-step fault tolerance ... without interrupting the entire training job";
  live recovery "from a healthy peer" (``README.md``) [torchft].
- state size: mixed-precision Adam keeps 16 bytes per parameter (2 + 2 + 12: fp16 weights and
  gradients, fp32 master weights, momentum and variance) [zero-2020].
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from courselib.errors import InputError
from courselib.model.nccl import NCCL_ERROR_AFTER_S, PG_NCCL_TIMEOUT_S

RUNGS = ("restart", "in-place", "requeue", "shrink", "grow", "per-step")

#: torchft ``Manager(timeout=timedelta(seconds=60))`` (torchft/manager.py L158 at 73dafea)
TORCHFT_TIMEOUT_S = 60.0
#: recreating every pod of a JobSet at 5,000 nodes: "about 2 minutes and 10 seconds"
RECREATE_PODS_S = 130.0
#: JobSet in-place restart: "92% restart speed improvement" on the same cluster [derived: 130 s × 0.08]
IN_PLACE_PODS_S = RECREATE_PODS_S * (1 - 0.92)
#: (ranks, seconds) measured by NVIDIA-NeMo/RL PR #3186 (shrink) and PR #3334 (grow), Qwen3 30B-A3B
SHRINK_MEASURED = ((32, 1.53), (64, 1.38), (128, 1.44), (256, 1.67), (512, 2.03), (1024, 2.02))
GROW_MEASURED = ((32, 1.73), (64, 1.76), (128, 1.79), (256, 1.91), (512, 2.17), (1024, 4.19))
#: mixed-precision Adam: 2Ψ + 2Ψ + 12Ψ bytes for Ψ parameters (ZeRO, Rajbhandari et al. 2020, §3.1)
ADAM_MIXED_BYTES_PER_PARAM = 16


def measured_at(table, ranks: int) -> tuple[int, float]:
    """The measurement at the smallest measured scale ≥ ``ranks`` (the largest if beyond them)."""
    for scale, seconds in table:
        if scale >= ranks:
            return scale, seconds
    return table[-1]


@dataclass(frozen=True)
class LadderInputs:
    """One lost rank of a job of ``ranks`` GPUs (one rank per GPU), and what recovery depends on.

    Times in seconds, sizes in bytes, bandwidths in bytes per second. Defaults marked
    *assumption* are not measured by any source: change them to your cluster's.
    """

    ranks: int = 512
    gpus_per_node: int = 8
    since_checkpoint_s: float = 1800.0    # the loss came this long after the last checkpoint
    loss: str = "error"                   # "error": its process is gone; "silent": it hangs
    step_s: float = 10.0                  # one training step (assumption)
    params: float = 70e9                  # the model's parameters (assumption: a 70B model)
    bytes_per_param: float = ADAM_MIXED_BYTES_PER_PARAM
    read_bytes_per_s_per_node: float = 2e9    # checkpoint storage read per node (assumption)
    peer_bytes_per_s_per_gpu: float = 25e9    # GPU-to-GPU network per GPU, 200 Gb/s (assumption)
    replacement_wait_s: float = 0.0       # until a node is free for the lost rank (0: one is free)
    launch_s: float = 60.0                # a process group starting again: rendezvous, NCCL
                                          # init, CUDA context (assumption)
    replica_groups: int = 0               # torchft replica groups (0: one per node)
    remaining_s: float = 3 * 3600.0       # training left after the loss (for capacity-hours)

    def __post_init__(self):
        for name in ("ranks", "gpus_per_node"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InputError(f"{v!r} is not a count ≥ 1", field=name)
        if self.ranks < 2:
            raise InputError("a job of one rank has no peer to lose", field="ranks", hint="give 2 or more")
        for name in ("since_checkpoint_s", "step_s", "params", "bytes_per_param", "read_bytes_per_s_per_node",
                     "peer_bytes_per_s_per_gpu", "replacement_wait_s", "launch_s", "remaining_s"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise InputError(f"{v!r} is not a number ≥ 0", field=name)
        for name in ("step_s", "read_bytes_per_s_per_node", "peer_bytes_per_s_per_gpu"):
            if getattr(self, name) <= 0:
                raise InputError(f"{name} must be > 0", field=name)
        if self.loss not in ("error", "silent"):
            raise InputError(f"unknown loss {self.loss!r}", field="loss", hint="error or silent")
        if self.replica_groups and (self.replica_groups < 2 or self.ranks % self.replica_groups):
            raise InputError(f"{self.replica_groups} replica groups do not divide {self.ranks} ranks into 2 "
                             "or more", field="replica_groups", hint="give a divisor of the rank count, ≥ 2")

    @property
    def groups(self) -> int:
        """torchft replica groups: ``replica_groups``, or one per node (one per rank when the job
        is not whole nodes, or is a single node)."""
        if self.replica_groups:
            return self.replica_groups
        per_node = self.ranks // self.gpus_per_node
        return per_node if per_node >= 2 and self.ranks % self.gpus_per_node == 0 else self.ranks

    @property
    def nodes(self) -> int:
        return math.ceil(self.ranks / self.gpus_per_node)

    @property
    def state_bytes(self) -> float:
        """The training state: parameters × bytes per parameter (16 for mixed-precision Adam)."""
        return self.params * self.bytes_per_param

    @property
    def reload_s(self) -> float:
        """Every node reads its share of the checkpoint at once: state / (nodes × read rate)."""
        return self.state_bytes / (self.nodes * self.read_bytes_per_s_per_node)

    @property
    def shard_s(self) -> float:
        """One rank's share of sharded state (state / N) read back by one node (ZeRO/FSDP keep one
        copy of each shard in the data-parallel group: the lost shard comes from the checkpoint —
        as of the checkpoint; replaying the optimizer steps since is not modelled)."""
        return self.state_bytes / self.ranks / self.read_bytes_per_s_per_node

    @property
    def heal_s(self) -> float:
        """A torchft replica group heals from a healthy replica: each of its G GPUs receives its
        shard of one full copy of the state (state / G) over its own link."""
        g = self.ranks // self.groups
        return self.state_bytes / g / self.peer_bytes_per_s_per_gpu

    @property
    def detection_s(self) -> float:
        """An NCCL error (≈34 s) for a vanished process; the 10-minute watchdog for a hung one."""
        return NCCL_ERROR_AFTER_S if self.loss == "error" else PG_NCCL_TIMEOUT_S


@dataclass(frozen=True)
class Rung:
    """What one rung costs for one lost rank (times in seconds, GPU-hours)."""

    name: str
    detection_s: float
    recovery_s: float                 # from detection to every rank of the job training again
    redone_s: float                   # training time redone (since the checkpoint, or the step)
    idle_gpus: int                    # GPUs held while nothing useful runs on them
    lost_gpu_hours: float             # GPU-hours that did no useful work because of the loss
    capacity_while_recovering: int    # ranks training while it recovers
    capacity_after: int               # ranks training once recovery is over
    redone_gpu_hours: float = 0.0     # the part of lost_gpu_hours that is work done twice
    reduced_gpu_hours: float = 0.0    # capacity missing afterwards (shrink: one GPU × remaining)
    spare_gpus: int = 0               # GPUs held idle in advance as hot spares
    needs: str = ""                   # what this rung requires of the job or the system
    parts: dict = field(default_factory=dict)   # recovery_s, broken down (seconds)
    sources: tuple = ()               # book/references.bib keys behind its figures

    def to_dict(self) -> dict:
        d = asdict(self)
        for k, v in d.items():
            if isinstance(v, float):
                d[k] = round(v, 4)
        d["parts"] = {k: round(v, 4) for k, v in self.parts.items()}
        d["sources"] = list(self.sources)
        return d


def _hours(gpus: float, seconds: float) -> float:
    return gpus * seconds / 3600.0


def rung(name: str, x: LadderInputs) -> Rung:
    """The costs of rung ``name`` for the inputs ``x`` (see the module docstring).

    Whole-job rungs (``restart``, ``in-place``, ``requeue``) go back to the checkpoint: all N GPUs
    redo ``since_checkpoint_s`` and sit through detection and recovery. The others keep the state
    in memory and redo only the step in flight — on average half a step, never more than the time
    since the checkpoint.
    """
    n, d = x.ranks, x.detection_s
    in_flight = min(x.step_s / 2, x.since_checkpoint_s)
    whole = (n, x.since_checkpoint_s)
    if name == "restart":
        parts = {"replacement wait": x.replacement_wait_s, "recreate every pod": RECREATE_PODS_S,
                 "launch": x.launch_s, "reload the checkpoint": x.reload_s}
        needs = "nothing: the default (torchrun, a JobSet's Recreate)"
        sources = ("torchrun-elastic", "jobset-failure-policy", "daocloud-jobset-inplace-2026", "zero-2020")
    elif name == "in-place":
        # survivors restart in place; the preempted pod is gone and is recreated once a node is free
        parts = {"replacement wait": x.replacement_wait_s, "restart every container in place": IN_PLACE_PODS_S,
                 "launch": x.launch_s, "reload the checkpoint": x.reload_s}
        needs = ("JobSet InPlaceRestart (behind its feature gate) on Kubernetes RestartAllContainers; an agent "
                 "sidecar in every pod")
        sources = ("jobset-kep-467", "k8s-kep-5532", "daocloud-jobset-inplace-2026", "zero-2020")
    elif name == "requeue":
        parts = {"replacement node": x.replacement_wait_s, "launch": x.launch_s, "reload the checkpoint": x.reload_s}
        needs = "Slurm 25.11 or later, sbatch --requeue=expedite (its nodes held for it)"
        sources = ("slurm-25-11-news", "zero-2020")
    elif name in ("shrink", "grow"):
        scale, shrink_s = measured_at(SHRINK_MEASURED, n)
        parts = {f"revoke + shrink (measured at {scale} ranks)": shrink_s}
        if name == "shrink":
            parts["the survivors read the lost rank's state shard"] = x.shard_s
            r = sum(parts.values())
            return Rung(name, d, r, in_flight, n - 1, _hours(n - 1, in_flight + d + r), n - 1, n - 1,
                        redone_gpu_hours=_hours(n - 1, in_flight), reduced_gpu_hours=_hours(1, x.remaining_s),
                        needs="NCCL ≥ 2.28 (revoke) and 2.27 (shrink), non-blocking communicators, a training "
                              "loop that rebuilds its groups and rescales the global batch; data-parallel "
                              "ranks (a tensor- or pipeline-parallel shard has no other copy)",
                        parts=parts, sources=("nccl-2273", "nccl-2287", "nemo-rl-nccl-shrink", "zero-2020"))
        gscale, grow_s = measured_at(GROW_MEASURED, n)
        parts[f"grow with a hot spare (measured at {gscale} ranks)"] = grow_s
        parts["the spare reads the lost rank's state shard"] = x.shard_s
        r = sum(parts.values())
        return Rung(name, d, r, in_flight, n - 1, _hours(n - 1, in_flight + d + r), n - 1, n, spare_gpus=1,
                    redone_gpu_hours=_hours(n - 1, in_flight),
                    needs="NCCL ≥ 2.29 (ncclCommGrow), a hot spare held idle and ready",
                    parts=parts, sources=("nccl-2292", "nemo-rl-nccl-grow", "nemo-rl-nccl-shrink", "zero-2020"))
    elif name == "per-step":
        g = n // x.groups   # GPUs of one replica group
        det = min(d, TORCHFT_TIMEOUT_S)
        # everyone waits out the detection and redoes the step that was not committed; then the
        # other groups train while the failed group restarts and heals from a healthy replica
        parts = {"replacement wait": x.replacement_wait_s, "the failed group's pods recreated": RECREATE_PODS_S,
                 "launch": x.launch_s, "heal from a peer replica": x.heal_s}
        back = sum(parts.values())
        lost = _hours(n, det + in_flight) + _hours(g, back)
        return Rung(name, det, back, in_flight, g, lost, n - g, n, redone_gpu_hours=_hours(n, in_flight),
                    reduced_gpu_hours=_hours(g, back),
                    needs="torchft (a Lighthouse, a Manager per replica group, fault-tolerant DDP/HSDP): "
                          "weights replicated across groups",
                    parts=parts, sources=("torchft", "torchft-manager", "zero-2020"))
    else:
        raise InputError(f"unknown recovery rung {name!r}", field="--recovery", hint="use " + ", ".join(RUNGS))
    r = sum(parts.values())
    return Rung(name, d, r, x.since_checkpoint_s, n, _hours(whole[0], whole[1] + d + r), 0, n,
                redone_gpu_hours=_hours(n, x.since_checkpoint_s), needs=needs, parts=parts, sources=sources)


def ladder(x: LadderInputs) -> list[Rung]:
    """Every rung for the same lost rank, in :data:`RUNGS` order."""
    return [rung(name, x) for name in RUNGS]
