"""Kueue as an extension of the local control plane: ``kube up --with kueue``, ``replay --policy kueue``.

The two halves: :mod:`~courselib.live.kube.kueue.manager` installs Kueue's own CRDs and webhooks
and runs its manager as one more daemon of the control plane; :mod:`~courselib.live.kube.kueue.replay`
is Kueue's part of a replay, at the driver's named hooks. :class:`Kueue` registers both under the
name ``kueue`` (:mod:`courselib.live.kube.extension`); the core imports neither.
"""
from __future__ import annotations

from courselib.live.kube.extension import Extension, register
from courselib.live.kube.kueue import manager
from courselib.live.kube.kueue.replay import KueueReplay, plan_kueue_replay


@register
class Kueue(Extension):
    name = "kueue"
    title = "Kueue"
    version = manager.KUEUE_VERSION
    policies = ("kueue",)
    roles = (manager.ROLE,)
    model_given = "the order the real Kueue drew among Workloads created together (UIDs)"

    def unavailable(self):
        return manager.unavailable_reason()

    def ports(self, shape):
        return manager.ports(shape)

    def start(self, cp, *, timeout, say):
        manager.start(cp, timeout=timeout, say=say)

    def stop(self, cp, *, say=lambda msg: None):
        manager.stop(cp, say=say)

    def plan(self, workload, *, policy, file, options):
        return plan_kueue_replay(workload, file=file, options=options)

    def replay(self, run):
        return KueueReplay(run)
