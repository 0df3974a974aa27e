"""The layers point one way (DESIGN.md §3): the model is pure, the simulation does not draw,
and importing courselib stays light. Checked from the source, so a new module cannot slip by."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "courselib"

FORBIDDEN = {
    "model": {"simpy", "matplotlib", "ipywidgets", "yaml", "IPython",
              "courselib.sim", "courselib.io", "courselib.live", "courselib.cli", "courselib.plots",
              "courselib.widgets"},
    "sim": {"matplotlib", "ipywidgets", "IPython", "courselib.cli", "courselib.plots", "courselib.widgets"},
    "io": {"matplotlib", "ipywidgets", "simpy", "courselib.cli", "courselib.plots", "courselib.widgets"},
}


def imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports_point_down(layer):
    bad = []
    for path in sorted((SRC / layer).rglob("*.py")):
        for name in imports(path):
            if any(name == f or name.startswith(f + ".") for f in FORBIDDEN[layer]):
                bad.append(f"{path.relative_to(SRC)} imports {name}")
    assert not bad, "\n".join(bad)


def test_import_courselib_and_its_model_is_light():
    code = ("import sys, courselib, courselib.model.cost, courselib.model.badness, courselib.model.cluster; "
            "print(','.join(m for m in ('matplotlib', 'simpy', 'ipywidgets', 'yaml', 'IPython') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"importing the model pulled in: {out}"
