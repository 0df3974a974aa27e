"""A real container and a real image build, from a base image the course makes itself.

- :mod:`~courselib.live.container.runtime` — the stand-in base image (an OCI layout built here), a
  command run as PID 1 of a real container (runc, crun), its inside and outside views, the real
  memory-cgroup OOM inside it, and the builder (buildah) the rebuild drives;
- :mod:`~courselib.live.container.rebuild` — ``courselib docker rebuild``: a Dockerfile built,
  changed and built again, each step's cache reuse compared with courselib's model.

``from courselib.live import container`` gives the runtime's names (``container.run_container``,
``container.source``, …), as the single module of earlier releases did.
"""
from courselib.live.container.runtime import *  # noqa: F401,F403 (the runtime's names, as before)
from courselib.live.container.runtime import OutOfTime  # noqa: F401
