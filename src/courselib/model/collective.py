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
  slowest hop — NCCL's own tuning model for its ring (``nccl-topology-search``: ``tuning.cc`` L288-291,
  L324, L378-381: bus bandwidth = channels × per-channel bandwidth, times ``n / 2(n−1)``).
- **The slowest hop of a split group** (:func:`split_link_bps`). NCCL runs a collective on several
  channels; on every node each channel's ring enters through a NIC, passes the node's GPUs of the
  communicator over NVLink and leaves through a NIC (``search.cc`` L820-834), and each channel takes its
  bandwidth from the NIC it uses (L739, L750). A node's system holds only the communicator's GPUs
  (``topo.cc`` L1800), so the NICs a node can use are those of the group's GPUs there — one 400 Gb/s
  NIC a GPU on an HGX H100 (``scaling-book-gpus``: a node's egress is its 8 × 400 Gb/s) — and NCCL
  then gives every rank the *smallest* channel count and per-channel bandwidth of any node
  (``init.cc`` L1435-1446). So a split group crosses at ``min over its domains of (its GPUs there) ×
  50 GB/s``, never faster than NVLink: 7+1 on two nodes → 50 GB/s, 6+2 → 100, 4+4 → 200, two whole
  8-GPU nodes → 400 (the node egress). A group inside one domain pays no crossing at all. This is
  the ring. NCCL's tree and NVLS-tree algorithms reduce inside each node first; on two nodes its
  tuning model credits them with up to twice the ring's crossing bandwidth (``tuning.cc`` L306, L320;
  ``search.cc`` L1280), through the same NICs, and NVLS is off for the whole communicator when one
  node holds a single GPU of it (``nvls.cc`` L262, ``init.cc`` L1453). So the ring's figure is an
  upper bound where NCCL's tuner picks a hierarchical algorithm, and the same node is the bottleneck.
- **Bandwidths** (per GPU, one direction): NVLink on an 8-GPU H100 node about 450 GB/s; between
  nodes, 8 × 400 Gb/s NICs give about 400 GB/s per node, 50 GB/s per GPU (``scaling-book-gpus``).
  NVLink reaches *across* nodes only in rack-scale systems such as GB200 NVL72, 72 GPUs in one NVLink
  domain (``nvidia-gb200-nvl72``), where Slurm's ``topology/block`` keeps a job inside a block
  (``slurm-topology``). GB200 NVL72's fifth-generation NVLink gives each GPU 1.8 TB/s both
  directions together, 900 GB/s one way (``nvidia-nvlink``).
- **Which message.** Megatron's tensor parallelism all-reduces each layer's activations, ``b × s × h``
  values, twice in the forward and twice in the backward pass (``narayanan-2021-megatron`` §3.2):
  :func:`tp_layer` times the four beside the layer's GEMMs, which gives ``f`` for a model's shape.
- **What a split costs a step.** A tensor-parallel all-reduce sits on the critical path of every
  layer. If exposed TP communication is a fraction ``f`` of a step on NVLink, the same step with one
  group across a slower link takes ``(1 − f) + f × r`` steps, ``r`` the bandwidth ratio
  (:func:`step_slowdown`); every rank waits for the slowest group, so the whole job runs at that pace
  for as long as the placement lasts. MFU halves exactly when ``f = 1/(r − 1)``
  (:func:`halving_comm_fraction`): 12.5 % for H100 NVLink against one 400 Gb/s NIC (r = 9, the
  worst split: one GPU alone across), 5.9 % for NVL72 NVLink5 against the same NIC (r = 18). "A split halves MFU" is one point of this
  curve, not a law: at f = 2 % the step is 16 % (r = 9) longer, at f = 30 % 3.4 times as long.
"""
from __future__ import annotations

from dataclasses import dataclass

GB = 1e9
NVLINK_H100_BPS = 450 * GB        # per GPU, one direction (8-GPU HGX H100 node)
IB_PER_GPU_BPS = 50 * GB          # one 400 Gb/s NIC per GPU
NVL72_DOMAIN = 72                 # GPUs in one GB200 NVL72 NVLink domain
NVLINK5_BPS = 900 * GB            # per GPU, one direction (GB200 NVL72: 1.8 TB/s both ways)


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


def split_link_bps(gpus_per_domain, *, nic_bps: float = IB_PER_GPU_BPS,
                   nvlink_bps: float = NVLINK_H100_BPS) -> float:
    """The slowest hop of a ring all-reduce over a group with ``gpus_per_domain[d]`` of its GPUs in
    NVLink domain ``d``: NVLink when one domain holds them all, else the NICs of the domain with the
    fewest of them, one ``nic_bps`` NIC a GPU, capped at NVLink (see the module docstring: NCCL's
    channels cross through the NICs of the group's GPUs and every rank runs at the slowest node's
    channels). ``[7, 1]`` → 50 GB/s, ``[4, 4]`` → 200, ``[8, 8]`` → 400, ``[8]`` → 450."""
    counts = [int(c) for c in gpus_per_domain if c]
    if not counts or min(counts) < 0 or nic_bps <= 0 or nvlink_bps <= 0:
        raise ValueError("need at least one GPU, no negative count and positive bandwidths")
    if len(counts) == 1:
        return nvlink_bps
    return min(min(counts) * nic_bps, nvlink_bps)


def domain_counts(domains) -> list[int]:
    """How many of a group's ranks are in each domain, given each rank's domain (order kept)."""
    counts: dict = {}
    for d in domains:
        counts[d] = counts.get(d, 0) + 1
    return list(counts.values())


def group_allreduce_s(group: list[int], gpus_per_node: int, message_bytes: float, *,
                      nvlink_bps: float = NVLINK_H100_BPS, network_bps: float = IB_PER_GPU_BPS,
                      nvlink_domain: int | None = None) -> float:
    """One ring all-reduce of a group: over NVLink if all its ranks share an NVLink domain, else at
    :func:`split_link_bps` — the NICs (``network_bps`` each, one a GPU) of the domain holding the
    fewest of its ranks, capped at NVLink.

    ``nvlink_domain``: GPUs per NVLink domain (``gpus_per_node`` on an ordinary node, 72 on NVL72).
    """
    domain = gpus_per_node if nvlink_domain is None else nvlink_domain
    link = split_link_bps(domain_counts(r // domain for r in group), nic_bps=network_bps, nvlink_bps=nvlink_bps)
    return ring_allreduce_s(message_bytes, len(group), link)


def step_slowdown(comm_fraction: float, fast_bps: float, slow_bps: float) -> float:
    """How many times as long a step takes when its TP communication (``comm_fraction`` of the step
    on the fast link) crosses the slow link instead: ``(1 - f) + f × fast/slow``."""
    if not 0 <= comm_fraction <= 1 or fast_bps <= 0 or slow_bps <= 0:
        raise ValueError("need 0 <= comm_fraction <= 1 and positive bandwidths")
    return (1 - comm_fraction) + comm_fraction * fast_bps / slow_bps


def halving_comm_fraction(fast_bps: float, slow_bps: float) -> float | None:
    """The TP communication fraction at which a split halves MFU (the step takes twice as long):
    ``1 / (r - 1)``; None when the slow link is not slower (no split can halve anything)."""
    r = fast_bps / slow_bps
    return None if r <= 1 else 1 / (r - 1)


def ranks_by_node(placement) -> list[int]:
    """The node of each rank when ranks are numbered node by node (torchrun), one rank a GPU:
    ``placement`` is ``[(node, gpus), ...]``, taken in node order."""
    return [node for node, gpus in sorted(placement) for _ in range(gpus)]


def group_splits(placement, tp: int, domain_of) -> list[list[int]]:
    """For each TP group of ``tp`` consecutive ranks of a job placed as ``placement``
    (``[(node, gpus)]``), how many of its GPUs are in each NVLink domain (``domain_of(node)``)."""
    nodes = ranks_by_node(placement)
    if tp < 1 or len(nodes) % tp:
        raise ValueError(f"tensor-parallel size {tp} must divide the job's {len(nodes)} GPUs")
    return [domain_counts(domain_of(n) for n in nodes[g:g + tp]) for g in range(0, len(nodes), tp)]


def split_groups(placement, tp: int, domain_of) -> tuple[int, int]:
    """(TP groups of ``tp`` consecutive ranks, how many span two NVLink domains) for a job placed
    as ``placement`` (``[(node, gpus)]``); ``domain_of(node)`` names a node's NVLink domain."""
    splits = group_splits(placement, tp, domain_of)
    return len(splits), sum(len(c) > 1 for c in splits)


# ---- the precise version of "a split halves MFU": one transformer layer's TP all-reduces -----------
H100_BF16_FLOPS = 990e12          # dense bf16 per H100 GPU (``scaling-book-gpus``: 9.9e14)
ALLREDUCES_PER_LAYER = 4          # Megatron TP: two in the forward pass (g), two in the backward (f)


@dataclass(frozen=True)
class TPLayer:
    """One transformer layer of a tensor-parallel group, forward and backward, on one link.

    ``message_bytes``: one all-reduce's message, the layer's activations ``b × s × h`` values;
    ``allreduce_s``: one ring all-reduce of it; ``comm_s``: the layer's four; ``compute_s``: the
    layer's GEMMs on one GPU of the group at ``efficiency`` of its peak."""

    micro_batch: int
    seq: int
    hidden: int
    tp: int
    link_bps: float
    message_bytes: float
    allreduce_s: float
    comm_s: float
    compute_s: float

    @property
    def comm_fraction(self) -> float:
        """Exposed TP communication as a fraction of the layer's time (none of it overlapped)."""
        return self.comm_s / (self.comm_s + self.compute_s)


def layer_flops(micro_batch: int, seq: int, hidden: int) -> float:
    """FLOPs of one GPT layer's GEMMs, forward and backward, for one micro-batch:
    ``72 b s h² (1 + s/6h)`` — Narayanan et al.'s equation (3) per layer without the recomputed
    forward pass (their 96 counts four passes, this three) (``narayanan-2021-megatron`` §5.1)."""
    if min(micro_batch, seq, hidden) < 1:
        raise ValueError("micro_batch, seq and hidden must be >= 1")
    return 72 * micro_batch * seq * hidden ** 2 * (1 + seq / (6 * hidden))


def tp_layer(micro_batch: int, seq: int, hidden: int, tp: int, link_bps: float, *,
             flops_per_s: float = H100_BF16_FLOPS, efficiency: float = 1.0,
             bytes_per_value: int = 2) -> TPLayer:
    """One layer of a ``tp``-way Megatron group whose slowest hop is ``link_bps``: four all-reduces
    of ``b × s × h`` values each (``shoeybi-2019-megatron`` §3; ``narayanan-2021-megatron`` §3.2),
    each a ring all-reduce (:func:`ring_allreduce_s`), beside the layer's GEMMs split ``tp`` ways."""
    if tp < 1 or not 0 < efficiency <= 1 or flops_per_s <= 0:
        raise ValueError("need tp >= 1, 0 < efficiency <= 1 and positive FLOP/s")
    message = micro_batch * seq * hidden * bytes_per_value
    one = ring_allreduce_s(message, tp, link_bps)
    compute = layer_flops(micro_batch, seq, hidden) / tp / (flops_per_s * efficiency)
    return TPLayer(micro_batch, seq, hidden, tp, link_bps, message, one, ALLREDUCES_PER_LAYER * one, compute)
