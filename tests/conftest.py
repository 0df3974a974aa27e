"""Shared fixtures: where the repository and the third-party corpus are."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

import budget

#: The live test loop: one control plane and one Slurm per session, reshaped, not restarted (house).
pytest_plugins = ("live_fixtures", "tiers")
#: Test tiers by cost and system (book, site, lab, real_*, scale, slow): tests/tiers.py.

# A property test that names no count gets Hypothesis' default (100) in the full run, 10 in the dev tier.
settings.register_profile("dev", max_examples=10)
if budget.budget() == "dev":
    settings.load_profile("dev")

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The read-only third-party corpus at ../shared/corpus (never copied into the repository)."""
    if not CORPUS.is_dir():
        pytest.skip(f"third-party corpus not found at {CORPUS} (it lives beside the repository in ../shared/corpus)")
    return CORPUS


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def solution_namespace(name: str) -> dict:
    """Run a lab solution's given and answer cells (not its checks) in a namespace, without a
    kernel; ``name`` is the lab's file name or a part of it (``"gang-deadlock"``)."""
    import contextlib
    import io

    import nbformat

    from courselib.grading import markers
    paths = sorted((ROOT / "solutions").glob(f"*{name}*.ipynb"))
    if len(paths) != 1:
        raise LookupError(f"no single solution notebook matches {name!r}: {paths}")
    ns: dict = {}
    for cell in nbformat.read(paths[0], 4).cells:
        if cell.cell_type == "code" and not markers.is_check(cell) and markers.SOLUTION_TAG not in markers.tags(cell):
            code = markers.solution_source(cell.source, paths[0].stem)
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(code, paths[0].name, "exec"), ns)  # noqa: S102 (our own notebook)
    return ns
