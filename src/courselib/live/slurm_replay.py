"""The Slurm replay's names where earlier releases had them; they now live in
:mod:`courselib.live.slurm.plan`, :mod:`~courselib.live.slurm.replay` and
:mod:`~courselib.live.slurm.result`. Kept for one release (the chapter and the labs import it)."""
from courselib.live.slurm.plan import *  # noqa: F401,F403
from courselib.live.slurm.plan import MIN_SLEEP  # noqa: F401
from courselib.live.slurm.replay import *  # noqa: F401,F403
from courselib.live.slurm.result import *  # noqa: F401,F403
