"""The fast path of the gang simulator decides exactly what the straightforward reference path does.

``simulate(..., reference=True)`` rescans every job and pod in every cycle (the code as first
written); the default path keeps ordered lists, running totals and free-GPU buckets so that a
cycle costs O(what waits), not O(jobs ever submitted) or O(nodes). On random seeded workloads
every job's result (start, end, state, pending reason, held GPUs), the deadlock verdict and the
whole trace must be identical, for all five policies and their main options.
"""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings, strategies as st

from courselib.model.generate import scale_workload
from courselib.model.workload import ClusterSpec, Job, Queue, Workload
from courselib.sim.gang import simulate

VARIANTS = {
    "kube-default": {}, "kube-default+preemption": {"preemption": True},
    "volcano": {}, "volcano+no-enqueue": {"enqueue": False},
    "volcano+overcommit-1.0": {"overcommit_factor": 1.0},
    "kueue": {}, "kueue+v1beta1": {"config_api": "v1beta1"},
    "slurm": {}, "slurm+easy": {"bf_job_part_count_reserve": 1}, "slurm+no-backfill": {"backfill": False},
    "kube-gang": {}, "kube-gang+pod-by-pod": {"pod_group_cycle": False},
    "kube-gang+pod-by-pod-60s": {"pod_group_cycle": False, "permit_timeout": 60, "requeue_after": 0},
}


@st.composite
def workloads(draw):
    """Small clusters under pressure: bursts, priorities, min_member, constraints, exclusive
    jobs, memory, time limits and queues with quotas and a cohort."""
    nodes = draw(st.integers(1, 8))
    gpn = draw(st.sampled_from([1, 2, 4, 8]))
    memory = draw(st.sampled_from([0, 0, 64]))
    cluster = ClusterSpec(nodes, gpn, memory_per_node=memory,
                          features=draw(st.sampled_from([(), ("nvlink",)])),
                          island_size=draw(st.sampled_from([0, 0, 2])))
    queues = draw(st.sampled_from([(), (Queue("a", nominal_quota=max(1, nodes * gpn // 2), cohort="c"),
                                        Queue("b", nominal_quota=nodes * gpn // 2, cohort="c",
                                              lending_limit=gpn))]))
    jobs, t = [], 0.0
    for k in range(draw(st.integers(1, 9))):
        t += draw(st.sampled_from([0.0, 0.0, 30.0, 600.0]))
        gpp = draw(st.integers(1, gpn))
        pods = draw(st.integers(1, max(1, (nodes * gpn) // gpp + 1)))
        duration = float(draw(st.sampled_from([0, 60, 600, 3600])))
        jobs.append(Job(
            name=f"j{k}", pods=pods, gpus_per_pod=gpp, submit=t, duration=duration,
            min_member=draw(st.one_of(st.none(), st.integers(1, pods))),
            priority=draw(st.integers(0, 2)),
            queue=draw(st.sampled_from(["a", "b"])) if queues else "default",
            constraint=draw(st.sampled_from([None, None, None, "nvlink", "[island0|island1]"])),
            exclusive=draw(st.sampled_from([False, False, True])),
            memory_per_pod=draw(st.sampled_from([0, 0, 16])),
            time_limit=draw(st.sampled_from([None, duration + 60, max(30.0, duration / 2)]))))
    return Workload(cluster, jobs, queues)


def same(w: Workload, variant: str, horizon: float | None = None, **extra) -> None:
    policy, options = variant.split("+")[0], {**VARIANTS[variant], **extra}
    fast = simulate(w, policy, horizon=horizon, check=True, **options)
    ref = simulate(w, policy, horizon=horizon, reference=True, **options)
    for a, b in zip(fast.jobs, ref.jobs, strict=True):
        assert (a.name, a.start, a.end, a.state, a.pending_reason) == \
            (b.name, b.start, b.end, b.state, b.pending_reason), variant
        assert a == b, variant
    assert fast.deadlock == ref.deadlock and fast.verdict == ref.verdict
    assert fast.trace == ref.trace
    assert fast.to_dict() == ref.to_dict()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.sampled_from(sorted(VARIANTS)))
def test_fast_path_matches_the_reference_on_random_workloads(w, variant):
    same(w, variant, horizon=12 * 3600)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.randoms(use_true_random=False))
def test_fast_path_matches_the_reference_with_a_recorded_quorum_order(w, rnd):
    """kube-gang's group_order (a real run's order of gangs meeting their quorum) on both paths."""
    names = [j.name for j in w.jobs]
    rnd.shuffle(names)
    same(w, "kube-gang", horizon=12 * 3600, group_order=names)


@settings(max_examples=12, deadline=None)
@given(st.integers(0, 10 ** 6), st.sampled_from(["kube-default", "volcano", "kueue", "slurm", "kube-gang"]),
       st.sampled_from([0.6, 1.0, 1.5]))
def test_fast_path_matches_the_reference_on_seeded_scale_workloads(seed, policy, load):
    """The benchmark's generator (benchmarks/bench_scale.py), small: queues build up and drain."""
    same(scale_workload(seed, nodes=12, jobs=80, load=load, queues=2), policy)


def test_the_check_can_fail():
    """A changed decision shows: another policy's schedule is not the reference's."""
    w = scale_workload(1, nodes=6, jobs=40, load=1.5)
    a, b = simulate(w, "volcano"), simulate(w, "slurm", reference=True)
    assert [j.start for j in a.jobs] != [j.start for j in b.jobs]
