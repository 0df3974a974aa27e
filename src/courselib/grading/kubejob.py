"""``courselib classroom k8s-job DIR --queue Q -o FILE``: a class's submissions graded on Kubernetes.

One **Indexed Job** (``completionMode: Indexed``) grades a folder of submissions: index *i* is the
*i*-th submission :func:`courselib.grading.many.find_jobs` finds (the same folder layouts as
``courselib grade --many``), and its pod runs ``courselib grade`` on that one notebook. The Job carries
the Kueue label ``kueue.x-k8s.io/queue-name: Q`` and is created **suspended**: Kueue admits it when the
queue's ClusterQueue has quota for it and only then unsuspends it, so a deadline's regrading waits
for quota instead of swamping the cluster.

What the file holds (one YAML stream, ``kubectl apply -f FILE``):

- a ConfigMap ``NAME-submissions`` with ``submissions.tsv``: line *i + 1* is index *i*'s submission
  path (relative to the submissions volume), its report's name and its seed, tab-separated;
- the Job ``NAME``: ``completions`` = the number of submissions, ``parallelism`` (``-j``, default 4),
  ``backoffLimitPerIndex: 1`` (a pod that fails is retried once, then only its index is marked failed),
  each pod with its own requests and limits (what Kueue counts against the quota), no service-account
  token and no service links, and the grader in *container isolation* (the pod is the throw-away
  container: :mod:`courselib.grading.sandbox`).

The volume ``--claim`` (a PersistentVolumeClaim) holds ``submissions/`` (mounted read-only) and
``reports/``, where each pod writes ``STUDENT--LAB.json``. The image is the instructor's grading image:
the course with ``solutions/`` (the hidden checks) at ``/course``; it must never be the students' image.

Paths from the folder are checked before anything is written: a name that is not plain letters,
digits, ``.``, ``_``, ``-`` and ``/`` is a one-line error naming it (no student-chosen text reaches the shell).
"""
from __future__ import annotations

import re
from pathlib import Path

import yaml

from courselib.errors import InputError
from courselib.grading.manifest import read_all
from courselib.grading.many import find_jobs, read_roster

#: Kueue's label naming the LocalQueue a Job is submitted to (Kueue v0.17 ``constants.QueueLabel``).
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PART_OF = "courselib-grading"
MOUNT = "/class"
LIST_DIR = "/etc/courselib-class"
_SAFE = re.compile(r"[A-Za-z0-9._/-]+")
_DNS = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_QUANTITY = re.compile(r"\d+(\.\d+)?(m|Ki|Mi|Gi|Ti|k|M|G|T)?")

#: What each pod runs: its line of the list, then the grader on that one submission.
SCRIPT = r"""set -eu
line=$(sed -n "$((JOB_COMPLETION_INDEX + 1))p" {list}/submissions.tsv)
sub=$(printf '%s' "$line" | cut -f1)
report=$(printf '%s' "$line" | cut -f2)
seed=$(printf '%s' "$line" | cut -f3)
mkdir -p {mount}/reports
echo "index $JOB_COMPLETION_INDEX: $sub"
exec courselib grade "{mount}/submissions/$sub" --json-file "{mount}/reports/$report" \
  --timeout {timeout} --time-limit {time_limit} ${{seed:+--seed "$seed"}} {source}
"""


def _labs(source: Path | None) -> set[str]:
    if source is not None and source.is_file() and source.suffix == ".json":
        return set(read_all(source))
    folder = source if source is not None and source.is_dir() else Path("solutions")
    names = {p.stem for p in folder.glob("*.ipynb")} if folder.is_dir() else set()
    if not names and Path("labs/manifest.json").is_file():
        names = set(read_all(Path("labs/manifest.json")))
    return names


def _name(text: str, field: str) -> str:
    if not (len(text) <= 52 and _DNS.fullmatch(text)):
        raise InputError(f"{text!r} is not a Kubernetes name of at most 52 characters (lower-case letters, digits, '-')",
                         field=field, hint="the Job's pods are named NAME-INDEX-…; choose a short lower-case name")
    return text


def submissions(folder: Path, *, lab: str | None = None, source: Path | None = None,
                roster: Path | None = None) -> list[tuple[str, str, str]]:
    """(path relative to ``folder``, report name, seed) of each submission, in index order; a one-line
    error for a submission that cannot be graded on the cluster (a symbolic link, no lab notebook, a name
    with characters other than letters, digits, '.', '_', '-', '/')."""
    folder = Path(folder)
    jobs, refused = find_jobs(folder, _labs(source), lab, read_roster(roster))
    if refused:
        r = refused[0]
        raise InputError(r.why, file=str(r.job.path), field="DIR",
                         hint="fix or remove it, then write the Job again")
    if not jobs:
        raise InputError("no submission to grade", file=str(folder), field="DIR",
                         hint="give the folder of submissions (DIR/STUDENT.ipynb or DIR/STUDENT/…/LAB.ipynb)")
    out = []
    for job in jobs:
        rel = job.path.relative_to(folder).as_posix()
        seed = job.seed or ""
        for what, text in (("submission", rel), ("seed", seed)):
            if text and not _SAFE.fullmatch(text):
                raise InputError(f"the {what} name {text!r} has characters the Job's shell step does not take",
                                 file=str(job.path), field="DIR",
                                 hint="rename it with letters, digits, '.', '_', '-' only")
        out.append((rel, f"{job.student}--{job.lab}.json", seed))
    return out


def manifests(folder: Path, *, queue: str, name: str = "grade", namespace: str = "default",
              image: str = "courselib-grader:latest", claim: str = "class", parallelism: int = 4,
              cpu: str = "1", memory: str = "2Gi", lab: str | None = None, source: Path | None = None,
              roster: Path | None = None, timeout: float = 30.0, time_limit: float = 600.0) -> list[dict]:
    """The ConfigMap and the Indexed Job that grade ``folder`` (see the module docstring)."""
    _name(queue, "--queue")
    _name(name, "--name")
    _name(namespace, "--namespace")
    _name(claim, "--claim")
    if not (isinstance(parallelism, int) and parallelism >= 1):
        raise InputError(f"{parallelism!r} is not a number of pods at a time (1 or more)", field="-j")
    for what, q in (("--cpu", cpu), ("--memory", memory)):
        if not _QUANTITY.fullmatch(q):
            raise InputError(f"{q!r} is not a Kubernetes quantity (e.g. 500m, 1, 2Gi)", field=what)
    rows = submissions(folder, lab=lab, source=source, roster=roster)
    labels = {"app.kubernetes.io/part-of": PART_OF, "app.kubernetes.io/instance": name}
    listing = "".join("\t".join(r) + "\n" for r in rows)
    source_arg = f'--source "{source.as_posix()}"' if source is not None else ""
    if source is not None and not _SAFE.fullmatch(source.as_posix()):
        raise InputError(f"the source path {source.as_posix()!r} has characters the Job's shell step does not take",
                         field="--source")
    script = SCRIPT.format(list=LIST_DIR, mount=MOUNT, timeout=f"{timeout:g}", time_limit=f"{time_limit:g}",
                           source=source_arg).rstrip() + "\n"
    resources = {"cpu": cpu, "memory": memory}
    config_map = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": f"{name}-submissions", "namespace": namespace, "labels": dict(labels)},
                  "data": {"submissions.tsv": listing}}
    job = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {**labels, QUEUE_LABEL: queue}},
        "spec": {
            "completionMode": "Indexed",
            "completions": len(rows),
            "parallelism": min(parallelism, len(rows)),
            "backoffLimitPerIndex": 1,
            "suspend": True,
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "containers": [{
                        "name": "grade",
                        "image": image,
                        "workingDir": "/course",
                        "command": ["sh", "-c", script],
                        "env": [{"name": "COURSELIB_GRADE_ISOLATION", "value": "container"}],
                        "resources": {"requests": dict(resources), "limits": dict(resources)},
                        "volumeMounts": [
                            {"name": "class", "mountPath": f"{MOUNT}/submissions", "subPath": "submissions",
                             "readOnly": True},
                            {"name": "class", "mountPath": f"{MOUNT}/reports", "subPath": "reports"},
                            {"name": "list", "mountPath": LIST_DIR, "readOnly": True}],
                    }],
                    "volumes": [
                        {"name": "class", "persistentVolumeClaim": {"claimName": claim}},
                        {"name": "list", "configMap": {"name": f"{name}-submissions"}}],
                },
            },
        },
    }
    return [config_map, job]


def dump(docs: list[dict]) -> str:
    """The manifests as one YAML stream."""
    return yaml.safe_dump_all(docs, sort_keys=False, default_flow_style=False, width=1000)
