"""`make book` builds with warnings as errors, and the site test builds as `make book` does (audit32 §4-5).

The Makefile's `JB_FLAGS` must keep `-W` (a warning is an error), `-n` (nitpicky: a reference to nothing
warns) and `--keep-going` (every warning reported before the build fails); `make book` and `make
book-student` must pass them to `jupyter-book build`, and tests/test_site.py's build must use every one of
them. The site test itself builds (tier `site`, `make test` only); this file only reads the Makefile, the
site test's source and _config.yml, so it runs in `make test-fast`, where a change that drops `-W` would
otherwise pass every fast test. _config.yml may silence one warning category only, the one it has silenced
since the first commit.

Each planted slip below must be found, and the real files must have none.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WARNINGS_AS_ERRORS = ("-W", "-n", "--keep-going")
SILENCED = ["mystnb.unknown_mime_type"]   # a MIME type a page's output has that Sphinx cannot render


def variable(makefile: str, name: str) -> list[str]:
    """Every assignment of ``name`` in the Makefile: [(operator, value)], as written."""
    return re.findall(rf"^{name}\s*([:?+!]?=)\s*(.*?)\s*$", makefile, re.M)


def recipe(makefile: str, target: str) -> tuple[str, list[str]]:
    """``target``'s prerequisites and recipe lines."""
    m = re.search(rf"^{re.escape(target)}:(.*)$", makefile, re.M)
    if m is None:
        return "", []
    lines = []
    for line in makefile[m.end() + 1:].splitlines():
        if not line.startswith("\t"):
            break
        lines.append(line.strip())
    return m.group(1), lines


def site_build_arguments(source: str) -> list[str]:
    """The literal arguments of the `jupyter-book build` that tests/test_site.py's ``_build`` runs."""
    tree = ast.parse(source)
    build = next(f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name == "_build")
    runs = [c for c in ast.walk(build) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
            and c.func.attr == "run" and c.args and isinstance(c.args[0], ast.List)]
    assert len(runs) == 1, "tests/test_site.py's _build should run one command"
    return [e.value for e in runs[0].args[0].elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]


def problems(makefile: str, site_test: str, config: str) -> list[str]:
    """What keeps a book build from failing on a warning; [] when nothing does."""
    found = []
    assignments = variable(makefile, "JB_FLAGS")
    if len(assignments) != 1 or assignments[0][0] not in (":=", "="):
        found.append(f"JB_FLAGS should be set once, with := (not ?=, which the environment overrides): {assignments}")
    flags = assignments[0][1].split() if assignments else []
    found += [f"JB_FLAGS lacks {f}" for f in WARNINGS_AS_ERRORS if f not in flags]
    for target in ("book", "book-student"):
        _, lines = recipe(makefile, target)
        builds = [line for line in lines if "jupyter-book build" in line]
        if len(builds) != 1 or not builds[0].endswith("$(JB_FLAGS)"):
            found.append(f"make {target} should run one jupyter-book build ending in $(JB_FLAGS): {builds}")
    prerequisites, _ = recipe(makefile, "site-test")
    if prerequisites.split() != ["book", "book-student"]:
        found.append(f"make site-test should test the sites make book and make book-student built: {prerequisites!r}")
    arguments = site_build_arguments(site_test)
    if arguments[:1] != ["build"]:
        found.append(f"tests/test_site.py's _build should run jupyter-book build: {arguments}")
    found += [f"tests/test_site.py's build lacks {f} (JB_FLAGS has it)" for f in flags if f not in arguments]
    silenced = re.findall(r"^\s*suppress_warnings:\s*(.*)$", config, re.M)
    if silenced != [str(SILENCED).replace("'", '"')]:
        found.append(f"_config.yml should silence {SILENCED} only: {silenced}")
    return found


def _files() -> tuple[str, str, str]:
    return ((ROOT / "Makefile").read_text(), (ROOT / "tests" / "test_site.py").read_text(),
            (ROOT / "_config.yml").read_text())


def test_make_book_and_the_site_test_build_with_warnings_as_errors():
    assert problems(*_files()) == []


PLANTED = [   # (what, file index 0-2, old, new)
    ("-W dropped from JB_FLAGS", 0, "JB_FLAGS := -W -n --keep-going", "JB_FLAGS := -n --keep-going"),
    ("-n dropped from JB_FLAGS", 0, "JB_FLAGS := -W -n --keep-going", "JB_FLAGS := -W --keep-going"),
    ("JB_FLAGS left to the environment", 0, "JB_FLAGS := -W", "JB_FLAGS ?= -W"),
    ("JB_FLAGS set again later", 0, "\n.PHONY:", "\nJB_FLAGS := --keep-going\n.PHONY:"),
    ("make book without JB_FLAGS", 0, "--path-output . $(JB_FLAGS)", "--path-output ."),
    ("make book-student without JB_FLAGS", 0, "--config .config_student.yml $(JB_FLAGS)", "--config .config_student.yml"),
    ("make site-test without building", 0, "site-test: book book-student", "site-test:"),
    ("the site test without -W", 1, '"-W", "-n", "--keep-going",', '"-n", "--keep-going",'),
    ("the site test without -n", 1, '"-W", "-n", "--keep-going",', '"-W", "--keep-going",'),
    ("another warning category silenced", 2, 'suppress_warnings: ["mystnb.unknown_mime_type"]',
     'suppress_warnings: ["mystnb.unknown_mime_type", "ref.ref"]'),
]


@pytest.mark.parametrize("what, index, old, new", PLANTED, ids=[p[0] for p in PLANTED])
def test_each_planted_slip_is_found(what, index, old, new):
    files = list(_files())
    assert files[index].count(old) == 1, (what, old)
    files[index] = files[index].replace(old, new)
    assert problems(*files), what
