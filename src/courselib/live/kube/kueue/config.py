"""What the real Kueue manager makes of a configuration, asked of the manager binary itself.

The manager reads its ``--config`` file before it talks to any API server (``cmd/kueue/main.go``
L150–154 of v0.17.1: ``config.Load`` decodes strictly, defaults and validates, and the manager exits
with "Unable to load the configuration" if that fails; if it succeeds it logs "Successfully loaded
configuration" with the whole defaulted configuration, L636). So courselib runs the pinned binary
with the file and a kubeconfig path that does not exist: the manager says what it read, or why it
refused it, and stops at ``GetConfigOrDie`` (L237) — no control plane, no port, nothing left behind.

That answers the questions the book's version facts raise, on the real program:

- a ``v1beta2`` configuration that writes v1beta1's ``waitForPodsReady.enable: true`` is refused
  (strict decoding: ``pkg/config/config.go`` L57);
- ``waitForPodsReady: {}`` without a ``timeout`` is refused at v0.17 ("must be specified",
  ``pkg/config/validation.go`` L201–208);
- a configuration without the block leaves it off at v0.17 (the defaulted configuration has none).

:data:`CASES` are those configurations; :func:`check_cases` runs them, :func:`record` writes the run the
book shows where the binary is not built (``courselib kube kueue-config --cases --record FILE``).
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from courselib.errors import CourseError, InputError
from courselib.io.yamlfile import load_all_text, read_text
from courselib.live import recorded
from courselib.live.kube.kueue import manager
from courselib.live.kube.result import LIVE_ENV

LOADED = "Successfully loaded configuration"
REFUSED = "Unable to load the configuration"
HEADER = f"apiVersion: {manager.CONFIG_API}\nkind: Configuration\n"
RECORDING = "kube-kueue-config.json"
RECORDED_BY = "courselib kube kueue-config --cases --record"

#: The configurations the book asks the manager about: (name, what a reader might write).
CASES = (
    ("no waitForPodsReady block", HEADER),
    ("v1beta1's words in a v1beta2 file: enable: true", HEADER + "waitForPodsReady:\n  enable: true\n"),
    ("the block without a timeout", HEADER + "waitForPodsReady: {}\n"),
    ("the block with timeout: 30m", HEADER + "waitForPodsReady:\n  timeout: 30m\n"),
    ("the old v1beta1 configuration with enable: true",
     "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nwaitForPodsReady:\n  enable: true\n"),
)


@dataclass(frozen=True)
class Loaded:
    """The manager's answer for one configuration."""
    name: str
    given: str
    accepted: bool
    error: str | None = None           # the manager's own words when it refused the file
    wait_for_pods_ready: dict | None = None   # the defaulted block (None: absent, so off)
    version: str = manager.KUEUE_VERSION

    @property
    def field(self) -> str | None:
        """The field the manager's error names (``waitForPodsReady.enable``), if any."""
        if not self.error:
            return None
        if 'unknown field "' in self.error:
            return self.error.split('unknown field "', 1)[1].split('"', 1)[0]
        head = self.error.split(":", 1)[0].strip()
        return head if head and " " not in head else None

    def summary(self) -> str:
        if not self.accepted:
            return f"refused: {self.error}"
        w = self.wait_for_pods_ready
        if not w:
            return "accepted; waitForPodsReady off (no block after defaulting)"
        return (f"accepted; waitForPodsReady on: timeout {w.get('timeout')}, recoveryTimeout "
                f"{w.get('recoveryTimeout')}, blockAdmission {str(w.get('blockAdmission')).lower()}")

    def to_dict(self) -> dict:
        return asdict(self)


def _messages(output: str) -> list[dict]:
    out = []
    for line in output.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def load(text: str, *, name: str = "", timeout: float = 60.0) -> Loaded:
    """Give ``text`` (a Kueue Configuration) to the pinned manager and read its answer."""
    import yaml
    why = manager.binary_reason()
    if why:
        raise CourseError(why)
    with tempfile.TemporaryDirectory(prefix="courselib-kueue-config-") as tmp:
        cfg = Path(tmp) / "config.yaml"
        cfg.write_text(text)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tmp}   # no KUBECONFIG
        argv = [str(manager.binary()), "--config", str(cfg), "--kubeconfig", str(Path(tmp) / "none"),
                "--zap-log-level", "info"]
        try:
            done = subprocess.run(argv, cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise recorded.OutOfTime(f"the Kueue manager did not answer within {timeout:g} s") from None
    msgs = _messages(done.stdout + "\n" + done.stderr)
    for m in msgs:
        if m.get("msg") == REFUSED:
            return Loaded(name, text, False, error=str(m.get("error", "")))
        if m.get("msg") == LOADED:
            config = yaml.safe_load(m.get("config") or "") or {}
            return Loaded(name, text, True, wait_for_pods_ready=config.get("waitForPodsReady"))
    raise CourseError(f"the Kueue manager said neither {LOADED!r} nor {REFUSED!r} "
                      f"(exit {done.returncode}): {(done.stderr or done.stdout).strip()[-300:]}")


def locate(text: str, field: str | None, file: str) -> int | None:
    """The line of ``field`` (``waitForPodsReady.enable``) in ``text``, or of its deepest parent."""
    if not field:
        return None
    try:
        docs = load_all_text(text, file=file)
    except InputError:
        return None
    node = docs[0] if docs else None
    line = getattr(node, "line", None)
    for part in field.split("."):
        if isinstance(node, dict) and part in node:
            line = node.line_of(part) if hasattr(node, "line_of") else line
            node = node[part]
        else:
            break
    return line


def check_file(path: str, *, timeout: float = 60.0) -> tuple[Loaded, int | None]:
    """The manager's answer for the configuration file at ``path``, and the line it objects to."""
    text = read_text(path, "manifest")
    got = load(text, name=str(path), timeout=timeout)
    return got, locate(text, got.field, str(path))


def check_cases(timeout: float = 60.0) -> list[Loaded]:
    return [load(text, name=name, timeout=timeout) for name, text in CASES]


def format_cases(results: list[Loaded]) -> str:
    version = results[0].version if results else manager.KUEUE_VERSION
    lines = [f"What the Kueue {version} manager makes of each configuration:"]
    for r in results:
        lines.append(f"- {r.name}: {r.summary()}")
    return "\n".join(lines)


def record(path, results: list[Loaded]) -> Path:
    """Write a run of :data:`CASES` (the book's fallback); never overwrites a file."""
    return recorded.write(path, {"recorded_by": RECORDED_BY,
                                 "recorded_on": f"{recorded.machine_note()}, Kueue {manager.KUEUE_VERSION}",
                                 "recorded_at": time.strftime("%Y-%m-%d", time.gmtime()),
                                 "versions": {"kueue": manager.KUEUE_VERSION},
                                 "results": [r.to_dict() for r in results]})


def load_recorded(name: str = RECORDING) -> tuple[list[Loaded], dict]:
    data = recorded.read(name, "") if name.endswith(".json") and os.sep in name else recorded.load(name)
    return [Loaded(**r) for r in data["results"]], data


def source() -> recorded.Source[list[Loaded]]:
    """The cases asked of the built manager (with ``COURSELIB_LIVE=1``), else the recording."""

    def unavailable() -> str | None:
        if os.environ.get(LIVE_ENV) != "1":
            return f"{LIVE_ENV} is not 1"
        return manager.binary_reason()

    def recording() -> recorded.Recording[list[Loaded]]:
        results, data = load_recorded()
        return recorded.Recording(results, data["recorded_on"], data["recorded_at"])
    return recorded.Source(check_cases, recording, unavailable)
