"""WORKLOAD.yaml reading (located one-line errors) and ``courselib gang simulate``."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from courselib.cli.main import main
from courselib.errors import InputError
from courselib.io.workload import load_workload

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "workloads"


def write(tmp_path, text: str) -> Path:
    p = tmp_path / "w.yaml"
    p.write_text(text)
    return p


def test_reads_the_issue_example_with_durations(tmp_path):
    w = load_workload(write(tmp_path, """\
cluster: {nodes: 75, gpus_per_node: 8, features: {nvlink: "1-40"}, island_size: 4, memory_per_node: 1Ti}
queues:
  - {name: team-a, nominal_quota: 256, cohort: all}
jobs:
  - {name: a, pods: 512, gpus_per_pod: 1, submit: 0, duration: 2h}
  - {name: b, pods: 8, gpus_per_pod: 8, submit: 30s, duration: 25m, min_member: 4, priority: 3,
     queue: team-a, constraint: "nvlink&island0", exclusive: true, time_limit: 1d, memory_per_pod: 80Gi}
"""))
    a, b = w.jobs
    assert (a.duration, a.min_member, a.queue) == (7200, 512, "default")
    assert (b.submit, b.duration, b.time_limit, b.min_member) == (30, 1500, 86400, 4)
    assert b.memory_per_pod == 80 * 2**30 and b.exclusive and b.constraint == "nvlink&island0"
    nodes = w.cluster.node_list()
    assert "nvlink" in nodes[39].features and "nvlink" not in nodes[40].features
    assert "island1" in nodes[4].features and nodes[0].name == "node1"
    assert w.queue("team-a").nominal_quota == 256 and w.queue("other").nominal_quota is None


@pytest.mark.parametrize("body,line,field,words", [
    ("cluster: {nodes: 2, gpus_per_node: 8}\njobs:\n  - {name: a, pods: 2, gpus_per_pod: 1}\n",
     3, "jobs[0](a)", "duration"),
    ("cluster: {nodes: 2, gpus_per_node: 8}\njobs:\n  - name: a\n    pods: 2\n    gpus_per_pod: 1\n"
     "    duration: 25 minutes\n", 6, "jobs[0](a).duration", "not a duration"),
    ("cluster: {nodes: 2, gpus_per_node: 8}\njobs:\n  - name: a\n    pods: 2\n    gpu_per_pod: 1\n"
     "    duration: 1h\n", 5, "jobs[0](a).gpu_per_pod", "did you mean 'gpus_per_pod'"),
    ("cluster: {nodes: 2, gpus_per_node: 8}\njobs:\n  - name: a\n    pods: 2\n    gpus_per_pod: 1\n"
     "    duration: 1h\n    min_member: 3\n", 7, "jobs[0](a).min_member", "between 1 and pods"),
    ("cluster: {nodes: 2, gpus_per_node: 8}\njobs:\n  - name: a\n    pods: 2\n    gpus_per_pod: 16\n"
     "    duration: 1h\n", 5, "jobs[0].gpus_per_pod", "exceeds gpus_per_node"),
    ("cluster:\n  nodes: 0\n  gpus_per_node: 8\njobs:\n  - {name: a, pods: 2, gpus_per_pod: 1, duration: 1h}\n",
     2, "cluster.nodes", "at least 1"),
    ("cluster: {nodes: 2, gpus_per_node: 8}\njobs:\n  - name: a\n    pods: 2\n    gpus_per_pod: 1\n"
     "    duration: 1h\n    constraint: 'nvlink && h100'\n", 7, "jobs[0](a).constraint", "not a constraint"),
    ("cluster: {nodes: 2, gpus_per_node: 8}\njobs:\n  - {name: a, pods: 1, gpus_per_pod: 1, duration: 1h}\n"
     "  - {name: a, pods: 1, gpus_per_pod: 1, duration: 1h}\n", 4, "jobs[1].name", "duplicate job name"),
])
def test_malformed_workload_is_one_line_with_field_and_line(tmp_path, body, line, field, words):
    p = write(tmp_path, body)
    with pytest.raises(InputError) as e:
        load_workload(p)
    msg = str(e.value)
    assert "\n" not in msg and f"{p}:{line}:" in msg and f"{field}:" in msg and words in msg, msg


def test_cli_deadlock_story_human_output(capsys):
    rc = main(["gang", "simulate", str(EXAMPLES / "seed-600-free-deadlock.yaml"), "--policy", "kube-default",
               "--trace"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "DEADLOCK under kube-default" in out.splitlines()[-1]
    assert "bound 300 pods: 300/512 placed" in out and out.startswith("ARG ")


def test_cli_json_has_the_issue_fields(capsys):
    rc = main(["gang", "simulate", str(EXAMPLES / "seed-400-of-512-25min.yaml"), "--policy", "kube-default",
               "--json", "--horizon", "24h"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0 and data["policy"] == "kube-default" and data["deadlock"] is False
    assert data["wasted_gpu_hours"] == pytest.approx(400 * 25 / 60)
    job = {j["name"]: j for j in data["jobs"]}["pretrain"]
    assert {"name", "state", "start", "end", "gpus_held_max"} <= set(job)
    assert job["start"] == 1500 and job["gpus_held_max"] == 512


def test_cli_json_start_is_null_when_training_never_began(capsys):
    main(["gang", "simulate", str(EXAMPLES / "seed-600-free-deadlock.yaml"), "--policy", "kube-default", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["deadlock"] is True and [j["start"] for j in data["jobs"]] == [None, None]


@pytest.mark.parametrize("argv,words", [
    (["--policy", "volcano", "--set", "nonsense=1"], "no option 'nonsense'"),
    (["--policy", "slurm", "--horizon", "a day"], "--horizon"),
])
def test_cli_bad_arguments_exit_2_with_one_line(capsys, argv, words):
    rc = main(["gang", "simulate", str(EXAMPLES / "seed-600-free-deadlock.yaml"), *argv])
    err = capsys.readouterr().err
    assert rc == 2 and words in err and err.count("\n") == 1


def test_cli_missing_file_exit_2(capsys, tmp_path):
    rc = main(["gang", "simulate", str(tmp_path / "nope.yaml"), "--policy", "slurm"])
    assert rc == 2 and "no such file" in capsys.readouterr().err
