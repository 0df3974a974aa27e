"""``courselib docker rebuild`` where earlier releases had it; now :mod:`courselib.live.container.rebuild`.
Kept for one release (a chapter and a lab import it)."""
from courselib.live.container.rebuild import *  # noqa: F401,F403
