"""The floors of courselib (ARCHITECTURE.md) and who may import whom, enforced on every import.

The checker (tests/import_rules.py) reads the source, imports nothing, and sees every import
statement, at the top of a module or inside a function. It is proven on a small package written
into a temporary folder: it finds a planted cycle, a planted upward import, a sideways one, a
private name taken from another package, a light module imported lazily, and passes once they are
taken out; then it runs on src/courselib.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from import_rules import Rules, imports, violations

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"

#: The floors, lowest first: a module imports from its own floor or below, never above.
FLOORS = [
    ("base", ["", "errors", "units", "course", "data", "versions"]),   # the package, errors, units, the course's table, the versions
    ("model", ["model"]),                                   # pure, typed, no I/O
    ("io", ["io"]),                                         # readers with located errors -> model objects
    ("sim, lint", ["sim", "lint"]),                         # simpy processes over the model; lint rules
    ("live, grading, problems", ["live", "grading", "problems"]),  # the real system; the grader; practice
    ("plots", ["plots"]),                                   # figures and text views of results
    ("cli", ["cli", "__main__"]),                           # the `courselib` command
    ("widgets", ["widgets"]),                               # the playgrounds (ipywidgets)
    ("static", ["static"]),                                 # the website's kernel-free views and self-checks
    ("book", ["book"]),                                     # helpers for the chapters' cells
]

#: Packages side by side on one floor that know nothing of each other.
SIBLINGS = [{"sim", "lint"}, {"live", "grading", "problems"}]

#: Packages only some may import. The CLI is the application shell: nothing builds on it. live is the
#: real system: only the CLI (and the book's chapters, outside the library) reach it, so a page,
#: a widget or the model never needs a kernel's privileges or a daemon to import.
RESERVED = {
    "cli": {"cli", "__main__"},
    "live": {"live", "cli"},
}

#: Third-party modules a function may import when it needs them (import times measured on the
#: course's 2-core machine with -X importtime, under load): each is slow to load or optional.
HEAVY = {
    "matplotlib": "figures: about 0.6 s (pyplot 1.7 s); a command or page without a figure never loads it",
    "numpy": "about 0.4 s; only the policies' fast paths and some figures use it",
    "simpy": "the simulators' process engine, about 0.15 s; readers and the CLI's help do not need it",
    "yaml": "PyYAML, about 60 ms; only the YAML readers need it",
    "ipywidgets": "the playgrounds, inside a Jupyter kernel only",
    "IPython": "inside a Jupyter kernel only",
    "traitlets": "inside a Jupyter kernel only",
    "nbformat": "notebooks (grading, labs): about 3 s with jsonschema",
    "nbclient": "runs notebooks (grading)",
    "jupyter_client": "runs notebooks (grading)",
    "ipykernel": "a Jupyter kernel's machinery, about 0.3 s CPU; only the grading kernel under nbval",
    "jsonschema": "about 7 s under load; validation of manifests and notebooks only",
    "referencing": "jsonschema's references; validation only",
    "kubernetes": "the Kubernetes client, about 6 s; the live control plane only",
    "kubernetes_validate": "offline manifest validation, about 6 s; `lint` of manifests only",
    "dockerfile": "the compiled Dockerfile parser binding: optional (the pure reader is the fallback)",
    "tqdm": "a progress bar for long replays: optional",
    "myst_nb": "the book's glue: the book build only",
    "mpi4py": "MPI for `courselib barrier real`: optional extra",
    "numba": "the compiled Slurm backfill pass and EASY replay (the fast extra): about 0.5 s; thousands of jobs only",
    "kubespawner": "KubeSpawner (the hub extra): the pod a student gets on Kubernetes only",
    "kubernetes_asyncio": "KubeSpawner's client (the hub extra): serialises that pod only",
}

#: Imports known to break a rule, each with who removes it; the list empties as they land, and an
#: entry that no longer matches anything fails the test (take it out).
KNOWN: list[tuple[str, str, str, str]] = [
    # (rule, importing module, imported module, who removes it); * matches any part of a name.
    # Empty: the grader's circle is open and live/'s and grading/'s function-level imports are at the top.
]

RULES = Rules(floors=FLOORS, siblings=SIBLINGS, reserved=RESERVED, lazy_ok=("cli", "__main__"), heavy=HEAVY,
              known=KNOWN)


# ---- the checker, proven on a planted package -------------------------------------------------------
def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    src = tmp_path / "src"
    for name, text in files.items():
        path = src / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return src


PLANT_RULES = Rules(floors=[("base", ["", "core"]), ("model", ["model"]), ("io", ["io"]), ("views", ["views", "ui"])],
                    siblings=[{"views", "ui"}], reserved={"ui": {"ui"}}, lazy_ok=("ui",), heavy={"numpy": "slow"})

CLEAN = {
    "__init__.py": "",
    "core.py": "X = 1\n",
    "model/__init__.py": "",
    "model/a.py": "from pkg.core import X\n",
    "model/b.py": "from pkg.model.a import X\n",
    "io/__init__.py": "",
    "io/read.py": """
        import json

        from pkg.model import b


        def load():
            import numpy   # heavy: allowed inside a function
            return numpy, json, b
    """,
    "views/__init__.py": "",
    "views/show.py": "from pkg.io.read import load\n",
    "ui/__init__.py": "",
    "ui/main.py": """
        def run():
            from pkg.io import read   # the ui may import lazily
            return read
    """,
}


def test_the_planted_package_passes_as_written(tmp_path):
    src = _package(tmp_path, CLEAN)
    assert violations(src, "pkg", PLANT_RULES) == []
    found, mods = imports(src, "pkg")
    assert ("pkg.io.read", "pkg.model.b") in {(i.source, i.target) for i in found}  # a submodule, resolved
    assert any(i.lazy and i.target == "numpy" for i in found)


@pytest.mark.parametrize("plant, expected", [
    ({"model/a.py": "from pkg.model.b import X\n"}, "import cycle among pkg.model.a, pkg.model.b"),
    ({"model/a.py": "from pkg.core import X\n\n\ndef f():\n    from pkg.model import b\n    return b\n"},
     "import cycle among pkg.model.a, pkg.model.b"),                  # a lazy import closes a circle too
    ({"model/a.py": "from pkg.core import X\nfrom pkg.io import read\n"}, "an upward import (floor 'model' below 'io')"),
    ({"model/a.py": "from pkg.core import X\n\n\ndef f():\n    from pkg.views import show\n"},
     "an upward import (floor 'model' below 'views')"),
    ({"views/show.py": "from pkg.ui.main import run\n"}, "a sideways import between 'views' and 'ui'"),
    ({"io/read.py": "from pkg.ui import main\n"}, "only ui may import 'ui'"),
    ({"model/b.py": "from pkg.core import _hidden\n"}, "imports _hidden from pkg.core: a private name"),
    ({"io/read.py": "def f():\n    from pkg.model import b\n    return b\n"}, "it is light"),
    ({"io/read.py": "def f():\n    import json\n    return json\n"}, "not a heavy optional dependency"),
    ({"extra/__init__.py": "", "extra/x.py": "from pkg.core import X\n"}, "'extra' is on no floor"),
])
def test_the_checker_finds_a_planted_break_and_passes_without_it(tmp_path, plant, expected):
    src = _package(tmp_path, {**CLEAN, **plant})
    found = violations(src, "pkg", PLANT_RULES)
    assert any(expected in v for v in found), found
    for name in plant:  # take the plant out: clean again
        if name in CLEAN:
            (src / "pkg" / name).write_text(textwrap.dedent(CLEAN[name]))
        else:
            (src / "pkg" / name).unlink()
    assert violations(src, "pkg", PLANT_RULES) == []


def test_a_private_name_is_shared_within_its_own_package_only(tmp_path):
    src = _package(tmp_path, {**CLEAN, "model/b.py": "from pkg.model.a import X, _y\n", "model/a.py": "X = _y = 1\n"})
    assert violations(src, "pkg", PLANT_RULES) == []
    (src / "pkg" / "model" / "deep").mkdir()
    (src / "pkg" / "model" / "deep" / "__init__.py").write_text("")
    (src / "pkg" / "model" / "deep" / "c.py").write_text("from pkg.model.a import _y\n")  # a package inside: another
    assert [v for v in violations(src, "pkg", PLANT_RULES) if "private" in v]


def test_a_known_break_is_listed_until_it_goes_and_a_stale_entry_fails(tmp_path):
    src = _package(tmp_path, {**CLEAN, "io/extra.py": "Y = 2\n", "model/a.py": "from pkg.core import X\nfrom pkg.io.extra import Y\n"})
    known = Rules(**{**PLANT_RULES.__dict__, "known": [("upward", "pkg.model.a", "pkg.io.extra", "helper x, issue 1")]})
    assert violations(src, "pkg", known) == []
    (src / "pkg" / "model" / "a.py").write_text(CLEAN["model/a.py"])
    assert any("no longer breaks" in v and "helper x, issue 1" in v for v in violations(src, "pkg", known))


# ---- courselib --------------------------------------------------------------------------------------
def test_every_top_level_name_of_courselib_is_on_a_floor():
    names = {p.stem if p.is_file() else p.name for p in (SRC / "courselib").iterdir()
             if (p.suffix == ".py" or (p / "__init__.py").is_file())}
    on_floors = {n for _, parts in FLOORS for n in parts} | {"__init__"}
    assert names <= on_floors, names - on_floors


def test_courselib_keeps_its_floors():
    """No import cycle, no upward or sideways import, no private name of another package, no
    lazy import of a light module outside the CLI (the rules in tests/import_rules.py)."""
    found = violations(SRC, "courselib", RULES)
    assert not found, "\n".join(found)
