"""The fast path of the gang simulator decides exactly what the straightforward reference path does.

``simulate(..., reference=True)`` rescans every job and pod in every cycle (the code as first
written); the default path keeps ordered lists, running totals and free-GPU buckets so that a
cycle costs O(what waits), not O(jobs ever submitted) or O(nodes). On random seeded workloads
every job's result (start, end, state, pending reason, held GPUs), the deadlock verdict and the
whole trace must be identical, for all five policies and their main options.
"""
from __future__ import annotations

import functools
import hashlib
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import replace

import math
import random

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from courselib.model.gang import SchedState
from courselib.model.generate import BUSY_RUNTIMES, BUSY_SIZES, busy_workload, overloaded_workload, scale_workload
from courselib.model.policies.slurm import Slurm
from courselib.model.policies.slurm_fast import SlurmFast
from courselib.model.workload import ClusterSpec, Job, Queue, Workload
from courselib.sim.gang import simulate
from budget import examples

VARIANTS = {
    "kube-default": {}, "kube-default+preemption": {"preemption": True},
    "volcano": {}, "volcano+no-enqueue": {"enqueue": False},
    "volcano+overcommit-1.0": {"overcommit_factor": 1.0}, "volcano+no-minResources": {"min_resources": False},
    "kueue": {}, "kueue+v1beta1": {"config_api": "v1beta1"}, "kueue+no-waitForPodsReady": {"wait_for_pods_ready": False},
    "kueue+short-timeout": {"timeout": 120, "backoff_base": 30, "backoff_max": 240},
    "kueue+requeue-by-creation": {"timeout": 120, "requeuing_timestamp": "Creation"},
    "slurm": {}, "slurm+easy": {"bf_job_part_count_reserve": 1}, "slurm+no-backfill": {"backfill": False},
    # a short window: many jobs find no start in it (the pass's staircase of failures); few tested
    "slurm+window-15min": {"bf_window": 900.0}, "slurm+test-3": {"bf_max_job_test": 3, "bf_window": 3600.0},
    # backfill as real slurmctld runs it: a pass every bf_interval after a change, not at every event
    "slurm+bf-interval-30s": {"bf_interval": 30.0}, "slurm+bf-interval-10min": {"bf_interval": 600.0, "bf_max_job_test": 8},
    "kube-gang": {}, "kube-gang+pod-by-pod": {"pod_group_cycle": False},
    "kube-gang+pod-by-pod-60s": {"pod_group_cycle": False, "permit_timeout": 60, "requeue_after": 0},
}


@st.composite
def workloads(draw, max_jobs: int = 9, oversize: int = 1):
    """Small clusters under pressure: bursts, priorities, min_member, constraints, exclusive
    jobs, memory, time limits and queues with quotas and a cohort. ``max_jobs`` and ``oversize``
    (jobs up to that many times the cluster) make crowds: most jobs wait, many never fit."""
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
    for k in range(draw(st.integers(1, max_jobs))):
        t += draw(st.sampled_from([0.0, 0.0, 30.0, 600.0]))
        gpp = draw(st.integers(1, gpn))
        pods = draw(st.integers(1, max(1, oversize * (nodes * gpn) // gpp + 1)))
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


def same(w: Workload, variant: str, horizon: float | None = None, *, reuse: bool = False, **extra) -> None:
    """The fast path's result on ``w`` is the reference's. ``reuse=True``: the reference's run may be one
    made earlier in this session on the same workload and options (:func:`_reference`), for the tests
    that plant slips in the fast path and compare each planted run with the same reference."""
    policy, options = variant.split("+")[0], {**VARIANTS[variant], **extra}
    with _slurm_passes() as passes:
        fast = simulate(w, policy, horizon=horizon, check=True, **options)
    ref, ref_passes = _reference(w, policy, horizon, options, reuse)
    # Slurm's backfill: every pass made the same reservations (start, end, nodes), not only the
    # same starts, so a wrong plan for a job that waits is caught before it changes a schedule
    # (each comparison of a whole run is a bool first: with CI set, pytest does not truncate a failed
    # assertion's diff, and diffing two runs' passes took 85 s where a planted slip is expected to fail)
    same_passes = passes[False] == ref_passes
    assert same_passes, f"{variant}: the passes' reservations differ from pass {_first_difference(passes[False], ref_passes)}"
    for a, b in zip(fast.jobs, ref.jobs, strict=True):
        assert (a.name, a.start, a.end, a.state, a.pending_reason) == \
            (b.name, b.start, b.end, b.state, b.pending_reason), variant
        assert a == b, variant
    assert fast.deadlock == ref.deadlock and fast.verdict == ref.verdict
    same_trace = fast.trace == ref.trace
    assert same_trace, f"{variant}: the traces differ from event {_first_difference(fast.trace, ref.trace)}"
    same_data = _decided(fast.to_dict()) == _decided(ref.to_dict())
    assert same_data, f"{variant}: the results' data differ"


def _first_difference(a: list, b: list) -> int:
    """The index of the first item where two lists differ (the shorter list's length if one is a prefix)."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


#: the last reference runs (result, every Slurm pass's reservations), by workload and options: the
#: reference path is a pure function of them, and the tests that reuse a run patch only the fast
#: path's classes (SlurmFast, slurm_profile), which the reference (Slurm) never calls
_REFERENCES: OrderedDict[str, tuple] = OrderedDict()
_KEPT = 8


def _reference(w: Workload, policy: str, horizon: float | None, options: dict, reuse: bool) -> tuple:
    """The reference's result and its passes: run now (and kept), or with ``reuse`` the kept run of the
    same workload, policy, horizon and options (keyed on their whole text)."""
    key = hashlib.sha256(repr((w, policy, horizon, sorted(options.items()))).encode()).hexdigest()
    if reuse and key in _REFERENCES:
        _REFERENCES.move_to_end(key)
        return _REFERENCES[key]
    with _slurm_passes() as passes:
        ref = simulate(w, policy, horizon=horizon, reference=True, **options)
    _REFERENCES[key] = ref, passes[True]
    while len(_REFERENCES) > _KEPT:
        _REFERENCES.popitem(last=False)
    return _REFERENCES[key]


def _decided(data: dict) -> dict:
    """A result's plain data less kube-gang's ``choices["messages"]`` on a topology: the pending
    messages every failed retry could have shown, which only the reference collects (it retries
    what cannot change; a comparison with a real run asks for the reference path,
    ``courselib.live.kube.result``). Every decision stays: the domain, the tied ones, the scores."""
    for job in data["jobs"]:
        if job.get("choices") and "messages" in job["choices"]:
            job["choices"] = {k: v for k, v in job["choices"].items() if k != "messages"}
    return data


@contextmanager
def _slurm_passes():
    """Record ``Slurm.reservations`` after every scheduling cycle, by path (reference or fast)."""
    passes: dict[bool, list] = {False: [], True: []}
    originals = {cls: cls.schedule for cls in (Slurm, SlurmFast)}

    def recorder(original):
        def recording(self, state):
            out = original(self, state)
            passes[self.reference].append((state.now, dict(self.reservations)))
            return out
        return recording

    for cls, original in originals.items():
        cls.schedule = recorder(original)
    try:
        yield passes
    finally:
        for cls, original in originals.items():
            cls.schedule = original


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.sampled_from(sorted(VARIANTS)))
def test_fast_path_matches_the_reference_on_random_workloads(w, variant):
    same(w, variant, horizon=12 * 3600)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.randoms(use_true_random=False))
def test_fast_path_matches_the_reference_with_a_recorded_group_order(w, rnd):
    """kube-gang's group_order (the order a real run's scheduler tried the gangs) on both paths."""
    names = [j.name for j in w.jobs]
    rnd.shuffle(names)
    same(w, "kube-gang", horizon=12 * 3600, group_order=names)


@settings(max_examples=examples(12), deadline=None)
@given(st.integers(0, 10 ** 6), st.sampled_from(["kube-default", "volcano", "kueue", "slurm", "kube-gang"]),
       st.sampled_from([0.6, 1.0, 1.5]))
def test_fast_path_matches_the_reference_on_seeded_scale_workloads(seed, policy, load):
    """The benchmark's generator (benchmarks/bench_scale.py), small: queues build up and drain."""
    same(scale_workload(seed, nodes=12, jobs=80, load=load, queues=2), policy)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(max_jobs=40, oversize=2), st.sampled_from(sorted(VARIANTS)))
def test_fast_path_matches_the_reference_on_crowded_workloads(w, variant):
    """Many jobs waiting at once, a third of them larger than the cluster: the fast paths' waiting
    indexes (courselib.model.waitlist) skip the jobs that cannot change; the reference looks at
    every one in every cycle."""
    same(w, variant, horizon=12 * 3600)


@settings(max_examples=examples(15), deadline=None)
@given(st.integers(0, 10 ** 6), st.sampled_from(sorted(VARIANTS)), st.sampled_from([(3, 8), (5, 2), (8, 1)]))
def test_fast_path_matches_the_reference_on_overloaded_workloads(seed, variant, shape):
    """The benchmark's overloaded cluster (bench_scale.py), small: jobs of growing size, half
    larger than the cluster, a queue that only grows until the submissions stop."""
    nodes, gpn = shape
    same(overloaded_workload(seed, nodes=nodes, gpus_per_node=gpn, jobs=8 * nodes), variant)


@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10 ** 6), st.sampled_from(sorted(VARIANTS)), st.sampled_from([(4, 8), (6, 2), (10, 1)]),
       st.sampled_from(BUSY_SIZES), st.sampled_from(BUSY_RUNTIMES), st.sampled_from([0.2, 1.0, 20.0]),
       st.sampled_from([0.0, 0.0, 0.2]))
def test_fast_path_matches_the_reference_on_busy_clusters(seed, variant, shape, sizes, runtime, gap, never):
    """The busy cluster of issue 35 (benchmarks/bench_busy.py), small: arrivals faster than ends, a
    long queue of jobs that (mostly) fit, so every backfill pass finds a start for every job it tests."""
    nodes, gpn = shape
    same(busy_workload(seed, nodes=nodes, gpus_per_node=gpn, jobs=60, sizes=sizes, runtime=runtime,
                       mean_gap_s=gap, mean_runtime_s=300.0, never_fit=never), variant)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_held_job_goes_exactly_when_it_fits(variant):
    """The boundary of every waiting index: b (3 GPUs) waits while 2 are free; c (2 GPUs) comes
    later and fits exactly; when x ends at 300 s exactly 3 are free and b goes then (under
    Volcano's overcommit 1.0 its enqueue is refused until then too). A fast path that lets a held
    job go one GPU early, or holds it one GPU late, differs from the reference here."""
    w = Workload(ClusterSpec(1, 8), [Job("a", 1, 5, duration=600.0), Job("x", 1, 1, duration=300.0),
                                     Job("b", 1, 3, duration=600.0),
                                     Job("c", 1, 2, submit=60.0, duration=180.0)])
    same(w, variant)
    r = simulate(w, variant.split("+")[0], **VARIANTS[variant])
    assert r.job("b").start == 300, variant
    if variant != "slurm+no-backfill":  # without backfill c waits behind b (Priority)
        # (with bf_interval: at the first backfill pass from 60 s on; the first pass ran at 0)
        assert r.job("c").start == max(60, VARIANTS[variant].get("bf_interval", 0)), variant


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(max_jobs=30, oversize=2), st.randoms(use_true_random=False),
       st.sampled_from(["Eviction", "Creation"]))
def test_fast_path_matches_the_reference_with_a_recorded_kueue_queue_order(w, rnd, requeuing):
    """Kueue's ties (same priority and queue-order timestamp) in a recorded queue_order, on crowded
    workloads with short PodsReady timeouts: the held index keeps each workload's key as it was
    when it was refused; an eviction gives the workload a new one (requeuingStrategy Eviction)."""
    names = [j.name for j in w.jobs]
    rnd.shuffle(names)
    same(w, "kueue", horizon=12 * 3600, timeout=120, backoff_base=30, backoff_max=240,
         requeuing_timestamp=requeuing, queue_order=tuple(names[: rnd.randint(0, len(names))]))


QUOTA = (Queue("a", nominal_quota=4, cohort="c"), Queue("b", nominal_quota=4, cohort="c", lending_limit=0))


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_job_held_for_quota_goes_exactly_when_the_quota_has_room(variant):
    """The quota boundary (Kueue's nominalQuota and cohort, Volcano's proportion capability): queue
    a has 4 GPUs and b lends none. a1 (2) and ax (1) run; a2 (2) waits for 1 GPU more (b's 4 are
    not lent); a3 (1) uses the last one exactly; a4 (5) is above a's maximum capacity and never
    goes under quota (Volcano's only with its enqueue gate); when ax ends at 300 s a's room is
    exactly 2 and a2 goes then, not before, not later."""
    w = Workload(ClusterSpec(2, 8), [Job("a1", 1, 2, duration=600.0, queue="a"),
                                     Job("ax", 1, 1, duration=300.0, queue="a"),
                                     Job("a2", 1, 2, duration=600.0, queue="a"),
                                     Job("a4", 5, 1, submit=30.0, duration=60.0, queue="a"),
                                     Job("a3", 1, 1, submit=60.0, duration=180.0, queue="a"),
                                     Job("b1", 1, 1, submit=90.0, duration=60.0, queue="b")], QUOTA)
    same(w, variant)
    r = simulate(w, variant.split("+")[0], **VARIANTS[variant])
    if variant.startswith("kueue") or variant in ("volcano", "volcano+overcommit-1.0"):  # the gate on
        assert r.job("a2").start == 300 and r.job("a3").start == 60, variant
        assert r.job("a4").start is None, variant


def test_a_waiting_job_is_not_retold_its_reason_at_every_cycle():
    """Issue 23: on an overloaded cluster (600 jobs, most waiting, half never fitting) each policy
    gives a waiting job its reason about once, not once per cycle in which the cluster's free
    capacity moved (Kueue's "k more needed", Volcano's plugin, kube-gang's pods that would fit)."""
    w = overloaded_workload(3, nodes=6, jobs=600)
    for policy in ("kube-default", "volcano", "kueue", "slurm", "kube-gang"):
        r = simulate(w, policy)
        told = sum(e.what.startswith("waiting:") for e in r.trace)
        assert told <= 1.5 * len(w.jobs), (policy, told)


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
    pol = SlurmFast(w)
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


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
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
    reference = Slurm(pol.workload)  # the reference, planning from the same running jobs
    reference.expected_end = pol.expected_end
    ref = reference.plan(state, job, t, reserved)
    assert fast == ref


def test_a_shorter_job_behind_one_that_found_no_start_still_gets_its_reservation():
    """The backfill pass's staircase of jobs with no start in the window covers only jobs with at
    least as many pods and at least as long a runtime. h (both nodes) is reserved from 1200 s to
    1900 s; a (1,000 s) fits on node 0 from 300 s only past the window (30 min), so it gets
    nothing; b (850 s) is as wide but shorter, ends before h's reservation and is reserved at
    300 s; c (1,100 s) is covered by a."""
    w = Workload(ClusterSpec(2, 8), [Job("r0", 1, 8, duration=300.0), Job("r1", 1, 8, duration=1200.0),
                                     Job("h", 2, 8, duration=700.0), Job("a", 1, 8, duration=1000.0),
                                     Job("b", 1, 8, duration=850.0), Job("c", 1, 8, duration=1100.0)])
    same(w, "slurm", bf_window=1800.0)
    with _slurm_passes() as passes:
        simulate(w, "slurm", bf_window=1800.0)
    first = passes[False][0]
    assert first[0] == 0 and set(first[1]) == {"h", "b"}
    assert first[1]["h"][:2] == (1200.0, 1900.0) and first[1]["b"][:2] == (300.0, 1150.0)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1, 2, 8]), st.integers(1, 12), st.sampled_from([60.0, 600.0, 900.0, 3600.0])),
                max_size=40), st.lists(st.tuples(st.sampled_from([1, 2, 8]), st.integers(1, 12),
                                                 st.sampled_from([30.0, 60.0, 600.0, 900.0, 7200.0])), max_size=20))
def test_the_staircase_answers_what_a_walk_over_every_failure_answers(failures, probes):
    """slurm._Staircase (the corners of the failed jobs) against the plain definition: some failed
    job as wide per pod with no more pods and no longer a runtime."""
    from courselib.model.policies.slurm_fast import _Staircase
    stairs, seen = _Staircase(), []
    for g, pods, runtime in failures:
        stairs.add(g, pods, runtime)
        seen.append((g, pods, runtime))
        for pg, pp, pr in probes + [(g, pods, runtime)]:
            walk = any(fg == pg and fp <= pp and fr <= pr for fg, fp, fr in seen)
            assert stairs.covers(pg, pp, pr) == walk


@settings(max_examples=examples(20), deadline=None)
@given(st.integers(0, 10 ** 6), st.sampled_from([2, 5, 500]), st.sampled_from([1800.0, 3600.0, 86400.0]),
       st.sampled_from([0, 1]))
def test_slurm_backfill_passes_repeated_behind_a_long_queue_match_the_reference(seed, tested, window, reserve):
    """The overloaded cluster, small, with few jobs tested and short windows: most cycles are
    arrivals behind the jobs backfill tests, where the fast path repeats the last pass's
    reservations instead of searching again (SlurmFast._same_pass) — unless something started or
    ended, the tested jobs changed, or a candidate time came into the window. Every pass's
    reservations are compared with the reference's (same())."""
    w = overloaded_workload(seed, nodes=3, gpus_per_node=8, jobs=40, gap_s=600.0)
    same(w, "slurm", bf_max_job_test=tested, bf_window=window, bf_job_part_count_reserve=reserve)


def test_slurm_profile_forgets_the_blocked_nodes_times_when_a_job_starts_on_them():
    """Availability._out_of reuses its last answer for the same mask object (a failed plan asks
    again); once a job starts or ends on those nodes the profile changes and the times must too."""
    from courselib.model.cluster import Cluster
    from courselib.model.policies.slurm_profile import Availability
    from courselib.model.workload import ClusterSpec, Job

    cluster = Cluster(ClusterSpec(nodes=3, gpus_per_node=4))
    ends: dict[str, float] = {}
    avail = Availability(cluster, ends)
    avail.refresh(0.0)
    mask = 0b011                                  # nodes 0 and 1, blocked by some reservation
    assert avail._out_of(mask, 4) == [-math.inf, -math.inf]   # both wholly free now
    job = Job("a", pods=2, gpus_per_pod=4, duration=100.0)
    cluster.bind(job, 0)
    cluster.bind(job, 1)
    ends["a"] = 100.0
    avail.touch([0, 1])
    avail.refresh(0.0)
    assert avail._out_of(mask, 4) == [100.0, 100.0]          # free again only when `a` ends


@contextmanager
def _carry_stats():
    """Sum ``Slurm.carry_stats`` over every fast-path policy made meanwhile."""
    total = {"passes": 0, "carried": 0, "moved": 0, "in_place": 0, "seeded": 0, "early": 0, "reach": 0}
    made: list = []
    original = Slurm.__init__

    @functools.wraps(original)  # (make_policy reads the options from the signature)
    def recording(self, *a, **k):
        original(self, *a, **k)
        made.append(self)

    Slurm.__init__ = recording
    try:
        yield total
    finally:
        Slurm.__init__ = original
        for pol in made:
            if not pol.reference:
                for key in total:
                    total[key] += pol.carry_stats[key]


@st.composite
def long_queues(draw):
    """An overloaded queue long enough for backfill passes to follow one another: whole-node and
    partial-node pods, some jobs ending before their time limit, bursts and gaps."""
    nodes, gpn = draw(st.sampled_from([(3, 8), (4, 4), (6, 8), (5, 2)]))
    jobs, t = [], 0.0
    for k in range(draw(st.integers(30, 90))):
        t += draw(st.sampled_from([0.0, 60.0, 60.0, 300.0, 1800.0]))
        gpp = draw(st.sampled_from([gpn, gpn, max(1, gpn // 2), 1]))
        pods = draw(st.integers(1, (nodes * gpn) // gpp + 2))
        duration = float(draw(st.sampled_from([0] + [1] * 9)) * draw(st.integers(1, 24)) * 300)
        limit = draw(st.sampled_from([None, None, duration or None, duration + 600.0]))
        jobs.append(Job(name=f"q{k}", pods=pods, gpus_per_pod=gpp, submit=t, duration=duration,
                        priority=draw(st.sampled_from([0, 0, 0, 1])), time_limit=limit))
    return Workload(ClusterSpec(nodes, gpn), jobs)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(long_queues(), st.sampled_from([{}, {"bf_max_job_test": 8}, {"bf_window": 7200.0},
                                       {"bf_max_job_test": 20, "bf_window": 14400.0}]))
def test_slurm_passes_that_carry_the_last_ones_outcomes_match_the_reference(w, options):
    """A backfill pass that carries the last pass's outcomes over (SlurmFast._carried: a reservation
    is kept if its plan still works, a job with no start is tried only at the times where it
    could now have one) makes every reservation the reference's full search makes (same())."""
    same(w, "slurm", **options)


def test_the_carried_passes_are_exercised_and_move_reservations():
    """The equality above means something only if passes do carry outcomes over, and some move a
    reservation (a job blocked by what another job found, re-searched where that one was)."""
    with _carry_stats() as stats:
        for seed in range(6):
            same(overloaded_workload(seed, nodes=4, gpus_per_node=8, jobs=80, gap_s=300.0), "slurm")
            w = scale_workload(seed, nodes=6, jobs=120)
            same(w, "slurm", bf_window=7200.0)
    assert stats["carried"] > stats["passes"] // 2, stats
    assert stats["moved"] > 0, stats
    assert stats["in_place"] > stats["carried"] // 2, stats  # the record updated, not rebuilt
    assert stats["seeded"] > 0, stats  # a job spared a search by a root carried from the last pass


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(planning_states(), st.data())
def test_the_capacity_curve_counts_what_a_plan_counts(setup, data):
    """Availability.curve answers, for a time and a pod size, every runtime at once: the nodes the
    reservations overlapping [t, t + runtime] block (closed at its end, as Slurm's backfill: each
    runtime that ends exactly where a reservation begins is asked too), and how many pods fit
    outside them. Asked
    in any order, each answer is what blocked() gives and what plan() decides, now included when
    no running job is due to end now (issue 23). A curve made before more reservations were
    added (as a pass adds them) takes them in when asked again."""
    pol, state, reserved, gpn = setup
    avail = pol._availability(state)
    later = sorted({e for e in pol.expected_end.values() if e > state.now} | {r[1] for r in reserved}
                   | {r[0] for r in reserved if r[0] > state.now} | {state.now + 1.0, state.now})
    assert all(e > state.now for e in pol.expected_end.values())  # (then now may be asked too)
    t = data.draw(st.sampled_from(later))
    g = data.draw(st.integers(1, gpn))
    split = data.draw(st.integers(0, len(reserved)))
    grown = list(reserved[:split])  # the pass's list, asked, then added to
    for runtime in data.draw(st.lists(st.integers(1, 1500), max_size=3)) + [2000]:  # (every mask made)
        avail.curve_at(avail.curve(grown, t, g), t, t + runtime, g)
    grown.extend(reserved[split:])
    curve = avail.curve(grown, t, g)
    edges = sorted({r[0] - t for r in grown if r[0] - t >= 1})  # a job that would end as one begins
    for runtime in data.draw(st.lists(st.integers(1, 1500), min_size=1, max_size=6)) + edges:
        mask, fit = avail.curve_at(curve, t, t + runtime, g)
        assert mask == avail.blocked(grown, t, t + runtime)
        for pods in {1, max(1, fit), fit + 1}:
            job = Job("x", pods, g, duration=float(runtime))
            assert (fit < pods) == (avail.plan(job, t, grown) is None), (runtime, pods, fit)


@pytest.mark.parametrize("touched", [1, 3, 40, 70])
def test_the_profile_after_a_change_is_the_profile_made_from_scratch(touched):
    """Availability.refresh moves a changed node's times level by level when few nodes changed,
    and sorts every level again when many did: either way the profile is the one a new
    Availability computes from the cluster as it is. So are its masks of the nodes free enough at
    a time (free_mask), which a change of few nodes updates where they were kept: some are asked
    after every change, some after many, some for the first time."""
    from courselib.model.cluster import Cluster
    from courselib.model.policies.slurm_profile import Availability
    from courselib.model.workload import ClusterSpec, Job

    rng = random.Random(touched)
    cluster = Cluster(ClusterSpec(nodes=70, gpus_per_node=8))
    ends: dict[str, float] = {}
    avail = Availability(cluster, ends)
    avail.refresh(0.0)
    running = []
    for step in range(60):
        if running and rng.random() < 0.4:
            name, nodes = running.pop(rng.randrange(len(running)))
            cluster.release(name)
            del ends[name]
        else:
            job = Job(f"j{step}", 1, rng.choice([1, 2, 4, 8]), duration=1.0)
            nodes = [i for i in rng.sample(range(70), touched) if cluster.free[i] >= job.gpus_per_pod]
            for i in nodes:
                cluster.bind(job, i)
            if not nodes:
                continue
            ends[job.name] = float(rng.randint(1, 50) * 60)
            running.append((job.name, nodes))
        avail.touch(nodes)
        avail.refresh(0.0)
        fresh = Availability(cluster, ends)
        fresh.refresh(0.0)
        assert (avail.when == fresh.when).all(), step
        assert avail.sorted == fresh.sorted, step
        for t in (0.0, 59.0, 60.0, 61.0, 600.0, 1500.0, 3000.0, math.inf):
            for f in range(1, 9):
                if rng.random() < (0.9 if t < 100 else 0.05):
                    assert avail.free_mask(t, f) == fresh.free_mask(t, f), (step, t, f)


def test_the_carried_record_holds_only_the_jobs_backfill_tests():
    """A pass updates the last one's record in place: the jobs that left the window (started
    since, or by this pass) must leave it too, or a run of 100,000 jobs would keep them all."""
    sizes: list[int] = []
    original = SlurmFast._backfill

    def recording(self, state, pending):
        original(self, state, pending)
        if self._carry is not None:
            sizes.append(max(len(self._carry.outcomes), len(self._carry.dom)))

    SlurmFast._backfill = recording
    try:
        for seed in range(3):
            w = overloaded_workload(seed, nodes=4, gpus_per_node=8, jobs=200, gap_s=300.0)
            simulate(w, "slurm", bf_max_job_test=8)
    finally:
        SlurmFast._backfill = original
    assert len(sizes) > 100 and max(sizes) <= 8, (len(sizes), max(sizes))


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(1, 12), st.sampled_from([1, 2, 4, 8]), st.sampled_from([0, 64]), st.data())
def test_binding_a_plan_at_once_is_binding_it_pod_by_pod(nodes, gpn, memory, data):
    """Cluster.bind_plan (one plain job's pods, node by node, totals counted once) leaves the
    cluster exactly as Cluster.bind pod by pod does: free GPUs and memory, buckets, bindings, the
    jobs on each node, held GPUs and pods per job and per queue; a job that is not plain is bound
    pod by pod; a plan that does not fit is refused as bind refuses it (issue 23). Releasing a
    job at once (its nodes' buckets moved together) is taking its pods off one by one, and the
    free GPUs as an array follow both (issue 29)."""
    from courselib.model.cluster import Cluster

    spec = ClusterSpec(nodes, gpn, memory_per_node=memory)
    at_once, by_pod = Cluster(spec), Cluster(spec)
    at_once.free_array()   # (kept from here on from the nodes changed)
    jobs = []
    for k in range(data.draw(st.integers(1, 8))):
        g = data.draw(st.integers(1, gpn))
        job = Job(f"j{k}", 1, g, duration=60.0, queue=data.draw(st.sampled_from(["default", "q2"])),
                  exclusive=data.draw(st.booleans()) and k % 3 == 0,
                  memory_per_pod=data.draw(st.sampled_from([0, 0, 16])))
        plan = []
        for i in data.draw(st.lists(st.integers(0, nodes - 1), unique=True, max_size=nodes)):
            plan.append((i, data.draw(st.integers(0, by_pod.free[i] // g + 1))))  # (+1: too many)
        try:
            for i, n in plan:
                for _ in range(n):
                    by_pod.bind(job, i)
        except ValueError:
            with pytest.raises(ValueError):
                at_once.bind_plan(job, plan)
            return  # (a refused plan: what bind left half done is no state to compare)
        assert at_once.bind_plan(job, plan) == sum(n for _, n in plan)
        jobs.append(job)
        if data.draw(st.booleans()):  # a job ends: released at once, or its pods one by one
            gone = jobs.pop(data.draw(st.integers(0, len(jobs) - 1)))
            freed = at_once.release(gone.name)
            assert freed == sum(b.gpus for b in by_pod.alloc.get(gone.name, {}).values())
            for i, b in sorted(list(by_pod.alloc.get(gone.name, {}).items())):
                for _ in range(b.pods):
                    by_pod.unbind_one(gone, i)
        for field in ("free", "free_mem", "_buckets", "jobs_on", "owner_exclusive", "_held", "_pods",
                      "_queue_of", "held_by_queue", "_free_total"):
            assert getattr(at_once, field) == getattr(by_pod, field), field
        assert {j: dict(b) for j, b in at_once.alloc.items()} == {j: dict(b) for j, b in by_pod.alloc.items()}
        assert at_once.free_array().tolist() == at_once.free


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(1, 40), st.sampled_from([1, 2, 4, 8]), st.data())
def test_the_buckets_read_after_any_changes_are_the_buckets_made_from_scratch(nodes, gpn, data):
    """Cluster keeps its free-GPU buckets up to date only when they are read: a bind_plan or a
    release notes the nodes it changed (every bucket made again at the next read once a quarter
    of the cluster or more did), a single bind or unbind moves its node at once while nothing
    waits. Whatever the changes between two reads (plans over a few nodes or most of them, pods
    bound or taken off one by one, jobs released), what is read then (bucket, max_free,
    fit_count, first_fit_node, pods_that_fit) is what the free GPUs say node by node."""
    from courselib.model.cluster import Cluster

    cluster = Cluster(ClusterSpec(nodes, gpn))
    jobs: dict[str, Job] = {}
    for step in range(data.draw(st.integers(1, 30))):
        what = data.draw(st.sampled_from(["plan", "plan", "bind", "unbind", "release", "read"]))
        if what == "plan":
            job = Job(f"j{step}", 1, data.draw(st.integers(1, gpn)), duration=60.0)
            fits = [i for i in range(nodes) if cluster.free[i] >= job.gpus_per_pod]
            chosen = data.draw(st.lists(st.sampled_from(fits), unique=True)) if fits else []
            if cluster.bind_plan(job, [(i, data.draw(st.integers(1, cluster.free[i] // job.gpus_per_pod)))
                                       for i in chosen]):
                jobs[job.name] = job
        elif what == "bind":
            job = Job(f"j{step}", 1, data.draw(st.integers(1, gpn)), duration=60.0)
            fits = [i for i in range(nodes) if cluster.free[i] >= job.gpus_per_pod]
            if fits:
                cluster.bind(job, data.draw(st.sampled_from(fits)))
                jobs[job.name] = job
        elif jobs and what == "unbind":
            job = jobs[data.draw(st.sampled_from(sorted(jobs)))]
            cluster.unbind_one(job, data.draw(st.sampled_from(sorted(cluster.alloc[job.name]))))
            if job.name not in cluster.alloc:
                del jobs[job.name]
        elif jobs and what == "release":
            cluster.release(jobs.pop(data.draw(st.sampled_from(sorted(jobs)))))
        if data.draw(st.booleans()):   # read now, or let the changes pile up until a later read
            free = list(cluster.free)
            levels = [[i for i in range(nodes) if free[i] == f] for f in range(gpn + 1)]
            assert [cluster.bucket(f) for f in range(gpn + 1)] == levels, step
            assert cluster.max_free() == max([f for f in free if f > 0], default=0)
            for g in range(1, gpn + 1):
                assert cluster.fit_count(g) == sum(f // g for f in free)
                job = Job("probe", nodes * gpn + 1, g, duration=60.0)
                assert cluster.pods_that_fit(job) == sum(f // g for f in free)
                for spread in (False, True):
                    fit = [i for i in range(nodes) if free[i] >= g]
                    best = min(fit, key=lambda i: (-free[i] if spread else free[i], i), default=None)
                    assert cluster.first_fit_node(job, spread=spread) == best, (g, spread)
    cluster.check()


@pytest.mark.parametrize("options", [{}, {"bf_max_job_test": 8}, {"backfill": False}])
def test_the_queue_head_the_slurm_policy_mirrors_is_the_queue_head(options):
    """Slurm keeps the runs and names of its queue's first entries from cycle to cycle (insertions,
    main-scheduler starts, backfill starts and removals made in both) instead of copying them out
    of the queue at every backfill pass: after every cycle they are exactly the queue's head, and
    every backfill pass is handed exactly its first bf_max_job_test jobs (issue 23)."""
    seen = {"cycles": 0, "passes": 0}

    class Checked(SlurmFast):
        def schedule(self, state):
            out = super().schedule(state)
            runs, names = self._head_runs, self._head_names
            assert runs == [e[-1] for e in self._queue[:len(runs)]]
            assert names == [e[-1].name for e in self._queue[:len(runs)]] == [e[3] for e in self._queue[:len(runs)]]
            seen["cycles"] += 1
            return out

        def _backfill(self, state, pending):
            assert pending == [e[-1] for e in self._queue[: self.bf_max_job_test]]
            seen["passes"] += 1
            super()._backfill(state, pending)

    import dataclasses
    base = overloaded_workload(5, nodes=6, jobs=400)
    rng = random.Random(5)  # (some jobs jump the queue: insertions into its head)
    w = Workload(base.cluster, [dataclasses.replace(j, priority=rng.choice([0, 0, 0, 1, 2])) for j in base.jobs])
    pol = Checked(w, **options)
    from courselib.sim.gang import EventLoop, default_horizon
    sim = EventLoop(w, pol)
    sim.run(default_horizon(w))
    assert seen["cycles"] > 100 and (seen["passes"] > 50 or options.get("backfill") is False)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(long_queues(), workloads(max_jobs=40, oversize=2)), st.sampled_from([1.0, 30.0, 300.0, 3600.0]),
       st.sampled_from([{}, {"bf_max_job_test": 8}, {"bf_window": 7200.0}]))
def test_backfill_every_bf_interval_matches_the_reference(w, interval, options):
    """Backfill as real slurmctld runs it (a pass once bf_interval has passed since the last one and
    something changed; a wake-up then): the fast path's passes, starts and reasons are the
    reference's, on busy queues and on random ones."""
    same(w, "slurm", bf_interval=interval, **options)


def test_bf_interval_spaces_the_backfill_passes_and_wakes_for_the_next():
    """The passes of a busy queue come at least bf_interval apart, and with a long interval fewer
    passes run and some job starts later than with a pass at every event: the option is not inert."""
    w = overloaded_workload(1, nodes=4, gpus_per_node=8, jobs=80, gap_s=300.0)
    times: dict[float, list] = {}
    original = Slurm._backfill_begins

    def spy(self, now):
        times.setdefault(self.bf_interval, []).append(now)
        return original(self, now)

    Slurm._backfill_begins = spy
    try:
        every = simulate(w, "slurm", bf_interval=0.0)
        spaced = simulate(w, "slurm", bf_interval=1800.0)
    finally:
        Slurm._backfill_begins = original
    gaps = [b - a for a, b in zip(times[1800.0], times[1800.0][1:])]
    assert gaps and min(gaps) >= 1800.0
    assert len(times[1800.0]) < len(times[0.0]) / 2
    later = [j.name for j, k in zip(spaced.jobs, every.jobs) if (j.start or 0) > (k.start or 0)]
    assert later


@st.composite
def busy_queues(draw):
    """Busy queues drawn freely (issue 35), not from the benchmark's generator: bursts faster than
    the ends, pods of any width packed several to a node or spread over many, runtimes from zero
    to hours that mostly end before their limit (reservations overlap, cover and abut one another,
    and jobs start in the middle of a pass), a few jobs with a feature, an exclusive or a memory
    request among them (planned on arrays, their reservations in the same timeline; one that
    starts elsewhere than it was reserved frees where it was, which a carried pass must see)."""
    nodes = draw(st.integers(2, 9))
    gpn = draw(st.sampled_from([1, 2, 4, 8]))
    memory = draw(st.sampled_from([0, 0, 0, 64]))
    cluster = ClusterSpec(nodes, gpn, memory_per_node=memory, features=("nvlink",) if nodes > 2 else ())
    jobs, t = [], 0.0
    for k in range(draw(st.integers(20, 70))):
        t += draw(st.sampled_from([0.0, 0.0, 1.0, 5.0, 60.0]))
        gpp = draw(st.integers(1, gpn))
        pods = draw(st.integers(1, max(1, (nodes * gpn) // gpp)))
        duration = float(draw(st.sampled_from([0, 60, 61, 300, 600, 1800, 3600])))
        limit = draw(st.sampled_from([None, duration + 60.0, 2 * duration + 60.0, duration * 1.5 or None]))
        odd = draw(st.sampled_from([None] * 8 + ["nvlink", "exclusive", "memory"]))
        jobs.append(Job(name=f"u{k}", pods=pods, gpus_per_pod=gpp, submit=t, duration=duration,
                        priority=draw(st.sampled_from([0, 0, 0, 1])), time_limit=limit,
                        constraint="nvlink" if odd == "nvlink" and nodes > 2 else None,
                        exclusive=odd == "exclusive", memory_per_pod=16 if odd == "memory" else 0))
    return Workload(cluster, jobs)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(busy_queues(), st.sampled_from([{}, {}, {"bf_max_job_test": 10}, {"bf_window": 1800.0},
                                       {"bf_interval": 30.0}, {"bf_job_part_count_reserve": 1}]), st.booleans())
def test_the_pass_timeline_finds_each_jobs_start_where_the_reference_does(w, options, by_runs):
    """SlurmFast's search of a plain job through the pass's Timeline (slurm_profile.Timeline: free
    GPUs and reserved nodes at every candidate time, the rows that cannot hold the job ruled out
    at once) makes every reservation and start the reference's walk over every time makes; also
    going by runs of rows whatever the rows (``by_runs``: slurm_profile.RUNS_FROM = 0)."""
    from courselib.model.policies import slurm_profile
    was = slurm_profile.RUNS_FROM
    slurm_profile.RUNS_FROM = 0 if by_runs else was
    try:
        same(w, "slurm", **options)
    finally:
        slurm_profile.RUNS_FROM = was


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(busy_queues(), st.sampled_from([30.0, 30.0, 60.0, 300.0]),
       st.sampled_from([{}, {}, {"bf_max_job_test": 10}, {"bf_window": 1800.0}]))
def test_busy_queues_with_a_pass_every_bf_interval_match_the_reference(w, interval, options):
    """Backfill at slurm.conf's bf_interval (30 s, backfill.c; or longer) on busy queues drawn freely:
    between two passes the main scheduler starts jobs and jobs end early, so a pass carries the last
    one's outcomes (SlurmFast._carried) across many cycles, and the cycles in between keep the last
    pass's reservations and ask to be woken for the next. Every pass's reservations, every start and
    reason are the reference's (benchmarks/README.md measures this setting beside bf_interval 0)."""
    same(w, "slurm", bf_interval=interval, **options)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(busy_queues(), st.sampled_from([{}, {}, {"bf_max_job_test": 10}, {"bf_window": 1800.0},
                                       {"bf_interval": 30.0}]))
def test_passes_carried_across_early_ends_match_the_reference(w, options):
    """A pass carried across early ends (issue 35: SlurmFast._carried's ``freed``): a job that ended
    before its --time frees GPUs from now until its old limit, a job the main scheduler started
    elsewhere than reserved frees where it was reserved, and each carried job is tried only over
    those spans (the pass's Timeline) before it keeps its reservation. On busy queues drawn freely,
    where most jobs end early, every pass's reservations, every start and reason are the reference's."""
    same(w, "slurm", **options)


def test_the_passes_carried_across_early_ends_are_exercised():
    """The equality above means something only if passes do carry over early ends and starts off a
    reservation, and move reservations there (the freed spans answered by the Timeline)."""
    with _carry_stats() as stats:
        for seed in range(3):
            same(busy_workload(seed, nodes=6, gpus_per_node=4, jobs=50, mean_runtime_s=300.0), "slurm")
    assert stats["early"] > stats["passes"] // 3, stats
    assert stats["moved"] > stats["early"], stats


@pytest.mark.parametrize("plant", ["a level too high", "the last of its nodes", "a second late"])
def test_a_freed_span_starts_where_one_of_its_nodes_holds_a_pod_and_planted_slips_fail(plant):
    """A carried pass tries a job over each span that an early end freed or a moved reservation
    left only from the first time one of that span's nodes has the job's GPUs a pod free
    (Availability.reach; before it those nodes hold none of its pods, so it fails as it did). It
    is exercised (friendly and busy queues on a few nodes, where a small job ends early on a node
    that others keep busy), the equalities above hold with it, and a reach read at the level above
    the job's, from the node that gets there last, or a second late makes the checks fail."""
    from courselib.model.policies import slurm_profile
    reach = slurm_profile.Availability.reach
    ws = [busy_workload(seed, nodes=6, gpus_per_node=4, jobs=50, mean_runtime_s=300.0) for seed in range(2)] + \
        [scale_workload(seed, nodes=8, jobs=150) for seed in range(2)]

    def planted(self, nodes, g):
        if plant == "a level too high":
            return reach(self, nodes, min(g + 1, self.top))
        if plant == "the last of its nodes":
            return max((float(self.when[g][i]) for i in nodes), default=math.inf)
        w = reach(self, nodes, g)
        return w if w == -math.inf else w + 1.0

    with _carry_stats() as stats:
        for w in ws:
            same(w, "slurm")
    assert stats["reach"] > stats["early"] > 100, stats
    slurm_profile.Availability.reach = planted
    failed = 0
    try:
        for w in ws:
            try:
                same(w, "slurm", reuse=True)
            except AssertionError:
                failed += 1
    finally:
        slurm_profile.Availability.reach = reach
    assert failed >= 2, (plant, failed)


def test_the_pass_timeline_is_exercised():
    """The equality above means something only if the timeline answers searches, with rows added
    by reservations and by jobs that start in the middle of a pass, and rows ruled out for a job."""
    from courselib.model.policies import slurm_profile
    seen = {"searches": 0, "found": 0, "refree": 0}
    earliest, refree = slurm_profile.Timeline.earliest, slurm_profile.Timeline.refree

    def spy_earliest(self, *a):
        out = earliest(self, *a)
        seen["searches"] += 1
        seen["found"] += out is not None
        return out

    def spy_refree(self, *a):
        seen["refree"] += 1
        return refree(self, *a)

    slurm_profile.Timeline.earliest, slurm_profile.Timeline.refree = spy_earliest, spy_refree
    try:
        for seed in range(3):
            same(busy_workload(seed, nodes=6, gpus_per_node=4, jobs=50, mean_runtime_s=300.0), "slurm")
    finally:
        slurm_profile.Timeline.earliest, slurm_profile.Timeline.refree = earliest, refree
    assert seen["found"] > 100 and seen["searches"] > seen["found"] // 2, seen
    assert seen["refree"] > seen["searches"] // 50, seen  # (one per pass, more when jobs start in it)


@pytest.mark.parametrize("plant", ["a later row", "a span a minute short", "a level at the row before's time"])
def test_a_planted_difference_in_the_pass_timeline_fails_the_busy_checks(plant):
    """The busy-queue equalities above can fail: a Timeline that answers a job's search with a later
    row than the first that fits, or that reads a job's span a minute short (a reservation that
    starts in the job's last minute not seen in its way), makes other reservations than the
    reference's walk, and the same checks (every pass's reservations, every start) say so; so does
    a row whose free-GPU level, packed when first asked (``Timeline._level``), is the profile's at
    the row before's time (what a level list shared with that row would hold if GPUs freed between)."""
    from courselib.model.policies import slurm_profile
    earliest, level = slurm_profile.Timeline.earliest, slurm_profile.Timeline._level

    def planted(self, g, pods, runtime, k, hi):
        if plant == "a later row":
            hit = earliest(self, g, pods, runtime, k, hi)
            return earliest(self, g, pods, runtime, hit[0] + 1, hi) if hit else hit
        return earliest(self, g, pods, runtime - 60.0 if runtime > 60.0 else runtime, k, hi)

    def planted_level(self, r, f):
        lv = self._lv[r] or self._row(r)
        if lv[f] is None and r > 1:
            lv[f] = self.avail.free_mask(self.times[r - 1], f)
        return level(self, r, f)

    if plant.startswith("a level"):
        slurm_profile.Timeline._level = planted_level
    else:
        slurm_profile.Timeline.earliest = planted
    failed = 0
    try:
        for seed in range(6):
            try:
                same(busy_workload(seed, nodes=6, gpus_per_node=4, jobs=50, mean_runtime_s=300.0), "slurm", reuse=True)
            except (AssertionError, TypeError):  # (or a search answered where no plan fits: a plan of None)
                failed += 1
    finally:
        slurm_profile.Timeline.earliest, slurm_profile.Timeline._level = earliest, level
    assert failed >= 3, (plant, failed)


@pytest.mark.parametrize("plant", ["a run a row too long", "a run past the next start or end",
                                   "the older rows' run a row early"])
def test_the_timeline_passes_over_runs_of_rows_and_planted_slips_fail(plant):
    """Between two times at which a reservation of the pass starts or ends, every row holds the
    same nodes, and after now a row's count never falls with time: Timeline.earliest reads the
    first row of such a run for all of it (issue 35: a whole-node job on the 6,250-node tree spans
    thousands of rows; from RUNS_FROM rows on, 0 here). It is exercised (busy queues, friendly ones,
    and the tree, where the tree plugin places the jobs), the equalities above hold with it, and a
    run read a row too long, one read past the next reservation's start or end, or the older rows
    of a window ORed from a row too early (the row before their run: its own held nodes left out)
    make the checks fail."""
    from courselib.model.generate import OVERLOADED_TOPOLOGY, with_topology
    from courselib.model.policies import slurm_profile
    Timeline = slurm_profile.Timeline
    run_end, run_start, init, runs_from = Timeline._run_end, Timeline._run_start, Timeline.__init__, \
        slurm_profile.RUNS_FROM
    ws = [busy_workload(seed, nodes=6, gpus_per_node=4, jobs=50, mean_runtime_s=300.0) for seed in range(4)] + \
        [scale_workload(seed, nodes=8, jobs=150) for seed in range(2)] + \
        [scale_workload(seed, nodes=16, jobs=400) for seed in (1, 2)] + \
        [scale_workload(seed, nodes=8, jobs=300, load=1.2) for seed in (1, 2)] + \
        [with_topology(overloaded_workload(4, nodes=25, jobs=150), OVERLOADED_TOPOLOGY, 4)]
    lines = []

    def spy_init(self, *a, **k):
        init(self, *a, **k)
        lines.append(self)

    def planted_end(self, r):
        if plant == "a run a row too long":
            return min(run_end(self, r) + 1, len(self.times))
        e = run_end(self, r)
        return run_end(self, e) if e < len(self.times) else e

    def planted_start(self, r):
        a = run_start(self, r)
        return a - 1 if a > 1 else a

    Timeline.__init__, slurm_profile.RUNS_FROM = spy_init, 0  # (by runs whatever the rows: few here)
    try:
        for w in ws:
            same(w, "slurm")
    finally:
        Timeline.__init__, slurm_profile.RUNS_FROM = init, runs_from
    assert sum(line.jumped for line in lines) > 1000, len(lines)
    failed = 0
    try:
        slurm_profile.RUNS_FROM = 0
        if plant.startswith("the older"):
            Timeline._run_start = planted_start
        else:
            Timeline._run_end = planted_end
        for w in ws:
            try:
                same(w, "slurm", reuse=True)
            except (AssertionError, TypeError):  # (a search answered where no plan fits: a plan of None)
                failed += 1
    finally:
        Timeline._run_end, Timeline._run_start, slurm_profile.RUNS_FROM = run_end, run_start, runs_from
    assert failed >= 2, (plant, failed)


# ---- on a topology (issue 29): the waiting gangs whose placement cannot have changed ------------
TOPOLOGY_VARIANTS = sorted(v for v in VARIANTS if v.split("+")[0] in ("kueue", "kube-gang"))
TREES = [(("rack", 4), ("block", 2)), (("rack", 8), ("block", 4)), (("block", 2),),
         (("spine", 8), ("rack", 4), ("block", 2))]


@st.composite
def topology_crowds(draw, trees=TREES, switches: bool = False):
    """Many jobs on a small tree, most waiting: required and preferred levels, elastic gangs
    (min_member), priorities, jobs larger than any domain or than the cluster, bursts and gaps, so
    that a cluster which changed often did not change where a waiting gang could go. ``switches``:
    also Slurm's side of a request (a required innermost level is ``--switches=N@wait``: N from
    ``max_domains``, a wait of its own or ``max_switch_wait``), time limits and jobs of no runtime."""
    levels = draw(st.sampled_from(trees))
    nodes = levels[0][1] * draw(st.integers(1, 3))
    gpn = draw(st.sampled_from([1, 2, 4]))
    jobs, t = [], 0.0
    for n in range(draw(st.integers(2, 30))):
        t += draw(st.sampled_from([0.0, 0.0, 30.0, 600.0]))
        gpp = draw(st.integers(1, gpn))
        level = draw(st.sampled_from(levels))
        # most fit one domain of their level, some not, some not even the cluster
        pods = draw(st.one_of(st.integers(1, max(1, level[1] * gpn // gpp)),
                              st.integers(1, max(1, level[1] * gpn // gpp)),
                              st.integers(1, max(1, 2 * nodes * gpn // gpp))))
        request = draw(st.sampled_from([None, "required", "required", "preferred"]))
        duration = float(draw(st.sampled_from([0, 60, 600, 3600] if switches else [60, 600, 3600])))
        job = Job(f"j{n}", pods, gpp, submit=t, duration=duration, priority=draw(st.integers(0, 1)),
                  min_member=draw(st.one_of(st.none(), st.none(), st.integers(1, pods))),
                  topology=(request, level[0]) if request else None)
        if switches:
            required = request == "required"
            job = replace(job, max_domains=draw(st.sampled_from([None, None, 2, 3])) if required else None,
                          topology_wait=draw(st.sampled_from([None, 0.0, 120.0, 3600.0])) if required else None,
                          time_limit=draw(st.sampled_from([None, duration + 60, max(30.0, duration / 2)])))
        jobs.append(job)
    return Workload(ClusterSpec(nodes, gpn, topology=levels), jobs)


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topology_crowds(), st.sampled_from(TOPOLOGY_VARIANTS))
def test_fast_path_matches_the_reference_on_topology_crowds(w, variant):
    """Kueue skips the TAS search for a waiting workload no domain can hold now (its reason keeps
    its first text); kube-gang looks at a failed topology gang only when a domain of its level
    holds it, and scores every domain at once: the reference searches every one of them again."""
    same(w, variant, horizon=12 * 3600)


@pytest.mark.parametrize("variant", TOPOLOGY_VARIANTS)
def test_a_gang_waiting_for_a_domain_goes_exactly_when_one_holds_it(variant):
    """Fragmentation, then exactly enough: b and d end at 60 s and leave one free node in each
    block (2 free, e needs 2 in one block: refused by Kueue's TAS, failed by kube-gang's search);
    at 600 s a and c end and a block holds e's 2 pods exactly. A fast path that held e until a
    domain had *more* room than it needs would never start it."""
    jobs = [Job(name, 1, 1, submit=0.0, duration=d) for name, d in zip("abcd", (600.0, 60.0, 600.0, 60.0))]
    w = Workload(ClusterSpec(4, 1, topology=(("block", 2),)),
                 jobs + [Job("e", 2, 1, submit=10.0, duration=60.0, topology=("required", "block"))])
    policy, options = variant.split("+")[0], VARIANTS[variant]
    if not options.get("pod_group_cycle", True):   # v1.35's Permit has no topology
        return
    assert simulate(w, policy, **options).job("e").start == 600.0
    same(w, variant)


# each example a benchmark row (60-100 jobs; kube-gang pod by pod churns for up to 12 s): 2 in the dev tier
@settings(max_examples=examples(20, dev=2), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10 ** 6), st.sampled_from(TOPOLOGY_VARIANTS),
       st.sampled_from([(10, 8, (("rack", 5), ("block", 1))), (8, 2, (("rack", 4), ("block", 2)))]),
       st.sampled_from(["overloaded", "scale"]))
def test_fast_path_matches_the_reference_on_the_benchmarks_topology_workloads(seed, variant, shape, kind):
    """The benchmark's topology rows (bench_scale.py TOPOLOGY_GRID), small."""
    from courselib.model.generate import with_topology
    nodes, gpn, tree = shape
    base = overloaded_workload(seed, nodes=nodes, gpus_per_node=gpn, jobs=8 * nodes) if kind == "overloaded" \
        else scale_workload(seed, nodes=nodes, gpus_per_node=gpn, jobs=10 * nodes, load=1.5)
    same(with_topology(base, tree, seed), variant)


def test_the_topology_fast_paths_are_exercised(monkeypatch):
    """The equivalence above is not vacuous: on the benchmark's tree, small and busy, Kueue answers
    refusals without the TAS search and kube-gang holds failed topology gangs by domain and scores
    domains at once."""
    from courselib.model import topology
    from courselib.model.generate import with_topology
    from courselib.model.policies.kube_gang import KubeGang
    from courselib.model.policies.kueue import Kueue
    seen = {"skip": 0, "domain index": 0, "fast placement": 0}
    can_fit, room_for, fast = Kueue._tas_can_fit, KubeGang._room_for, topology.kube_gang_topology_fast

    def counting_can_fit(self, *a):
        ok = can_fit(self, *a)
        seen["skip"] += not ok
        return ok

    def counting_room_for(self, state, g):
        seen["domain index"] += isinstance(g, tuple)
        return room_for(self, state, g)

    def counting_fast(*a, **k):
        seen["fast placement"] += 1
        return fast(*a, **k)

    monkeypatch.setattr(Kueue, "_tas_can_fit", counting_can_fit)
    monkeypatch.setattr(KubeGang, "_room_for", counting_room_for)
    monkeypatch.setattr(topology, "kube_gang_topology_fast", counting_fast)
    w = with_topology(scale_workload(4, nodes=10, jobs=200, load=1.5), (("rack", 5), ("block", 1)), 4)
    for policy in ("kueue", "kube-gang"):
        same(w, policy)
    assert all(seen.values()), seen


# ---- Slurm on a tree (issue 29): every job goes through the topology plugin ---------------------
SLURM_TOPOLOGY_VARIANTS = sorted(v for v in VARIANTS if v.split("+")[0] == "slurm")


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topology_crowds(), st.sampled_from(SLURM_TOPOLOGY_VARIANTS))
def test_slurm_fast_path_matches_the_reference_on_topology_crowds(w, variant):
    """On a tree no job is plain, but one that is plain but for the tree has its candidate times
    ruled out by the profile's count of its pods on the nodes no reservation holds (and, after a
    time where too few fit, the times before enough could); only the rest go to the tree search.
    The reference plans every time: every pass's reservations and every job must be the same."""
    same(w, variant, horizon=12 * 3600)


# each example a benchmark row (60-150 jobs, up to 2 s): 2 in the dev tier
@settings(max_examples=examples(20, dev=2), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10 ** 6), st.sampled_from(SLURM_TOPOLOGY_VARIANTS),
       st.sampled_from([(10, 8, (("rack", 5), ("block", 1))), (15, 4, (("rack", 5), ("block", 1)))]),
       st.sampled_from(["overloaded", "scale"]))
def test_slurm_fast_path_matches_the_reference_on_the_benchmarks_topology_workloads(seed, variant, shape, kind):
    """The benchmark's Slurm topology rows (bench_scale.py TOPOLOGY_GRID), small."""
    from courselib.model.generate import with_topology
    nodes, gpn, tree = shape
    base = overloaded_workload(seed, nodes=nodes, gpus_per_node=gpn, jobs=6 * nodes) if kind == "overloaded" \
        else scale_workload(seed, nodes=nodes, gpus_per_node=gpn, jobs=10 * nodes, load=1.5)
    same(with_topology(base, tree, seed), variant)


def test_the_slurm_topology_gate_is_exercised_and_planted_slips_fail():
    """The equivalence above is not vacuous: on the benchmark's overloaded tree, small, the
    timeline finds the starts of jobs the tree refuses only for their count, the profile's count
    rules out times for those waiting for --switches, and the arrays and the tree are planned far less
    often than the reference plans them. A count that asks for one pod more than the job has (so rules out a
    time the tree would take), or a timeline that answers the second time the pods fit rather
    than the first, makes the checks fail; so does a first row for the walk (SlurmFast._first_row,
    which spares it the rows where the pods do not fit at all) one row too far on."""
    from dataclasses import replace
    from courselib.model.generate import OVERLOADED_TOPOLOGY, with_topology
    from courselib.model.policies import slurm_profile
    w = with_topology(overloaded_workload(3, nodes=25, jobs=120), OVERLOADED_TOPOLOGY, 3)
    plan, earliest, arrays = slurm_profile.Availability.plan, slurm_profile.Timeline.earliest, Slurm.plan
    first_row = SlurmFast._first_row
    seen = {"count": 0, "timeline": 0, "arrays fast": 0, "arrays reference": 0, "rows spared": 0}

    def counting_first_row(self, line, times, state, job, k):
        r = first_row(self, line, times, state, job, k)
        seen["rows spared"] += r - k
        return r

    def one_row_on(self, line, times, state, job, k):
        r = first_row(self, line, times, state, job, k)
        return r + (r < len(times))

    def counting_plan(self, *a, **k):
        seen["count"] += 1
        return plan(self, *a, **k)

    def counting_earliest(self, *a):
        seen["timeline"] += 1
        return earliest(self, *a)

    def counting_arrays(self, *a):   # Slurm.plan: the free GPUs as arrays, then the tree
        seen["arrays reference" if self.reference else "arrays fast"] += 1
        return arrays(self, *a)

    def one_more(self, job, *a, **k):
        return plan(self, replace(job, pods=job.pods + 1), *a, **k)

    def second(self, g, pods, runtime, k, hi):
        hit = earliest(self, g, pods, runtime, k, hi)
        return (earliest(self, g, pods, runtime, hit[0] + 1, hi) or hit) if hit else hit

    try:
        slurm_profile.Availability.plan, slurm_profile.Timeline.earliest = counting_plan, counting_earliest
        Slurm.plan, SlurmFast._first_row = counting_arrays, counting_first_row
        same(w, "slurm")
        assert seen["count"] and seen["timeline"] and seen["rows spared"], seen
        assert 5 * seen["arrays fast"] < seen["arrays reference"], seen
        Slurm.plan = arrays
        for planted in ((one_more, earliest, first_row), (plan, second, first_row), (plan, earliest, one_row_on)):
            slurm_profile.Availability.plan, slurm_profile.Timeline.earliest, SlurmFast._first_row = planted
            with pytest.raises(AssertionError):
                same(w, "slurm", reuse=True)
    finally:
        slurm_profile.Availability.plan, slurm_profile.Timeline.earliest = plan, earliest
        Slurm.plan, SlurmFast._first_row = arrays, first_row


def test_the_main_schedulers_plans_on_a_tree_count_pods_per_leaf_and_planted_slips_fail():
    """The main scheduler plans a job plain but for the tree from the free pods per leaf switch
    that SlurmFast keeps from the nodes each start and end touched (_tree_plan_now): used, and
    not vacuous. Counts that miss the nodes touched since the last plan, or only those of the jobs
    that ended, make the checks fail."""
    from courselib.model.generate import OVERLOADED_TOPOLOGY, with_topology
    w = with_topology(overloaded_workload(3, nodes=25, jobs=120), OVERLOADED_TOPOLOGY, 3)
    now_plan, on_finish = SlurmFast._tree_plan_now, SlurmFast.on_finish
    seen = []

    def counting(self, state, job):
        seen.append(job.name)
        return now_plan(self, state, job)

    def stale(self, state, job):  # the nodes touched since the last plan are not counted again
        self._leaf_dirty.clear()
        return now_plan(self, state, job)

    def ends_unseen(self, state, run):  # the nodes of a job that ended are not marked
        dirty = set(self._leaf_dirty)
        on_finish(self, state, run)
        self._leaf_dirty = dirty

    try:
        SlurmFast._tree_plan_now = counting
        same(w, "slurm")
        assert len(seen) > 50, len(seen)
        for planted in ((stale, on_finish), (now_plan, ends_unseen)):
            SlurmFast._tree_plan_now, SlurmFast.on_finish = planted
            with pytest.raises((AssertionError, ValueError)):  # (a wrong plan may not even bind)
                same(w, "slurm", reuse=True)
    finally:
        SlurmFast._tree_plan_now, SlurmFast.on_finish = now_plan, on_finish


def test_slurm_tree_jobs_carry_the_last_pass_and_planted_slips_fail():
    """On a tree a job plain but for the tree plugin, not waiting for --switches, starts where a
    plain job of its shape would, so a backfill pass carries its last outcome as a plain job's
    (SlurmFast._carried): the equivalence above covers it, and it is not vacuous, since passes
    are carried and updated in place on the benchmark's overloaded tree. A carry that forgets what
    started since (the changes), or a capacity curve that counts one pod fewer than fit, makes
    the checks fail (one more is caught: the tree then refuses the job and it is searched)."""
    from courselib.model.generate import OVERLOADED_TOPOLOGY, with_topology
    from courselib.model.policies import slurm_profile
    w = with_topology(overloaded_workload(4, nodes=25, jobs=150), OVERLOADED_TOPOLOGY, 4)
    carried, curve_at, backfill = SlurmFast._carried, slurm_profile.Availability.curve_at, SlurmFast._backfill
    stats: list[dict] = []

    def recording(self, *a):
        backfill(self, *a)
        stats.append(self.carry_stats)

    def forgetful(self, state):
        c = carried(self, state)
        return None if c is None else c[:2] + ([],) + c[3:]

    def one_less(self, *a):
        m, n = curve_at(self, *a)
        return m, n - 1

    try:
        SlurmFast._backfill = recording
        same(w, "slurm")
        # a job that waited for --switches in the last pass (not carried) and holds a reservation
        # it leaves for an earlier start once its wait is over: where it was, the jobs after it
        # look again (seed 20: without that, o105 keeps its start 60780 where 52140 is free)
        same(with_topology(overloaded_workload(20, nodes=25, jobs=150), OVERLOADED_TOPOLOGY, 20), "slurm")
        assert stats and stats[-1]["carried"] and stats[-1]["in_place"], stats[-1:]
        SlurmFast._backfill = backfill
        for name, planted in (("_carried", forgetful), ("curve_at", one_less)):
            cls = SlurmFast if name == "_carried" else slurm_profile.Availability
            setattr(cls, name, planted)
            try:
                with pytest.raises(AssertionError):
                    same(w, "slurm", reuse=True)
            finally:
                setattr(cls, name, carried if name == "_carried" else curve_at)
    finally:
        SlurmFast._backfill, SlurmFast._carried = backfill, carried
        slurm_profile.Availability.curve_at = curve_at


@pytest.mark.parametrize("plant", ["freed at t missed", "one level short"])
def test_slurm_plans_read_later_free_gpus_from_the_profile_and_planted_slips_fail(plant):
    """The arrays the tree plugin's plans are given at a later time (Slurm._free_at) come from the
    availability profile's levels (Availability.free_at), not from a walk over the running jobs'
    ends: exercised on the overloaded tree (the walk is not asked there), and the equalities above
    hold with it. A profile that misses the GPUs freed exactly at the time asked (the end of a
    running job is a candidate time), or that counts one level short on a node, makes the checks fail."""
    from courselib.model.generate import OVERLOADED_TOPOLOGY, with_topology
    from courselib.model.policies import slurm_profile
    free_at, walk = slurm_profile.Availability.free_at, SlurmFast._free_at_from_nearest
    seen = {"profile": 0, "walk": 0}

    def counting(self, t):
        seen["profile"] += 1
        return free_at(self, t)

    def counting_walk(self, *a):
        seen["walk"] += 1
        return walk(self, *a)

    def missed(self, t):
        return free_at(self, math.nextafter(t, -math.inf))

    def short(self, t):
        out = free_at(self, t)
        return out - (out == out.max())

    ws = [with_topology(overloaded_workload(seed, nodes=25, jobs=120), OVERLOADED_TOPOLOGY, seed) for seed in (3, 4)]
    try:
        slurm_profile.Availability.free_at, SlurmFast._free_at_from_nearest = counting, counting_walk
        same(ws[0], "slurm", reuse=True)
        assert seen["profile"] > 50 and seen["walk"] == 0, seen
        SlurmFast._free_at_from_nearest = walk
        slurm_profile.Availability.free_at = missed if plant.startswith("freed") else short
        for w in ws:
            with pytest.raises(AssertionError):
                same(w, "slurm", reuse=True)
    finally:
        slurm_profile.Availability.free_at, SlurmFast._free_at_from_nearest = free_at, walk
