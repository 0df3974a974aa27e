"""The real Slurm 26.05 with topology/tree and topology/block (issue 29): every topology workload
replayed on a local slurmctld whose topology.conf is the workload's tree (switches) or its blocks
(BlockName, BlockSizes), jobs submitted with --switches / --segment as they ask, and compared with
courselib's slurm policy: started, order, pending reasons and where each job landed (the
innermost level's domains of squeue's nodes). Skipped where the local Slurm cannot run."""
from __future__ import annotations

from pathlib import Path

import pytest

from courselib.io.workload import load_workload
from courselib.live import slurm
from courselib.live.slurm import replay
from courselib.live.slurm.plan import plan_replay
from courselib.live.slurm.result import compare, format_comparison, node_indexes

pytestmark = [pytest.mark.real, pytest.mark.slow]

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "topology"
WORKLOADS = sorted(EXAMPLES.glob("*.yaml"), key=lambda p: (p.stem.endswith("block") or "block" in p.stem, p.stem))

REASON = slurm.unavailable_reason()
if REASON:
    pytestmark.append(pytest.mark.skip(reason=f"local Slurm not runnable here: {REASON}"))

_RUNS: dict[str, replay.ReplayResult] = {}


def _run(stem: str, lab) -> replay.ReplayResult:
    """One real replay per workload per session (the cluster restarts only for another shape)."""
    if stem not in _RUNS:
        plan = plan_replay(load_workload(EXAMPLES / f"{stem}.yaml"))
        _RUNS[stem] = replay.run_replay(lab.up(plan.shape), plan)
    return _RUNS[stem]


@pytest.mark.parametrize("path", WORKLOADS, ids=lambda p: p.stem)
def test_the_real_slurm_places_every_topology_workload_as_the_model_does(path, live_slurm):
    c = compare(_run(path.stem, live_slurm), name=path.stem)
    assert c.level and c.placement_checks > 0, format_comparison(c)
    assert c.agreement == 1.0, format_comparison(c)


def test_what_the_real_plugins_did(live_slurm):   # after the replays: reuses them
    """The real slurmctld's own decisions, pinned: block's best fit ties to the last block, a
    --segment job spans blocks a whole job cannot, --switches=1 waits for one leaf."""
    best = _run("best-fit-block", live_slurm)
    assert node_indexes(best.job("a").nodes) == [12, 13]          # block3: the last of four ties
    assert {i // 4 for i in node_indexes(best.job("b").nodes)} == {2}
    assert best.job("e").start is None or best.job("e").start > best.job("d").start
    seg = _run("segment-block", live_slurm)
    assert len({i // 4 for i in node_indexes(seg.job("seg2").nodes)}) == 2
    assert seg.job("whole").reason is not None and seg.job("seg2").start is not None
    tree = _run("preferred-vs-required", live_slurm)
    assert tree.job("preferred").start is not None and tree.job("required").reason is not None
    # --switches=2: starts at once over two leaves; over its wait, the tree's closer leaves whose
    # parent holds the rest (i_fit as _topo_compare_switches leaves it), all in rack1
    sw = _run("switches", live_slurm)
    assert {i // 2 for i in node_indexes(sw.job("pair").nodes)} == {0, 1}
    assert node_indexes(sw.job("wide").nodes) == [9, 11, 13] and sw.job("wide").start < sw.job("tight").start
    # backfill keeps --switches=1 while its wait is not over: s starts first, w after b ends
    res = _run("switches-reservation", live_slurm)
    assert res.job("s").start < res.job("w").start and node_indexes(res.job("w").nodes) == [5, 7]
    # the count is of the tree search's own placement: three waits although 2 blocks would hold it
    greedy = _run("switches-greedy", live_slurm)
    assert greedy.job("three").reason == "Resources" and node_indexes(greedy.job("three").nodes) == [0, 2, 4]
