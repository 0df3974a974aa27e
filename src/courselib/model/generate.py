"""Seeded workloads: the same seed gives the same cluster and jobs on every machine.

Used by the chapters (a mixed workload to compare schedulers on, the seed's race), by practice
problems, the playgrounds, the website's static views and by benchmarks. Sizes follow what shared GPU clusters see: many small jobs, some multi-node gangs and
a few that want a large part of the cluster; users' time limits overestimate the real runtime.
"""
from __future__ import annotations

import math
import random
from dataclasses import replace

from courselib.model.workload import ClusterSpec, Job, Workload


def default_workload(nodes: int = 75, gpus_per_node: int = 8, pods_a: int = 512, pods_b: int = 512,
                     minutes_b: float = 0.0) -> Workload:
    """The seed's story 1 (600 free GPUs, two 512-GPU jobs): two 1-GPU-per-rank training jobs of
    2 h; job b arrives ``minutes_b`` after job a."""
    return Workload(ClusterSpec(nodes, gpus_per_node),
                    [Job("a", pods_a, 1, 0.0, 7200.0), Job("b", pods_b, 1, minutes_b * 60, 7200.0)])


def mixed_workload(seed: int, *, nodes: int = 16, gpus_per_node: int = 8, jobs: int = 24,
                   mean_gap_s: float = 600.0, burst: int = 3) -> Workload:
    """A seeded mix of small, medium and large gangs arriving in small bursts.

    ``burst`` jobs share each arrival instant (several teams submitting at once — the case where
    pod-by-pod scheduling interleaves gangs); gaps between bursts are exponential with mean
    ``mean_gap_s``. Durations are 20 min to 4 h; time limits are 1-2x the duration.
    """
    if nodes < 1 or gpus_per_node < 1 or jobs < 1 or burst < 1:
        raise ValueError("nodes, gpus_per_node, jobs and burst must be at least 1")
    rng = random.Random(seed)
    total = nodes * gpus_per_node
    out, t = [], 0.0
    for i in range(jobs):
        if i and i % burst == 0:
            t += round(rng.expovariate(1.0 / mean_gap_s))
        kind = rng.random()
        if kind < 0.5:                       # small: one pod, a few GPUs
            gpp, pods = rng.choice([1, 2, 4]), 1
        elif kind < 0.85:                    # medium: a multi-node gang
            gpp = rng.choice([1, 4, gpus_per_node])
            pods = max(2, (rng.randint(2, max(2, nodes // 4)) * gpus_per_node) // gpp)
        else:                                # large: a third to three quarters of the cluster
            gpp = rng.choice([1, gpus_per_node])
            want = rng.randint(total // 3, (3 * total) // 4)
            pods = max(2, want // gpp)
        duration = float(rng.choice([20, 30, 45, 60, 90, 120, 180, 240]) * 60)
        limit = float(int(duration * rng.uniform(1.0, 2.0) / 60 + 1) * 60)
        out.append(Job(name=f"j{i:02d}", pods=pods, gpus_per_pod=gpp, submit=t, duration=duration,
                       time_limit=limit, priority=0))
    return Workload(ClusterSpec(nodes=nodes, gpus_per_node=gpus_per_node), tuple(out))


def scale_workload(seed: int, *, nodes: int = 100, jobs: int = 1000, gpus_per_node: int = 8,
                   max_gpus: int = 4096, load: float = 0.8, queues: int = 1) -> Workload:
    """A seeded cluster-scale gang workload: ``jobs`` gangs of 1 to ``max_gpus`` GPUs.

    Sizes are powers of two, each doubling half as likely as the one before (most jobs use one
    GPU or one node, a few a large slice), never more than the cluster; a job of up to one node
    is one pod, a larger one is ``gpus / gpus_per_node`` pods of a whole node each. Durations
    are log-uniform from 10 min to 8 h, time limits 1-2x the duration, priorities 0-3.
    Arrivals are Poisson with the rate that offers ``load`` x the cluster's GPU-seconds, so
    queues stay finite (``load`` < 1) and the run length grows with ``jobs``, not quadratically.
    ``queues`` > 1 spreads jobs over that many queues (``q0`` ...), without quotas.
    """
    if nodes < 1 or gpus_per_node < 1 or jobs < 1 or max_gpus < 1 or not 0 < load:
        raise ValueError("nodes, gpus_per_node, jobs and max_gpus must be >= 1 and load > 0")
    rng = random.Random(seed)
    cap = min(max_gpus, nodes * gpus_per_node)
    sizes = [1 << k for k in range(cap.bit_length()) if 1 << k <= cap]
    weights = [0.5 ** k for k in range(len(sizes))]
    lo, hi = math.log(600.0), math.log(8 * 3600.0)
    mean_size = sum(s * w for s, w in zip(sizes, weights)) / sum(weights)
    mean_duration = (8 * 3600.0 - 600.0) / (hi - lo)  # mean of a log-uniform distribution
    rate = load * nodes * gpus_per_node / (mean_size * mean_duration)  # jobs per second
    out, t = [], 0.0
    for i in range(jobs):
        t += rng.expovariate(rate)
        gpus = rng.choices(sizes, weights)[0]
        pods, gpp = (1, gpus) if gpus <= gpus_per_node else (gpus // gpus_per_node, gpus_per_node)
        duration = float(round(math.exp(rng.uniform(lo, hi))))
        limit = float(int(duration * rng.uniform(1.0, 2.0) / 60 + 1) * 60)
        out.append(Job(name=f"s{i}", pods=pods, gpus_per_pod=gpp, submit=float(round(t)),
                       duration=duration, time_limit=limit, priority=rng.randint(0, 3),
                       queue=f"q{i % queues}" if queues > 1 else "default"))
    return Workload(ClusterSpec(nodes=nodes, gpus_per_node=gpus_per_node), tuple(out))


def overloaded_workload(seed: int, *, nodes: int = 75, jobs: int = 10_000, gpus_per_node: int = 8,
                        gap_s: float = 60.0) -> Workload:
    """A cluster that cannot keep up, and jobs of growing size of which about half never fit.

    Job ``i`` asks for ``gpus_per_node × (1 + i mod 2·nodes)`` GPUs as whole-node pods: sizes
    grow from one node to twice the cluster and start over, so about half the jobs are larger
    than the cluster and wait forever, and the rest queue behind each other. One submission
    every ``gap_s`` seconds; durations are seeded, 10 min to 2 h. The case where a scheduler's
    cycle must not cost more with every job that waits and cannot change (issue 23).
    """
    if nodes < 1 or gpus_per_node < 1 or jobs < 1 or gap_s <= 0:
        raise ValueError("nodes, gpus_per_node and jobs must be >= 1 and gap_s > 0")
    rng = random.Random(seed)
    out = []
    for i in range(jobs):
        pods = 1 + i % (2 * nodes)
        out.append(Job(name=f"o{i}", pods=pods, gpus_per_pod=gpus_per_node, submit=i * gap_s,
                       duration=float(rng.randint(10, 120) * 60)))
    return Workload(ClusterSpec(nodes=nodes, gpus_per_node=gpus_per_node), tuple(out))


#: The bench's three-level tree for 6,250 nodes (6,250 = 2 x 5^5, so 8-node blocks cannot tile it):
#: NVL72-like blocks of 10 nodes, racks of 50, spines of 1,250 (five of them)
SCALE_TOPOLOGY = (("spine", 1250), ("rack", 50), ("block", 10))


def topology_workload(seed: int, *, nodes: int = 6250, jobs: int = 1000, topology=SCALE_TOPOLOGY,
                      required_share: float = 0.3, preferred_share: float = 0.4, **scale) -> Workload:
    """:func:`scale_workload` on a cluster with ``topology`` (:func:`with_topology`)."""
    return with_topology(scale_workload(seed, nodes=nodes, jobs=jobs, **scale), topology, seed,
                         required_share, preferred_share)


#: the overloaded 75-node cluster's tree: racks of 25 nodes, blocks of 5
OVERLOADED_TOPOLOGY = (("rack", 25), ("block", 5))


def with_topology(base: Workload, topology, seed: int, required_share: float = 0.3,
                  preferred_share: float = 0.4) -> Workload:
    """``base`` on a cluster with ``topology``, each multi-node job asking for the smallest level
    that can hold it: ``required`` for ``required_share`` of them, ``preferred`` for
    ``preferred_share``, none for the rest (drawn from their own seed: the jobs stay the same)."""
    rng = random.Random(f"topology:{seed}")
    levels = sorted(topology, key=lambda lv: lv[1])   # innermost first
    gpn = base.cluster.gpus_per_node
    out = []
    for j in base.jobs:
        draw = rng.random()
        level = next((name for name, size in levels if size * gpn >= j.gpus), None)
        if j.pods > 1 and level is not None and draw < required_share + preferred_share:
            j = replace(j, topology=("required" if draw < required_share else "preferred", level))
        out.append(j)
    spec = replace(base.cluster, topology=tuple(topology))
    return replace(base, cluster=spec, jobs=tuple(out))


#: :func:`busy_workload`'s choices of job size, runtime distribution
BUSY_SIZES = ("uniform", "powers", "small")
BUSY_RUNTIMES = ("exponential", "fixed", "lognormal")


def busy_workload(seed: int, *, nodes: int = 75, jobs: int = 10_000, gpus_per_node: int = 8,
                  sizes: str = "uniform", max_share: float = 0.75, mean_gap_s: float = 1.0,
                  runtime: str = "exponential", mean_runtime_s: float = 600.0,
                  never_fit: float = 0.0) -> Workload:
    """A busy cluster: a long queue of jobs that (mostly) fit, arriving faster than they end (issue 35).

    The user's case: 10,000 jobs on 75 nodes x 8 GPUs, every job fits, sizes up to about three
    quarters of the cluster, one arrival about every second (Poisson, mean gap ``mean_gap_s``), about
    ten minutes of runtime (``mean_runtime_s``), so a queue of thousands builds up and every pass of
    conservative backfill finds a start for every job it tests. Sweep axes:

    - ``sizes``: ``uniform`` (1 GPU to ``max_share`` of the cluster, every size as likely),
      ``powers`` (powers of two up to ``max_share``, each doubling half as likely), ``small``
      (1 GPU to one node);
    - ``runtime``: ``exponential``, ``fixed`` (every job ``mean_runtime_s``), ``lognormal``
      (sigma 1.5, a long tail, with mean ``mean_runtime_s``); at least 60 s;
    - ``never_fit``: the share of jobs larger than the cluster (1 to 2 x it), which wait forever.

    A job of up to one node is one pod; a larger one asks for whole nodes (``ceil(gpus / gpus_per_node)``
    pods of ``gpus_per_node``). Time limits are 1-2x the runtime, in whole minutes; priorities 0.
    """
    if nodes < 1 or gpus_per_node < 1 or jobs < 1 or mean_gap_s <= 0 or mean_runtime_s <= 0:
        raise ValueError("nodes, gpus_per_node and jobs must be >= 1; mean_gap_s and mean_runtime_s > 0")
    if sizes not in BUSY_SIZES or runtime not in BUSY_RUNTIMES:
        raise ValueError(f"sizes is one of {', '.join(BUSY_SIZES)}; runtime one of {', '.join(BUSY_RUNTIMES)}")
    if not 0 < max_share <= 1 or not 0 <= never_fit <= 1:
        raise ValueError("max_share is in (0, 1] and never_fit in [0, 1]")
    rng = random.Random(f"busy:{seed}")
    total = nodes * gpus_per_node
    cap = max(1, int(total * max_share))
    powers = [1 << k for k in range(cap.bit_length()) if 1 << k <= cap]
    weights = [0.5 ** k for k in range(len(powers))]
    sigma = 1.5
    mu = math.log(mean_runtime_s) - sigma * sigma / 2
    out, t = [], 0.0
    for i in range(jobs):
        t += rng.expovariate(1.0 / mean_gap_s)
        if rng.random() < never_fit:
            gpus = rng.randint(total + 1, 2 * total)
        elif sizes == "uniform":
            gpus = rng.randint(1, cap)
        elif sizes == "powers":
            gpus = rng.choices(powers, weights)[0]
        else:
            gpus = rng.randint(1, min(gpus_per_node, cap))
        pods, gpp = (1, gpus) if gpus <= gpus_per_node else (-(-gpus // gpus_per_node), gpus_per_node)
        if runtime == "exponential":
            duration = rng.expovariate(1.0 / mean_runtime_s)
        elif runtime == "fixed":
            duration = mean_runtime_s
        else:
            duration = rng.lognormvariate(mu, sigma)
        duration = float(max(60, round(duration)))
        limit = float(int(duration * rng.uniform(1.0, 2.0) / 60 + 1) * 60)
        out.append(Job(name=f"b{i}", pods=pods, gpus_per_pod=gpp, submit=float(round(t)),
                       duration=duration, time_limit=limit))
    return Workload(ClusterSpec(nodes=nodes, gpus_per_node=gpus_per_node), tuple(out))


#: The busy-cluster sweep (``make bench``): the issue's case, then one axis changed at a time
BUSY_BASE = {"sizes": "uniform", "mean_gap_s": 1.0, "runtime": "exponential", "never_fit": 0.0, "nodes": 75}
BUSY_SWEEP = (
    ("base", {}),
    ("sizes=powers", {"sizes": "powers"}),
    ("sizes=small", {"sizes": "small"}),
    ("gap=0.2s", {"mean_gap_s": 0.2}),
    ("gap=10s", {"mean_gap_s": 10.0}),
    ("runtime=fixed", {"runtime": "fixed"}),
    ("runtime=lognormal", {"runtime": "lognormal"}),
    ("never_fit=10%", {"never_fit": 0.1}),
    ("never_fit=50%", {"never_fit": 0.5}),
    ("nodes=16", {"nodes": 16}),
    ("nodes=300", {"nodes": 300}),
)


def busy_sweep_cell(name: str, seed: int, jobs: int) -> Workload:
    """The sweep cell ``name`` of :data:`BUSY_SWEEP` with ``jobs`` jobs."""
    over = dict(BUSY_SWEEP).get(name)
    if over is None:
        raise ValueError(f"no busy sweep cell {name!r}; one of {', '.join(n for n, _ in BUSY_SWEEP)}")
    return busy_workload(seed, jobs=jobs, **{**BUSY_BASE, **over})
