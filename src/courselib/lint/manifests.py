"""Lint rules for Kubernetes manifests (codes K0xx): the documents of one file, cross-checked.

Each rule reads one :class:`~courselib.io.manifests.ManifestReading` with a context built once per
file: how many pods of the file join each PodGroup, and the queues the file defines.
"""
from __future__ import annotations

from dataclasses import dataclass

from courselib.io.manifests import (COSCHEDULING_LABEL, GROUP_ANNOTATION, KUEUE_QUEUE_LABEL, TEMPLATED_KINDS,
                                    VOLCANO_BUILTIN_QUEUES, VOLCANO_GROUP_ANNOTATION, ManifestReading, PodSet,
                                    api_group)
from courselib.lint.registry import rule, rules_for
from courselib.model.lint import Finding, gang_mismatch

#: the kinds whose pods run to completion together: a multi-GPU one of them is a training gang
BATCH_KINDS = {"Job", "PyTorchJob", "MPIJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob", "TrainJob", "Pod"}


@dataclass(frozen=True)
class Context:
    members: dict        # PodGroup name -> pods of this file that join it
    defined: dict        # "Queue" / "LocalQueue" / "ClusterQueue" -> names this file defines


def lint_manifests(readings: list[ManifestReading]) -> list[Finding]:
    """Findings for the documents of one file (codes K0xx), cross-checking PodGroups and pods."""
    members: dict[str, int] = {}
    for r in readings:
        for p in r.pod_sets:
            ann = pod_annotations(r, p)
            g = ann.get(GROUP_ANNOTATION) or ann.get(VOLCANO_GROUP_ANNOTATION) or p.scheduling_group
            if g and p.replicas is not None:
                members[g] = members.get(g, 0) + p.replicas
    ctx = Context(members, queues_defined(readings))
    return [f for r in readings for each in rules_for("manifest", "document") for f in each.check(r, ctx)]


def _finding(r: ManifestReading, code: str, severity: str, line, message: str, fix: str) -> Finding:
    return Finding(code, severity, r.file, line if line is not None else r.line,
                   f"{r.kind or 'document'} {r.name or '#' + str(r.doc_index)}: {message}", fix)


def pod_annotations(r: ManifestReading, p: PodSet) -> dict:
    """The annotations the pods of ``p`` carry: the template's; for a Volcano or Kubeflow job (whose
    operator creates the pods and their group) the object's count too."""
    if r.kind in TEMPLATED_KINDS and api_group(r.api_version) in ("", "batch", "apps"):
        return dict(p.annotations)
    return dict(p.annotations) | dict(r.annotations)


def pod_labels(r: ManifestReading, p: PodSet) -> dict:
    if r.kind in TEMPLATED_KINDS and api_group(r.api_version) in ("", "batch", "apps"):
        return dict(p.labels)
    return dict(p.labels) | dict(r.labels)


def queues_defined(readings: list[ManifestReading]) -> dict[str, set]:
    """Names of the Volcano Queues, Kueue LocalQueues and ClusterQueues the file defines."""
    out: dict[str, set] = {"Queue": set(), "LocalQueue": set(), "ClusterQueue": set()}
    for r in readings:
        group = api_group(r.api_version)
        if r.name and ((r.kind == "Queue" and group == "scheduling.volcano.sh")
                       or (r.kind in ("LocalQueue", "ClusterQueue") and group == "kueue.x-k8s.io")):
            out[r.kind].add(r.name)
    return out


def gang_mechanism(r: ManifestReading) -> str | None:
    """What admits this workload's pods together, if anything: volcano / kubeflow / kueue / ..."""
    if r.kind == "Job" and (r.api_version or "").startswith("batch.volcano.sh"):
        return "volcano"
    if r.gang_rule.startswith("spec.runPolicy.schedulingPolicy"):
        return "kubeflow"
    for p in r.pod_sets:
        if GROUP_ANNOTATION in pod_annotations(r, p):
            return "podgroup"
        if p.scheduling_group:
            return "kubernetes-podgroup"
        if COSCHEDULING_LABEL in pod_labels(r, p):
            return "coscheduling"
    if (r.api_version or "").startswith("kubeflow.org") and \
            any(p.scheduler_name == "volcano" for p in r.pod_sets):
        return "kubeflow"
    if r.queue and r.queue_source and "kueue" in r.queue_source:
        return "kueue"
    if r.gang_rule.startswith("Kueue pod group"):
        return "kueue"
    if any(n.startswith("spec.scheduling gang") for n in r.notes):
        return "kubernetes-workload"
    return None


def multi_gpu_batch(r: ManifestReading) -> bool:
    """A batch workload of more than one pod that holds GPUs: a gang for a synchronous job."""
    return r.is_workload and r.kind in BATCH_KINDS and (r.pods or 0) > 1 and (r.total_gpus or 0) > 0


@rule("K001", "manifest", "document", "error", "an unresolved template",
      why="a value like {{ .Values.x }} or ${VAR} is sent to the API server as it is written: the object "
          "is rejected, or runs with a literal placeholder.",
      fix="render the template (envsubst, helm template, kustomize) before applying it")
def k001(r: ManifestReading, ctx: Context):
    for ln, fld, v in r.templates:
        yield _finding(r, "K001", "error", ln, f"unresolved template in {fld}: {v!r}",
                       "render the template (envsubst, helm template, kustomize) before applying it")


@rule("K002", "manifest", "document", "error", "the Kubernetes schema rejects the object",
      why="the object does not validate against the OpenAPI schema of its kind; the API server refuses it.",
      fix="fix the field named; `kubectl apply --dry-run=server` shows the same error")
def k002(r: ManifestReading, ctx: Context):
    for ln, msg in r.validation_errors:
        yield _finding(r, "K002", "error", ln, f"the Kubernetes schema rejects it: {msg}",
                       "fix the field named; `kubectl apply --dry-run=server` shows the same error")


@rule("K003", "manifest", "document", "error", "a value that cannot be read",
      why="a field whose value cannot be read (a bad quantity, a key written twice, a wrong type) is "
          "refused by the API server, or silently not what was meant.",
      fix="fix the value the finding names")
def k003(r: ManifestReading, ctx: Context):
    for ln, fld, msg in r.problems:
        yield _finding(r, "K003", "error", ln, f"{fld}: {msg}" if fld else msg, "fix the value")


@rule("K004", "manifest", "document", "error, warning or info", "a gang minimum that differs from the pods",
      why="a gang is ready when at least its minimum of pods are placed (Volcano's gang plugin: "
          "ReadyTaskNum() >= MinAvailable): a minimum above the pods can never be met and no pod is ever "
          "bound [volcano-podgroup-api, volcano-allocate]; below the pods, a partial gang can start and a "
          "synchronous training job then holds its GPUs waiting at the first collective.",
      fix="set the minimum (minMember, minAvailable, minCount) to the number of pods")
def k004(r: ManifestReading, ctx: Context):
    members = ctx.members
    if r.kind == "PodGroup" and r.gang_size is not None and r.name in members:
        rel = gang_mismatch(r.gang_size, members[r.name])
        if rel:
            field = "minCount" if r.gang_rule.startswith("spec.schedulingPolicy") else "minMember"
            yield _finding(r, "K004", "error" if rel == "above" else "warning", r.gang_line,
                           f"{field} {r.gang_size} is {rel} the {members[r.name]} pods in this file "
                           f"that join the group" + ((": it can never be met (NotEnoughTasks)" if field == "minMember"
                                                      else ": it can never be met (the pods wait at PreEnqueue "
                                                      "\"for minCount pods from a gang to appear\" "
                                                      "[k8s-v1372-gang-plugin])")
                                                     if rel == "above" else ": a partial gang can start"),
                           f"set {field}: {members[r.name]}")
    if r.gang_rule.startswith(("spec.minAvailable", "spec.runPolicy")) and r.pods is not None \
            and r.gang_size is not None:
        rel = gang_mismatch(r.gang_size, r.pods)
        if rel == "above":
            yield _finding(r, "K004", "error", r.gang_line,
                           f"minAvailable {r.gang_size} is above the {r.pods} pods the job creates: "
                           f"the gang can never be complete and no pod is ever bound [volcano-podgroup-api, volcano-allocate]",
                           f"set minAvailable: {r.pods}")
        elif rel == "below":
            gpu = (r.total_gpus or 0) > 0
            yield _finding(r, "K004", "warning" if gpu else "info", r.gang_line,
                           f"minAvailable {r.gang_size} is below the {r.pods} pods: the scheduler may start "
                           f"{r.gang_size} and leave the rest pending"
                           + ("; a synchronous training job then holds its GPUs waiting at the first "
                              "collective" if gpu else ""),
                           f"set minAvailable: {r.pods} for all-or-nothing (lower only for elastic jobs)")


@rule("K011", "manifest", "document", "error", "a group key on the workload's own metadata, not its pods'",
      why="a Job (Deployment, ...) controller creates pods from spec.template only, so a group annotation "
          "or label on the object itself reaches no pod, and the scheduler, which reads it from the pod, "
          "sees no gang [k8s-docs-jobs, volcano-podgroup-api].",
      fix="move it to spec.template.metadata")
def k011(r: ManifestReading, ctx: Context):
    for key, value, ln in r.object_group_keys:
        pod_keys = {k for p in r.pod_sets for k in dict(p.annotations) | dict(p.labels)}
        if key in pod_keys:
            continue
        where = "annotation" if key in (GROUP_ANNOTATION, VOLCANO_GROUP_ANNOTATION) else "label"
        yield _finding(r, "K011", "error", ln,
                       f"the {where} {key}: {value} is on the {r.kind}'s own metadata; the {r.kind} "
                       f"controller creates pods from spec.template only, so no pod carries it and none "
                       f"joins the group {value!r} (the Volcano scheduler reads it from the pod "
                       f"[k8s-docs-jobs, volcano-podgroup-api])",
                       f"move it to spec.template.metadata.{where}s")


@rule("K012", "manifest", "document", "error", "a Job whose pods would restart in place",
      why="a Job's pod template must say restartPolicy Never or OnFailure; the default, Always, is "
          "refused by the API server (Kubernetes v1.37.2 pkg/apis/batch/validation/validation.go "
          "L299-307) [k8s-docs-jobs].",
      fix="set spec.template.spec.restartPolicy: Never (or OnFailure)")
def k012(r: ManifestReading, ctx: Context):
    if r.kind == "Job" and api_group(r.api_version) == "batch":
        for p in r.pod_sets:
            if p.restart_policy in ("Never", "OnFailure"):
                continue
            what = ("has no restartPolicy, so it defaults to Always" if p.restart_policy is None
                    else f"has restartPolicy {p.restart_policy}")
            yield _finding(r, "K012", "error", p.restart_policy_line or p.spec_line or p.line,
                           f"the pod template {what}, which a Job may not use: the API server rejects the "
                           f"Job (spec.template.spec.restartPolicy: "
                           + ('Required value' if p.restart_policy in (None, "Always") else 'Unsupported value')
                           + ': valid values: "OnFailure", "Never") [k8s-docs-jobs]',
                           "set spec.template.spec.restartPolicy: Never (or OnFailure)")


@rule("K013", "manifest", "document", "warning", "a queue the file never defines",
      why="Kueue admits a Job only through a LocalQueue that points to a ClusterQueue [kueue-cluster-queue], "
          "and Volcano does not schedule a PodGroup whose queue does not exist [volcano-podgroup-api]: "
          "unless the cluster already has the queue, the workload waits for ever.",
      fix="define the queue in the same file, or check that the cluster has it")
def k013(r: ManifestReading, ctx: Context):
    defined = ctx.defined
    if r.queue is not None and r.queue_source is not None:
        kueue = "kueue" in r.queue_source
        kinds = "LocalQueue" if kueue else "Queue"
        if (r.queue not in defined[kinds]) and (kueue or r.queue not in VOLCANO_BUILTIN_QUEUES):
            yield _finding(r, "K013", "warning", r.queue_line,
                           f"it names the {'Kueue LocalQueue' if kueue else 'Volcano queue'} {r.queue!r} "
                           f"({r.queue_source}), which this file never defines: unless the cluster already has "
                           + ("it, Kueue never admits the workload (a Job opts in through a LocalQueue that "
                              "points to a ClusterQueue [kueue-cluster-queue])" if kueue else
                              "it, the PodGroup is never scheduled (\"if queue does not exist, the PodGroup will "
                              "not be scheduled\" [volcano-podgroup-api])"),
                           f"define the {kinds} {r.queue} in the same file (or check it exists: kubectl get "
                           f"{kinds.lower()}s{' -A' if kueue else ''})")
    if r.kind == "LocalQueue" and r.cluster_queue and r.cluster_queue not in defined["ClusterQueue"]:
        yield _finding(r, "K013", "warning", r.line,
                       f"it points to the ClusterQueue {r.cluster_queue!r}, which this file never defines: "
                       "unless the cluster already has it, nothing queued here is admitted [kueue-cluster-queue]",
                       f"define the ClusterQueue {r.cluster_queue} in the same file (or check kubectl get clusterqueues)")


@rule("K005", "manifest", "document", "warning", "the group named with an annotation Volcano does not read",
      why=f"the Volcano scheduler keys a pod's group on {GROUP_ANNOTATION}; {VOLCANO_GROUP_ANNOTATION} "
          "alone does not put the pod in its group [volcano-podgroup-api].",
      fix=f"use the annotation {GROUP_ANNOTATION}")
def k005(r: ManifestReading, ctx: Context):
    for p in r.pod_sets:
        ann = pod_annotations(r, p)
        if VOLCANO_GROUP_ANNOTATION in ann and GROUP_ANNOTATION not in ann:
            yield _finding(r, "K005", "warning", p.line,
                           f"pods name their group with {VOLCANO_GROUP_ANNOTATION}, which the Volcano "
                           f"scheduler does not read (it keys on {GROUP_ANNOTATION} [volcano-podgroup-api])",
                           f"use the annotation {GROUP_ANNOTATION}: {ann[VOLCANO_GROUP_ANNOTATION]}")


@rule("K006", "manifest", "document", "error", "a multi-GPU batch workload with no gang scheduler",
      why="the default scheduler binds pods one at a time, so some pods of a training job can start and "
          "hold their GPUs while the rest stay Pending: a partial gang that never trains (Kubernetes' own "
          "gang scheduling, the GenericWorkload feature gate, is beta and off by default in v1.37 "
          "[k8s-v1372-feature-gates]).",
      fix="admit it whole: a Kueue LocalQueue label, a Volcano PodGroup, or a scheduling.k8s.io PodGroup "
          "with gang minCount (Kubernetes v1.37 with GenericWorkload on)")
def k006(r: ManifestReading, ctx: Context):
    if multi_gpu_batch(r) and gang_mechanism(r) is None:
        schedulers = {p.scheduler_name for p in r.pod_sets}
        extra = (" schedulerName: volcano alone does not tie the pods into one PodGroup "
                 "(no scheduling.k8s.io/group-name annotation)."
                 if "volcano" in schedulers else "")
        yield _finding(r, "K006", "error", r.gang_line or r.line,
                       f"{r.pods} pods ({r.total_gpus} GPUs) with no gang scheduler: the default "
                       f"scheduler binds pods one at a time, so some can start and hold their GPUs "
                       f"while the rest stay Pending - a partial gang that never trains (Kubernetes' "
                       f"own gang scheduling, the GenericWorkload feature gate, is beta and off by "
                       f"default in v1.37 [k8s-v1372-feature-gates]).{extra}",
                       f"admit it whole: add the label {KUEUE_QUEUE_LABEL}: <local-queue> (Kueue), "
                       f"or schedulerName: volcano with a PodGroup (minMember: {r.pods}) named in the "
                       f"pods' {GROUP_ANNOTATION} annotation, or (Kubernetes v1.37 with GenericWorkload "
                       f"on) a scheduling.k8s.io/v1beta1 PodGroup with gang minCount {r.pods} named in "
                       f"spec.template.spec.schedulingGroup.podGroupName")


@rule("K007", "manifest", "document", "warning", "GPU pods of one job with no topology constraint",
      why="without a topology constraint the pods may be spread over any nodes, racks or zones, and the "
          "job's NCCL traffic crosses the slowest link; Kueue admits by quota, not placement "
          "[kueue-all-or-nothing].",
      fix="add kueue.x-k8s.io/podset-required-topology (Kueue TAS), or podAffinity with a topologyKey, "
          "or Volcano networkTopology")
def k007(r: ManifestReading, ctx: Context):
    if multi_gpu_batch(r) and not any(p.has_topology_constraint for p in r.pod_sets if p.gpus_per_pod):
        yield _finding(r, "K007", "warning", r.line,
                       f"{r.pods} GPU pods with no topology constraint: they may be spread over "
                       f"any nodes, racks or zones, and NCCL traffic crosses the slowest link"
                       + ("; Kueue admits by quota, not placement [kueue-all-or-nothing]"
                          if gang_mechanism(r) == "kueue" else ""),
                       "add kueue.x-k8s.io/podset-required-topology (Kueue TAS), or podAffinity with "
                       "a topologyKey, or Volcano networkTopology")


@rule("K008", "manifest", "document", "warning or info", "a container with no memory limit",
      why="with no memory limit the container's cgroup has memory.max 'max': it can grow until the node "
          "runs short and the kernel's global OOM killer picks a victim [linux-oom-kill, "
          "k8s-kubelet-qos-policy].",
      fix="set resources.limits.memory (equal to requests.memory for Guaranteed QoS)")
def k008(r: ManifestReading, ctx: Context):
    for p in r.pod_sets:
        for cname, ln in p.containers_without_memory_limit:
            yield _finding(r, "K008", "warning" if p.gpus_per_pod else "info", ln,
                           f"container {cname} ({p.name}) has no memory limit: its cgroup's memory.max is "
                           f"'max', so it can grow until the node runs short and the kernel's global OOM "
                           f"killer picks a victim [linux-oom-kill, k8s-kubelet-qos-policy]",
                           "set resources.limits.memory (equal to requests.memory for Guaranteed QoS)")


@rule("K009", "manifest", "document", "error", "a memory limit below the request",
      why="the API server rejects a container whose memory limit is below its request.",
      fix="raise limits.memory to at least requests.memory")
def k009(r: ManifestReading, ctx: Context):
    for p in r.pod_sets:
        for cname, ln, req, lim in p.limit_below_request:
            yield _finding(r, "K009", "error", ln,
                           f"container {cname}: memory limit {lim} is below its request {req}; the API "
                           f"server rejects this",
                           f"raise limits.memory to at least {req}")


@rule("K010", "manifest", "document", "error", "a GPU request the API server refuses",
      why="GPUs are an extended resource: they are given in limits, and requests, if set, must equal "
          "them; anything else is refused.",
      fix="give GPUs in resources.limits (requests, if set, must be equal)")
def k010(r: ManifestReading, ctx: Context):
    for p in r.pod_sets:
        for cname, ln, msg in p.gpu_request_problems:
            yield _finding(r, "K010", "error", ln, f"container {cname}: {msg}",
                           "give GPUs in resources.limits (requests, if set, must be equal)")


#: Kueue's Topology-Aware Scheduling pod-set annotations (concepts/topology_aware_scheduling.md)
TAS_ANNOTATIONS = ("kueue.x-k8s.io/podset-required-topology", "kueue.x-k8s.io/podset-preferred-topology")


@rule("K014", "manifest", "document", "warning", "a Kueue topology request on a workload Kueue never sees",
      why="Kueue's pod-set annotations kueue.x-k8s.io/podset-required-topology and -preferred-topology are "
          "read by Kueue's Topology-Aware Scheduling when it admits the workload [kueue-tas]; a workload "
          "without a Kueue queue is never admitted by Kueue, and the kube-scheduler ignores the annotation: "
          "its pods land wherever they fit, spread over the network.",
      fix=f"add the label {KUEUE_QUEUE_LABEL}: <local-queue> (with a ClusterQueue whose flavor has a topology)")
def k014(r: ManifestReading, ctx: Context):
    if r.queue_source is not None and "kueue" in r.queue_source:
        return
    for p in r.pod_sets:
        ann = pod_annotations(r, p)
        asked = [a for a in TAS_ANNOTATIONS if a in ann]
        if asked:
            yield _finding(r, "K014", "warning", p.line,
                           f"the pods ask for {asked[0]}: {ann[asked[0]]}, but no Kueue queue manages this "
                           f"workload: Kueue never admits it and the kube-scheduler ignores the annotation, so "
                           f"the request is dropped and the pods land wherever they fit [kueue-tas]",
                           f"add the label {KUEUE_QUEUE_LABEL}: <local-queue>")
