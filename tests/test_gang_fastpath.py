"""The fast path of the gang simulator decides exactly what the straightforward reference path does.

``simulate(..., reference=True)`` rescans every job and pod in every cycle (the code as first
written); the default path keeps ordered lists, running totals and free-GPU buckets so that a
cycle costs O(what waits), not O(jobs ever submitted) or O(nodes). On random seeded workloads
every job's result (start, end, state, pending reason, held GPUs), the deadlock verdict and the
whole trace must be identical, for all five policies and their main options.
"""
from __future__ import annotations

from contextlib import contextmanager

from hypothesis import HealthCheck, given, settings, strategies as st

from courselib.model.gang import SchedState
from courselib.model.generate import scale_workload
from courselib.model.policies.slurm import Slurm
from courselib.model.workload import ClusterSpec, Job, Queue, Workload
from courselib.sim.gang import simulate

VARIANTS = {
    "kube-default": {}, "kube-default+preemption": {"preemption": True},
    "volcano": {}, "volcano+no-enqueue": {"enqueue": False},
    "volcano+overcommit-1.0": {"overcommit_factor": 1.0}, "volcano+no-minResources": {"min_resources": False},
    "kueue": {}, "kueue+v1beta1": {"config_api": "v1beta1"}, "kueue+no-waitForPodsReady": {"wait_for_pods_ready": False},
    "kueue+short-timeout": {"timeout": 120, "backoff_base": 30, "backoff_max": 240},
    "kueue+requeue-by-creation": {"timeout": 120, "requeuing_timestamp": "Creation"},
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
    with _slurm_passes() as passes:
        fast = simulate(w, policy, horizon=horizon, check=True, **options)
        ref = simulate(w, policy, horizon=horizon, reference=True, **options)
    # Slurm's backfill: every pass made the same reservations (start, end, nodes), not only the
    # same starts, so a wrong plan for a job that waits is caught before it changes a schedule
    assert passes[False] == passes[True], variant
    for a, b in zip(fast.jobs, ref.jobs, strict=True):
        assert (a.name, a.start, a.end, a.state, a.pending_reason) == \
            (b.name, b.start, b.end, b.state, b.pending_reason), variant
        assert a == b, variant
    assert fast.deadlock == ref.deadlock and fast.verdict == ref.verdict
    assert fast.trace == ref.trace
    assert fast.to_dict() == ref.to_dict()


@contextmanager
def _slurm_passes():
    """Record ``Slurm.reservations`` after every scheduling cycle, by path (reference or fast)."""
    passes: dict[bool, list] = {False: [], True: []}
    original = Slurm.schedule

    def recording(self, state):
        out = original(self, state)
        passes[self.reference].append((state.now, dict(self.reservations)))
        return out

    Slurm.schedule = recording
    try:
        yield passes
    finally:
        Slurm.schedule = original


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


@st.composite
def planning_states(draw):
    """A Slurm cluster mid-run: running jobs with expected ends, and reservations of whole nodes."""
    nodes = draw(st.integers(1, 70))  # past 64 nodes the masks span more than one machine word
    gpn = draw(st.sampled_from([1, 2, 4, 8]))
    w = Workload(ClusterSpec(nodes, gpn), [Job("probe", 1, 1, duration=1.0)])
    pol = Slurm(w)
    state = SchedState(w)
    state.now = float(draw(st.integers(0, 100)))
    for k in range(draw(st.integers(0, 3 * nodes))):
        gpp = draw(st.integers(1, gpn))
        pods = draw(st.integers(1, 3))
        job = Job(f"r{k}", pods, gpp, duration=float(draw(st.integers(1, 500))))
        run = state.submit(job)
        plan = pol.plan(state, job, state.now, [])
        if plan is None:
            continue
        pol._start(state, run, plan)
    reserved = []
    for _ in range(draw(st.integers(0, 4))):
        s = state.now + draw(st.integers(0, 600))
        reserved.append((s, s + draw(st.integers(1, 600)),
                         sorted(draw(st.sets(st.integers(0, nodes - 1), min_size=1, max_size=nodes)))))
    return pol, state, reserved, gpn


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(planning_states(), st.data())
def test_the_availability_profile_plans_what_the_arrays_plan(setup, data):
    """Slurm's backfill plans a plain job from level bitmasks (``Profile``): for any running jobs,
    reservations, start time and job shape, the same nodes and pod counts as the array planner."""
    pol, state, reserved, gpn = setup
    ends = sorted(pol.expected_end.values())
    t = data.draw(st.sampled_from([state.now] + ends + [r[1] for r in reserved]))
    job = Job("x", data.draw(st.integers(1, 40)), data.draw(st.integers(1, gpn)),
              duration=float(data.draw(st.integers(1, 900))))
    fast = pol.plan(state, job, t, reserved)
    pol.reference = True
    try:
        ref = pol.plan(state, job, t, reserved)
    finally:
        pol.reference = False
    assert fast == ref
