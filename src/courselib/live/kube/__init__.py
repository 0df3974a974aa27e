"""A real Kubernetes control plane on this machine, replays on it, and the systems that join it.

One package, one room per concern:

- :mod:`~courselib.live.kube.cluster` — etcd, kube-apiserver, kube-scheduler and
  kube-controller-manager with fake GPU nodes, on the shared daemon storey
  (:mod:`courselib.live.daemons`): ``up``, ``status``, ``reshape``, ``down``;
- :mod:`~courselib.live.kube.config` — the pinned versions, their binaries, the certificates,
  kubeconfigs and every daemon's flags;
- :mod:`~courselib.live.kube.api` — the few API calls courselib makes (JSON in and out);
- :mod:`~courselib.live.kube.plan` — a workload's jobs as ``batch/v1`` Jobs (and PodGroups);
- :mod:`~courselib.live.kube.watch` — a replay's pods as the API server's watch delivers them;
- :mod:`~courselib.live.kube.replay` — the replay driver, in virtual time;
- :mod:`~courselib.live.kube.result` — the comparison with the model, tables, recordings;
- :mod:`~courselib.live.kube.extension` — the named extension points, and the registry;
- :mod:`~courselib.live.kube.kueue` — Kueue, an extension (registered by
  :mod:`~courselib.live.kube.plugins`); :mod:`~courselib.live.kube.validate` — server-side dry
  runs; :mod:`~courselib.live.kube.gates` — the pinned version's feature gates from its source.

``from courselib.live import kube`` gives the control plane's names (``kube.up``,
``kube.KubeShape``, …), as the single module of earlier releases did.
"""
from courselib.live.kube.cluster import *  # noqa: F401,F403 (the control plane's names, as before)
from courselib.live.kube.config import *  # noqa: F401,F403 (versions, binaries, certificates, flags)
from courselib.live.kube.cluster import BASE_PORT, FEATURE_PREFIX, GPU, MARKER, STATE  # noqa: F401
from courselib.live.kube import plugins  # noqa: E402,F401 (registers the in-tree extensions)
