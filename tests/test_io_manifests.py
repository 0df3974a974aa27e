"""Kubernetes manifests: gang size and its rule, GPUs per pod, memory limit, queue."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from courselib.errors import CourseError, InputError
from courselib.io.manifests import read_manifests, read_manifests_text
from budget import examples

sys.path.insert(0, str(Path(__file__).parent))

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "files"


def one(text: str, **kw):
    docs = read_manifests_text(text, file="m.yaml", **kw)
    assert len(docs) == 1
    return docs[0]


VCJOB = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: vc}
spec:
  minAvailable: MIN
  tasks:
    - name: ps
      replicas: 1
      template: {spec: {containers: [{name: a, image: x}]}}
    - name: worker
      replicas: 4
      template:
        spec:
          containers:
            - name: w
              image: x
              resources: {limits: {nvidia.com/gpu: "2", memory: 8Gi}}
"""


def test_volcano_job_gang_gpus_and_default_queue():
    r = one(VCJOB.replace("MIN", "5"))
    assert (r.gang_size, r.gang_rule, r.pods) == (5, "spec.minAvailable", 5)
    assert r.gpus_per_pod == {"ps": 0, "worker": 2} and r.total_gpus == 8
    assert r.memory_limit == {"ps": None, "worker": "8Gi"}
    assert r.queue is None and any("default" in n for n in r.notes)


def test_volcano_job_without_min_available_gangs_all_replicas():
    r = one(VCJOB.replace("  minAvailable: MIN\n", "  queue: research\n"))
    assert (r.gang_size, r.queue) == (5, "research")
    assert "sum of task replicas" in r.gang_rule


@pytest.mark.parametrize("api", ["scheduling.volcano.sh/v1beta1", "scheduling.incubator.k8s.io/v1alpha1"])
def test_podgroup_current_and_legacy_groups(api):
    r = one(f"apiVersion: {api}\nkind: PodGroup\nmetadata: {{name: pg}}\nspec: {{minMember: 3, queue: q}}\n")
    assert (r.kind, r.gang_size, r.gang_rule, r.queue, r.gang_line) == ("PodGroup", 3, "spec.minMember", "q", 4)


def test_batch_job_parallelism_default_and_kueue_label():
    r = one("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n  labels: {kueue.x-k8s.io/queue-name: lq}\n"
            "spec:\n  template:\n    spec:\n      restartPolicy: Never\n"
            "      containers: [{name: c, image: i, resources: {limits: {nvidia.com/gpu: 1}}}]\n")
    assert (r.gang_size, r.gang_rule, r.total_gpus, r.queue) == (1, "spec.parallelism unset -> default 1", 1, "lq")
    assert r.validation_errors == ()


def test_kubeflow_jobs_sum_replicas_and_scheduling_policy():
    text = """
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: m}
spec:
  runPolicy: {schedulingPolicy: {minAvailable: 2, queue: vq}}
  mpiReplicaSpecs:
    Launcher: {replicas: 1, template: {spec: {containers: [{name: l, image: i}]}}}
    Worker:
      replicas: 2
      template: {spec: {containers: [{name: w, image: i, resources: {limits: {nvidia.com/gpu: 8, memory: 32000Mi}}}]}}
"""
    r = one(text)
    assert (r.gang_size, r.queue, r.total_gpus) == (2, "vq", 16)
    assert r.gang_rule == "spec.runPolicy.schedulingPolicy.minAvailable"
    r2 = one(text.replace("  runPolicy: {schedulingPolicy: {minAvailable: 2, queue: vq}}\n", ""))
    assert (r2.gang_size, r2.gang_rule) == (3, "sum of replicas (Launcher 1 + Worker 2)")


def test_unresolved_templates_are_reported_not_guessed():
    r = one("apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  parallelism: $NUM_NODES\n"
            "  template:\n    spec:\n      containers:\n        - name: c\n          image: ${IMAGE}\n"
            "          command: [sh, -c, 'echo $HOME']\n", validate=False)
    assert r.gang_size is None
    assert [(ln, f) for ln, f, _ in r.templates] == [(5, "spec.parallelism"),
                                                     (10, "spec.template.spec.containers[0].image")]


def test_core_kinds_are_validated_against_the_kubernetes_schema():
    r = one("apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  parallelism: 2\n"
            "  template:\n    spec:\n      containers: [{name: c, image: i, imagePullPolcy: Always}]\n")
    assert r.validation_errors and "imagePullPolcy" in r.validation_errors[0][1]
    assert r.validation_errors[0][0] == 8


def test_odd_documents_are_described_not_crashed_on():
    docs = read_manifests_text("--- just a string\n---\n- a list\n---\n{kind: Widget}\n", file="m.yaml")
    assert [d.kind for d in docs] == [None, None, "Widget"]
    assert docs[0].problems


def test_yaml_errors_are_located():
    with pytest.raises(InputError) as e:
        read_manifests_text("kind: Job\nspec:\n  a: [1, 2\n", file="bad.yaml")
    assert e.value.file == "bad.yaml" and e.value.line is not None


def test_examples_read():
    r = read_manifests(EXAMPLES / "gpu-job-volcano.yaml")[0]
    assert (r.gang_size, r.pods, r.total_gpus, r.memory_limit) == (4, 4, 32, "400Gi")


# --- corpus --------------------------------------------------------------------------------

def corpus_files():
    from conftest import CORPUS
    d = CORPUS / "k8s"
    return sorted(d.glob("*.yaml")) if d.is_dir() else []


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name[:60])
def test_every_corpus_manifest_reads_and_core_kinds_validate(path):
    docs = read_manifests(path)
    assert docs
    for d in docs:
        assert d.validation_errors == (), d.validation_errors


def test_agreement_with_expected(corpus):
    from corpus_agreement import report, k8s_agreement
    matched, total, bad = report("k8s", k8s_agreement, corpus)
    assert total == 144
    assert matched == total, bad


# --- robustness ----------------------------------------------------------------------------

YAML_BITS = st.sampled_from([
    "apiVersion: batch/v1\n", "apiVersion: batch.volcano.sh/v1alpha1\n", "apiVersion: kubeflow.org/v1\n",
    "kind: Job\n", "kind: PodGroup\n", "kind: PyTorchJob\n", "spec:\n", "  minAvailable: 3\n",
    "  parallelism: x\n", "  tasks:\n", "  - replicas: 2\n", "    template: {}\n", "  pytorchReplicaSpecs:\n",
    "    Worker: {replicas: -1}\n", "  resources: {limits: {memory: 1e999, nvidia.com/gpu: '1.5'}}\n",
    "---\n", "metadata: {name: [1]}\n", "  containers: 5\n", "  1: 2\n", "- 1\n", "&a [*a]\n", "!!binary x\n",
    "  queue: ${Q}\n", ": :\n", "\t\n", "{{ .Values.x }}\n",
])


@given(st.lists(YAML_BITS, max_size=14).map("".join))
@settings(max_examples=examples(150), deadline=None)
def test_generated_yaml_never_raises_anything_but_located_course_errors(text):
    from courselib.lint import lint_manifests
    try:
        docs = read_manifests_text(text, file="gen.yaml", validate=False)
        lint_manifests(docs)
        [d.to_dict() for d in docs]
    except CourseError as err:
        assert err.file == "gen.yaml"


@given(st.data())
@settings(max_examples=examples(60), deadline=None)
def test_mutated_corpus_manifests_never_crash(data):
    from courselib.lint import lint_manifests
    files = corpus_files() or [EXAMPLES / "gpu-job-volcano.yaml"]
    text = data.draw(st.sampled_from(files)).read_text()
    pos = data.draw(st.integers(0, len(text)))
    mutated = text[:pos] + data.draw(st.text(alphabet=" :-\n{}[]$'\"x1", max_size=8)) + \
        text[pos + data.draw(st.integers(0, 10)):]
    try:
        lint_manifests(read_manifests_text(mutated, file="m.yaml"))
    except CourseError as err:
        assert err.file == "m.yaml"


def test_to_job_keeps_the_gpu_pods_as_the_gang():
    from courselib.io.manifests import to_job
    job = to_job(one(VCJOB.replace("MIN", "4")), duration=600)
    # ps (no GPU) leaves the gang: 4 workers x 2 GPUs, minAvailable 4 - 1 non-GPU pod = 3
    assert (job.pods, job.gpus_per_pod, job.min_member, job.memory_per_pod) == (4, 2, 3, 8 * 2 ** 30)
    with pytest.raises(InputError):
        to_job(one("apiVersion: v1\nkind: Namespace\nmetadata: {name: n}\n"), duration=1)


def test_kueue_cluster_queue_becomes_a_queue(corpus):
    from courselib.io.manifests import to_queue
    docs = read_manifests(corpus / "k8s" / "kubernetes-sigs__kueue__site__static__examples__tas__sample-gpu-queues.yaml")
    cq = next(d for d in docs if d.kind == "ClusterQueue")
    lq = next(d for d in docs if d.kind == "LocalQueue")
    assert cq.gpu_quota[0] == 16 and lq.cluster_queue == cq.name
    q = to_queue(cq)
    assert (q.name, q.nominal_quota) == ("tas-cluster-queue", 16)
    cpu_only = next(d for d in read_manifests(corpus / "k8s" / "kubernetes-sigs__kueue__site__static__examples__admin__single-clusterqueue-setup.yaml")
                    if d.kind == "ClusterQueue")
    assert cpu_only.gpu_quota is None and to_queue(cpu_only).nominal_quota is None
    with pytest.raises(InputError):
        to_queue(lq)


def test_cluster_queue_limits_and_cohort():
    r = one("apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: team-a}\nspec:\n"
            "  cohort: research\n  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n    flavors:\n"
            "    - name: a100\n      resources:\n      - {name: nvidia.com/gpu, nominalQuota: 8, borrowingLimit: 8}\n"
            "    - name: h100\n      resources:\n      - {name: nvidia.com/gpu, nominalQuota: 4, lendingLimit: 2}\n")
    assert (r.gpu_quota, r.cohort) == ((12, 8, 2), "research")


@pytest.mark.parametrize("extra, topo", [
    ("", False),
    ("      nodeSelector: {node.kubernetes.io/instance-type: p5.48xlarge}\n", False),
    ("      nodeSelector: {topology.kubernetes.io/zone: us-east-1a}\n", True),
    ("      affinity: {podAffinity: {requiredDuringSchedulingIgnoredDuringExecution: "
     "[{topologyKey: rack, labelSelector: {matchLabels: {a: b}}}]}}\n", True),
    ("      affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: "
     "[{matchExpressions: [{key: example.com/nvlink-island, operator: In, values: ['3']}]}]}}}\n", True),
])
def test_what_counts_as_a_topology_constraint(extra, topo):
    r = one("apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  parallelism: 2\n  template:\n"
            "    spec:\n" + extra + "      containers: [{name: c, image: i, resources: {limits: {nvidia.com/gpu: 8}}}]\n",
            validate=False)
    assert r.pod_sets[0].has_topology_constraint is topo


# --- Kueue plain pod group (written for this test) -----------------------------------------------
# Pods sharing the label kueue.x-k8s.io/pod-group-name form one Workload of the size the annotation
# kueue.x-k8s.io/pod-group-total-count gives (Kueue v0.17.0 pod_webhook.go validatePodGroupMetadata,
# pod_controller.go groupTotalCount): a gang of 3, not three gangs of 1.
POD_GROUP = "".join(f"""---
apiVersion: v1
kind: Pod
metadata:
  name: ranks-{i}
  labels:
    kueue.x-k8s.io/queue-name: team-a
    kueue.x-k8s.io/pod-group-name: ranks
  annotations:
    kueue.x-k8s.io/pod-group-total-count: "3"
spec:
  restartPolicy: Never
  containers:
  - name: train
    image: trainer:1
    resources: {{limits: {{nvidia.com/gpu: 4, memory: 64Gi}}}}
""" for i in range(3))


def test_kueue_plain_pod_group_is_one_gang_of_its_total_count():
    from courselib.io.manifests import to_job
    from courselib.lint import lint_manifests
    docs = read_manifests_text(POD_GROUP, file="group.yaml")
    assert [(d.gang_size, d.queue, d.pods, d.total_gpus) for d in docs] == [(3, "team-a", 1, 4)] * 3
    assert docs[0].gang_rule.startswith("Kueue pod group 'ranks'") and docs[0].gang_line == 10
    job = to_job(docs[0], duration=600)
    assert (job.pods, job.gpus_per_pod, job.min_member, job.queue) == (3, 4, 3, "team-a")
    assert not [f for f in lint_manifests(docs) if f.code == "K006"]


@pytest.mark.parametrize("edit, problem", [
    (lambda t: t.replace('    kueue.x-k8s.io/pod-group-total-count: "3"\n', "    x: y\n"), "both the label"),
    (lambda t: t.replace("    kueue.x-k8s.io/pod-group-name: ranks\n", ""), "both the label"),
    (lambda t: t.replace('total-count: "3"', 'total-count: "0"'), "at least 1"),
    (lambda t: t.replace('total-count: "3"', 'total-count: "three"'), "whole number"),
])
def test_a_half_declared_pod_group_is_a_located_problem_and_stays_a_single_pod(edit, problem):
    first = POD_GROUP.split("---\n")[1]
    r = one(edit(first))
    assert r.gang_size == 1 and r.gang_rule == "a single pod"
    assert any(problem in m for _, _, m in r.problems), r.problems
    assert all(ln is not None for ln, _, _ in r.problems)
