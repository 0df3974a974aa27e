"""A real Slurm on this machine, and replays of a workload on it (one package, four rooms).

- :mod:`~courselib.live.slurm.cluster` — munge, ``slurmctld`` and one ``slurmd`` per node on the
  shared daemon storey (:mod:`courselib.live.daemons`): ``up``, ``status``, ``down``;
- :mod:`~courselib.live.slurm.plan` — the workload as ``sbatch`` lines, scaled to seconds;
- :mod:`~courselib.live.slurm.replay` — submit the plan, watch ``squeue``, record what happened;
- :mod:`~courselib.live.slurm.result` — compare with the model, print, record, read back.

``from courselib.live import slurm`` gives the cluster's names (``slurm.up``, ``slurm.ClusterShape``,
…), as the single module of earlier releases did.
"""
from courselib.live.slurm.cluster import *  # noqa: F401,F403 (the cluster's names, as before)
from courselib.live.slurm.cluster import (BASE_PORT, CLIENTS, DAEMONS, DEBIAN_PACKAGES,  # noqa: F401
                                          MARKER, PARTITION, SCHEDULER_PARAMETERS, STATE_ENV,
                                          TOKEN_ENV)
