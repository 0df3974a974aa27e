"""A real Kubernetes control plane: up/down by PID, and replays that must agree with courselib's model.

Runs where the pinned Kubernetes and etcd are built (`make setup-k8s`; .ci/run always builds them);
elsewhere every test is skipped with the reason. The session's control plane (tests/live_fixtures.py)
uses its own ports (18100+) and private state directory, so one a developer has up on the default
ports is never touched.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from courselib.io.workload import load_workload
from courselib.live import kube
from courselib.live.kube import plan as kplan, replay as kreplay, result as kresult
from courselib.live.nodes import port_free
from live_fixtures import FAST_QPS, KUBE_PORT, marked

pytestmark = [pytest.mark.real, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples" / "kube"
SEED = REPO / "examples" / "workloads"
PORT = KUBE_PORT


# Built by `make setup-k8s` (and `make test`, .ci/run) under the heavy lock, never while tests are
# collected: a build started here would race the one those run.
REASON = kube.unavailable_reason()
if REASON:
    pytestmark.append(pytest.mark.skip(reason=f"local Kubernetes not runnable here: {REASON}"))


def _ours_running(state_dir: Path) -> list[int]:
    """PIDs of processes whose environment carries this control plane's marker."""
    return marked(state_dir, kube.MARKER)


def _ports_free(shape: kube.KubeShape) -> bool:
    return all(port_free(p) for p in list(shape.ports.values())[:5])


@pytest.fixture
def lab(live_kube):
    """The session's control plane (tests/live_fixtures.py: reshaped, not restarted, per cluster
    shape; at the end of the session it proves that `down` left nothing)."""
    return live_kube


_REPLAYS: dict = {}


# The seed's story keeps the controller manager's default client rate (20 requests/s), as the recorded
# run does: the one guard that the story holds as a reader would see it. Every other replay checks
# agreement with the model given the real pod order, so it runs at FAST_QPS and waits less.
DEFAULT_RATE = {("seed-600-free-deadlock.yaml", False)}


def _replay(lab, path: Path | None, *, gang: bool = False, workload=None):
    """Replay a workload once per module (several tests read the same run)."""
    key = (str(path), gang, id(workload))
    if key not in _REPLAYS:
        workload = workload if workload is not None else load_workload(path)
        plan = kplan.plan_replay(workload, gang=gang, policy="kube-gang" if gang else "kube-default")
        qps = None if (getattr(path, "name", None), gang) in DEFAULT_RATE else FAST_QPS
        cp = lab.up(plan.shape, qps=qps)
        result = kreplay.run_replay(cp, plan)
        _REPLAYS[key] = (result, kresult.compare(result, name=getattr(path, "name", "workload")))
    return _REPLAYS[key]


def _report(c) -> str:
    return kresult.format_comparison(c)


# ----------------------------------------------------------------------------- up / down

def test_up_is_idempotent_and_registers_fake_gpu_nodes(lab):
    shape = kube.KubeShape(nodes=8, gpus_per_node=8, features=(("nvlink", 4),))
    first = lab.up(shape)
    again = lab.up(shape)
    assert [p.pid for p in again.procs] == [p.pid for p in first.procs]
    info = kube.status(first)
    assert info["up"] and info["nodes"] == 8 and info["gpus"] == 64
    assert {p["role"] for p in info["processes"]} == {
        "etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager"}
    # The real API server answers with the pinned version, and the nodes carry the feature label.
    from kubernetes import client
    api = first.api()
    assert client.VersionApi(api).get_code().git_version == kube.KUBERNETES_VERSION
    nodes = {n.metadata.name: n for n in client.CoreV1Api(api).list_node().items}
    assert nodes["node1"].metadata.labels.get(kube.FEATURE_PREFIX + "nvlink") == "true"
    assert kube.FEATURE_PREFIX + "nvlink" not in nodes["node5"].metadata.labels
    assert not nodes["node1"].spec.taints  # no not-ready taint: the scheduler may use it
    assert [c.status for c in nodes["node8"].status.conditions if c.type == "Ready"] == ["True"]


def test_a_different_shape_is_refused_while_one_is_up(lab):
    cp = lab.up(kube.KubeShape(nodes=8, gpus_per_node=8, features=(("nvlink", 4),)))
    with pytest.raises(kube.CourseError, match="different local control plane"):
        kube.up(kube.KubeShape(nodes=3, gpus_per_node=8, base_port=PORT))
    assert all(kube.is_ours(p) for p in cp.procs)


def test_sigterm_while_starting_leaves_nothing(tmp_path):
    """`kube up` killed mid-start (SIGTERM) stops what it started and removes its directory."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    env = dict(os.environ, COURSELIB_STATE_DIR=str(state))
    port = PORT + 50
    proc = subprocess.Popen([sys.executable, "-m", "courselib", "kube", "up", "--nodes", "2",
                             "--port", str(port)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    record = state / "kube.json"
    while time.monotonic() < deadline and not record.exists():
        time.sleep(0.05)
    time.sleep(0.5)  # some daemon has started
    assert record.exists(), "kube up never recorded anything"
    state_dir = Path(__import__("json").loads(record.read_text())["state_dir"])
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert "Traceback" not in out
    assert not state_dir.exists()
    assert _ours_running(state_dir) == []
    assert not record.exists()
    assert _ports_free(kube.KubeShape(nodes=2, base_port=port))


def test_a_control_plane_that_breaks_mid_replay_fails_in_one_line_and_down_cleans_up(lab, tmp_path):
    """The scheduler dies during a replay: the replay stops with an error, not a hang; down
    still stops everything (checked by the fixture)."""
    cp = lab.up(kube.KubeShape(nodes=8, gpus_per_node=8, features=(("nvlink", 4),)))
    plan = kplan.plan_replay(load_workload(EXAMPLES / "apart.yaml"))
    sched = next(p for p in cp.procs if p.role == "kube-scheduler")
    import threading
    threading.Timer(4.0, lambda: os.kill(sched.pid, signal.SIGKILL)).start()
    with pytest.raises(kube.CourseError):
        kreplay.run_replay(cp, plan, timeout=90)
    lab.down()


# ----------------------------------------------------------------------------- agreement

# Workloads replayed on default feature gates; each must agree 100 % with kube-default given the
# pod order the real Job controller created. Grouped by cluster shape (one control plane each).
KUBE_DEFAULT = [
    (EXAMPLES, "deadlock-small.yaml"),
    (EXAMPLES, "fragmentation.yaml"),
    (EXAMPLES, "apart.yaml"),
    (EXAMPLES, "more-than-fit.yaml"),
    (EXAMPLES, "priority.yaml"),
    (EXAMPLES, "constraint.yaml"),
    (EXAMPLES, "mixed-sizes.yaml"),
    (SEED, "seed-400-of-512-25min.yaml"),
    (SEED, "seed-600-free-deadlock.yaml"),
]


@pytest.mark.parametrize("where,name", KUBE_DEFAULT, ids=[n for _, n in KUBE_DEFAULT])
def test_kube_default_agrees_with_the_real_scheduler(lab, where, name):
    result, c = _replay(lab, where / name)
    assert c.agreement == 1.0, _report(c)


def test_fragmentation_waits_holding_nothing_then_starts(lab):
    result, c = _replay(lab, EXAMPLES / "fragmentation.yaml")
    whole = result.job("whole")
    assert whole.timeline[0] == (60.0, 0)  # nothing bound on arrival although 48 GPUs are free
    assert whole.start == 3600.0  # when `spread` ends
    assert not result.deadlock


def test_the_seed_deadlocks_on_the_real_control_plane(lab):
    result, c = _replay(lab, SEED / "seed-600-free-deadlock.yaml")
    assert result.deadlock
    a, b = result.job("llm-a"), result.job("llm-b")
    assert a.start is None and b.start is None
    assert a.bound_at_end + b.bound_at_end == 600  # every GPU held, nothing training
    assert 0 < a.bound_at_end < 512 and 0 < b.bound_at_end < 512


# The same with Kubernetes' own gang scheduling on (GenericWorkload, a PodGroup per job): each must
# agree 100 % with kube-gang given the order in which the real scheduler tried the PodGroups (its
# log), and that order must be one its queue's rule allows (courselib.live.kube.queue).
KUBE_GANG = [
    (SEED, "seed-600-free-deadlock.yaml"),
    (SEED, "seed-400-of-512-25min.yaml"),
    (EXAMPLES, "deadlock-small.yaml"),
    (EXAMPLES, "fragmentation.yaml"),
    (EXAMPLES, "apart.yaml"),
    (EXAMPLES, "more-than-fit.yaml"),
]


@pytest.mark.live_kube(gang=True)
@pytest.mark.parametrize("where,name", KUBE_GANG, ids=[n for _, n in KUBE_GANG])
def test_kube_gang_agrees_with_the_real_scheduler(lab, where, name):
    result, c = _replay(lab, where / name, gang=True)
    print(kresult.format_replay(result), _report(c), result.extra.get("podgroup_cycles"), sep="\n")
    assert result.extra.get("podgroup_cycles"), "kube-scheduler's log named no PodGroup cycle"
    assert c.queue_rule == "" and c.agreement == 1.0, _report(c)
    # all or nothing: no job ever holds pods without all of them (min_member = pods here)
    for rj in result.jobs:
        assert all(n in (0, rj.pods) for _, n in rj.timeline), (rj.name, rj.timeline)
    assert not result.deadlock


@pytest.mark.live_kube(gang=True)
def test_native_gang_scheduling_ends_the_seed_deadlock(lab):
    result, c = _replay(lab, SEED / "seed-600-free-deadlock.yaml", gang=True)
    first, second = sorted(result.jobs, key=lambda j: j.start)
    assert first.start == 0 and second.start == 7200  # one trains, the other waits for it
    assert second.timeline[0] == (0.0, 0)  # ... holding nothing while it waits


# ----------------------------------------------------------------------------- the gang-deadlock lab

def _lab_ns():
    """The gang-deadlock lab's solution: its given and answer cells run without a kernel."""
    from conftest import solution_namespace
    return solution_namespace("gang-deadlock")


# The lab's two halves run in the two feature-gate groups (tests/live_fixtures.py orders them): the
# default scheduler's on the plane the default replays use, native gang scheduling's first of the gang
# group, so neither restarts the control plane for the other.
def test_the_gang_deadlock_lab_s_rivals_keep_llm_from_training_on_the_real_scheduler(lab):
    """The lab's answers (labs/06-gang-deadlock), checked in the lab against the model, hold on the
    real scheduler: the rival jobs the solution writes keep `llm` from ever training under the default
    scheduler."""
    from courselib.model.workload import Workload
    ns = _lab_ns()
    mine = Workload(ns["CLUSTER"], [ns["LLM"], *ns["other_jobs"]])
    result, c = _replay(lab, None, workload=mine)
    assert c.agreement == 1.0, _report(c)
    # llm never trains unless the Job controller happened to create nearly all of its pods first
    # (the race chapter 6 shows): then the model, given that order, says so too (agreement above)
    first = result.pod_order[:mine.cluster.total_gpus]
    assert result.job("llm").start is None or first.count("llm") >= ns["LLM"].pods, kresult.format_replay(result)


@pytest.mark.live_kube(gang=True, order=-1)  # first of the gang group without a topology
def test_the_gang_deadlock_lab_s_pair_holds_nothing_idle_with_native_gang_scheduling(lab):
    """With Kubernetes' own gang scheduling the lab's PAIR holds nothing idle and `finetune` starts
    when `pretrain` ends (the lab's Volcano answer; Volcano itself cannot be built here)."""
    ns = _lab_ns()
    pair, cg = _replay(lab, None, gang=True, workload=ns["PAIR"])
    assert cg.agreement == 1.0, _report(cg)  # the model, given the order the scheduler tried the PodGroups
    held_idle = [rj.name for rj in pair.jobs if any(0 < n < rj.pods for _, n in rj.timeline)]
    assert held_idle == [] and ns["volcano_idle_gpu_hours"] == 0
    first, second = sorted(pair.jobs, key=lambda j: j.start)
    assert second.start == first.end, kresult.format_replay(pair)  # the moment the first one ends
    # Which PodGroup the scheduler tries first is a race between the Job controller's pace and the
    # scheduler's (courselib.live.kube.queue): it creates the two Jobs' pods interleaved, and on a
    # loaded machine finetune's can all exist first (a CI run of 2026-12-01 did that). When pretrain
    # goes first, as the lab's Volcano queue has it, finetune starts at the lab's answer.
    if first.name == "pretrain":
        assert second.start / 3600 == ns["finetune_start_hours"], kresult.format_replay(pair)


# ----------------------------------------------------------------------------- validate

FILES = REPO / "examples" / "files"


def _validate(lab, *paths):
    from courselib.live.kube import validate as kube_validate
    cp = lab.cp or lab.up(kube.KubeShape(nodes=8, gpus_per_node=8, features=(("nvlink", 4),)))
    return kube_validate.validate_files(cp, [str(p) for p in paths])


def test_validate_locates_the_api_server_s_rejection(lab):
    pg, job = _validate(lab, FILES / "podgroup-mistakes.yaml")
    assert pg.kind == "PodGroup" and not pg.rejected  # the stand-in CRD serves it
    assert job.rejected and job.kind == "Job"
    (cause,) = job.causes
    assert cause["field"] == "spec.template.spec.containers[0].resources.requests"
    assert "must be less than or equal to memory limit" in cause["message"]
    assert cause["line"] == 28  # the requests: line of the file
    assert job.text().startswith(f"{FILES / 'podgroup-mistakes.yaml'}:28: document 2 (Job/bert):")


def test_validate_accepts_a_volcano_job_and_a_plain_job(lab):
    findings = _validate(lab, FILES / "gpu-job-volcano.yaml", FILES / "gpu-job-no-gang.yaml")
    assert [(f.kind, f.rejected) for f in findings] == [("Job", False), ("Queue", False), ("Job", False)]
    assert all(f.validated for f in findings)


def test_validate_reports_a_field_the_server_drops(lab, tmp_path):
    """On a server without GenericWorkload, a pod's schedulingGroup is accepted and silently dropped."""
    f = tmp_path / "job.yaml"
    f.write_text("apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n    spec:\n"
                 "      restartPolicy: Never\n      schedulingGroup: {podGroupName: g}\n"
                 "      containers: [{name: c, image: x}]\n")
    cp = lab.up(kube.KubeShape(nodes=8, gpus_per_node=8, features=(("nvlink", 4),)))
    assert not cp.shape.gang
    (job,) = _validate(lab, f)
    assert not job.rejected
    assert job.dropped == [{"field": "spec.template.spec.schedulingGroup", "line": 8}]


def test_validate_rejects_the_seed_s_job_for_its_restart_policy_and_accepts_the_corrected_one(lab):
    seed = _validate(lab, FILES / "seed-podgroup-job.yaml")
    fixed = _validate(lab, FILES / "seed-podgroup-job-fixed.yaml")
    job = next(f for f in seed if f.kind == "Job")
    assert job.rejected
    assert [c["field"] for c in job.causes] == ["spec.template.spec.restartPolicy"]
    assert 'valid values: "OnFailure", "Never"' in job.causes[0]["message"]
    assert [f.rejected for f in fixed] == [False, False] and all(f.validated for f in fixed)


def test_a_replay_reshapes_the_fake_nodes_to_its_workload(lab):
    from kubernetes import client
    cp = lab.up(kube.KubeShape(nodes=8, gpus_per_node=8, features=(("nvlink", 4),)))
    pids = [p.pid for p in cp.procs]
    kube.reshape(cp, kube.KubeShape(nodes=3, gpus_per_node=4, features=(("ib", 1),)))
    nodes = {n.metadata.name: n for n in client.CoreV1Api(cp.api()).list_node().items}
    assert sorted(nodes) == ["node1", "node2", "node3"]
    assert nodes["node1"].metadata.labels.get(kube.FEATURE_PREFIX + "ib") == "true"
    assert kube.FEATURE_PREFIX + "nvlink" not in nodes["node1"].metadata.labels
    assert nodes["node3"].status.allocatable[kube.GPU] == "4"
    assert [p.pid for p in kube.load().procs] == pids  # the same daemons
    assert kube.load().shape.describe() == "3 nodes x 4 GPUs (ib on 1 node)"
    with pytest.raises(kube.CourseError, match="gang scheduling"):
        kube.reshape(cp, kube.KubeShape(nodes=3, gpus_per_node=4, gang=True))
