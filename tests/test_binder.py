"""Binder as a reader meets it: the image is environment.yml + postBuild alone, and it runs the course.

The slow test rebuilds that image's Python side here: a fresh venv gets exactly environment.yml's
package set from the package index (uv, as `make setup` installs, or pip; conda is not on this machine),
postBuild runs in a copy of the repository, and then courselib imports and a chapter executes on that
environment's own kernel.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from test_book import page_path, toc_files

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = "book/08-cost.md"   # pure courselib, runs in seconds

# conda-forge name -> PyPI name where they differ (none today; a new one belongs here)
CONDA_TO_PIP: dict[str, str] = {}


def environment_requirements() -> tuple[str, list[str]]:
    """(python version, pip requirement strings) from environment.yml."""
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    python, reqs = None, []
    for dep in env["dependencies"]:
        if isinstance(dep, dict) and list(dep) == ["pip"]:   # installed from PyPI as written
            reqs += dep["pip"]
            continue
        if not isinstance(dep, str):
            raise AssertionError(f"environment.yml: nested {dep!r} is not expected")
        name = re.match(r"[A-Za-z0-9_.\-]+", dep).group(0)
        if name == "python":
            python = dep.split("=", 1)[1]
        elif name != "pip":
            reqs.append(CONDA_TO_PIP.get(name, name) + dep[len(name):])
    assert python, "environment.yml pins no python"
    return python, reqs


def test_binder_files_are_there_and_postbuild_is_executable():
    modes = subprocess.run(["git", "ls-files", "-s", "postBuild", "environment.yml"], cwd=ROOT,
                           capture_output=True, text=True).stdout
    if not modes.strip():
        pytest.skip("not a git checkout")
    assert re.search(r"^100755 \S+ \d\tpostBuild$", modes, re.M), "postBuild must be executable in git"
    assert "environment.yml" in modes
    text = (ROOT / "postBuild").read_text()
    assert text.startswith("#!/bin/bash") and "set -euo pipefail" in text
    assert "jupytext-config set-default-viewer" in text and "markdown" in text, \
        "postBuild makes JupyterLab open the .md chapters (the launch buttons' targets) as notebooks"


def test_every_page_binder_can_open_is_in_the_repository():
    """The launch buttons open lab/tree/<the page's source>: each such file is tracked by git."""
    tracked = set(subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split())
    if not tracked:
        pytest.skip("not a git checkout")
    for entry in toc_files():
        source = page_path(entry).relative_to(ROOT).as_posix()
        assert source in tracked, f"{source} is in the table of contents but not committed"


def _offline_reason(python: Path) -> str | None:
    probe = subprocess.run([str(python), "-m", "pip", "download", "--no-deps", "--quiet", "-d",
                            str(python.parent.parent / "probe"), "simpy"], capture_output=True, text=True,
                           timeout=300)
    if probe.returncode != 0:
        return "the package index is not reachable: " + (probe.stderr.strip().splitlines() or ["?"])[-1]
    return None


def _installer(python: Path) -> list[str]:
    """What installs environment.yml's packages into ``python``'s venv: uv, the installer `make setup` uses
    (beside this interpreter), with its cache; pip where uv is not there. Either resolves the whole set
    at once and fails on a conflict. With warm caches uv took 1.8 CPU s and pip 38 (2026-12-05, issue 34)."""
    uv = shutil.which("uv", path=str(Path(sys.executable).parent))
    if uv:
        return [uv, "pip", "install", "--quiet", "--python", str(python)]
    return [str(python), "-m", "pip", "install", "--quiet", "--no-compile"]


def _index_env() -> dict[str, str]:
    """pip's index settings passed on under uv's names, as `make setup` does (the Makefile's UV_ENV)."""
    names = {"PIP_INDEX_URL": "UV_INDEX_URL", "PIP_EXTRA_INDEX_URL": "UV_EXTRA_INDEX_URL",
             "PIP_FIND_LINKS": "UV_FIND_LINKS"}
    return {**os.environ, **{uv: os.environ[pip] for pip, uv in names.items() if os.environ.get(pip)}}


@pytest.mark.slow
def test_binder_environment_installs_and_runs_a_chapter(tmp_path):
    version, reqs = environment_requirements()
    if not sys.version.startswith(version):
        pytest.skip(f"environment.yml asks for Python {version}; this is {sys.version.split()[0]}")
    venv = tmp_path / "binder"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    reason = _offline_reason(py)
    if reason:
        pytest.skip(reason)
    done = subprocess.run([*_installer(py), *reqs], capture_output=True, text=True, timeout=1500, env=_index_env())
    assert done.returncode == 0, "environment.yml's packages do not install together:\n" + done.stderr[-3000:]

    # postBuild, as repo2docker runs it: in the repository, with the environment first on PATH.
    repo = tmp_path / "repo"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True).stdout.split("\0")
    for f in filter(None, files):
        if (ROOT / f).is_file():
            (repo / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, repo / f)
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "PATH": f"{venv / 'bin'}:{os.environ['PATH']}", "HOME": str(home),
           "VIRTUAL_ENV": str(venv), "MPLBACKEND": "Agg"}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(["bash", str(repo / "postBuild")], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, "postBuild failed:\n" + (done.stdout + done.stderr)[-3000:]
    viewers = subprocess.run([str(venv / "bin" / "jupytext-config"), "list-default-viewer"], env=env,
                             capture_output=True, text=True).stdout
    assert "markdown: Jupytext Notebook" in viewers, viewers

    # courselib comes from the environment (not from this checkout), and a chapter runs on its kernel.
    run = f"""
import courselib, jupytext, nbclient, pathlib
assert pathlib.Path(courselib.__file__).is_relative_to({str(venv)!r}), courselib.__file__
page = pathlib.Path({str(repo / CHAPTER)!r})
nb = jupytext.read(page)
nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                        resources={{"metadata": {{"path": str(page.parent)}}}}).execute()
errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"]
assert not errors, errors
print("ran", sum(c.cell_type == "code" for c in nb.cells), "cells of", page.name, "with courselib from", courselib.__file__)
"""
    done = subprocess.run([str(py), "-c", run], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{CHAPTER} does not run in the Binder environment:\n" + (done.stdout + done.stderr)[-3000:]
    assert "ran " in done.stdout
