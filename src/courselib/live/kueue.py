"""Kueue's manager where earlier releases had it; now :mod:`courselib.live.kube.kueue.manager`
(an extension of the control plane: :mod:`courselib.live.kube.kueue`). Kept for one release."""
from courselib.live.kube.kueue.manager import *  # noqa: F401,F403
