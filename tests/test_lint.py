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


# ---- issue 16: what a real API server and scheduler reveal, found statically ---------------------
JOB = """apiVersion: batch/v1
kind: Job
metadata:
  name: train
{meta}spec:
  parallelism: 2
  template:
{tmeta}    spec:
{restart}      containers:
        - name: c
          image: registry.example.org/t:1
          resources:
            requests: {{memory: 1Gi}}
            limits: {{memory: 1Gi, nvidia.com/gpu: 1}}
"""


def lint_text(capsys, tmp_path, text: str, name: str = "m.yaml"):
    f = tmp_path / name
    f.write_text(text)
    return codes(capsys, f)


def test_the_seed_gang_is_flagged_for_both_mistakes(capsys):
    """FACTS §3.3: the seed's group annotation sits on the Job, and its pods have no restartPolicy."""
    rc, found = codes(capsys, EX / "seed-podgroup-job.yaml")
    assert rc == 1
    assert ("K011", "error", 21) in found   # the annotation on metadata, line of the key
    assert ("K012", "error", 27) in found   # the pod spec without restartPolicy
    assert ("K006", "error", 23) in found   # hence: no pod joins a gang
    rc, found = codes(capsys, EX / "seed-podgroup-job-fixed.yaml")
    assert (rc, found) == (0, [])
    rc, found = codes(capsys, EX / "gang-kubernetes-v1.37.yaml")
    assert (rc, found) == (0, [])


@pytest.mark.parametrize("meta,tmeta,expect", [
    ("  annotations:\n    scheduling.k8s.io/group-name: g\n", "", True),
    ("  annotations:\n    scheduling.volcano.sh/group-name: g\n", "", True),
    ("  labels:\n    scheduling.x-k8s.io/pod-group: g\n", "", True),
    ("  labels:\n    kueue.x-k8s.io/pod-group-name: g\n", "", True),
    # on both: the pods carry it, nothing to say
    ("  annotations:\n    scheduling.k8s.io/group-name: g\n",
     "    metadata:\n      annotations:\n        scheduling.k8s.io/group-name: g\n", False),
    # the Kueue queue label belongs on the Job: Kueue reads the Job, not its pods
    ("  labels:\n    kueue.x-k8s.io/queue-name: q\n", "", False),
])
def test_k011_a_group_key_on_the_job_never_reaches_the_pods(capsys, tmp_path, meta, tmeta, expect):
    rc, found = lint_text(capsys, tmp_path, JOB.format(meta=meta, tmeta=tmeta, restart="      restartPolicy: Never\n"))
    hits = [f for f in found if f[0] == "K011"]
    assert bool(hits) == expect
    if expect:
        assert hits == [("K011", "error", 6)]


def test_k011_the_object_annotation_no_longer_counts_as_a_gang(capsys, tmp_path):
    """Before issue 16 the reader merged the Job's own annotations into its pods': the seed's Job
    counted as ganged (no K006) and its PodGroup as filled (no K004)."""
    text = ("apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\nmetadata: {name: g}\n"
            "spec: {minMember: 3, queue: default}\n---\n"
            + JOB.format(meta="  annotations:\n    scheduling.k8s.io/group-name: g\n", tmeta="",
                         restart="      restartPolicy: Never\n").replace("      schedulerName", ""))
    rc, found = lint_text(capsys, tmp_path, text)
    got = {c for c, _, _ in found}
    assert "K006" in got and "K011" in got
    assert "K004" not in got  # no pod joins g, so there is nothing to compare minMember with


@pytest.mark.parametrize("restart,expect", [
    ("", "Required value"), ("      restartPolicy: Always\n", "Required value"),
    ("      restartPolicy: Sometimes\n", "Unsupported value"),
    ("      restartPolicy: Never\n", None), ("      restartPolicy: OnFailure\n", None),
])
def test_k012_a_job_needs_restart_policy_never_or_on_failure(capsys, tmp_path, restart, expect):
    f = tmp_path / "j.yaml"
    f.write_text(JOB.format(meta="", tmeta="", restart=restart))
    main(["lint", "--json", str(f)])
    k012 = [x for x in json.loads(capsys.readouterr().out) if x["code"] == "K012"]
    if expect is None:
        assert k012 == []
    else:
        assert len(k012) == 1 and expect in k012[0]["message"] and k012[0]["severity"] == "error"
        assert k012[0]["line"] == 9  # restartPolicy, or the first line of the pod spec


def test_k012_only_for_batch_jobs(capsys, tmp_path):
    pod = ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
           "    - {name: c, image: i, resources: {limits: {memory: 1Gi}}}\n")
    _, found = lint_text(capsys, tmp_path, pod)
    assert not any(c == "K012" for c, _, _ in found)


VOLCANO_JOB = """apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: v}}
spec:
  minAvailable: 1
  queue: {queue}
  tasks:
    - replicas: 1
      template:
        spec:
          restartPolicy: Never
          containers: [{{name: c, image: i, resources: {{limits: {{memory: 1Gi}}}}}}]
"""
VQUEUE = "---\napiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: research}\nspec: {weight: 1}\n"


def test_k013_a_queue_the_file_never_defines(capsys, tmp_path):
    _, found = lint_text(capsys, tmp_path, VOLCANO_JOB.format(queue="research"))
    assert ("K013", "warning", 6) in found
    _, found = lint_text(capsys, tmp_path, VOLCANO_JOB.format(queue="research") + VQUEUE)
    assert not any(c == "K013" for c, _, _ in found)
    _, found = lint_text(capsys, tmp_path, VOLCANO_JOB.format(queue="default"))  # Volcano's own
    assert not any(c == "K013" for c, _, _ in found)


def test_k013_kueue_local_queue_and_its_cluster_queue(capsys, tmp_path):
    job = JOB.format(meta="  labels:\n    kueue.x-k8s.io/queue-name: team-a\n", tmeta="",
                     restart="      restartPolicy: Never\n")
    _, found = lint_text(capsys, tmp_path, job)
    assert ("K013", "warning", 6) in found
    lq = "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: team-a}\nspec: {clusterQueue: cq}\n"
    _, found = lint_text(capsys, tmp_path, job + lq)
    k013 = [f for f in found if f[0] == "K013"]
    assert k013 == [("K013", "warning", 19)]  # now the LocalQueue's ClusterQueue is missing
    cq = ("---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: cq}\n"
          "spec: {namespaceSelector: {}}\n")
    _, found = lint_text(capsys, tmp_path, job + lq + cq)
    assert not any(c == "K013" for c, _, _ in found)


def test_kubernetes_podgroup_min_count_against_its_pods(capsys, tmp_path):
    text = (EX / "gang-kubernetes-v1.37.yaml").read_text().replace("minCount: 64", "minCount: 80")
    _, found = lint_text(capsys, tmp_path, text)
    assert ("K004", "error", 13) in found


# ---- the rules as a registry (issue 34) ------------------------------------------------------------
#: Every code the linter had when its rules moved into the registry: none may go or change its meaning.
CODES = {f"S{n:03d}" for n in range(1, 14)} | {f"K{n:03d}" for n in range(1, 15)} | {f"D{n:03d}" for n in range(1, 5)} \
    | {"W001", "W002", "W003"}


def test_every_code_is_one_registered_rule_with_its_reason_and_fix():
    from courselib.lint import RULES
    assert set(RULES) == CODES
    for code, r in RULES.items():
        assert r.code == code and code[0] == {"sbatch": "S", "manifest": "K", "dockerfile": "D", "workload": "W"}[r.kind]
        assert r.title and len(r.why) > 40 and r.fix
        assert set(r.severity.replace(",", " ").split()) - {"or"} <= {"error", "warning", "info"}


def test_a_rule_reports_only_its_own_code():
    """Each registered check builds findings of its own code only (read from the source: a rule that
    reported another code would make --explain describe the wrong thing)."""
    import ast
    import inspect
    import textwrap

    from courselib.lint import RULES
    for code, r in RULES.items():
        tree = ast.parse(textwrap.dedent(inspect.getsource(r.check)))
        made = {n.args[1].value if isinstance(n.func, ast.Name) and n.func.id == "_finding" else n.args[0].value
                for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                and n.func.id in ("Finding", "_finding")}
        assert made == {code}, (code, made)


def test_explain_prints_the_reason_and_the_fix(capsys):
    assert main(["lint", "--explain", "k006"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("K006 (manifest, error):") and "\nwhy: " in out and "\nfix: " in out
    assert main(["lint", "--explain", "S006", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["code"] == "S006" and "minutes" in doc["why"]


@pytest.mark.parametrize("argv, text", [
    (["lint", "--explain", "X999"], "no lint rule 'X999'"),
    (["lint", "--explain", "S001", "train.sbatch"], "--explain takes a rule code, not files"),
    (["lint"], "nothing to lint"),
])
def test_explain_and_lint_misuse_is_a_one_line_error(capsys, argv, text):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert text in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_the_readers_are_readers_only():
    """courselib.io reads files into values; no reader builds a finding or holds a rule."""
    src = Path(__file__).resolve().parents[1] / "src" / "courselib" / "io"
    for path in src.glob("*.py"):
        text = path.read_text()
        assert "Finding" not in text and "def lint_" not in text and "courselib.lint" not in text, path.name
