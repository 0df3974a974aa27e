"""Property tests (hypothesis) of the mini gang scheduler over random clusters and workloads."""
from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, example, given, settings, strategies as st

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


@st.composite
def preempting_workloads(draw):
    """A few nodes under pressure from jobs of several priorities, some of which may preempt, with
    whole-node (exclusive) jobs, memory and PodGroups of disruption mode All."""
    nodes = draw(st.integers(1, 4))
    gpn = draw(st.sampled_from([2, 4, 8]))
    memory = draw(st.sampled_from([0, 64]))
    jobs = []
    for k in range(draw(st.integers(2, 6))):
        gpp = draw(st.integers(1, gpn))
        pods = draw(st.integers(1, max(1, nodes * gpn // gpp)))
        jobs.append(Job(
            name=f"j{k}", pods=pods, gpus_per_pod=gpp, submit=float(draw(st.sampled_from([0, 0, 600]))),
            duration=float(draw(st.sampled_from([600, 3600]))),
            min_member=draw(st.one_of(st.none(), st.integers(1, pods))),
            priority=draw(st.integers(0, 3)),
            exclusive=draw(st.sampled_from([False, False, True])),
            memory_per_pod=draw(st.sampled_from([0, 16, 48])),
            preemption_policy=draw(st.sampled_from([None, "PreemptLowerPriority"])),
            disruption_mode=draw(st.sampled_from(["single", "single", "all"]))))
    return Workload(ClusterSpec(nodes, gpn, memory_per_node=memory), jobs)


def _fits_after_every_group_preemption(monkeypatch):
    """Make kube-gang's workload-aware preemption fail the run at once if, right after it deleted
    victims, the group's scheduling algorithm still cannot place ``minCount`` pods."""
    from courselib.model.policies.kube_gang import KubeGang

    original = KubeGang._preempt_for_group

    def checked(self, state, run, want):
        took = original(self, state, run, want)
        if took:
            placed = state.bound(run) + self._fit(state, run, want)
            assert placed >= run.job.min_member, \
                f"t = {state.now:g} s: victims deleted for {run.name}, which still places {placed}/{run.job.min_member}"
        return took

    monkeypatch.setattr(KubeGang, "_preempt_for_group", checked)


_WHOLE_NODE = Workload(ClusterSpec(2, 8), [Job("a", 2, 1, duration=3600, exclusive=True),
                                           Job("b", 2, 1, duration=3600, exclusive=True, priority=1),
                                           Job("c", 2, 1, submit=600, duration=600, priority=3,
                                               preemption_policy="PreemptLowerPriority")])
_MEMORY = Workload(ClusterSpec(1, 8, memory_per_node=64), [
    Job("a", 1, 4, duration=3600, priority=1, memory_per_pod=8),
    Job("b", 1, 1, duration=3600, priority=2, memory_per_pod=48),
    Job("c", 1, 4, submit=600, duration=600, priority=3, memory_per_pod=16,
        preemption_policy="PreemptLowerPriority")])


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                          HealthCheck.function_scoped_fixture])
@given(preempting_workloads())
@example(_WHOLE_NODE)
@example(_MEMORY)
def test_kube_gang_preemption_never_deletes_victims_for_nothing(monkeypatch, w):
    """A PodGroup's preemption deletes victims only when the group then places its ``minCount``:
    the dry run's placement and reprieves ask every filter (kube-scheduler v1.37.2
    ``podgrouppreemption.go`` L223-240, L258-331), so no victim is taken for a group that still
    does not fit, and no run stalls at one instant (``NoProgress``) with victims coming back."""
    with monkeypatch.context() as m:
        _fits_after_every_group_preemption(m)
        simulate(w, "kube-gang", check=True, horizon=6 * 3600)


@settings(max_examples=examples(300), deadline=None)
@given(st.integers(1, 4), st.sampled_from([1, 2, 4, 8]), st.sampled_from([0, 64]), st.data())
def test_the_dry_run_sees_what_taking_the_pods_off_would_leave(nodes, gpn, memory, data):
    """``Cluster.room_without`` and ``Cluster.place_without`` (a preemption's dry run, read from the
    bindings) answer what the cluster answers once those pods are really unbound: each node takes
    as many pods of the preemptor one after another as ``bind`` accepts, and ``place`` with
    ``spread`` puts the group where ``place_without`` said (GPUs, memory, nodes owned by exclusive
    jobs, the preemptor's own nodes)."""
    import copy

    from courselib.model.cluster import Cluster

    cluster = Cluster(ClusterSpec(nodes, gpn, memory_per_node=memory))
    def job(name, pods):
        return Job(name, pods, data.draw(st.integers(0, gpn)), duration=60.0,
                   exclusive=data.draw(st.sampled_from([False, False, True])),
                   memory_per_pod=data.draw(st.sampled_from([0, 16, 24])))
    jobs = [job(f"j{k}", 8) for k in range(data.draw(st.integers(1, 4)))]
    group = job("group", 4)
    for j, i in data.draw(st.lists(st.tuples(st.sampled_from(jobs + [group]), st.integers(0, nodes - 1)),
                                   max_size=12)):
        if cluster.fits(j, i, None):
            cluster.bind(j, i)
    gone = {i: {name: data.draw(st.integers(0, count)) for name, count in cluster.jobs_on[i].items()
                if name != "group"} for i in range(nodes)}
    after = copy.deepcopy(cluster)
    for i, taken in gone.items():
        for name, k in taken.items():
            for _ in range(k):
                after.unbind_one(next(j for j in jobs if j.name == name), i)
    for i in range(nodes):
        trial, took = copy.deepcopy(after), 0
        while took < 12 and trial.fits(group, i, None):
            trial.bind(group, i)
            took += 1
        assert min(cluster.room_without(group, i, gone[i]), 12) == took, i
        assert cluster.fits_without(group, i, gone[i]) == (took > 0)
    want = data.draw(st.integers(1, 8))
    plan = cluster.place_without(group, want, gone)
    before = {i: b.pods for i, b in after.alloc.get("group", {}).items()}
    after.fast = data.draw(st.booleans())
    after.place(group, want, spread=True)
    assert plan == {i: b.pods - before.get(i, 0) for i, b in after.alloc.get("group", {}).items()
                    if b.pods > before.get(i, 0)}
