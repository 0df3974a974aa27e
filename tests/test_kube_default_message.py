"""The default scheduler's FailedScheduling message, word for word, with the node count (issue 32: "the
kube-default model's FailedScheduling message gives the node count as the real one does").

The real kube-scheduler v1.37.2 writes a pod it cannot place as ``FitError.Error()``
(``pkg/scheduler/framework/types.go`` L1470-1521 at ``k8s.io/kubernetes@v1.37.2``): ``NoNodeAvailableMsg``
("0/%v nodes are available", L1447) with every node counted, a colon, then each Filter reason with the number
of nodes that gave it ("%v %v", sorted, joined by ", ", closed by "."), then any PostFilter message. The
NodeResourcesFit plugin's reason for a missing extended resource is ``"Insufficient " + name``
(``plugins/noderesources/fit.go`` L789). :func:`fit_error` writes that for the case the course meets — every
node short of GPUs — and three sources are held to it: the Go source (when the module cache has it), every
recorded real run of the default scheduler, and courselib's models (kube-default, both paths, and kube-gang's
pods past their quorum). A message without the count ("0/75 nodes are available: Insufficient
nvidia.com/gpu.") fails each.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from courselib.model.workload import ClusterSpec, Job, Workload
from courselib.sim.gang import simulate

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "src" / "courselib" / "data" / "recorded"
GPU = "nvidia.com/gpu"


def fit_error(nodes: int, reasons: dict[str, int]) -> str:
    """``FitError.Error()`` of types.go L1470-1521 when Filter failed (no PreFilter or PostFilter message)."""
    histogram = sorted(f"{count} {reason}" for reason, count in reasons.items())
    return f"0/{nodes} nodes are available: {', '.join(histogram)}."


def no_gpu(nodes: int) -> str:
    return fit_error(nodes, {f"Insufficient {GPU}": nodes})


def test_fit_error_writes_the_count_twice():
    assert no_gpu(75) == "0/75 nodes are available: 75 Insufficient nvidia.com/gpu."
    assert fit_error(4, {"Insufficient nvidia.com/gpu": 3, "Insufficient memory": 1}) == (
        "0/4 nodes are available: 1 Insufficient memory, 3 Insufficient nvidia.com/gpu.")


def test_the_pinned_kube_scheduler_source_writes_it_so():
    """The format strings, read from the pinned module (``make setup-k8s`` fills the Go module cache)."""
    from courselib.live.kube.gates import module_dir

    base = module_dir()
    framework = base / "pkg/scheduler/framework"
    types, fit = framework / "types.go", framework / "plugins/noderesources/fit.go"
    if not types.exists():
        pytest.skip(f"no {base} (make setup-k8s puts it there)")
    src = types.read_text()
    assert 'NoNodeAvailableMsg = "0/%v nodes are available"' in src
    error = src[src.index("func (f *FitError) Error() string"):]
    error = error[:error.index("\n}\n")]
    for piece in ('fmt.Sprintf(NoNodeAvailableMsg+":", f.NumAllNodes)', 'fmt.Sprintf("%v %v", v, k)',
                  "sort.Strings(reasonStrings)", 'fmt.Sprintf(" %v.", strings.Join(sortedFilterMsg, ", "))'):
        assert piece in error, piece
    assert 'fmt.Sprintf("Insufficient %v", rName)' in fit.read_text()


def recorded_messages() -> list[tuple[str, int, str]]:
    """(recording, nodes of its cluster, message) for each default-scheduler message in a recorded real run
    of a cluster without a topology (a topology-aware PodGroup's pod counts only its placement's nodes)."""
    out = []
    for path in sorted(RECORDED.glob("kube-*.json")):
        data = json.loads(path.read_text())
        shape = (data.get("replay") or {}).get("shape", "")
        if not shape or "topology" in shape:
            continue
        nodes = int(re.match(r"(\d+) nodes", shape).group(1))
        found: set[str] = set()

        def walk(x):
            if isinstance(x, dict):
                for v in x.values():
                    walk(v)
            elif isinstance(x, list):
                for v in x:
                    walk(v)
            elif isinstance(x, str) and "nodes are available" in x:
                found.add(x)
        walk(data)
        out += [(path.stem, nodes, m) for m in sorted(found)]
    return out


def test_every_recorded_real_message_counts_every_node():
    seen = recorded_messages()
    assert {name for name, _, _ in seen} >= {"kube-seed-600", "kube-jobset-seed-512", "kube-kueue-quota"}
    for name, nodes, message in seen:
        body = message.removeprefix("Unschedulable: ")
        # what follows the Filter reasons is PostFilter's (preemption's) message, which the models leave out
        assert body.startswith(no_gpu(nodes) + " preemption: "), (name, message)


def deadlock(nodes: int) -> Workload:
    """Two jobs, each as large as the cluster: pod-at-a-time binding leaves both waiting."""
    return Workload(ClusterSpec(nodes, 8), (Job("a", nodes * 8, 1, duration=3600.0),
                                            Job("b", nodes * 8, 1, duration=3600.0)))


def past_quorum(nodes: int) -> Workload:
    """A gang whose quorum fits and whose last four pods do not."""
    return Workload(ClusterSpec(nodes, 8), (Job("a", nodes * 8 + 4, 1, duration=3600.0, min_member=nodes * 8),))


CASES = [("kube-default", {}, deadlock), ("kube-default", {"reference": True}, deadlock),
         ("kube-gang", {}, past_quorum), ("kube-gang", {"pod_group_cycle": False}, past_quorum)]


def unschedulable_lines(result) -> list[str]:
    lines = [e.what.removeprefix("waiting: ") for e in result.trace if e.what.startswith("waiting: ")]
    lines += [j.pending_reason for j in result.jobs if j.pending_reason]
    return [x for x in lines if "nodes are available" in x]


@pytest.mark.parametrize("nodes", [1, 3, 7])
@pytest.mark.parametrize("policy, options, workload", CASES, ids=lambda x: str(x) if not callable(x) else x.__name__)
def test_the_models_message_is_the_real_schedulers_with_the_node_count(policy, options, workload, nodes):
    lines = unschedulable_lines(simulate(workload(nodes), policy, horizon=2 * 3600, **options))
    assert lines, f"{policy} {options}: no FailedScheduling message on {nodes} nodes"
    pattern = re.compile(r"(?:.*; )?(\d+) pods? Unschedulable: " + re.escape(no_gpu(nodes)))
    for line in lines:
        m = pattern.fullmatch(line)
        assert m and (m.group(1) == "1") == (" pod " in line), (policy, options, line, no_gpu(nodes))


@pytest.mark.parametrize("reference", [False, True])
def test_the_model_of_the_recorded_deadlock_says_what_the_real_scheduler_said(reference):
    """The seed's deadlock on 75 nodes: the real run's message (to its PostFilter part) is the model's."""
    from courselib.io.workload import load_workload

    data = json.loads((RECORDED / "kube-seed-600.json").read_text())
    real = {j["name"]: j["reason"] for j in data["replay"]["jobs"] if j.get("reason")}
    result = simulate(load_workload(ROOT / data["workload_file"]), "kube-default", horizon=3 * 3600,
                      reference=reference)
    model = {j.name: j.pending_reason for j in result.jobs if j.pending_reason}
    assert set(model) == set(real) == {"llm-a", "llm-b"}
    for name, reason in model.items():
        assert reason.split(" Unschedulable: ", 1)[1] == no_gpu(75), reason
        assert real[name].removeprefix("Unschedulable: ").startswith(reason.split(" Unschedulable: ", 1)[1])
