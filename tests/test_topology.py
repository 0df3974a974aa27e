"""Topology-aware gangs (issue 29): the cluster's tree, where each policy lands a gang, and why one waits.

The domain choices are each scheduler's own, read from its source (``courselib.model.topology``);
these tests hold the properties the issue names: a required placement never spans its level; a
preferred one spans no more domains than needed when one domain would do (Kueue's BestFit); the
fast path decides exactly what the reference does; kube-default ignores the request and says so;
hostile topologies are one located line each.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from budget import examples
from courselib.errors import InputError
from courselib.io.yamlfile import load_all_text
from courselib.io.workload import parse_workload
from courselib.model import topology
from courselib.model.workload import ClusterSpec, Job, Workload
from courselib.sim.gang import simulate

ISSUE = """\
cluster:
  nodes: 16
  gpus_per_node: 4
  topology:
    - {level: rack, size: 8}
    - {level: block, size: 4}
jobs:
  - {name: x, pods: 6, gpus_per_pod: 4, submit: 0, duration: 2h, topology: {required: rack}}
  - {name: p, pods: 4, gpus_per_pod: 4, submit: 0, duration: 1h, topology: {preferred: block}}
"""
POLICIES = ["slurm", "kueue", "volcano", "kube-gang", "kube-default"]
#: the policies that honour a required level as a hard constraint (Slurm only at the leaves, and
#: only until max_switch_wait; kube-default never)
HONOUR_REQUIRED = ["kueue", "volcano", "kube-gang"]


def workload(text: str, file: str = "w.yaml") -> Workload:
    return parse_workload(load_all_text(text, file=file)[0], file=file)


def test_the_issue_workload_reads_and_every_policy_names_the_domains():
    w = workload(ISSUE)
    assert w.cluster.topology == (("rack", 8), ("block", 4))
    assert w.job("x").topology == ("required", "rack") and w.job("p").topology == ("preferred", "block")
    for policy in POLICIES:
        r = simulate(w, policy, check=True)
        x = r.job("x")
        assert x.start == 0 and set(x.domains) == {"rack", "block"}
        if policy in HONOUR_REQUIRED:
            assert x.domains["rack"] == ["rack0"] and x.topology_note is None
    blind = simulate(w, "kube-default").job("x")
    assert blind.domains["rack"] == ["rack0", "rack1"] and "topology-blind" in blind.topology_note


FRAGMENTED = """\
cluster:
  nodes: 16
  gpus_per_node: 4
  topology: [{level: rack, size: 8}, {level: block, size: 4}]
jobs:
  - {name: a, pods: 5, gpus_per_pod: 4, submit: 0, duration: 1h, topology: {required: rack}}
  - {name: b, pods: 5, gpus_per_pod: 4, submit: 0, duration: 1h, topology: {required: rack}}
  - {name: c, pods: 6, gpus_per_pod: 4, submit: 60, duration: 1h, topology: {required: rack}}
"""


def test_fragmentation_six_free_gpus_per_rack_but_no_rack_holds_the_job():
    """a and b leave 3 free nodes in each rack: 6 nodes free, no rack holds c's 6 pods."""
    w = workload(FRAGMENTED)
    r = simulate(w, "kueue", horizon=120)
    c = r.job("c")
    assert c.start is None
    assert c.pending_reason == ('Pending: couldn\'t assign flavors to pod set main: topology "default" '
                                'allows to fit only 3 out of 6 pod(s). Total nodes: 16; excluded: '
                                'resource "nvidia.com/gpu": 10')   # a and b's 10 full nodes (ExclusionStats)
    assert simulate(w, "kueue").job("c").start == 3600     # a rack frees when a and b end
    blind = simulate(w, "kube-default", horizon=120).job("c")
    assert blind.start == 60 and "topology-blind" in blind.topology_note   # placed, wherever
    gang = simulate(w, "kube-gang", horizon=120).job("c")
    assert gang.start is None and gang.pending_reason.startswith(
        "PodGroup Unschedulable: 0/2 placements are available, first placement status: minCount (6) cannot be "
        "satisfied: 3 scheduled, 2 remaining")
    vol = simulate(w, "volcano", horizon=120).job("c")
    assert vol.start is None and "3/6" in vol.pending_reason


def test_kueue_best_fit_takes_the_fullest_domain_that_still_fits():
    """Kueue's BestFit (tas_flavor_snapshot.go L1188–1203): of rack0 (8 free nodes) and rack1
    (2 free), a 2-pod job goes to rack1; a spread-first scheduler would pick rack0."""
    spec = ClusterSpec(16, 4, topology=(("rack", 8), ("block", 4)))
    k = [1] * 8 + [1, 1] + [0] * 6
    plan, _ = topology.kueue_tas(spec, k, 2, "required", "rack")
    assert sorted(i for i, _ in plan) == [8, 9]
    plan, fit = topology.kueue_tas(spec, k, 9, "required", "rack")
    assert plan is None and fit == 8
    plan, _ = topology.kueue_tas(spec, k, 9, "preferred", "rack")   # spans: the whole of both
    assert sum(n for _, n in plan) == 9 and {i // 8 for i, _ in plan} == {0, 1}


def test_slurm_tree_takes_the_tightest_leaf_switch_and_waits_for_one_leaf_at_most_max_switch_wait():
    spec = ClusterSpec(16, 4, topology=(("rack", 8), ("block", 4)))
    k = [1] * 4 + [1, 1, 0, 0] + [1, 1, 1, 0] + [0] * 4
    plan, _ = topology.slurm_tree(spec, k, 3)
    assert [i for i, _ in plan] == [8, 9, 10]           # block2 (3 free) is tighter than block0 (4)
    plan, _ = topology.slurm_tree(spec, k, 5, max_leaves=1)
    assert plan is None
    text = """\
cluster: {nodes: 8, gpus_per_node: 1, topology: [{level: block, size: 4}]}
jobs:
  - {name: a, pods: 3, gpus_per_pod: 1, submit: 0, duration: 1h}
  - {name: b, pods: 2, gpus_per_pod: 1, submit: 0, duration: 1h, topology: {required: block}}
  - {name: c, pods: 3, gpus_per_pod: 1, submit: 0, duration: 1h, topology: {required: block}}
"""
    r = simulate(workload(text), "slurm", check=True)
    assert r.job("b").domains["block"] == ["block1"]
    c = r.job("c")   # 3 nodes free (1 + 2): waits 300 s for one leaf, then spans both
    assert c.start == 300 and c.domains["block"] == ["block0", "block1"]
    assert "max_switch_wait" in c.topology_note


@st.composite
def topology_workloads(draw):
    levels = draw(st.sampled_from([((("rack", 4), ("block", 2))), (("rack", 8), ("block", 4)),
                                   (("block", 2),), (("spine", 8), ("rack", 4), ("block", 2))]))
    nodes = levels[0][1] * draw(st.integers(1, 3))
    gpn = draw(st.sampled_from([1, 2, 4]))
    names = [name for name, _ in levels]
    jobs, t = [], 0.0
    for n in range(draw(st.integers(1, 8))):
        t += draw(st.sampled_from([0.0, 0.0, 60.0, 600.0]))
        gpp = draw(st.integers(1, gpn))
        pods = draw(st.integers(1, max(1, nodes * gpn // gpp)))
        request = draw(st.sampled_from([None, "required", "preferred"]))
        required = request == "required"   # with --switches=N@wait (max_domains, topology_wait)
        jobs.append(Job(f"j{n}", pods, gpp, submit=t, duration=float(draw(st.sampled_from([60, 600, 3600]))),
                        priority=draw(st.integers(0, 1)),
                        topology=(request, draw(st.sampled_from(names))) if request else None,
                        max_domains=draw(st.sampled_from([None, 1, 2, 3])) if required else None,
                        topology_wait=draw(st.sampled_from([None, 0.0, 120.0, 900.0])) if required else None))
    return Workload(ClusterSpec(nodes, gpn, topology=levels), jobs)


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topology_workloads(), st.sampled_from(POLICIES + ["slurm+bf_interval"]))
def test_fast_path_matches_the_reference_on_topology_workloads(w, policy):
    options = {"bf_interval": 30.0} if policy == "slurm+bf_interval" else {}
    policy = policy.split("+")[0]
    fast = simulate(w, policy, check=True, **options)
    ref = simulate(w, policy, reference=True, **options)
    assert fast.jobs == ref.jobs and fast.trace == ref.trace


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topology_workloads(), st.sampled_from(HONOUR_REQUIRED))
def test_a_required_placement_never_spans_its_level(w, policy):
    r = simulate(w, policy, check=True)
    for j in r.jobs:
        job = w.job(j.name)
        if job.topology and job.topology[0] == "required" and j.domains:
            assert len(j.domains[job.topology[1]]) == 1, (policy, j)


@settings(max_examples=examples(200), deadline=None)
@given(st.data())
def test_kueue_preferred_spans_one_domain_whenever_one_domain_holds_the_pods(data):
    """BestFit at the preferred level: if some domain of the level holds every pod, the plan
    stays in one; else it climbs (and spans no more top-level domains than a greedy fill needs)."""
    spec = ClusterSpec(16, 4, topology=(("rack", 8), ("block", 4)))
    k = data.draw(st.lists(st.integers(0, 4), min_size=16, max_size=16))
    pods = data.draw(st.integers(1, max(1, sum(k))))
    level = data.draw(st.sampled_from(["rack", "block"]))
    plan, _ = topology.kueue_tas(spec, k, pods, "preferred", level)
    if sum(k) < pods:
        assert plan is None
        return
    assert sum(n for _, n in plan) == pods and all(n <= k[i] for i, n in plan)
    need = topology.fewest_domains(spec, level, k, pods)
    if need == 1:
        assert len(topology.domains_spanned(spec, [i for i, _ in plan], level)) == 1


@pytest.mark.parametrize("cluster_topology, message", [
    ("[{level: rack, size: 5}]", "w.yaml:1: cluster.topology[0].size: size 5 does not divide the cluster's 16 nodes"),
    ("[{level: rack, size: 0}]", "w.yaml:1: cluster.topology[0].size: size must be at least 1 node, got 0"),
    ("[{level: rack, size: 8}, {level: rack, size: 4}]",
     "w.yaml:1: cluster.topology[1].level: level 'rack' is named twice (first at line 1)"),
    ("[{level: rack, size: 4}, {level: block, size: 8}]",
     "w.yaml:1: cluster.topology[1].size: size 8 does not divide the level above it (4 nodes)"),
])
def test_a_hostile_topology_is_one_located_line(cluster_topology, message):
    text = f"cluster: {{nodes: 16, gpus_per_node: 4, topology: {cluster_topology}}}\n" \
           "jobs:\n  - {name: a, pods: 1, gpus_per_pod: 1, duration: 1h}\n"
    with pytest.raises(InputError) as err:
        workload(text)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_a_job_requiring_an_unknown_level_is_one_located_line():
    text = ISSUE.replace("{required: rack}", "{required: pod}")
    with pytest.raises(InputError) as err:
        workload(text)
    assert str(err.value).startswith("w.yaml:8: jobs[0].topology.required: topology level 'pod' is not "
                                     "a level of cluster.topology (rack, block)")
    flat = "cluster: {nodes: 2, gpus_per_node: 1}\njobs:\n  - {name: a, pods: 1, gpus_per_pod: 1, " \
           "duration: 1h, topology: {preferred: rack}}\n"
    with pytest.raises(InputError, match="the cluster has none"):
        workload(flat)
    with pytest.raises(InputError, match="one of required or preferred"):
        workload(ISSUE.replace("{required: rack}", "{required: rack, preferred: block}"))


def test_the_model_refuses_what_the_reader_refuses():
    with pytest.raises(ValueError, match="named twice"):
        ClusterSpec(4, 1, topology=(("a", 2), ("a", 1)))
    with pytest.raises(ValueError, match="not a level"):
        Workload(ClusterSpec(4, 1, topology=(("a", 2),)), [Job("j", 1, 1, duration=1, topology=("required", "b"))])


LINTED = """\
cluster:
  nodes: 16
  gpus_per_node: 4
  topology: [{level: rack, size: 8}, {level: block, size: 4}]
jobs:
  - {name: x, pods: 6, gpus_per_pod: 4, duration: 2h, topology: {required: block}}
  - {name: p, pods: 4, gpus_per_pod: 4, duration: 1h, topology: {preferred: block}}
  - {name: ok, pods: 4, gpus_per_pod: 4, duration: 1h, topology: {required: block}}
"""


def test_lint_finds_a_required_domain_smaller_than_the_job_and_each_scheduler_that_ignores_a_request(tmp_path):
    from courselib.cli.files import lint_file
    path = tmp_path / "w.yaml"
    path.write_text(LINTED)
    found = [(f.code, f.line, f.message.split(":")[0]) for f in lint_file(str(path))]
    assert ("W001", 6, "job 'x' requires one block but needs 6 pods of 4 GPUs; an empty block holds 4") in \
        [(c, ln, m) for c, ln, m in [(f.code, f.line, f.message.split(": it")[0]) for f in lint_file(str(path))]]
    assert not any(c == "W001" and ln != 6 for c, ln, _ in found)            # 'ok' fits one block
    ignored = {(ln, m) for c, ln, m in found if c == "W002"}
    assert ignored == {(6, "job 'x' under kube-default"), (7, "job 'p' under kube-default"),
                       (7, "job 'p' under kube-gang"), (8, "job 'ok' under kube-default")}   # volcano: soft mode
    path.write_text(LINTED.replace("required: block}}\n  - {name: p", "required: rack}}\n  - {name: p"))
    assert not any(f.code == "W001" for f in lint_file(str(path)))            # a rack holds 8 nodes


def test_a_split_tp_group_paces_every_step_and_mfu_halves_at_one_over_r_minus_one():
    from courselib.model import collective as cl
    r = cl.NVLINK_H100_BPS / cl.IB_PER_GPU_BPS
    assert r == 9 and cl.halving_comm_fraction(cl.NVLINK_H100_BPS, cl.IB_PER_GPU_BPS) == 1 / 8
    assert cl.step_slowdown(1 / 8, cl.NVLINK_H100_BPS, cl.IB_PER_GPU_BPS) == pytest.approx(2.0)
    assert cl.step_slowdown(0.0, cl.NVLINK5_BPS, cl.IB_PER_GPU_BPS) == 1.0
    assert cl.halving_comm_fraction(cl.NVLINK5_BPS, cl.IB_PER_GPU_BPS) == pytest.approx(1 / 17)
    assert cl.halving_comm_fraction(1.0, 2.0) is None
    # 3 nodes x 4 GPUs placed 4 + 4 + 4: TP 8 groups [n0 n0 n0 n0 n1 n1 n1 n1], [n2 ...]: one split
    assert cl.split_groups([(0, 4), (1, 4), (2, 4)], 4, lambda i: i) == (3, 0)
    assert cl.split_groups([(0, 4), (1, 4)], 8, lambda i: i) == (1, 1)
    spec = ClusterSpec(16, 4, topology=(("rack", 8), ("block", 4)))
    same_block = topology.split_cost(spec, [(0, 4), (1, 4)], 8, 0.1, nvlink_level="block")
    assert same_block["split"] == 0 and same_block["slowdown"] == 1.0
    across = topology.split_cost(spec, [(3, 4), (4, 4)], 8, 0.1, nvlink_level="block")
    # 4 GPUs in block0 (node 3), 4 in block1 (node 4): the ring crosses through 4 NICs a side,
    # 4 x 50 = 200 GB/s against NVLink5's 900: r = 4.5, a step 0.9 + 0.1 x 4.5 = 1.35 (was 2.7, one NIC)
    assert across["split"] == 1 and across["nics"] == 4 and across["slow_GBps"] == 200
    assert across["slowdown"] == pytest.approx(0.9 + 0.1 * 900 / 200) == pytest.approx(1.35)
    # 7 + 1 over the same boundary: one NIC, 50 GB/s, r = 18: 0.9 + 0.1 x 18 = 2.7 (the old figure for every split)
    worst = topology.split_cost(spec, [(3, 1), (4, 4), (5, 3)], 8, 0.1, nvlink_level="block")
    assert worst["nics"] == 1 and worst["slowdown"] == pytest.approx(2.7)


SPLIT = """\
cluster: {nodes: 8, gpus_per_node: 4, topology: [{level: block, size: 4}]}
jobs:
  - {name: a, pods: 2, gpus_per_pod: 2, submit: 0, duration: 2h}
  - {name: x, pods: 4, gpus_per_pod: 2, submit: 60, duration: 1h, topology: {preferred: block}}
"""


def test_gang_simulate_reports_domains_and_slowdown_and_split_cost_prices_it(tmp_path, capsys):
    """Blocks as NVLink domains (NVL72-like): kube-default spreads x over nodes 2-5, 2 GPUs each,
    4 in block0 and 4 in block1, so its TP 8 group crosses through 4 NICs a side, 4 x 50 = 200 GB/s
    instead of 900 (r = 4.5, a step 0.9 + 0.1 x 4.5 = 1.35; one NIC, 50 GB/s and x2.70 before the
    split was priced by its NICs); Kueue's BestFit keeps it in block0."""
    from courselib.cli.main import main
    path = tmp_path / "w.yaml"
    path.write_text(SPLIT)
    args = ["gang", "simulate", str(path), "--tp", "8", "--nvlink-level", "block", "--comm-fraction", "0.1"]
    assert main(args + ["--policy", "kube-default"]) == 0
    out = capsys.readouterr().out
    assert "placement (block):" in out
    assert ("x            block0 block1   TP 8: 1 of 1 groups cross a slow link "
            "(900 -> 200 GB/s: 4 NICs x 50 on the emptier side): step x1.35") in out
    assert "a            block0   TP 8 does not divide its 4 GPUs" in out
    assert main(args + ["--policy", "kueue"]) == 0
    assert "x            block0   TP 8: 0 of 1 groups cross a slow link: step x1.00" in capsys.readouterr().out
    assert main(args + ["--policy", "kueue", "--nvlink-level", "rack"]) == 2
    assert main(["split-cost", "--gpus", "512", "--run", "30d", "--comm-fraction", "0.125"]) == 0
    out = capsys.readouterr().out
    assert "MFU halves when f = 1/(r - 1) = 12.5 %; at f = 0.125 it is divided by 2.000" in out
    assert "+30d x 512 GPUs = 368,640.0 GPU-hours" in out
    assert main(["split-cost", "--gpus", "512", "--run", "30d", "--comm-fraction", "1.5"]) == 2


EXAMPLES = sorted((__import__("pathlib").Path(__file__).parent.parent / "examples" / "topology").glob("*.yaml"))


def test_there_are_the_six_topology_workloads_the_issue_names():
    assert {p.stem for p in EXAMPLES} >= {"fragmentation", "larger-than-domain", "preferred-vs-required", "apart",
                                          "blocked-head", "mixed"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_topology_example_runs_under_every_policy_and_the_fast_path_agrees(path):
    from courselib.io.workload import load_workload
    w = load_workload(path)
    for policy in POLICIES:
        fast, ref = simulate(w, policy, check=True), simulate(w, policy, reference=True)
        assert fast.jobs == ref.jobs and fast.trace == ref.trace, (path.stem, policy)


def test_the_examples_tell_their_stories():
    from courselib.io.workload import load_workload
    ex = {p.stem: load_workload(p) for p in EXAMPLES}
    # fragmentation: 24 GPUs free at 1m, but c waits an hour under every scheduler honouring the rack
    for policy in HONOUR_REQUIRED:
        assert simulate(ex["fragmentation"], policy).job("c").start == 3600, policy
    # a required domain smaller than the job never starts; preferred spans
    r = simulate(ex["larger-than-domain"], "kueue")
    assert r.job("big-required").start is None and r.job("big-preferred").domains["rack"] == ["rack0", "rack1"]
    # preferred starts at once across blocks; required waits for a whole block (2h)
    r = simulate(ex["preferred-vs-required"], "kueue")
    assert r.job("preferred").start == 60 and len(r.job("preferred").domains["block"]) == 2
    assert r.job("required").start == 7200 and len(r.job("required").domains["block"]) == 1
    # Slurm's --switches=1 waits max_switch_wait (300 s) and then spans
    s = simulate(ex["preferred-vs-required"], "slurm").job("required")
    assert s.start == 360 and len(s.domains["block"]) == 2
    # blocked head: the small job behind it starts at once under Kueue (BestEffortFIFO) and Slurm
    for policy in ("kueue", "slurm"):
        assert simulate(ex["blocked-head"], policy).job("small").start == 120, policy
    # apart: best fit keeps a whole block for j4; kube-default scatters and j4 spans two racks
    assert simulate(ex["apart"], "kueue").job("j4").domains["block"] == ["block2"]
    assert len(simulate(ex["apart"], "kube-default").job("j4").domains["rack"]) == 2


def test_lint_flags_the_larger_than_domain_example(capsys):
    from courselib.cli.files import lint_file
    found = [f.code for f in lint_file(str(next(p for p in EXAMPLES if p.stem == "larger-than-domain")))]
    assert found.count("W001") == 1


def test_trace_replay_on_a_topology(capsys):
    from courselib.cli.main import main
    from courselib.io.traces import read_trace
    from courselib.sim.traces import replay
    toy = EXAMPLES[0].parent.parent / "files" / "toy.swf"
    r = replay(read_trace(str(toy)), "kueue", topology="rack:8,block:4@preferred:block")
    s = r.summary()
    assert s["topology"]["levels"] == "rack:8,block:4@preferred:block" and int(s["cluster"].split("x")[0]) % 8 == 0
    assert all(j.domains for j in r.result.jobs if j.start is not None)
    assert main(["trace", "replay", str(toy), "--policy", "kube-default", "--topology", "rack:8,block:4"]) == 0
    assert "of 3 started jobs" in capsys.readouterr().out
    for bad in ("rack:8,block:3", "rack:0", "rack", "rack:8@required:pod", "rack:8,rack:4"):
        assert main(["trace", "replay", str(toy), "--policy", "kueue", "--topology", bad]) == 2, bad
        assert "--topology" in capsys.readouterr().err


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_the_topology_practice_problem_answers_what_the_simulator_says(difficulty):
    from courselib import problems
    from courselib.problems import topology as topic
    for seed in range(6):
        p = problems.generate("topology", seed, difficulty)
        s = problems.solve(p)
        for policy in p.data["policies"]:
            r = topic.run(p.data, policy)
            assert s.answer[policy] == {j.name: {"start_s": j.start, "domains": j.domains, "waits": j.pending_reason}
                                        for j in r.jobs}
        assert "Headcount fits; no rack does." in s.steps[0]
        if difficulty == "easy":   # Kueue's TAS refuses the head job with its own message
            assert any('topology "default" allows to fit only' in step for step in s.steps), seed


TAS_JOB = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: train
spec:
  parallelism: 4
  completions: 4
  completionMode: Indexed
  template:
    metadata:
      annotations:
        kueue.x-k8s.io/podset-required-topology: cloud.provider.com/rack
    spec:
      restartPolicy: Never
      containers:
        - {name: t, image: busybox, resources: {limits: {nvidia.com/gpu: 8}}}
"""


def test_lint_flags_a_kueue_topology_request_no_kueue_queue_will_read(tmp_path):
    from courselib.cli.files import lint_file
    path = tmp_path / "job.yaml"
    path.write_text(TAS_JOB)
    found = [f for f in lint_file(str(path)) if f.code == "K014"]
    assert len(found) == 1 and found[0].line == 10 and "kueue.x-k8s.io/podset-required-topology" in found[0].message
    path.write_text(TAS_JOB.replace("  name: train\n", "  name: train\n  labels: {kueue.x-k8s.io/queue-name: team}\n"))
    assert not [f for f in lint_file(str(path)) if f.code == "K014"]


SWITCHES = """\
cluster: {nodes: 8, gpus_per_node: 1, topology: [{level: rack, size: 4}, {level: block, size: 2}]}
jobs:
  - {name: a, pods: 4, gpus_per_pod: 1, submit: 0, duration: 1h, constraint: odd}
  - {name: n2, pods: 2, gpus_per_pod: 1, submit: 1, duration: 1h, topology: {required: block, max_domains: 2}}
  - {name: n2w, pods: 2, gpus_per_pod: 1, submit: 2, duration: 1h,
     topology: {required: block, max_domains: 1, wait: 2m}}
"""


def test_switches_n_starts_over_n_leaves_at_once_and_waits_for_fewer_at_most_its_own_wait():
    """--switches=2: a job the tree places over 2 leaf switches starts at once; --switches=1@2m
    waits 2 minutes for one leaf, then takes the tree's placement (eval_nodes_tree.c L1362-1411)."""
    text = SWITCHES.replace("gpus_per_node: 1,", "gpus_per_node: 1, features: {odd: '1,3,5,7'},")
    r = simulate(workload(text), "slurm", check=True)
    assert r.job("n2").start == 1 and r.job("n2").domains["block"] == ["block0", "block1"]
    late = r.job("n2w")          # one free node in each of block2 and block3
    assert late.start == 2 + 120 and late.domains["block"] == ["block2", "block3"]
    assert "--switches=1@120s" in late.topology_note
    ref = simulate(workload(text), "slurm", reference=True)
    assert ref.jobs == r.jobs


def test_a_wait_longer_than_max_switch_wait_is_cut_to_it():
    """_max_switch_wait (job_mgr.c L870-895): the smaller of the job's wait and max_switch_wait."""
    text = SWITCHES.replace("gpus_per_node: 1,", "gpus_per_node: 1, features: {odd: '1,3,5,7'},")
    r = simulate(workload(text.replace("wait: 2m", "wait: 1h")), "slurm", check=True)
    assert r.job("n2w").start == 2 + 300
    r = simulate(workload(text.replace("wait: 2m", "wait: 1h")), "slurm", check=True, max_switch_wait=3600)
    assert r.job("n2w").start == 3600      # waited for a (just before its wait was over)


def test_a_reservation_keeps_the_switch_count_while_the_wait_is_not_over():
    """Backfill plans a later start with the plugin's clock (time(NULL), eval_nodes_tree.c L814-820),
    not the start it plans for: w, still waiting for one leaf switch, reserves where one leaf holds
    it (when a ends), not the spread placement b's end would give after its wait, so s (on the
    nodes that spread placement would take) starts at once. The old model relaxed the count at any
    planned start past the wait: it reserved nodes 2 and 4 from 400 s, kept s out, started w at 301."""
    text = """\
cluster: {nodes: 8, gpus_per_node: 1, features: {odd: "1,3,5,7", b: "6,8"},
          topology: [{level: rack, size: 4}, {level: block, size: 2}]}
jobs:
  - {name: a, pods: 4, gpus_per_pod: 1, submit: 0, duration: 1000, constraint: odd}
  - {name: b, pods: 2, gpus_per_pod: 1, submit: 0, duration: 400, constraint: b}
  - {name: w, pods: 2, gpus_per_pod: 1, submit: 1, duration: 1h, topology: {required: block}}
  - {name: s, pods: 2, gpus_per_pod: 1, submit: 1, duration: 500}
"""
    for reference in (False, True):  # (s behind w in the same backfill pass, at 1 s)
        r = simulate(workload(text), "slurm", reference=reference)
        assert r.job("s").start == 1 and r.job("s").domains["block"] == ["block0", "block1"]
        assert r.job("w").start == 400 and r.job("w").domains["block"] == ["block2", "block3"]


def test_max_domains_and_wait_are_read_and_a_wrong_one_is_one_located_line():
    w = workload(SWITCHES.replace("gpus_per_node: 1,", "gpus_per_node: 1, features: {odd: '1,3,5,7'},"))
    assert (w.job("n2").max_domains, w.job("n2").topology_wait) == (2, None)
    assert (w.job("n2w").max_domains, w.job("n2w").topology_wait) == (1, 120.0)
    for bad, words in [("{preferred: block, max_domains: 2}", "max_domains goes with required"),
                       ("{required: block, max_domains: 0}", "must be at least 1"),
                       ("{required: block, wait: soon}", "is not a duration"),
                       ("{required: block, wait: 2m, most: 3}", "most")]:
        text = SWITCHES.replace("{required: block, max_domains: 2}", bad)
        with pytest.raises(InputError) as e:
            workload(text.replace("gpus_per_node: 1,", "gpus_per_node: 1, features: {odd: '1,3,5,7'},"))
        assert words in str(e.value) and "w.yaml:" in str(e.value) and "\n" not in str(e.value)


def test_lint_says_a_count_of_domains_is_slurms_alone(tmp_path):
    from courselib.cli.files import lint_file
    path = tmp_path / "w.yaml"
    path.write_text(LINTED.replace("{name: x, pods: 6, gpus_per_pod: 4, duration: 2h, topology: {required: block}}",
                                   "{name: x, pods: 6, gpus_per_pod: 4, duration: 2h,\n"
                                   "     topology: {required: block, max_domains: 2, wait: 2m}}"))
    found = [(f.code, f.line, f.message) for f in lint_file(str(path))]
    w3 = [(ln, m) for c, ln, m in found if c == "W003"]
    assert w3 == [(6, "job 'x': max_domains 2, wait 120s is Slurm's --switches=2 (topology/tree, leaf "
                      "switches); kueue, volcano and kube-gang require one block; an empty block holds 4 "
                      "of its 6 pods: it never starts there")]
    path.write_text(LINTED)
    assert not any(f.code == "W003" for f in lint_file(str(path)))


def test_switches_counts_the_trees_own_placement_not_the_fewest_leaves():
    """switches-greedy.yaml: two blocks (13-14 and 9) would hold three, but the tree search takes the
    tighter rack's three blocks, so --switches=2 waits its minute (the real Slurm 26.05.5 did too)."""
    from courselib.io.workload import load_workload
    w = load_workload(EXAMPLES[0].parent / "switches-greedy.yaml")
    free = [0 if "busy" in f else 1 for f in w.cluster.features]
    per_block = sorted((sum(free[b:b + 2]) for b in range(0, 16, 2)), reverse=True)
    assert per_block[0] + per_block[1] >= 3                      # two blocks would do
    plan, _ = topology.slurm_tree_reference(w.cluster, free, 3)
    assert [i for i, _ in plan] == [0, 2, 4]                     # the search takes three
    r = simulate(w, "slurm", check=True).job("three")
    assert r.start == 10 + 60 and r.domains["block"] == ["block0", "block1", "block2"]


@settings(max_examples=examples(300), deadline=None)
@given(st.data())
def test_kueue_tas_fast_is_kueue_tas(data):
    """The fast path's TAS search (an unconstrained pod set reads the nodes alone, and finds the
    least free node that holds it without sorting) answers what the reference's does."""
    levels = data.draw(st.sampled_from([(("rack", 8), ("block", 4)), (("block", 2),),
                                        (("spine", 8), ("rack", 4), ("block", 2))]))
    nodes = levels[0][1] * data.draw(st.integers(1, 3))
    spec = ClusterSpec(nodes, 4, topology=levels)
    k = data.draw(st.lists(st.integers(0, 4), min_size=nodes, max_size=nodes))
    pods = data.draw(st.integers(1, 4 * nodes + 1))
    mode = data.draw(st.sampled_from(["unconstrained", "required", "preferred"]))
    level = data.draw(st.sampled_from([name for name, _ in levels]))
    fast = topology.kueue_tas_fast(spec, k, pods, mode, level)
    assert fast == topology.kueue_tas(spec, k, pods, mode, level)


def test_kueue_tas_fast_reads_node_labels_as_strings():
    """Two nodes of one rack hold the pod set with the same free pods: Kueue takes node10 before node2."""
    spec = ClusterSpec(16, 4, topology=(("rack", 16),))
    k = [0] * 16
    k[1] = k[9] = 2
    assert topology.kueue_tas_fast(spec, k, 1, "unconstrained", None) == \
        topology.kueue_tas(spec, k, 1, "unconstrained", None) == ([(9, 1)], 1)


@pytest.mark.parametrize("mode", ["required", "preferred"])
def test_kueue_tas_fast_breaks_a_tie_between_domains_by_label(mode):
    """Two racks hold the pod set with the same free pods: BestFit takes the first by label, as
    strings (rack10 before rack2); the fast path finds it without sorting the racks."""
    spec = ClusterSpec(22, 4, topology=(("rack", 2),))
    k = [0] * 22
    k[4] = k[5] = k[20] = k[21] = 1   # rack2 and rack10, one pod free on each node
    assert topology.kueue_tas_fast(spec, k, 2, mode, "rack") == \
        topology.kueue_tas(spec, k, 2, mode, "rack") == ([(20, 1), (21, 1)], 2)
