"""Durations stretched by a split tensor-parallel group (issue 29), opt-in.

With ``stretch=Stretch(tp, f, level)`` (``gang simulate --tp N --stretch``) a job whose TP groups
cross a slow link trains ``(1 − f) + f·r`` times as long, so it ends later and holds its GPUs
longer; without it every duration is as written (the default, unchanged).
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from budget import examples
from courselib.io.workload import parse_workload
from courselib.io.yamlfile import load_all_text
from courselib.model.topology import Stretch
from courselib.sim.gang import simulate

SPLIT = """\
cluster: {nodes: 8, gpus_per_node: 4, topology: [{level: block, size: 4}]}
jobs:
  - {name: a, pods: 2, gpus_per_pod: 2, submit: 0, duration: 1h}
  - {name: x, pods: 4, gpus_per_pod: 2, submit: 60, duration: 1h, topology: {preferred: block}}
  - {name: y, pods: 8, gpus_per_pod: 4, submit: 120, duration: 1h}
"""


def workload(text=SPLIT):
    return parse_workload(load_all_text(text, file="w.yaml")[0], file="w.yaml")


def test_a_split_gang_ends_later_and_holds_its_gpus_longer_and_the_next_job_waits():
    """kube-default spreads x over nodes 2-5, 2 GPUs each: 4 GPUs in block0, 4 in block1 (NVLink
    900 GB/s inside a block; between blocks the ring crosses through the 4 NICs of a side, 4 x 50 =
    200 GB/s): TP 8 at f = 0.1 runs 0.9 + 0.1 x 900/200 = 1.35 x as long (2.7 x when every split
    paid one NIC). y (the whole cluster) waits for x: 1 h later without the stretch, 1.35 h with it."""
    w, stretch = workload(), Stretch(8, 0.1, "block")
    plain = simulate(w, "kube-default")
    split = simulate(w, "kube-default", stretch=stretch)
    x0, x1 = plain.job("x"), split.job("x")
    assert x0.domains["block"] == ["block0", "block1"] and x1.placement == x0.placement
    assert x0.end - x0.start == 3600 and x1.end - x1.start == pytest.approx(3600 * 1.35)
    assert split.job("a").end == plain.job("a").end == 3600      # 4 GPUs: TP 8 does not divide them
    assert split.job("y").start == pytest.approx(x1.end) and split.job("y").start > plain.job("y").start
    assert any("every step x1.350" in e.what for e in split.trace if e.job == "x")
    assert simulate(w, "kube-default", stretch=stretch, reference=True).jobs == split.jobs
    # Kueue's BestFit keeps x in block1 (a holds 4 GPUs of block0): nothing split, nothing stretched
    k0, k1 = simulate(w, "kueue").job("x"), simulate(w, "kueue", stretch=stretch).job("x")
    assert len(k0.domains["block"]) == 1 and k1.end - k1.start == 3600 == k0.end - k0.start


def test_by_default_nothing_is_stretched_and_a_bad_stretch_is_refused():
    w = workload()
    assert simulate(w, "kube-default").jobs == simulate(w, "kube-default", stretch=None).jobs
    assert simulate(w, "kube-default", stretch=Stretch(8, 0.0, "block")).jobs == simulate(w, "kube-default").jobs
    for bad in (dict(tp=0), dict(tp=True), dict(tp=8, comm_fraction=1.5)):
        with pytest.raises(ValueError):
            Stretch(**bad)
    with pytest.raises(ValueError, match="not a level"):
        simulate(w, "kueue", stretch=Stretch(8, 0.1, "rack"))


def test_slurm_kills_a_stretched_job_at_its_time_limit():
    """a and b (--switches=1) take 3 nodes of each block; x (2 whole nodes, TP 8) gets node 3 and node 7, one in
    each block: its group is 4 + 4, so its ring crosses through 4 NICs a side, 200 GB/s against 900, and
    at f = 0.1 a step is 0.9 + 0.1 x 4.5 = 1.35 x as long: 81 min of training does not fit its 80 min
    limit, and Slurm kills it there."""
    text = """\
cluster: {nodes: 8, gpus_per_node: 4, topology: [{level: block, size: 4}]}
jobs:
  - {name: a, pods: 3, gpus_per_pod: 4, submit: 0, duration: 3h}
  - {name: b, pods: 3, gpus_per_pod: 4, submit: 0, duration: 3h, topology: {required: block}}
  - {name: x, pods: 2, gpus_per_pod: 4, submit: 60, duration: 1h, time_limit: 80m}
"""
    w = workload(text)
    x0 = simulate(w, "slurm").job("x")
    x1 = simulate(w, "slurm", stretch=Stretch(8, 0.1, "block")).job("x")
    assert x0.domains["block"] == ["block0", "block1"] == x1.domains["block"]
    assert x0.state == "COMPLETED" and x0.end - x0.start == 3600
    assert x1.state == "TIMEOUT" and x1.end - x1.start == 4800


@st.composite
def stretched_workloads(draw):
    levels = draw(st.sampled_from([(("rack", 4), ("block", 2)), (("block", 2),), (("rack", 8), ("block", 4))]))
    nodes = levels[0][1] * draw(st.integers(1, 3))
    gpn = draw(st.sampled_from([2, 4]))
    names = [n for n, _ in levels]
    lines = [f"cluster: {{nodes: {nodes}, gpus_per_node: {gpn}, topology: ["
             + ", ".join(f"{{level: {n}, size: {s}}}" for n, s in levels) + "]}", "jobs:"]
    t = 0
    for n in range(draw(st.integers(1, 7))):
        t += draw(st.sampled_from([0, 0, 60, 600]))
        gpp = draw(st.sampled_from([g for g in (1, 2, 4) if g <= gpn]))
        pods = draw(st.integers(1, max(1, nodes * gpn // gpp)))
        req = draw(st.sampled_from(["", "required", "preferred"]))
        topo = f", topology: {{{req}: {draw(st.sampled_from(names))}}}" if req else ""
        limit = draw(st.sampled_from(["", ", time_limit: 2h"]))
        lines.append(f"  - {{name: j{n}, pods: {pods}, gpus_per_pod: {gpp}, submit: {t}, "
                     f"duration: {draw(st.sampled_from([600, 3600]))}{limit}{topo}}}")
    tp = draw(st.sampled_from([2, 4, 8]))
    return workload("\n".join(lines) + "\n"), Stretch(tp, draw(st.sampled_from([0.05, 0.5])),
                                                      draw(st.sampled_from([None] + names)))


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stretched_workloads(), st.sampled_from(["kube-default", "kueue", "volcano", "slurm", "kube-gang"]))
def test_with_a_stretch_the_fast_path_still_equals_the_reference_and_no_job_ends_sooner(case, policy):
    w, stretch = case
    fast = simulate(w, policy, check=True, stretch=stretch)
    ref = simulate(w, policy, reference=True, stretch=stretch)
    assert fast.jobs == ref.jobs and fast.trace == ref.trace
    for j in fast.jobs:
        if j.start is not None and j.end is not None and j.state == "COMPLETED":
            assert j.end - j.start >= w.job(j.name).duration - 1e-6


def test_gang_simulate_stretch_on_the_command_line(tmp_path, capsys):
    from courselib.cli.main import main
    path = tmp_path / "w.yaml"
    path.write_text(SPLIT)
    args = ["gang", "simulate", str(path), "--policy", "kube-default"]
    assert main(args + ["--stretch"]) == 2
    assert "--stretch" in capsys.readouterr().err
    assert main(args + ["--tp", "8", "--nvlink-level", "block", "--stretch"]) == 0
    out = capsys.readouterr().out
    assert "--tp 8 --comm-fraction 0.1 --nvlink-level block --stretch" in out
    assert "step x1.35 (applied: its duration stretched)" in out
    assert main(args + ["--tp", "8", "--nvlink-level", "rack", "--stretch"]) == 2
