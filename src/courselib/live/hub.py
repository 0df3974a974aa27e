"""A class server on one machine: a real JupyterHub, its proxy, and one notebook server per student.

``courselib classroom hub up`` starts, in a new private directory that carries a random token:

- **configurable-http-proxy** (npm; :func:`proxy_binary`), the public side, on 127.0.0.1:PORT
  (default :data:`BASE_PORT`, not JupyterHub's 8000) with its API on PORT + 1;
- **JupyterHub** (PyPI ``jupyterhub``) on 127.0.0.1:PORT + 2, told not to start a proxy of its own
  (``ConfigurableHTTPProxy.should_start = False``: both are daemons of this record, stopped by PID),
  its database and cookie secret in the directory;
- with JupyterHub's own **SharedPasswordAuthenticator** (its DummyAuthenticator with a password, renamed in
  JupyterHub 5.3) and one shared password (random, printed by ``up`` and
  kept in the directory, mode 0600): any user name logs in — for a test or a workshop on one machine,
  never for a class on the Internet (book/instructors.md: The Littlest JupyterHub, Zero to JupyterHub);
- and its **SimpleLocalProcessSpawner**: each student's notebook server (``jupyterhub-singleuser``,
  JupyterLab) runs as the user who ran ``up``, with ``HOME`` = ``DIR/home/STUDENT``. Every process it
  starts carries this hub's marker and token in its environment, so ``down`` finds the notebook
  servers and their kernels even when the hub died without stopping them.

Students open an **nbgitpuller** link (:func:`pull_link`): nbgitpuller (PyPI, a server extension of
each notebook server) clones the course — or the student template — into their home the first time
and merges the instructor's later changes without overwriting the student's, then opens the lab.
The instructor grades the homes with ``courselib grade --many DIR/home``.

``down`` stops the hub (which stops the notebook servers it knows), the proxy, then whatever still
carries the marker, and removes the directory and the record (only if they carry the token); on an
error, Ctrl-C, SIGTERM or SIGHUP during ``up`` the same happens before the error is shown
(:func:`courselib.live.daemons.bring_up`).
"""
from __future__ import annotations

import asyncio
import importlib.util
import os
import secrets
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from courselib.errors import CourseError, InputError
from courselib.live.cleanup import stop_pids
from courselib.live.daemons import (HOST, Daemon, Launcher, System, bring_up, cache_dir, check_ports,
                                    marked_pids, record_fields, status_of)
from courselib.live.state import StateFile

#: The proxy's public port; its API is BASE_PORT + 1 and the hub's own BASE_PORT + 2 (JupyterHub's
#: defaults are 8000, 8001 and 8081).
BASE_PORT = 18800
#: Environment variables carried by the hub and every process it starts: its directory and token.
MARKER = "COURSELIB_HUB_DIR"
TOKEN_ENV = "COURSELIB_HUB_TOKEN"
#: Environment variable naming the state file instead of ``<private dir>/hub.json``.
STATE_ENV = "COURSELIB_HUB_STATE"
#: The versions .ci/build.d/20-hub.sh installs (the npm proxy into the cache folder below).
PROXY_VERSION = "5.3.0"
PROXY_DIR = f"configurable-http-proxy-{PROXY_VERSION}"


def proxy_home() -> Path:
    """Where .ci/build.d/20-hub.sh installs the proxy: the build steps' cache folder (``cache_dir``:
    ``$COURSELIB_CACHE``, else ``$XDG_CACHE_HOME/allornothing`` or ~/.cache/allornothing)."""
    return cache_dir() / PROXY_DIR


#: Python packages the hub needs (the ``hub`` extra of pyproject.toml).
MODULES = {"jupyterhub": "jupyterhub", "nbgitpuller": "nbgitpuller", "jupyterlab": "jupyterlab"}
#: The folder nbgitpuller clones the course into, inside each home.
TARGET = "course"


# ----------------------------------------------------------------------------- availability

def proxy_binary() -> str | None:
    """configurable-http-proxy: on PATH, else where .ci/build.d/20-hub.sh installs it."""
    found = shutil.which("configurable-http-proxy")
    if found:
        return found
    local = proxy_home() / "node_modules" / ".bin" / "configurable-http-proxy"
    return str(local) if os.access(local, os.X_OK) else None


def unavailable_reason() -> str | None:
    """Why a hub cannot start here (``None``: it can)."""
    missing = [pkg for mod, pkg in MODULES.items() if importlib.util.find_spec(mod) is None]
    if missing:
        return (f"the Python package{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                f"{'are' if len(missing) > 1 else 'is'} not installed (pip install -e '.[hub]')")
    if shutil.which("node") is None:
        return "node is not installed (apt-get install nodejs npm)"
    if proxy_binary() is None:
        return ("configurable-http-proxy is not installed (.ci/build.d/20-hub.sh, or "
                f"npm install --prefix {proxy_home()} configurable-http-proxy@{PROXY_VERSION})")
    if shutil.which("git") is None:
        return "git is not installed (nbgitpuller clones with it)"
    return None


def check_available() -> None:
    reason = unavailable_reason()
    if reason:
        raise CourseError(f"no class server can start here: {reason}")


# ----------------------------------------------------------------------------- the record

def _record() -> StateFile:
    env = os.environ.get(STATE_ENV)
    return StateFile.at(env, "hub") if env else StateFile("hub")


def state_file() -> Path:
    return _record().path


@dataclass
class Hub(System):
    """A running (or starting) class server: its port, directory, course and processes."""
    port: int
    state_dir: Path
    course: str
    branch: str = "main"
    procs: list[Daemon] = field(default_factory=list)
    started_at: float = 0.0
    token: str = ""
    launcher: Launcher = HOST

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def homes(self) -> Path:
        """Every student's home (``courselib grade --many`` grades this folder)."""
        return self.state_dir / "home"

    @property
    def password_file(self) -> Path:
        return self.state_dir / "password"

    def password(self) -> str:
        return self.password_file.read_text().strip()

    def to_json(self) -> dict:
        return {"port": self.port, "state_dir": str(self.state_dir), "course": self.course,
                "branch": self.branch, "token": self.token, "started_at": self.started_at,
                "procs": [p.to_json() for p in self.procs], "launcher": self.launcher.to_json()}

    @classmethod
    def from_json(cls, d: dict) -> "Hub":
        state_dir, token, procs, started = record_fields(d)
        port = d["port"]
        if isinstance(port, bool) or not isinstance(port, int) or not 1024 <= port <= 65533:
            raise ValueError(f"port {port!r} is not a port")
        course, branch = d["course"], d.get("branch", "main")
        if not isinstance(course, str) or not isinstance(branch, str):
            raise ValueError("course or branch is not text")
        return cls(port, state_dir, course, branch, procs, started,
                   token, Launcher.from_json(d.get("launcher")))

    def save(self) -> None:
        _record().save(self.to_json())

    def marks(self) -> dict[str, str]:
        return {MARKER: str(self.state_dir), TOKEN_ENV: self.token}


def load_hub() -> Hub | None:
    """The hub in the record, or ``None``; a one-line error if the record is not one of ours."""
    return _record().load(Hub.from_json)


# ----------------------------------------------------------------------------- configuration

def course_url(course: str) -> str:
    """What nbgitpuller clones: a URL as given, a local git repository as ``file://`` + its path."""
    if "://" in course:
        return course
    path = Path(course).resolve()
    if not (path / ".git").exists() and not (path / "HEAD").is_file():
        raise InputError("not a git repository (nbgitpuller clones the course with git)", file=str(course),
                         field="--course", hint="give the course's repository (or the student template's)")
    return path.as_uri()


def pull_link(base: str, course: str, *, branch: str = "main", lab: str | None = None) -> str:
    """The nbgitpuller link: log in, clone ``course`` (``branch``) into ``~/course`` or merge its news,
    then open ``labs/LAB.ipynb`` in JupyterLab (the folder when no lab is named)."""
    path = f"lab/tree/{TARGET}" + (f"/labs/{lab}.ipynb" if lab else "")
    query = urllib.parse.urlencode({"repo": course, "branch": branch, "targetpath": TARGET, "urlpath": path})
    return f"{base.rstrip('/')}/hub/user-redirect/git-pull?{query}"


def render_config(hub: Hub, *, expose_app: bool = False) -> str:
    """jupyterhub_config.py for this hub (every value written out, nothing read from elsewhere)."""
    d = hub.state_dir
    args = ["--ServerApp.ip=127.0.0.1"]
    if os.geteuid() == 0:
        args.append("--ServerApp.allow_root=True")      # the notebook servers run as whoever ran `up`
    if expose_app:
        args.append("--LabApp.expose_app_in_browser=True")  # window.jupyterapp, for the browser test
    env = {MARKER: str(d), TOKEN_ENV: hub.token,
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "/usr/bin:/bin")]),
           "JUPYTER_CONFIG_DIR": str(d / "jupyter-config"), "JUPYTER_RUNTIME_DIR": str(d / "runtime"),
           "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "student", "GIT_AUTHOR_EMAIL": "student@localhost",
           "GIT_COMMITTER_NAME": "student", "GIT_COMMITTER_EMAIL": "student@localhost"}
    lines = [
        "# Written by `courselib classroom hub up` (courselib.live.hub); removed by `hub down`.",
        "c = get_config()  # noqa",
        "c.JupyterHub.ip = '127.0.0.1'",
        f"c.JupyterHub.port = {hub.port}",
        "c.JupyterHub.hub_ip = '127.0.0.1'",
        f"c.JupyterHub.hub_port = {hub.port + 2}",
        "c.ConfigurableHTTPProxy.should_start = False",
        f"c.ConfigurableHTTPProxy.api_url = 'http://127.0.0.1:{hub.port + 1}'",
        f"c.JupyterHub.db_url = {('sqlite:///' + str(d / 'jupyterhub.sqlite'))!r}",
        f"c.JupyterHub.cookie_secret_file = {str(d / 'cookie_secret')!r}",
        "c.JupyterHub.cleanup_servers = True",
        "c.JupyterHub.authenticator_class = 'shared-password'",
        f"c.SharedPasswordAuthenticator.user_password = open({str(hub.password_file)!r}).read().strip()",
        "c.Authenticator.allow_all = True",
        "c.Authenticator.admin_users = {'instructor'}",
        "c.JupyterHub.spawner_class = 'simple'",
        f"c.SimpleLocalProcessSpawner.home_dir_template = {str(hub.homes / '{username}')!r}",
        f"c.Spawner.cmd = [{sys.executable!r}, '-m', 'jupyterhub.singleuser']",
        f"c.Spawner.args = {args!r}",
        "c.Spawner.default_url = '/lab'",
        f"c.Spawner.environment = {env!r}",
        "c.Spawner.start_timeout = 120",
        "c.Spawner.http_timeout = 120",
    ]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- up / down

def _get(url: str, timeout: float = 2.0) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status
    except urllib.error.HTTPError as err:
        return err.code
    except (OSError, ValueError):
        return None


def up(*, course: str, port: int = BASE_PORT, branch: str = "main", timeout: float = 60.0,
       expose_app: bool = False, say=lambda msg: None) -> Hub:
    """Start the class server (or find the one running: idempotent for the same port and course)."""
    check_available()
    if isinstance(port, bool) or not isinstance(port, int) or not 1024 <= port <= 65533:
        raise InputError(f"{port!r} is not a port from 1024 to 65533 (the hub takes PORT to PORT + 2)",
                         field="--port")
    url = course_url(course)
    existing = load_hub()
    if existing is not None:
        if existing.all_ours():
            if (existing.port, existing.course) != (port, url):
                raise CourseError(f"a class server is already up on port {existing.port} for {existing.course}",
                                  hint="run `courselib classroom hub down` first")
            say(f"already up: {existing.url} (state in {existing.state_dir})")
            return existing
        say("found a stale record of a class server; cleaning it up")
        down(existing)
    check_ports([port, port + 1, port + 2], hint="stop what uses them, or choose another --port")
    return bring_up("courselib-hub-",
                    lambda token, d: Hub(port, d, url, branch, started_at=time.time(), token=token),
                    lambda hub: _start(hub, timeout=timeout, expose_app=expose_app, say=say), down)


def _start(hub: Hub, *, timeout: float, expose_app: bool, say) -> None:
    d = hub.state_dir
    for sub in ("log", "home", "jupyter-config", "runtime"):
        (d / sub).mkdir(mode=0o700)
    hub.save()
    fd = os.open(hub.password_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(secrets.token_urlsafe(12) + "\n")
    (d / "jupyterhub_config.py").write_text(render_config(hub, expose_app=expose_app))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTERHUB_", "JPY_"))}
    env.update(hub.marks())
    env["CONFIGPROXY_AUTH_TOKEN"] = secrets.token_hex(32)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "/usr/bin:/bin")])

    say(f"starting configurable-http-proxy on 127.0.0.1:{hub.port} (API {hub.port + 1})")
    hub.spawn("proxy", [proxy_binary(), "--ip", "127.0.0.1", "--port", str(hub.port),
                        "--api-ip", "127.0.0.1", "--api-port", str(hub.port + 1),
                        "--default-target", f"http://127.0.0.1:{hub.port + 2}",
                        "--error-target", f"http://127.0.0.1:{hub.port + 2}/hub/error"], env=env)
    hub.wait_for(lambda: _get(f"http://127.0.0.1:{hub.port + 1}/api/routes") == 403, timeout,
                 "configurable-http-proxy answering on its API port")

    say(f"starting JupyterHub on 127.0.0.1:{hub.port + 2} (SharedPasswordAuthenticator, SimpleLocalProcessSpawner)")
    hub.spawn("jupyterhub", [sys.executable, "-m", "jupyterhub", "-f", str(d / "jupyterhub_config.py")], env=env)
    hub.wait_for(lambda: _get(f"{hub.url}/hub/api") == 200, timeout, "JupyterHub answering through the proxy",
                 interval=0.5)
    say(f"up: {hub.url}/hub/login (any user name, password in {hub.password_file}); homes in {hub.homes}")


def status(hub: Hub | None = None) -> dict:
    hub = hub or load_hub()
    out = status_of(hub, _record())
    if hub is not None:
        out.update(url=hub.url, course=hub.course, homes=str(hub.homes), password_file=str(hub.password_file),
                   link=pull_link(hub.url, hub.course, branch=hub.branch),
                   students=sorted(p.name for p in hub.homes.iterdir()) if hub.homes.is_dir() else [])
    return out


def down(hub: Hub | None = None, *, say=lambda msg: None) -> dict:
    """Stop the hub (and the notebook servers it knows), the proxy, then every process still carrying the
    hub's marker and token; remove the directory and the record."""
    hub = hub or load_hub()
    if hub is None:
        say("no class server is recorded; nothing to stop")
        return {"stopped": [], "left": []}
    # JupyterHub stops the servers it spawned on SIGTERM (cleanup_servers): give it the time to.
    stopped, left = hub.stop([[p for p in hub.procs if p.role == "jupyterhub"]], grace=15.0)
    ours = {p.pid for p in hub.procs}
    late = [p for p in marked_pids(hub.marks()) if p not in ours]
    if late:
        left += stop_pids(late, grace=3.0)
        stopped += [{"role": "notebook server or kernel", "pid": p} for p in late]
    done, gone = hub.stop([[p for p in hub.procs if p.role == "proxy"]])
    stopped += done
    left += gone
    late = [p for p in marked_pids(hub.marks()) if p not in ours]
    if late:
        left += stop_pids(late, grace=2.0)
        stopped += [{"role": "notebook server or kernel", "pid": p} for p in late]
    say(f"stopped {len(stopped)} process{'es' if len(stopped) != 1 else ''}"
        + (f"; {len(left)} would not stop: {left}" if left else ""))
    out = {"stopped": stopped, "left": left, "kept_dir": None}
    if not left:
        out.update(hub.forget(_record()))
        if out["kept_dir"]:
            say(f"left {out['kept_dir']} in place: it is not the directory this hub made (no token of ours)")
    return out


def require_up() -> Hub:
    hub = load_hub()
    if hub is None or not hub.all_ours():
        raise CourseError("no class server is up", hint="start one with `courselib classroom hub up`")
    return hub



# ----------------------------------------------------------------------------- the pod on Kubernetes

#: The Zero to JupyterHub settings the instructors' page gives (values.yaml's singleuser block), as
#: KubeSpawner's traits: each student's pod guarantees and caps CPU and memory, keeps its home on a
#: PersistentVolumeClaim of its own, and runs the course's image.
KUBESPAWNER = {"cpu_guarantee": 0.5, "cpu_limit": 2.0, "mem_guarantee": "1G", "mem_limit": "2G",
               "storage_capacity": "2Gi"}

_NO_CLUSTER = """apiVersion: v1
kind: Config
clusters: [{name: none, cluster: {server: "http://127.0.0.1:1"}}]
contexts: [{name: none, context: {cluster: none, user: none}}]
current-context: none
users: [{name: none, user: {}}]
"""


def kubespawner_reason() -> str | None:
    """Why KubeSpawner's pod cannot be made here (``None``: it can)."""
    if importlib.util.find_spec("kubespawner") is None:
        return "the Python package jupyterhub-kubespawner is not installed (pip install -e '.[hub]')"
    return None


def kubespawner_pod(user: str, *, image: str, namespace: str = "default", hub_url: str = "http://hub:8081/hub/",
                    settings: dict | None = None) -> dict:
    """The pod KubeSpawner (its own ``get_pod_manifest``) creates for ``user`` under the instructors' page's
    Zero to JupyterHub settings, as the JSON the API server receives. No cluster is contacted: KubeSpawner
    loads a client configuration when it is made, so it is given one that points nowhere. The hub's API
    token for the pod is left empty (a real hub sets one per spawn)."""
    from kubernetes_asyncio.client import ApiClient
    from kubernetes_asyncio.config import kube_config
    from kubespawner import KubeSpawner
    from kubespawner.spawner import MockObject
    from traitlets.config import Config

    reason = kubespawner_reason()
    if reason:
        raise CourseError(f"cannot make KubeSpawner's pod: {reason}")
    if not user or not user.replace("-", "").replace(".", "").replace("_", "").isalnum():
        raise InputError(f"{user!r} is not a user name (letters, digits, '-', '.', '_')", field="STUDENT")
    c = Config()
    for key, value in {**KUBESPAWNER, **(settings or {})}.items():
        setattr(c.KubeSpawner, key, value)
    c.KubeSpawner.image = image
    c.KubeSpawner.namespace = namespace
    c.KubeSpawner.volumes = [{"name": "home", "persistentVolumeClaim": {"claimName": "claim-{username}"}}]
    c.KubeSpawner.volume_mounts = [{"name": "home", "mountPath": "/home/jovyan"}]
    who = MockObject()
    who.name, who.id, who.url = user, 1, f"/user/{user}/"
    the_hub = MockObject()
    the_hub.public_host, the_hub.url, the_hub.base_url = "", hub_url, "/hub/"
    the_hub.api_url = urllib.parse.urljoin(hub_url, "api")

    async def make() -> dict:
        spawner = KubeSpawner(config=c, user=who, hub=the_hub, api_token="", _mock=True,
                              oauth_client_id=f"jupyterhub-user-{user}")
        pod = await spawner.get_pod_manifest()
        async with ApiClient() as client:
            out = client.sanitize_for_serialization(pod)
        await spawner.api.api_client.close()     # KubeSpawner's shared client: never used here
        return out

    with tempfile.TemporaryDirectory(prefix="courselib-kubespawner-") as tmp:
        kubeconfig = Path(tmp) / "config"
        kubeconfig.write_text(_NO_CLUSTER)
        old = kube_config.KUBE_CONFIG_DEFAULT_LOCATION   # read from $KUBECONFIG when it was imported
        kube_config.KUBE_CONFIG_DEFAULT_LOCATION = str(kubeconfig)
        try:
            pod = asyncio.run(make())
        finally:
            kube_config.KUBE_CONFIG_DEFAULT_LOCATION = old
    pod = {"apiVersion": "v1", "kind": "Pod", **pod}
    pod["metadata"]["namespace"] = namespace     # KubeSpawner names it when it creates the pod
    return pod
