"""What a Kubernetes replay submits: each job of a workload as a real ``batch/v1`` Job.

Each job becomes an Indexed Job (``parallelism = completions = pods``, ``restartPolicy: Never``),
each pod asking for ``gpus_per_pod`` × ``nvidia.com/gpu`` and its share of CPU and memory, with
node affinity for its ``constraint`` and a PriorityClass for its priority; with native gang
scheduling, a PodGroup (``scheduling.k8s.io/v1beta1``) per job. :func:`plan_replay` checks that
the workload can be replayed and chooses the model to compare with: ``kube-default``,
``kube-gang``, or a policy an extension plans (``kueue``: :mod:`courselib.live.kube.extension`).
"""
from __future__ import annotations

from dataclasses import dataclass

from courselib.errors import InputError
from courselib.live.kube import extension
from courselib.live.kube.cluster import FEATURE_PREFIX, GPU, NAMESPACE, KubeShape
from courselib.live.nodes import features_for
from courselib.model.cluster import parse_constraint
from courselib.model.workload import ClusterSpec, Job, Workload

REPLAY_LABEL = "courselib/replay"
IMAGE = "registry.invalid/allornothing/train:stand-in"  # never pulled: there is no kubelet
#: The policies the core replays; an extension adds its own (``Extension.policies``).
CORE_POLICIES = ("kube-default", "kube-gang")


def shape_for(spec: ClusterSpec, gang: bool = False, with_: tuple[str, ...] = ()) -> KubeShape:
    """The local control plane that emulates ``spec``: same nodes, GPUs, per-node features and
    topology (its nodes labelled by level: :mod:`courselib.live.kube.topology`)."""
    mem = f"{spec.memory_per_node // 2**20}Mi" if spec.memory_per_node else "1024Gi"
    return KubeShape(nodes=spec.nodes, gpus_per_node=spec.gpus_per_node, features=features_for(spec),
                     gang=gang, memory_per_node=mem, with_=tuple(with_), topology=spec.topology)


def _affinity(constraint: str | None) -> dict | None:
    terms = parse_constraint(constraint)
    if not terms:
        return None
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": FEATURE_PREFIX + f, "operator": "In", "values": ["true"]}
                              for f in sorted(term)]} for term in terms]}}}


def priority_class_name(priority: int, preempt: bool = False) -> str:
    """The PriorityClass of a priority; ``preempt``: the one that may preempt (a workload event's
    preempting job: ``preemptionPolicy: PreemptLowerPriority``)."""
    return f"courselib-priority-{priority}{'-preempt' if preempt else ''}".replace("-" * 2, "-minus-")


def preempts(job) -> bool:
    return getattr(job, "preemption_policy", None) == "PreemptLowerPriority"


def job_manifest(job: Job, workload: Workload, replay_id: str, *, gang: bool = False) -> dict:
    """The ``batch/v1`` Job that stands for ``job``. Its pods ask for GPUs, and for one CPU and
    16 GiB per GPU (1/64 of a fake node's 64 CPUs and 1 TiB, never the scarce resource), so that
    the scheduler's default scoring — NodeResourcesFit LeastAllocated over CPU and memory, and
    BalancedAllocation — ranks nodes by their free GPUs, as it does for real GPU jobs that ask for
    their share of a node."""
    spec = workload.cluster
    if job.memory_per_pod and spec.memory_per_node:
        mem = f"{job.memory_per_pod // 2**20}Mi"
    else:
        mem = f"{16 * job.gpus_per_pod}Gi" if job.gpus_per_pod else "256Mi"
    resources = {"cpu": f"{job.gpus_per_pod}" if job.gpus_per_pod else "100m", "memory": mem}
    if job.gpus_per_pod:
        resources[GPU] = str(job.gpus_per_pod)
    pod_spec: dict = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "train", "image": IMAGE,
                        "command": ["torchrun", "--nnodes", str(job.pods), "train.py"],
                        "resources": {"requests": resources, "limits": resources}}],
    }
    aff = _affinity(job.constraint)
    if aff:
        pod_spec["affinity"] = aff
    if job.priority:
        pod_spec["priorityClassName"] = priority_class_name(job.priority, preempts(job))
    if gang:
        # v1.37: a pod joins its PodGroup by this immutable field (core/v1 PodSchedulingGroup)
        pod_spec["schedulingGroup"] = {"podGroupName": job.name}
    labels = {REPLAY_LABEL: replay_id, "app.kubernetes.io/name": job.name}
    spec = {"parallelism": job.pods, "completions": job.pods, "completionMode": "Indexed",
            "backoffLimit": 0,
            "template": {"metadata": {"labels": dict(labels)}, "spec": pod_spec}}
    if workload.events and getattr(job, "kind", "job") == "job":
        # a preempted pod is replaced without counting against backoffLimit: the scheduler marks
        # its victims DisruptionTarget (the model: the Job controller replaces the pod)
        spec["podFailurePolicy"] = {"rules": [{"action": "Ignore",
                                               "onPodConditions": [{"type": "DisruptionTarget"}]}]}
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": job.name, "namespace": NAMESPACE, "labels": dict(labels)},
        "spec": spec,
    }


def pod_group_manifest(job: Job, replay_id: str) -> dict:
    """Kubernetes v1.37's own PodGroup (``scheduling.k8s.io/v1beta1``) for ``job``: the gang
    policy with ``minCount`` = the job's ``min_member``; its priority is the pods' (the scheduler
    refuses a group whose pods' priority differs, schedule_one_podgroup.go validatePodGroup)."""
    spec: dict = {"schedulingPolicy": {"gang": {"minCount": job.min_member or job.pods}}}
    if job.priority:
        spec["priorityClassName"] = priority_class_name(job.priority, preempts(job))
    if getattr(job, "disruption_mode", "single") == "all":
        # KEP-5710: the scheduler preempts the group's pods together or not at all
        spec["disruptionMode"] = {"all": {}}
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": job.name, "namespace": NAMESPACE,
                         "labels": {REPLAY_LABEL: replay_id}},
            "spec": spec}


def priority_class_manifest(priority: int, preemption: bool, preempt_class: bool = False) -> dict:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": priority_class_name(priority, preempt_class)}, "value": priority,
            "preemptionPolicy": "PreemptLowerPriority" if preemption or preempt_class else "Never",
            "description": "courselib replay"}


@dataclass(frozen=True)
class ReplayPlan:
    workload: Workload
    shape: KubeShape
    policy: str
    preemption: bool = False
    notes: tuple[str, ...] = ()
    #: the model's options (``simulate(**dict(options))``), e.g. Kueue's timeout
    options: tuple[tuple[str, object], ...] = ()

    def batches(self) -> list[tuple[float, list[Job]]]:
        out: dict[float, list[Job]] = {}
        for j in self.workload.jobs:
            out.setdefault(j.submit, []).append(j)
        return sorted(out.items())


def job_notes(workload: Workload, file: str | None = None) -> list[str]:
    """Refuse a job Kubernetes cannot express; note what a replay leaves out."""
    notes = []
    for j in workload.jobs:
        if j.exclusive and j.gpus_per_pod != workload.cluster.gpus_per_node:
            raise InputError(f"job {j.name}: `exclusive` is a Slurm notion; Kubernetes has no "
                             "whole-node allocation for a pod smaller than its node",
                             file=file, field="exclusive",
                             hint="give the pods a whole node's GPUs, or drop exclusive")
        if j.time_limit:
            notes.append(f"{j.name}: time_limit is not replayed (a Job's activeDeadlineSeconds "
                         "is not a scheduling input)")
    return notes


def plan_replay(workload: Workload, *, policy: str | None = None, preemption: bool = False,
                gang: bool | None = None, file: str | None = None,
                options: dict | None = None) -> ReplayPlan:
    """Check that ``workload`` can be replayed on Kubernetes and choose the model to compare with."""
    if policy is None:
        policy = "kube-gang" if gang else "kube-default"
    ext = extension.for_policy(policy)
    if ext is not None:
        return ext.plan(workload, policy=policy, file=file, options=options or {})
    if policy not in CORE_POLICIES:
        raise InputError(f"--policy {policy}: a kube replay compares with "
                         f"{', '.join(CORE_POLICIES + extension.policies())}", file=file,
                         hint="Volcano cannot be built here (the Go module proxy refuses volcano.sh/volcano)")
    if options:
        raise InputError(f"--set {', '.join(options)}: only a "
                         f"{' or '.join('--policy ' + p for p in extension.policies())} replay takes "
                         "model options", file=file, field="--set")
    gang = policy == "kube-gang" if gang is None else gang
    notes = job_notes(workload, file)
    if workload.queues and any(q.nominal_quota is not None for q in workload.queues):
        notes.append("queues and quotas are not replayed (they are Kueue's)")
    with_ = ("jobset",) if any(getattr(j, "kind", "job") == "jobset" for j in workload.jobs) else ()
    return ReplayPlan(workload, shape_for(workload.cluster, gang=gang, with_=with_), policy, preemption,
                      tuple(notes))
