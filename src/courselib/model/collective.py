"""Where a tensor-parallel group lands, and what a slow link costs it.

- **Rank order.** torchrun gives every node the same number of workers and numbers them node by node
  (``RANK``, ``LOCAL_RANK``, ``GROUP_RANK``; bibliography ``torchrun-env``), and frameworks such as
  Megatron build tensor-parallel groups from consecutive ranks. So a TP group of ``tp`` ranks stays
  inside one node exactly when ``tp`` divides the GPUs per node — whatever Slurm's ``--constraint``
  says: a feature is a label an administrator gave the node, not a promise about which ranks talk to
  which (``slurm-sbatch``).
- **Cost of a collective.** nccl-tests reports an all-reduce's *bus bandwidth*: its data moved
  ``2(n−1)/n`` times over the slowest link of the ring (``nccl-tests-performance``). So an all-reduce of
  ``S`` bytes over ``n`` ranks takes about ``2(n−1)/n × S / B`` seconds, with ``B`` the bandwidth of its
  slowest hop: one rank across a node boundary paces the whole group — a straggler by topology.
- **Bandwidths** (per GPU, one direction): NVLink on an 8-GPU H100 node about 450 GB/s; between
  nodes, 8 × 400 Gb/s NICs give about 400 GB/s per node, 50 GB/s per GPU (``scaling-book-gpus``).
  NVLink reaches *across* nodes only in rack-scale systems such as GB200 NVL72, 72 GPUs in one NVLink
  domain (``nvidia-gb200-nvl72``), where Slurm's ``topology/block`` keeps a job inside a block
  (``slurm-topology``).
"""
from __future__ import annotations

GB = 1e9
NVLINK_H100_BPS = 450 * GB        # per GPU, one direction (8-GPU HGX H100 node)
IB_PER_GPU_BPS = 50 * GB          # one 400 Gb/s NIC per GPU
NVL72_DOMAIN = 72                 # GPUs in one GB200 NVL72 NVLink domain


def node_of(rank: int, gpus_per_node: int) -> int:
    """The node a rank runs on when ranks are numbered node by node."""
    if gpus_per_node < 1 or rank < 0:
        raise ValueError("gpus_per_node must be >= 1 and rank >= 0")
    return rank // gpus_per_node


def tp_groups(world: int, tp: int) -> list[list[int]]:
    """Tensor-parallel groups of consecutive ranks: [0..tp-1], [tp..2tp-1], …"""
    if tp < 1 or world % tp:
        raise ValueError(f"tensor-parallel size {tp} must divide the world size {world}")
    return [list(range(g, g + tp)) for g in range(0, world, tp)]


def nodes_spanned(group: list[int], gpus_per_node: int) -> int:
    return len({node_of(r, gpus_per_node) for r in group})


def ring_allreduce_s(message_bytes: float, ranks: int, link_bps: float) -> float:
    """Seconds for a ring all-reduce of ``message_bytes`` on ``ranks`` ranks whose slowest link is ``link_bps``."""
    if ranks < 1 or link_bps <= 0 or message_bytes < 0:
        raise ValueError("need ranks >= 1, a positive bandwidth and a non-negative size")
    if ranks == 1:
        return 0.0
    return 2 * (ranks - 1) / ranks * message_bytes / link_bps


def group_allreduce_s(group: list[int], gpus_per_node: int, message_bytes: float, *,
                      nvlink_bps: float = NVLINK_H100_BPS, network_bps: float = IB_PER_GPU_BPS,
                      nvlink_domain: int | None = None) -> float:
    """One all-reduce of a group: over NVLink if all its ranks share an NVLink domain, else over the network.

    ``nvlink_domain``: GPUs per NVLink domain (``gpus_per_node`` on an ordinary node, 72 on NVL72).
    """
    domain = gpus_per_node if nvlink_domain is None else nvlink_domain
    one_domain = len({r // domain for r in group}) == 1
    return ring_allreduce_s(message_bytes, len(group), nvlink_bps if one_domain else network_bps)
