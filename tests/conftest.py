"""Shared fixtures: where the repository and the third-party corpus are."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

import budget
from courselib.grading.notebook import skip_the_iri_parser

# nbformat's jsonschema would build the iri format checker's 39 Earley parsers when first imported (about
# 2 s; courselib never checks that format): the test process leaves them out as courselib's own processes
# do. `make test-fast` loads no nbval, so this comes first; where nbval is loaded it has imported them.
skip_the_iri_parser()

#: The live test loop: one control plane and one Slurm per session, reshaped, not restarted (house).
pytest_plugins = ("live_fixtures", "tiers", "leftovers")
#: Test tiers by cost and system (book, site, lab, real_*, scale, slow): tests/tiers.py.

# A property test that names no count gets Hypothesis' default (100) in the full run, 10 in the dev tier.
# The dev tier draws the same examples every run (derandomize: seeded from each test's own source), so the
# loop's time is a figure, not a draw: an example costs 0.01 to 8 s (kube-gang pod by pod with a 60 s
# permit timeout churns through 67,000 events), and random draws put 25-90 s into test_gang_fastpath.py.
# The full run keeps every count as written and the profile Hypothesis loads itself: random draws in
# `make test`, its built-in derandomized "ci" profile where the CI variable is set (.ci/run sets it).
settings.register_profile("dev", max_examples=10, derandomize=True)
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
