"""``courselib lint`` and the file commands: findings a practitioner would agree with."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from courselib.cli.main import main
from courselib.model.lint import Finding, gang_mismatch, sort_findings, time_confusion

EX = Path(__file__).resolve().parents[1] / "examples" / "files"


def codes(capsys, *files) -> tuple[int, list[tuple[str, str, int]]]:
    rc = main(["lint", "--json", *map(str, files)])
    out = json.loads(capsys.readouterr().out)
    return rc, [(f["code"], f["severity"], f["line"]) for f in out]


def test_model_helpers():
    assert gang_mismatch(3, 6) == "below" and gang_mismatch(7, 6) == "above"
    assert gang_mismatch(6, 6) is None and gang_mismatch(None, 6) is None
    assert "48 minutes" in time_confusion(48, "M")
    assert time_confusion(48 * 60, "H:M:S") is None and time_confusion(120, "M") is None
    assert "minutes:seconds" in time_confusion(100, "M:S")
    with pytest.raises(ValueError):
        Finding("X", "fatal", None, None, "m", "f")
    fs = [Finding("B", "info", "a", 2, "", ""), Finding("A", "error", "a", 2, "", ""),
          Finding("C", "warning", "a", 1, "", "")]
    assert [f.code for f in sort_findings(fs)] == ["C", "A", "B"]


def test_clean_files_exit_zero(capsys):
    rc, found = codes(capsys, EX / "train-64node.sbatch", EX / "gpu-job-volcano.yaml",
                      EX / "Dockerfile.deps-first", EX / "hetjob.sbatch", EX / "toy.swf")
    assert (rc, found) == (0, [])


def test_sbatch_mistakes(capsys):
    rc, found = codes(capsys, EX / "train-64node-mistakes.sbatch")
    assert rc == 1
    assert found == [("S006", "warning", 5), ("S007", "error", 6), ("S002", "error", 9)]


def test_the_seed_multi_pod_gpu_job_without_a_gang_scheduler(capsys):
    rc, found = codes(capsys, EX / "gpu-job-no-gang.yaml")
    assert rc == 1
    assert ("K006", "error", 8) in found          # parallelism: 4 x 8 GPUs, no gang
    assert ("K007", "warning", 3) in found        # no topology constraint
    assert ("K008", "warning", 18) in found       # no memory limit on a GPU pod


def test_podgroup_mistakes(capsys):
    rc, found = codes(capsys, EX / "podgroup-mistakes.yaml")
    got = {c for c, _, _ in found}
    assert {"K004", "K005", "K006", "K009"} <= got
    assert ("K004", "error", 8) in found          # minMember 6 > 4 pods


def test_dockerfile_code_first(capsys):
    rc, found = codes(capsys, EX / "Dockerfile.code-first")
    assert (rc, found) == (1, [("D001", "warning", 4)])


def test_unreadable_input_exits_two(capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1,\n")
    assert main(["lint", str(bad), str(EX / "train-64node.sbatch")]) == 2
    err = capsys.readouterr().err
    assert "bad.yaml:" in err and "Traceback" not in err
    assert main(["lint", str(tmp_path / "nope.sbatch")]) == 2


def test_min_severity_filters(capsys):
    rc = main(["lint", "--json", "--min-severity", "error", str(EX / "train-64node-mistakes.sbatch")])
    assert rc == 1 and {f["severity"] for f in json.loads(capsys.readouterr().out)} == {"error"}


def test_parse_commands_json_keys(capsys):
    assert main(["sbatch", "parse", "--json", str(EX / "train-64node.sbatch")]) == 0
    d = json.loads(capsys.readouterr().out)
    for key in ("nodes", "gpus_per_node", "total_gpus", "constraint", "exclusive", "time_limit_min",
                "partition", "array", "components", "ignored_directives"):
        assert key in d
    assert (d["nodes"], d["total_gpus"], d["array"]) == (64, 512, None)
    assert main(["manifest", "parse", "--json", str(EX / "podgroup-mistakes.yaml")]) == 0
    docs = json.loads(capsys.readouterr().out)
    for key in ("doc_index", "kind", "api_version", "name", "gang_size", "gang_rule", "gpus_per_pod",
                "total_gpus", "memory_limit", "queue"):
        assert key in docs[0]
    assert [(x["kind"], x["gang_size"]) for x in docs] == [("PodGroup", 6), ("Job", 4)]


def test_docker_layers_and_trace_load(capsys):
    assert main(["docker", "layers", str(EX / "Dockerfile.code-first"), "--changed", "train.py", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["rebuilt"], d["steps"]) == (4, 6)
    assert main(["docker", "layers", str(EX / "Dockerfile.deps-first"), "--edited-line", "2"]) == 0
    assert "0 of 9 steps rebuild" in capsys.readouterr().out
    assert main(["trace", "load", str(EX / "toy.swf"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["jobs"] == 3


def test_lint_on_the_whole_corpus_finds_the_known_problems(corpus, capsys):
    files = sorted(p for sub in ("sbatch", "k8s", "docker", "traces") for p in (corpus / sub).glob("*")
                   if p.name != "EXPECTED.tsv")
    rc = main(["lint", "--json", *map(str, files)])
    findings = json.loads(capsys.readouterr().out)
    assert rc == 1
    by = {(Path(f["file"]).name, f["code"]) for f in findings}
    assert ("facebookresearch__swav__scripts__swav_RN50w4_400ep_pretrain.sh", "S001") in by
    assert ("mvsjober__ml-benchmarks__slurm__roihu-gpu8-mpi.sh", "S004") in by
    assert ("kubeflow__training-operator__examples__pytorch__mnist__v1__pytorch_job_mnist_nccl.yaml", "K006") in by
    assert ("aws-samples__awsome-distributed-training__micro-benchmarks__nccl-tests__kubernetes__nccl-tests.yaml", "K001") in by
    assert ("NVIDIA__Megatron-LM__examples__multimodal__Dockerfile", "D001") in by
    # a Kueue-queued Job is admitted whole: no "no gang scheduler" error for it
    assert ("kubernetes-sigs__kueue__site__static__examples__provisioning__sample-job.yaml", "K006") not in by
    # nothing in the corpus is a schema error
    assert not any(f["code"] == "K002" for f in findings)


def test_lint_a_directory_finds_the_job_files(capsys, tmp_path):
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "run.sh").write_text("#!/bin/bash\n#SBATCH --time=30\nsrun x\n")
    (tmp_path / "jobs" / "notes.txt").write_text("not a job file\n")
    (tmp_path / "jobs" / "helper.sh").write_text("#!/bin/bash\necho hi\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "x.yaml").write_text("a: [\n")
    rc = main(["lint", "--json", str(tmp_path)])
    found = json.loads(capsys.readouterr().out)
    assert rc == 1 and [(Path(f["file"]).name, f["code"]) for f in found] == [("run.sh", "S006")]
