"""environment.yml (Binder) and pyproject.toml list the same dependencies with the same ranges."""
from __future__ import annotations

import re
import tomllib

import yaml


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _split(req: str) -> tuple[str, str]:
    m = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*)$", req)
    return _norm(m.group(1)), m.group(2).replace(" ", "")


def test_environment_yml_matches_pyproject(root):
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    wanted = dict(_split(r) for r in project["dependencies"])
    for extra in ("io", "book", "test"):
        wanted.update(_split(r) for r in project["optional-dependencies"][extra])
    env = yaml.safe_load((root / "environment.yml").read_text())
    listed = dict(_split(d) for d in env["dependencies"] if isinstance(d, str) and not d.startswith(("python", "pip")))
    listed.update(_split(d) for dep in env["dependencies"] if isinstance(dep, dict) for d in dep.get("pip", []))
    assert listed == wanted


def test_dev_extra_pulls_every_other_extra(root):
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    extras = set(project["optional-dependencies"]) - {"dev"}
    assert project["optional-dependencies"]["dev"] == [f"courselib[{','.join(sorted(extras))}]"]
