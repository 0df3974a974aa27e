"""Property tests (hypothesis) of the mini gang scheduler over random clusters and workloads."""
from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings, strategies as st

from courselib.model.workload import ClusterSpec, Job, Workload
from courselib.sim.gang import simulate
from budget import examples

POLICIES = ["kube-default", "volcano", "kueue", "slurm", "kube-gang"]


@st.composite
def workloads(draw, same_submit: bool = False, plain: bool = False):
    nodes = draw(st.integers(1, 5))
    gpn = draw(st.sampled_from([1, 2, 4, 8]))
    island = 0 if plain else draw(st.sampled_from([0, 0, 2]))
    feats = () if plain else draw(st.sampled_from([(), ("nvlink",)]))
    cluster = ClusterSpec(nodes, gpn, features=feats, island_size=island)
    jobs = []
    for k in range(draw(st.integers(1, 5))):
        gpp = draw(st.integers(1, gpn))
        pods = draw(st.integers(1, max(1, (nodes * gpn) // gpp + 2)))
        jobs.append(Job(
            name=f"j{k}", pods=pods, gpus_per_pod=gpp,
            submit=0.0 if same_submit else float(draw(st.sampled_from([0, 0, 60, 600]))),
            duration=float(draw(st.sampled_from([60, 600, 3600]))),
            min_member=None if plain else draw(st.one_of(st.none(), st.integers(1, pods))),
            priority=0 if plain else draw(st.integers(0, 2)),
            constraint=None if plain else draw(st.sampled_from([None, None, "nvlink", "[island0|island1]"])),
            exclusive=False if plain else draw(st.booleans()),
            time_limit=None))
    return Workload(cluster, jobs)


FAST = settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(workloads(), st.sampled_from(POLICIES + ["kube-default+preemption", "slurm+easy", "kueue+v1beta1",
                                                "kube-gang+pod-by-pod"]))
def test_gpus_are_never_double_booked_or_lost(w, policy):
    """After every scheduling cycle: free + held = total on every node (SchedState.check)."""
    options = {"kube-default+preemption": {"preemption": True}, "slurm+easy": {"bf_job_part_count_reserve": 1},
               "kueue+v1beta1": {"config_api": "v1beta1"},
               "kube-gang+pod-by-pod": {"pod_group_cycle": False}}.get(policy, {})
    r = simulate(w, policy.split("+")[0], check=True, horizon=6 * 3600, **options)
    for j in r.jobs:
        assert 0 <= j.gpus_held <= j.gpus_held_max
        if j.state in ("COMPLETED", "TIMEOUT"):
            assert j.gpus_held == 0
    assert sum(j.gpus_held for j in r.jobs) <= w.cluster.total_gpus


@FAST
@given(workloads(), st.sampled_from(["volcano", "slurm", "kube-gang"]))
def test_volcano_and_slurm_never_hold_gpus_without_training(w, policy):
    """FACTS §3.1 (Discard unless JobReady), §3.4 (a job is one whole allocation) and Kubernetes
    v1.37.2's PodGroup cycle (tentative placements reverted unless minCount is met,
    ``schedule_one_podgroup.go`` L557-562)."""
    r = simulate(w, policy, horizon=6 * 3600)
    assert not r.deadlock and r.wasted_gpu_hours == 0
    for name, history in r.histories.items():
        for _, held, training in history:
            assert held == 0 or training, (name, history)


@settings(max_examples=examples(25), deadline=None)
@given(workloads(), st.sampled_from(POLICIES), st.integers(0, 3))
def test_simulation_is_deterministic(w, policy, seed):
    a = simulate(w, policy, seed=seed, horizon=6 * 3600).to_dict()
    b = simulate(w, policy, seed=seed, horizon=6 * 3600).to_dict()
    assert a == b


def brute_force_kube_deadlock(w: Workload) -> tuple[bool, set]:
    """An independent, deliberately naive replay of kube-default for jobs all submitted at t=0:
    pods in round-robin order, each to the node with most free GPUs (lowest index on ties), every
    node scanned for every pod; a job runs when all its pods are bound; time jumps to the next end
    (every job ending at that instant releases its GPUs before the next pass, as in the simulator).
    Deadlock: nothing runs, and some job holds GPUs without having all its pods."""
    free = [w.cluster.gpus_per_node] * w.cluster.nodes
    queue = [j for k in range(max(j.pods for j in w.jobs)) for j in w.jobs if k < j.pods]
    bound = {j.name: [] for j in w.jobs}
    running, started, now = {}, set(), 0.0
    while True:
        left = []
        for job in queue:
            best = None
            for i in range(len(free)):
                if free[i] >= job.gpus_per_pod and (best is None or free[i] > free[best]):
                    best = i
            if best is None:
                left.append(job)
            else:
                free[best] -= job.gpus_per_pod
                bound[job.name].append(best)
        queue = left
        for job in w.jobs:
            if job.name not in started and len(bound[job.name]) == job.pods:
                started.add(job.name)
                running[job.name] = now + job.duration
        if not running:
            stuck = any(0 < len(bound[j.name]) < j.pods for j in w.jobs)
            return stuck, started
        now = min(running.values())
        for name in [n for n, end in running.items() if end == now]:  # all ends at one instant, then a cycle
            del running[name]
            job = next(j for j in w.jobs if j.name == name)
            for i in bound[name]:
                free[i] += job.gpus_per_pod
            bound[name] = [None] * job.pods  # finished: keeps its count, holds nothing


@settings(max_examples=examples(150), deadline=None)
@given(workloads(same_submit=True, plain=True))
def test_kube_default_deadlock_agrees_with_brute_force(w):
    expected, started = brute_force_kube_deadlock(w)
    r = simulate(w, "kube-default")
    assert r.deadlock == expected
    assert {j.name for j in r.jobs if j.start is not None} == started


# ---- kube-gang without the PodGroup cycle: Permit holds, but never beyond its timeout ----------
def idle_holds(r) -> list[tuple[str, float, float]]:
    """(job, bound at, released at) for every GPU a job held while not training, read from the
    trace alone (each event's ``held`` is the job's GPUs after it): GPUs bound while waiting join
    a FIFO, a drop in ``held`` before training releases the oldest, the barrier clears the FIFO;
    GPUs still held at the end of the run are released at ``r.end_time``."""
    fifo: dict[str, list] = {}
    training: set[str] = set()
    held: dict[str, int] = {}
    spans = []
    for e in r.trace:
        before = held.get(e.job, 0)
        held[e.job] = e.held
        if e.what.startswith("barrier passed"):
            training.add(e.job)
            fifo.pop(e.job, None)
            continue
        if e.job in training:
            if e.what.startswith("completed") or e.what.startswith("TIMEOUT"):
                training.discard(e.job)
            continue
        q = fifo.setdefault(e.job, [])
        if e.held > before:
            q.extend([e.time] * (e.held - before))
        for _ in range(before - e.held):
            spans.append((e.job, q.pop(0), e.time))
    spans += [(job, t, r.end_time) for job, q in fifo.items() for t in q]
    return spans


def assert_permit_bounded(r, timeout: float) -> None:
    for job, bound, released in idle_holds(r):
        assert released - bound <= timeout + 1e-9, (job, bound, released)


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.sampled_from([60.0, 300.0, 900.0]), st.sampled_from([0.0, 300.0]))
def test_kube_gang_never_holds_gpus_for_an_incomplete_gang_beyond_the_permit_timeout(w, timeout, requeue):
    """Each pod waiting at Permit for its gang's minCount is rejected and unreserved at its own
    ``permitTimeoutDuration`` (gangscheduling.go L42, waiting_pods_map.go L99-105): no GPU is held
    for a gang that has not started for longer than the timeout (pod-by-pod, the v1.35 design).
    Slurm's ``--exclusive`` is left out: a Kubernetes pod cannot own a whole node, and an exclusive
    job's node stays held while any of its pods (each on its own timer) waits."""
    w = Workload(w.cluster, [replace(j, exclusive=False) for j in w.jobs])
    r = simulate(w, "kube-gang", horizon=6 * 3600, check=True, pod_group_cycle=False,
                 permit_timeout=timeout, requeue_after=requeue)
    assert_permit_bounded(r, timeout)
    # and with the PodGroup cycle nothing is held idle at all
    g = simulate(w, "kube-gang", horizon=6 * 3600)
    assert not g.deadlock and all(released == bound for _, bound, released in idle_holds(g))


def test_the_permit_bound_check_can_fail():
    """Two 512-GPU gangs on 600 GPUs hold 300 each at Permit for the full 300 s: a 299-s bound fails."""
    import pytest
    w = Workload(ClusterSpec(75, 8), [Job("a", 512, 1, duration=7200), Job("b", 512, 1, duration=7200)])
    r = simulate(w, "kube-gang", horizon=3600, pod_group_cycle=False)
    assert_permit_bounded(r, 300)
    spans = idle_holds(r)
    assert max(rel - b for _, b, rel in spans) == 300
    with pytest.raises(AssertionError):
        assert_permit_bounded(r, 299)
