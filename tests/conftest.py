"""Shared fixtures: where the repository and the third-party corpus are."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

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
