"""The live test loop: one control plane and one Slurm per test session, reshaped instead of restarted.

A pytest plugin (``pytest_plugins`` in conftest.py) on the shared daemon storey
(:mod:`courselib.live.daemons`):

- ``live_kube`` (session): ONE local Kubernetes control plane for every test that asks for it (the
  Kubernetes, Kueue and JobSet suites). A test says what it needs — ``plane.up(shape, kueue=…,
  qps=…)``, the shape naming its extensions — and the plane is changed as little as that takes: new
  fake nodes are only objects (``reshape``), JobSet and Kueue *join* the running plane (``join``), a
  client rate restarts only the controller manager (``set_api_qps``); only a different feature-gate set
  (native gang scheduling) needs ``down`` and ``up``, and so does an extension *leaving* (Kueue's
  webhooks would refuse every Job once its manager is gone) and JobSet joining after Kueue (Kueue
  turns its JobSet integration on only if JobSet's CRD is there when it starts).
- Ordering: the tests that use ``live_kube`` run grouped by feature-gate set, then by whether Kueue
  has joined (``@pytest.mark.live_kube(gang=…, kueue=…)``; default: neither), so each group starts
  the plane at most once.
- ``live_slurm`` (session): one local Slurm, restarted only when the shape changes.
- At the end of the session each fixture proves that ``down`` left nothing: no process of ours, no
  state directory, no process carrying the marker, every port free, no record.

:data:`FAST_QPS`: the controller manager's client rate for replays whose assertion is agreement
(the model is given the real pod order, so how fast the Job controller creates pods changes
nothing the test checks, only how long it waits). A recorded run, and the one guard test of the
seed's story, keep Kubernetes' default (20 requests/s).
"""
from __future__ import annotations

import contextlib
import dataclasses

import os
import signal
from pathlib import Path

import pytest

#: The controller manager's client rate for agreement replays (requests/s; burst 1.5x).
FAST_QPS = 200
#: The session's control plane's first port; make test's kueue lane runs a second plane (tests/lanes.py)
KUBE_PORT = int(os.environ.get("COURSE_TEST_KUBE_PORT", "18100"))
SLURM_PORT = 17900


def pytest_configure(config):
    config.addinivalue_line("markers", "live_kube(gang=False, kueue=False, order=0): what a test needs "
                            "of the session's control plane (tests are grouped by it; order: within a group)")
    unwind_on_termination(config)


def unwind_on_termination(config, signals=(signal.SIGTERM, signal.SIGHUP)) -> None:
    """SIGTERM and SIGHUP end the session as Ctrl-C does: pytest unwinds and the session's fixtures
    stop what they started. Left at their default, either killed pytest where it stood, and the control
    plane it had started (etcd, the API server, scheduler, controller manager, Kueue) ran on with parent 1.
    The course's own :func:`~courselib.live.cleanup.cleanup_on_signals`, held for the whole session: the
    first one unwinds, later ones wait while the fixtures clean up (SIGKILL still ends it). A signal not
    at its default (a handler someone set, or ignored, as under nohup) is left as it is."""
    from courselib.live.cleanup import cleanup_on_signals
    stack = contextlib.ExitStack()
    stack.enter_context(cleanup_on_signals(tuple(s for s in signals if signal.getsignal(s) == signal.SIG_DFL)))
    config.add_cleanup(stack.close)


def _kube_key(item) -> tuple:
    mark = item.get_closest_marker("live_kube")
    kw = mark.kwargs if mark else {}
    return (bool(kw.get("gang", False)), bool(kw.get("kueue", False)), kw.get("order", 0))


def pytest_collection_modifyitems(session, config, items):
    """The tests that use the session's control plane, grouped by feature-gate set, then by whether
    Kueue joins; every other test keeps its place."""
    slots = [k for k, item in enumerate(items) if "live_kube" in getattr(item, "fixturenames", ())]
    ordered = sorted((items[k] for k in slots), key=_kube_key)  # stable: file order within a group
    for k, item in zip(slots, ordered):
        items[k] = item


def marked(state_dir: Path, marker: str) -> list[int]:
    """PIDs of processes whose environment carries ``marker=state_dir``."""
    needle = f"{marker}={state_dir}".encode()
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    out.append(int(entry.name))
            except OSError:
                continue
    return out


class _PrivateState:
    """A private state directory for the session (``COURSELIB_STATE_DIR``), restored after."""

    def __init__(self, tmp_path_factory, name: str, env: str = "COURSELIB_STATE_DIR", file: str | None = None):
        self.dir = tmp_path_factory.mktemp(name)
        self.dir.chmod(0o700)
        self.env, self.value = env, str(self.dir / file) if file else str(self.dir)
        self.old = os.environ.get(env)
        os.environ[env] = self.value

    def restore(self) -> None:
        if self.old is None:
            os.environ.pop(self.env, None)
        else:
            os.environ[self.env] = self.old


def _record(started: list, procs) -> None:
    """Add the processes in ``procs`` not yet in ``started`` (the same PID and start time)."""
    seen = {(p.pid, p.start_ticks) for p in started}
    started.extend(p for p in procs if (p.pid, p.start_ticks) not in seen)


def still_running(procs) -> list[int]:
    """The PIDs of ``procs`` (daemon records) that are still the very processes started: alive, with the
    start time recorded when each started. A PID alone is not enough over a whole session: with Linux's
    pid_max at 32,768 and six lanes starting processes, a daemon stopped early in a session may have its
    PID reused by another lane's process by its end (the kube lane's check of 2026-12-06 named a PID
    that `down` had stopped)."""
    from courselib.live.cleanup import alive
    from courselib.live.state import ProcessStamp   # (of a zombie too, which alive counts while unreaped)
    return [p.pid for p in procs if alive(p.pid) and (p.stamp is None or ProcessStamp.of(p.pid) == p.stamp)]


class LiveKube:
    """The session's control plane, shaped to each test's need (see the module docstring)."""

    def __init__(self):
        from courselib.live import kube
        self.kube = kube
        self.cp = None
        self.started: list[tuple[list, Path, object]] = []   # (each plane's processes, its state, shape)
        self.restarts = 0

    def up(self, shape, *, kueue: bool = False, qps: int | None = FAST_QPS):
        """A control plane with ``shape``'s nodes, gang setting and extensions (``shape.with_``: JobSet),
        Kueue if asked, and controller manager client rate ``qps`` (``None``: the default)."""

        from courselib.live.kube import cluster
        kube = self.kube
        with_ = tuple(dict.fromkeys(tuple(shape.with_) + (("kueue",) if kueue else ())))
        want = kube.KubeShape(shape.nodes, shape.gpus_per_node, shape.features, gang=shape.gang,
                              cpus_per_node=shape.cpus_per_node, memory_per_node=shape.memory_per_node,
                              base_port=KUBE_PORT, with_=with_, api_qps=qps,
                              topology=getattr(shape, "topology", ()))
        cp = self.cp
        running = cp.shape.with_ if cp is not None else ()
        # an extension leaving (Kueue's webhooks would stay): every test gets exactly the extensions it asks for
        leaving = [w for w in running if w not in with_]
        # Kueue turns its JobSet integration on only if JobSet's CRD exists when it starts
        jobset_after_kueue = "kueue" in running and "jobset" in with_ and "jobset" not in running
        if cp is not None and (cp.shape.core_gates() != want.core_gates() or leaving or jobset_after_kueue
                               or not cp.all_ours()):
            self.down()  # a feature gate (gang, topology-aware PodGroups), an extension leaving, JobSet after Kueue, a broken plane
            cp = None
        if cp is None:
            self.cp = kube.up(want)
            self.restarts += 1
            self.started.append((list(self.cp.procs), self.cp.state_dir, self.cp.shape))
            return self.cp
        if not cp.shape.same_nodes(want):
            kube.reshape(cp, want)  # fake nodes are only objects: the daemons stay
        joining = [w for w in with_ if w not in cp.shape.with_]
        if joining:
            cluster.join(cp, joining)  # JobSet, then Kueue, join the running control plane
        cluster.set_api_qps(cp, qps)  # restarts only the controller manager, if the rate changes
        _record(self.started[-1][0], cp.procs)
        return cp

    def down(self) -> None:
        if self.cp is None:
            return
        _record(self.started[-1][0], self.cp.procs)
        out = self.kube.down(self.cp)
        assert out["left"] == []
        self.cp = None

    def prove_clean(self, record: Path) -> None:
        """Nothing of any control plane of the session is left: processes, directories, ports."""
        from courselib.live.nodes import port_free
        for procs, state_dir, shape in self.started:
            assert still_running(procs) == [], "processes of ours still running after down"
            assert not state_dir.exists()
            assert marked(state_dir, self.kube.MARKER) == []
            assert all(port_free(p) for p in shape.ports.values())
            assert all(port_free(shape.ports["extra"] + k) for k in range(6))  # Kueue's, JobSet's
        assert not record.exists()


@pytest.fixture(scope="session")
def live_kube(tmp_path_factory):
    """The session's one local Kubernetes control plane (see the module docstring)."""
    state = _PrivateState(tmp_path_factory, "kube-state")
    plane = LiveKube()
    try:
        yield plane
    finally:
        try:
            plane.down()
        finally:
            state.restore()
    plane.prove_clean(state.dir / "kube.json")


class LiveSlurm:
    """The session's local Slurm, restarted only when a test needs another shape."""

    def __init__(self):
        from courselib.live import slurm
        self.slurm = slurm
        self.cluster = None
        self.started: list = []   # every process of every cluster of the session (courselib.live.daemons.Daemon)

    def up(self, shape):
        slurm = self.slurm
        shape = dataclasses.replace(shape, base_port=SLURM_PORT)   # (its topology too)
        if self.cluster is not None and not self.cluster.shape.same_nodes(shape):
            self.down()
        self.cluster = slurm.up(shape)
        _record(self.started, self.cluster.procs)
        return self.cluster

    def down(self) -> None:
        if self.cluster is None:
            return
        out = self.slurm.down(self.cluster)
        assert out["left"] == []
        self.cluster = None


@pytest.fixture(scope="session")
def live_slurm(tmp_path_factory):
    """The session's one local Slurm (restarted per shape); proves ``down`` left nothing."""
    from courselib.live import slurm
    state = _PrivateState(tmp_path_factory, "slurm", env=slurm.STATE_ENV, file="state.json")
    lab = LiveSlurm()
    try:
        yield lab
    finally:
        try:
            lab.down()
        finally:
            state.restore()
    running = still_running(lab.started)
    assert running == [], f"processes of ours still running after down: {running}"
    assert not Path(state.value).exists()
