"""The pinned Kubernetes' feature gates where earlier releases had them; now
:mod:`courselib.live.kube.gates`. Kept for one release (the chapters import it)."""
from courselib.live.kube.gates import *  # noqa: F401,F403
