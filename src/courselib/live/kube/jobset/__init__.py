"""JobSet as an extension of the local control plane: ``kube up --with jobset``.

:mod:`~courselib.live.kube.jobset.manager` installs JobSet's CRD and webhooks and runs its manager;
:mod:`~courselib.live.kube.jobset.replay` submits a job of ``kind: jobset`` as a JobSet and reads
back what the JobSet controller did. :class:`JobSet` registers both under the name ``jobset``
(:mod:`courselib.live.kube.extension`); the core imports neither. How the controller reacts to a
lost pod is modelled in :mod:`courselib.model.jobset`.
"""
from __future__ import annotations

from courselib.live.kube.extension import Extension, register
from courselib.live.kube.jobset import manager
from courselib.live.kube.jobset.replay import JobSetReplay


@register
class JobSet(Extension):
    name = "jobset"
    title = "JobSet"
    version = manager.JOBSET_VERSION
    roles = (manager.ROLE,)

    def unavailable(self):
        return manager.unavailable_reason()

    def ports(self, shape):
        return manager.ports(shape)

    def start(self, cp, *, timeout, say):
        manager.start(cp, timeout=timeout, say=say)

    def stop(self, cp, *, say=lambda msg: None):
        manager.stop(cp, say=say)

    def replay(self, run):
        return JobSetReplay(run)
