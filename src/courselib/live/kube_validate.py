"""``courselib kube validate`` where earlier releases had it; now :mod:`courselib.live.kube.validate`.
Kept for one release (the chapters import it)."""
from courselib.live.kube.validate import *  # noqa: F401,F403
