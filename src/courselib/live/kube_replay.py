"""The Kubernetes replay's names where earlier releases had them; they now live in
:mod:`courselib.live.kube.plan`, :mod:`~courselib.live.kube.watch`,
:mod:`~courselib.live.kube.replay` and :mod:`~courselib.live.kube.result`. Kept for one release
(the chapters import it)."""
from courselib.live.kube.api import Api, ApiError  # noqa: F401
from courselib.live.kube.plan import *  # noqa: F401,F403
from courselib.live.kube.replay import *  # noqa: F401,F403
from courselib.live.kube.result import *  # noqa: F401,F403
from courselib.live.kube.result import expand_runs as _expand, pod_runs as _compress  # noqa: F401 (the chapter)
from courselib.live.kube.watch import *  # noqa: F401,F403
