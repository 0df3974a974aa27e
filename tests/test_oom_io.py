"""Scenario and pod readers: one located line for every mistake; real manifests read."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from courselib.cli.main import main
from courselib.errors import InputError
from courselib.io.pod import parse_quantity, read_pods, read_pods_text
from courselib.io.scenario import scenario_from_text
from courselib.model.qos import pod_oom_score_adj

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "oom"
CORPUS = ROOT.parent / "shared" / "corpus" / "k8s"

GOOD = """scope: memcg
limit: 1Gi
processes:
  - {name: a, rss: 150000p}
"""


@pytest.mark.parametrize("text, line, field, words", [
    ("scope: memcg\nlimit: 1Gi\nprocesses:\n  - {name: a, rss: 150000}\n", 4, "processes[0].rss", "no unit"),
    ("scope: pod\nlimit: 1Gi\nprocesses:\n  - {name: a, rss: 1p}\n", 1, "scope", "not one of"),
    ("limit: 1Gb\nprocesses:\n  - {name: a, rss: 1p}\n", 1, "limit", "not a memory size"),
    ("limit: 1Gi\nprocesses:\n  - {name: a, rss: 1p}\n  - {name: a, rss: 2p}\n", 4, "processes[1].name", "duplicate"),
    ("limit: 1Gi\nprocesses:\n  - {name: a, rss: 1p, oom_score_adj: 2000}\n", 3, "processes[0].oom_score_adj", "[-1000, 1000]"),
    ("limit: 1Gi\nprocesses:\n  - {name: a, rss: 1p, oom_scor_adj: 5}\n", 3, "processes[0].oom_scor_adj", "did you mean 'oom_score_adj'"),
    ("limit: 1Gi\ncgroup: v1\noom_group: true\nprocesses:\n  - {name: a, rss: 1p}\n", 3, "oom_group", "only on cgroup v2"),
    ("limit: 1Gi\nprocesses: []\n", 2, "processes", "list of processes"),
    ("scope: memcg\nprocesses:\n  - {name: a, rss: 1p}\n", 1, None, "missing required field 'limit'"),
    ("limit: 1Gi\nprocesses:\n  - {name: a, rss: 1p, cgroup: pod}\n", 3, "processes[0].cgroup", "not a cgroup path"),
    ("limit: 1Gi\nprocesses:\n  - {name: a rss: 1p}\n", 3, None, "YAML"),
])
def test_bad_scenarios_give_located_errors(text, line, field, words):
    with pytest.raises(InputError) as err:
        scenario_from_text(text, file="s.yaml")
    e = err.value
    assert e.file == "s.yaml" and e.line == line and e.field == field and words in str(e)
    assert "\n" not in str(e)


def test_good_scenario_reads():
    sc = scenario_from_text(GOOD)
    assert sc.limit == 262144 and sc.processes[0].task.rss == 150000 and sc.cgroup == "v2"


def test_cli_error_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "s.yaml"
    bad.write_text("limit: 1Gi\nprocesses:\n  - {name: a, rss: 12}\n")
    out = subprocess.run([sys.executable, "-m", "courselib", "oom", "simulate", str(bad)],
                         capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert f"{bad}:3: processes[0].rss" in out.stderr


def test_simulate_json(capsys):
    assert main(["oom", "simulate", str(EXAMPLES / "basic.yaml"), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["victim"] == "cache" and d["killed"] == ["cache"] and d["exit_codes"]["cache"] == 137
    assert d["points"] == {"web": 150000, "cache": 60000 + 500 * 262, "db": None}
    assert set(d["events"]) >= {"oom", "oom_kill", "oom_group_kill"}


def test_simulate_text(capsys):
    assert main(["oom", "simulate", str(EXAMPLES / "node.yaml")]) == 0
    out = capsys.readouterr().out
    assert "victim burstable-api" in out and "totalpages = 2097152" in out


# --- pods -------------------------------------------------------------------------------------

def test_quantities():
    assert parse_quantity("500m") * 1000 == 500 and parse_quantity("2Gi") == 2 * 2 ** 30
    assert parse_quantity("129e6") == 129_000_000 and parse_quantity(1) == 1
    with pytest.raises(InputError):
        parse_quantity("2GB")


def test_score_adj_example(capsys):
    assert main(["oom", "score-adj", str(EXAMPLES / "pod.yaml"), "--node-memory", "16Gi", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    pod = d["pods"][0]
    # FACTS §2.2: 1000 - 1000*2Gi/16Gi = 875; 1000 - floor(1000*64Mi/16Gi) = 1000 - 3 = 997
    assert pod["qos"] == "Burstable"
    assert [c["oom_score_adj"] for c in pod["containers"]] == [875, 997]


PLR_POD = """apiVersion: v1
kind: Pod
metadata: {name: trainer}
spec:
  resources:                      # pod-level (Kubernetes v1.34+)
    requests: {cpu: "2", memory: 8Gi}
    limits: {cpu: "4", memory: 12Gi}
  initContainers:
  - name: proxy
    restartPolicy: Always         # a sidecar
    resources: {requests: {memory: 256Mi}}
  containers:
  - name: train
    resources: {requests: {memory: 4Gi}}
"""


def test_pod_level_resources_are_read_and_scored_by_the_courses_kubelet(tmp_path, capsys):
    (reading,) = read_pods_text(PLR_POD, file="t.yaml")
    res = reading.pod.resources
    assert (res.requests, res.limits) == ({"cpu": 2000, "memory": 8 * 2 ** 30}, {"cpu": 4000, "memory": 12 * 2 ** 30})
    f = tmp_path / "t.yaml"
    f.write_text(PLR_POD)
    assert main(["oom", "score-adj", str(f), "--node-memory", "16Gi", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    # unclaimed 8Gi - 4Gi - 256Mi shared by 2 containers; the sidecar capped at the trainer's score
    share = (8 * 2 ** 30 - 4 * 2 ** 30 - 256 * 2 ** 20) // 2
    train = 1000 - 1000 * (4 * 2 ** 30 + share) // (16 * 2 ** 30)
    assert d["kubernetes"] == "1.37.2" and d["pods"][0]["qos"] == "Burstable"
    assert [c["oom_score_adj"] for c in d["pods"][0]["containers"]] == [train, train]
    # v1.31 knew neither pod-level resources nor the sidecar rule
    assert main(["oom", "score-adj", str(f), "--node-memory", "16Gi", "--kubernetes", "1.31", "--json"]) == 0
    old = json.loads(capsys.readouterr().out)["pods"][0]["containers"]
    assert [c["oom_score_adj"] for c in old] == [1000 - 1000 * 4 * 2 ** 30 // (16 * 2 ** 30),
                                                 1000 - 1000 * 256 * 2 ** 20 // (16 * 2 ** 30)]
    assert main(["oom", "score-adj", str(f), "--node-memory", "16Gi", "--kubernetes", "1.12"]) == 2
    assert "--kubernetes" in capsys.readouterr().err


def test_bad_pod_quantity_is_located():
    text = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: a\n" \
           "    resources:\n      limits: {memory: 2GB}\n"
    with pytest.raises(InputError) as err:
        read_pods_text(text, file="p.yaml")
    assert err.value.line == 8 and err.value.field == "spec.containers[0].resources.limits.memory"


def test_no_pod_template():
    with pytest.raises(InputError) as err:
        read_pods_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", file="c.yaml")
    assert "no Pod and no pod template" in str(err.value)


def test_workload_templates_in_the_real_corpus():
    if not CORPUS.is_dir():
        pytest.skip(f"third-party corpus not found at {CORPUS}")
    job = read_pods(CORPUS / "kubernetes-sigs__kueue__site__static__examples__jobs__sample-job.yaml")
    qos, adjs = pod_oom_score_adj(job[0].pod, 16 * 2 ** 30)
    # requests cpu 1, memory 200Mi, no limits -> Burstable; 1000 - floor(1000*200Mi/16Gi) = 988
    assert job[0].where == "spec.template.spec" and qos == "Burstable" and adjs[0].oom_score_adj == 988
    pt = read_pods(CORPUS / "kubeflow__training-operator__examples__pytorch__mnist__v1__pytorch_job_mnist_nccl.yaml")
    assert {r.where for r in pt} == {"spec.pytorchReplicaSpecs.Master.template.spec",
                                     "spec.pytorchReplicaSpecs.Worker.template.spec"}
    vj = read_pods(CORPUS / "volcano-sh__volcano__example__job.yaml")
    assert vj[0].where == "spec.tasks[0].template.spec"
