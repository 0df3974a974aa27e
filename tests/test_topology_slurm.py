"""Slurm's two topology plugins in the model (issue 29): topology/tree places every job by its
switches, topology/block every job in one block of the smallest BlockSizes that holds it, and
``--segment`` splits a job into blocks. Read from Slurm 26.05 (``courselib.model.topology``); the
real slurmctld's side is ``tests/test_topology_slurm_live.py``."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from budget import examples
from courselib.errors import InputError
from courselib.io.workload import load_workload, parse_workload
from courselib.io.yamlfile import load_all_text
from courselib.live.slurm.cluster import ClusterShape, render_slurm_conf, render_topology_conf
from courselib.live.slurm.plan import plan_replay
from courselib.live.slurm.result import compare, format_comparison
from courselib.model import topology
from courselib.model.workload import ClusterSpec, Job, Workload
from courselib.sim.gang import simulate

EX = Path(__file__).parent.parent / "examples" / "topology"
TREE = (("rack", 8), ("block", 4))


def workload(text: str, file: str = "w.yaml") -> Workload:
    return parse_workload(load_all_text(text, file=file)[0], file=file)


def block_spec(sizes=()) -> ClusterSpec:
    return ClusterSpec(16, 4, topology=TREE, slurm_topology="block", block_sizes=sizes)


def test_block_takes_the_block_with_fewest_free_nodes_ties_to_the_last():
    w = load_workload(EX / "best-fit-block.yaml")
    r = simulate(w, "slurm", check=True)
    assert r.job("a").domains["block"] == ["block3"]          # all tie: the last block
    assert r.job("b").domains["block"] == ["block2"]          # block3 has 2 free: too few for 3
    assert r.job("c").domains["block"] == ["block3"]          # exactly 2 free: the fewest
    assert r.job("d").domains["rack"] == ["rack0"]            # 8 nodes: one 8-node block
    e = simulate(w, "slurm", horizon=300).job("e")
    assert e.start is None and e.pending_reason == "Resources"   # 3 nodes free, no block has 2


def test_block_sizes_default_to_the_levels_that_are_the_base_times_a_power_of_two():
    assert topology.slurm_block_sizes(block_spec()) == (4, 8)
    assert topology.slurm_block_sizes(block_spec((4, 16))) == (4, 16)
    odd = ClusterSpec(24, 4, topology=(("rack", 12), ("block", 4)), slurm_topology="block")
    assert topology.slurm_block_sizes(odd) == (4,)            # 12 = 3 blocks: no block size


def test_segment_splits_a_job_into_blocks_and_a_segment_that_does_not_divide_it_fails():
    k = [0, 0, 1, 1] * 4                                     # 2 free nodes in every block
    plan, why = topology.slurm_block(block_spec(), k, 4, 1)
    assert plan is None and why == topology.BLOCK_NO_FIT
    plan, why = topology.slurm_block(block_spec(), k, 4, 1, segment=2)
    blocks = {n // 4 for n, _ in plan}
    assert why is None and len(plan) == 4 and len(blocks) == 2
    assert topology.slurm_block(block_spec(), k, 6, 1, segment=3) == (None, topology.BLOCK_SEGMENT_NO_FIT)
    assert topology.slurm_block(block_spec(), [1] * 16, 6, 1, segment=4) == (None, topology.BLOCK_CONFIG)
    plan, why = topology.slurm_block(block_spec(), [1] * 16, 3, 1, segment=8)   # larger than the job
    assert why is None and {n // 4 for n, _ in plan} == {3}


def test_block_sizes_limit_a_job_to_two_base_blocks_below_the_next_size():
    k = [0, 1, 1, 1] * 4                                     # 3 free in every block, 12 in all
    assert topology.slurm_block(block_spec((4, 16)), k, 7, 1)[0] is None
    plan, _ = topology.slurm_block(block_spec((4, 16)), k, 6, 1)
    assert len({n // 4 for n, _ in plan}) == 2 and len({n // 8 for n, _ in plan}) == 1
    assert topology.slurm_block(block_spec(), k, 7, 1)[0] is None     # (4, 8): one rack has 6


def test_the_block_examples_tell_their_stories():
    seg = simulate(load_workload(EX / "segment-block.yaml"), "slurm", check=True)
    assert seg.job("seg2").start == 60 and len(seg.job("seg2").domains["block"]) == 2
    assert seg.job("whole").start == 7200 and seg.job("seg3").start == 7200
    sizes = simulate(load_workload(EX / "block-sizes.yaml"), "slurm", check=True)
    assert sizes.job("seven").start == 1200 and sizes.job("six").start == 300


def test_under_tree_a_job_without_a_request_is_placed_by_the_switches():
    """eval_nodes_tree runs for every job (L1464-1472): best-fit leaf switches, not best-fit nodes."""
    text = """\
cluster: {nodes: 8, gpus_per_node: 4, topology: [{level: block, size: 4}]}
jobs:
  - {name: a, pods: 1, gpus_per_pod: 4, submit: 0, duration: 2h}
  - {name: b, pods: 4, gpus_per_pod: 4, submit: 1m, duration: 2h}
"""
    r = simulate(workload(text), "slurm", check=True)
    assert r.job("a").domains["block"] == ["block0"] and r.job("b").domains["block"] == ["block1"]
    # (best-fit nodes, fewest free GPUs then index, would have taken nodes 1-4: block0 and block1)


@st.composite
def block_workloads(draw):
    sizes = draw(st.sampled_from([(), (4, 16), (4,), (4, 8, 16)]))
    nodes = 16
    jobs, t = [], 0.0
    for n in range(draw(st.integers(1, 7))):
        t += draw(st.sampled_from([0.0, 0.0, 60.0, 600.0]))
        pods = draw(st.integers(1, 10))
        seg = draw(st.sampled_from([None, None, 1, 2, 3, 4]))
        jobs.append(Job(f"j{n}", pods, 4, submit=t, duration=float(draw(st.sampled_from([60, 600, 3600]))),
                        priority=draw(st.integers(0, 1)), segment=seg))
    return Workload(ClusterSpec(nodes, 4, topology=TREE, slurm_topology="block", block_sizes=sizes), jobs)


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(block_workloads(), st.sampled_from([{}, {"bf_interval": 30.0}]))
def test_fast_path_matches_the_reference_under_topology_block(w, options):
    fast = simulate(w, "slurm", check=True, **options)
    ref = simulate(w, "slurm", reference=True, **options)
    assert fast.jobs == ref.jobs and fast.trace == ref.trace


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.integers(0, 1), min_size=16, max_size=16), st.integers(1, 16),
       st.sampled_from([(), (4, 16), (4,)]), st.sampled_from([None, 1, 2, 4]))
def test_a_block_placement_stays_in_one_block_of_its_size_per_segment(free, pods, sizes, segment):
    spec = block_spec(sizes)
    plan, why = topology.slurm_block(spec, free, pods, 1, segment)
    if plan is None:
        return
    assert sum(n for _, n in plan) == pods and all(free[i] for i, _ in plan)
    seg = segment if segment and segment <= pods else pods
    levels = [b // 4 for b in topology.slurm_block_sizes(spec)]
    size = next((4 * lv for lv in levels if 4 * lv >= seg), 16)
    if segment is None or segment >= pods:
        assert len({i // size for i, _ in plan}) == 1


@pytest.mark.parametrize("cluster, field, message", [
    ("slurm_topology: ring", "cluster.slurm_topology", "write tree or block"),
    ("slurm_topology: block\n  block_sizes: [8]", "cluster.block_sizes", "the smallest must be the base block"),
    ("slurm_topology: block\n  block_sizes: [4, 12]", "cluster.block_sizes", "times a power of two"),
    ("block_sizes: [4, 8]", "cluster.block_sizes", "needs slurm_topology: block"),
])
def test_a_bad_slurm_topology_is_one_located_line(cluster, field, message):
    text = f"""cluster:
  nodes: 16
  gpus_per_node: 4
  topology: [{{level: rack, size: 8}}, {{level: block, size: 4}}]
  {cluster}
jobs:
  - {{name: a, pods: 1, gpus_per_pod: 4, duration: 1h}}
"""
    with pytest.raises(InputError) as err:
        workload(text)
    line = 5 + cluster.split(field.split(".")[-1] + ":")[0].count("\n")   # the field's own line
    assert err.value.field == field and message in str(err.value) and err.value.line == line
    assert "\n" not in err.value.message


def test_a_segment_on_a_tree_cluster_is_one_located_line():
    text = """cluster:
  nodes: 16
  gpus_per_node: 4
  topology: [{level: rack, size: 8}, {level: block, size: 4}]
jobs:
  - {name: a, pods: 4, gpus_per_pod: 4, duration: 1h,
     segment: 2}
"""
    with pytest.raises(InputError) as err:
        workload(text)
    assert err.value.field == "jobs[0].segment" and err.value.line == 7 and "topology/block" in str(err.value)
    with pytest.raises(InputError) as err:
        workload(text.replace("segment: 2", "segment: 0").replace("  topology:", "  slurm_topology: block\n  topology:"))
    assert "segment" in err.value.field


def test_the_live_slurm_writes_the_tree_and_the_block_form_and_the_jobs_ask_as_the_model_does(tmp_path):
    tree = plan_replay(load_workload(EX / "preferred-vs-required.yaml"))
    conf = render_topology_conf(tree.shape)
    assert "SwitchName=block0 Nodes=node[1-4]" in conf and "SwitchName=rack1 Switches=block[2-3]" in conf
    assert "SwitchName=root Switches=rack[0-1]" in conf
    assert "TopologyPlugin=topology/tree" in render_slurm_conf(tree.shape, tmp_path)
    args = {s.name: s.args for s in tree.submissions}
    assert "--switches=1@5" in args["required"] and not any("switches" in a for a in args["preferred"])
    block = plan_replay(load_workload(EX / "segment-block.yaml"))
    conf = render_topology_conf(block.shape)
    assert "BlockName=block3 Nodes=node[13-16]" in conf and "BlockSizes=4,8" in conf
    assert "TopologyPlugin=topology/block" in render_slurm_conf(block.shape, tmp_path)
    assert "--segment=2" in {s.name: s.args for s in block.submissions}["seg2"]
    assert not block.shape.same_nodes(tree.shape)           # a replay restarts Slurm with the other plugin
    again = ClusterShape.from_json(block.shape.to_json())
    assert again == block.shape and "topology/block" in again.describe()
    sizes = plan_replay(load_workload(EX / "block-sizes.yaml")).shape
    assert "BlockSizes=4,16" in render_topology_conf(sizes) and "--block-sizes 4,16" in sizes.cli_args()


def test_slurm_up_topology_flags_are_read_and_a_bad_tree_is_one_line():
    from courselib.cli.slurm import _levels
    assert _levels("rack:8,block:4", "--topology") == (("rack", 8), ("block", 4))
    assert _levels("4,16", "--block-sizes", bare=True) == (("", 4), ("", 16))
    with pytest.raises(InputError) as err:
        _levels("rack8", "--topology")
    assert err.value.field == "--topology"
    with pytest.raises(InputError) as err:
        ClusterShape(nodes=16, gpus_per_node=4, topology=(("rack", 3),))
    assert err.value.field == "--topology" and "does not divide" in str(err.value)
    shape = ClusterShape(nodes=16, gpus_per_node=4, topology=TREE, topology_plugin="block")
    assert shape.spec().slurm_topology == "block" and "--slurm-topology block" in shape.cli_args()


def test_squeue_node_lists_map_to_the_models_domains():
    from courselib.live.slurm.result import node_indexes
    assert node_indexes("node[1-3,7],node9") == [0, 1, 2, 6, 8] and node_indexes("") == []
    assert topology.domains_spanned(block_spec(), node_indexes("node[13-14]"), "block") == ["block3"]


def test_the_slurm_root_follows_its_own_absolute_symlinks(tmp_path):
    """Debian links /usr/sbin/slurmctld -> /etc/alternatives/slurmctld -> /usr/sbin/slurmctld-wlm:
    absolute links that name the root's files; a host without /etc/alternatives/slurmctld must
    still find the root's slurmctld (it did not, and `slurm up` said Slurm was incomplete)."""
    import os
    from courselib.live.slurm.root import RootLauncher
    (tmp_path / "usr/sbin").mkdir(parents=True)
    (tmp_path / "etc/alternatives").mkdir(parents=True)
    real = tmp_path / "usr/sbin/slurmctld-wlm"
    real.write_text("#!/bin/sh\n")
    real.chmod(0o755)
    os.symlink("/usr/sbin/slurmctld-wlm", tmp_path / "etc/alternatives/slurmctld-course-test")
    os.symlink("/etc/alternatives/slurmctld-course-test", tmp_path / "usr/sbin/slurmctld")
    launcher = RootLauncher(tmp_path)
    assert launcher.which("slurmctld") == "/usr/sbin/slurmctld" and launcher.which("slurmd") is None
    assert launcher.inside("/usr/sbin/slurmctld") == real


TOPOLOGY_RUNS = ["fragmentation", "larger-than-domain", "preferred-vs-required", "apart", "blocked-head",
                 "mixed", "switches", "switches-reservation", "switches-greedy",
                 "best-fit-block", "segment-block", "block-sizes"]


@pytest.mark.parametrize("name", TOPOLOGY_RUNS)
def test_the_recorded_real_slurm_runs_agree_with_the_model(name):
    """The real slurmctld's runs (examples/topology/record.sh, Slurm 26.05.5) against today's model:
    started, order, reasons and where each job landed, 100 % (chapter 5 shows them)."""
    from courselib.live.slurm.result import load_recorded
    c = compare(load_recorded(f"topology-{name}").result, name=name)
    assert c.placement_checks > 0 and c.agreement == 1.0, format_comparison(c)
