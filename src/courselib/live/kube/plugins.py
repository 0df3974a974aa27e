"""The extensions that ship with courselib, registered by importing them (kube-scheduler keeps its
in-tree plugins in one list the same way, ``pkg/scheduler/framework/plugins/registry.go``).

A new real system that joins the control plane is a package beside :mod:`courselib.live.kube.kueue`
with an :class:`~courselib.live.kube.extension.Extension` registered under its name, and one line
here; the control plane and the replay driver do not change.
"""
from courselib.live.kube import kueue  # noqa: F401  (registers "kueue")
from courselib.live.kube import jobset  # noqa: F401  (registers "jobset")
from courselib.live.kube import topology  # noqa: F401  (registers "topology": node labels per level)
