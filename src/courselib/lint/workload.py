"""Lint rules for workload files (codes W0xx): topology requests that cannot be met, or are ignored.

``courselib lint WORKLOAD.yaml`` (a file with ``cluster:`` and ``jobs:``) reads it with the workload
reader and runs these rules on each job, with a context that knows each job's line. Which scheduler
ignores what is each policy's own :meth:`~courselib.model.policies.base.Policy.topology_note`,
one fact in one place (``courselib.model.topology`` cites the sources).
"""
from __future__ import annotations

from dataclasses import dataclass

from courselib.lint.registry import rule, rules_for
from courselib.model.lint import Finding
from courselib.model.policies import make_policy, policy_names
from courselib.model.workload import Job, Workload


@dataclass(frozen=True)
class Context:
    file: str | None
    workload: Workload
    lines: dict          # job name -> the line of its entry (None when not known)
    notes: dict          # policy name -> the policy, made once for the file


def lint_workload(workload: Workload, file: str | None = None, lines: dict | None = None) -> list[Finding]:
    """Findings for one workload (codes W0xx)."""
    notes = {}
    if any(j.topology for j in workload.jobs) and workload.cluster.topology:
        notes = {name: make_policy(name, workload) for name in policy_names()}
    ctx = Context(file, workload, lines or {}, notes)
    return [f for job in workload.jobs for each in rules_for("workload", "job") for f in each.check(job, ctx)]


def domain_capacity(workload: Workload, job: Job, level: str) -> int:
    """Pods of ``job`` one empty domain of ``level`` holds."""
    spec = workload.cluster
    per_node = spec.gpus_per_node // job.gpus_per_pod if job.gpus_per_pod else job.pods
    if job.exclusive and job.gpus_per_pod:
        per_node = spec.gpus_per_node // job.gpus_per_pod
    return spec.level_size(level) * per_node


@rule("W001", "workload", "job", "error", "a required topology domain smaller than the job",
      why="""A job that requires one domain of a level (Kueue's podset-required-topology, a PodGroup's
      schedulingConstraints.topology, Volcano's mode: hard) waits until one domain holds every pod;
      if even an empty domain is too small, it waits forever: Kueue keeps it pending with "topology
      ... doesn't allow to fit" (tas_flavor_snapshot.go L1698-1718), the PodGroup stays
      Unschedulable.""",
      fix="require a larger level (the one above), make it preferred, or split the job")
def w001(job: Job, ctx: Context):
    if not job.topology or job.topology[0] != "required":
        return
    level = job.topology[1]
    room = domain_capacity(ctx.workload, job, level)
    if room < job.pods:
        yield Finding("W001", "error", ctx.file, ctx.lines.get(job.name),
                      f"job {job.name!r} requires one {level} but needs {job.pods} pods of "
                      f"{job.gpus_per_pod} GPUs; an empty {level} holds {room}: it can never start",
                      f"require the level above {level}, or write preferred: {level}")


@rule("W002", "workload", "job", "warning", "a topology request a scheduler ignores",
      why="""Not every scheduler honours a topology request as written: the default kube-scheduler
      is topology-blind (pods land wherever LeastAllocated puts them); Kubernetes v1.37's PodGroup
      topology is one required key, with no preferred form (topology_placement.go L122-135);
      Slurm's topology/tree counts leaf switches only (--switches), so a required level above the
      leaves is not a requirement. (Volcano honours preferred as mode: soft: the lowest tier that
      holds the job, the whole cluster only when none does.) A request ignored is a
      placement left to chance, and a gang split over a slow link runs at that link's speed.""",
      fix="run it under a scheduler that honours the request, or write the request it does honour")
def w002(job: Job, ctx: Context):
    if not job.topology or not ctx.notes:
        return
    ignored = [(name, note) for name, pol in ctx.notes.items() if (note := pol.topology_note(job))]
    for name, note in ignored:
        if "max_switch_wait" in note:   # honoured, for a while: not ignored
            continue
        yield Finding("W002", "warning", ctx.file, ctx.lines.get(job.name),
                      f"job {job.name!r} under {name}: {note}",
                      "under that scheduler, expect the placement of a job without the request")


@rule("W003", "workload", "job", "warning", "a count of domains only Slurm's tree reads",
      why="""max_domains: N and wait: T (at most N domains of the required level, waiting at most T
      for them) are Slurm's --switches=N@T, read by topology/tree for the leaf switches (the
      innermost level) only: eval_nodes_tree.c L1362-1411 counts the leaf switches of its placement
      and refuses one over N until the job has waited T (at most max_switch_wait, 300 s by default,
      job_mgr.c L870-895). Kueue's TAS, Volcano's HyperNodes and kube-scheduler's PodGroup topology
      have no count of domains: they require one domain of the level, so a job that N domains hold
      and one does not never starts there.""",
      fix="under those schedulers require the level above, or write preferred: LEVEL")
def w003(job: Job, ctx: Context):
    if job.max_domains is None and job.topology_wait is None:
        return
    level, n = job.topology[1], job.max_domains or 1
    room = domain_capacity(ctx.workload, job, level)
    tail = f"; an empty {level} holds {room} of its {job.pods} pods: it never starts there" if room < job.pods else ""
    yield Finding("W003", "warning", ctx.file, ctx.lines.get(job.name),
                  f"job {job.name!r}: max_domains {n}" + (f", wait {job.topology_wait:g}s" if job.topology_wait
                                                          is not None else "")
                  + f" is Slurm's --switches={n} (topology/tree, leaf switches); kueue, volcano and kube-gang "
                  f"require one {level}{tail}",
                  f"for those, require the level above {level} or write preferred: {level}")
