"""The live storey's rules (ARCHITECTURE.md, "The live storey"), checked from the source.

- A real system is a package on the shared storey (``live/daemons.py``, ``live/recorded.py``,
  ``live/replays.py``, ``live/nodes.py``): what two systems share lives there once, so no block of
  six or more lines is repeated between ``live/kube`` and ``live/slurm``.
- The storey names no system: it imports no package of ``live/`` built on it.
- ``live_or_recorded`` is defined once (``recorded.py``); each system gives it a ``Source``.
"""
from __future__ import annotations

import ast
from pathlib import Path

LIVE = Path(__file__).resolve().parents[1] / "src" / "courselib" / "live"
STOREY = ("daemons.py", "recorded.py", "replays.py", "nodes.py", "state.py", "cleanup.py")
SYSTEMS = ("kube", "slurm", "container")
WINDOW = 6


def _lines(path: Path) -> list[str]:
    """The file's lines, stripped, without blank lines (the unit the rule counts)."""
    return [ln.strip() for ln in path.read_text().splitlines() if ln.strip()]


def _windows(folder: Path) -> dict[tuple[str, ...], str]:
    out: dict[tuple[str, ...], str] = {}
    for path in sorted(folder.rglob("*.py")):
        lines = _lines(path)
        for k in range(len(lines) - WINDOW + 1):
            block = tuple(lines[k:k + WINDOW])
            # a run of closing brackets and docstring quotes says nothing
            if sum(len(ln) > 12 for ln in block) >= 3:
                out.setdefault(block, f"{path.relative_to(folder.parent)}")
    return out


def repeated_blocks(a: Path, b: Path) -> list[str]:
    wa, wb = _windows(a), _windows(b)
    return [f"{wa[w]} ~ {wb[w]}:\n    " + "\n    ".join(w) for w in wa.keys() & wb.keys()]


def test_no_block_of_six_lines_is_repeated_between_the_kube_and_slurm_packages():
    found = repeated_blocks(LIVE / "kube", LIVE / "slurm")
    assert not found, "move what they share to the storey (live/daemons.py, replays.py, nodes.py):\n" + \
        "\n".join(found[:5])


def test_the_check_finds_a_planted_copy(tmp_path):
    """The rule can fail: six lines of the Slurm cluster copied into a kube module are found."""
    (tmp_path / "kube").mkdir()
    (tmp_path / "slurm").mkdir()
    source = _lines(LIVE / "slurm" / "cluster.py")
    start = next(k for k, ln in enumerate(source) if ln.startswith("def render_slurm_conf"))
    (tmp_path / "slurm" / "a.py").write_text("\n".join(source))
    (tmp_path / "kube" / "b.py").write_text("x = 1\n" + "\n".join(source[start:start + 8]) + "\ny = 2\n")
    assert repeated_blocks(tmp_path / "kube", tmp_path / "slurm")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module} | \
        {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}


def test_the_storey_imports_no_system_built_on_it():
    bad = [f"{name} imports {m}" for name in STOREY for m in _imports(LIVE / name)
           if any(m == f"courselib.live.{s}" or m.startswith(f"courselib.live.{s}.") for s in SYSTEMS)]
    assert not bad, bad


def definitions(root: Path, name: str) -> list[str]:
    """Every module under ``root`` that defines a function or class called ``name``."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.py")
                  if any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == name
                         for n in ast.walk(ast.parse(p.read_text()))))


def test_live_or_recorded_is_defined_once(tmp_path):
    """One call shape, one definition (recorded.py); a system gives it a ``Source``, it does not wrap it."""
    assert definitions(LIVE.parent, "live_or_recorded") == ["live/recorded.py"]
    (tmp_path / "memcg.py").write_text("def live_or_recorded():\n    pass\n")
    assert definitions(tmp_path, "live_or_recorded") == ["memcg.py"]  # the check sees a planted wrapper


def test_every_build_step_and_courselib_agree_where_builds_go(tmp_path, monkeypatch):
    """What a build step installs, courselib finds: every step names the one cache folder of
    ``daemons.cache_dir`` ($COURSELIB_CACHE, else $XDG_CACHE_HOME or ~/.cache, then allornothing). The
    hub's proxy step and ``hub.proxy_binary`` once looked in ~/.cache alone, so with $COURSELIB_CACHE set
    the proxy was installed where courselib's hub never looked for it."""
    import os

    from courselib.live import hub
    root = LIVE.parents[2]
    expression = "${COURSELIB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/allornothing}"
    steps = sorted((root / ".ci" / "build.d").glob("*.sh")) + [root / "k8s" / "build.sh"]
    for step in steps:
        text = step.read_text()
        if "allornothing" in text:                          # (10-k8s.sh only runs k8s/build.sh)
            assert expression in text and ".cache/allornothing" not in text.replace(expression, ""), step
    monkeypatch.setenv("COURSELIB_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", "/nonexistent")                 # not on PATH: the build step's copy
    proxy = tmp_path / hub.PROXY_DIR / "node_modules" / ".bin" / "configurable-http-proxy"
    proxy.parent.mkdir(parents=True)
    proxy.write_text("#!/bin/sh\n")
    proxy.chmod(0o755)
    assert hub.proxy_binary() == str(proxy)
    assert os.access(proxy, os.X_OK)


def test_a_crd_whose_conditions_are_still_null_is_waited_for():
    """kube/validate.ensure_standin_crds waits until each stand-in CRD is Established. Just after it is
    created the API server may answer with ``"conditions": null`` (seen once in a full run on v1.37.2:
    TypeError: 'NoneType' object is not iterable); that is "not yet", not a crash."""
    from courselib.live.kube import validate

    class Api:
        def __init__(self):
            self.gets = 0

        def create(self, path, body, ok_exists=False):
            return body

        def raw(self, method, path):
            self.gets += 1
            if self.gets == 1:
                return {"status": {"conditions": None}}
            if self.gets == 2:
                return {"status": None}
            return {"status": {"conditions": [{"type": "Established", "status": "True"}]}}

    api = Api()
    validate.ensure_standin_crds(api, timeout=5)
    assert api.gets >= 3
