"""ARCHITECTURE.md matches the code: every module and folder it names exists, its table of floors is
tests/test_import_rules.py's, and the live storey's drawing names every package of live/."""
from __future__ import annotations

import re
from pathlib import Path

import test_import_rules

ROOT = Path(__file__).resolve().parents[1]
LIB = ROOT / "src" / "courselib"
TEXT = (ROOT / "ARCHITECTURE.md").read_text()


def _exists(name: str) -> bool:
    name = name.rstrip("/")
    bases = (ROOT, LIB, LIB / "live", LIB / "live" / "kube")
    return any((base / name).exists() for base in bases)


def test_every_file_and_folder_it_names_exists():
    named = {m for m in re.findall(r"`([\w./-]+(?:\.py|/))`", TEXT)}
    named |= set(re.findall(r"\b([\w/]+\.py)\b", TEXT.split("## The live storey")[1].split("```")[1]))
    missing = sorted(n for n in named if not _exists(n) and not n.startswith(("pkg/", "plugins/")))
    assert len(named) > 30 and not missing, missing


def test_every_dotted_module_it_names_exists():
    for dotted in re.findall(r"`(courselib(?:\.\w+)+)", TEXT):
        parts = dotted.split(".")[1:]
        assert (LIB.joinpath(*parts).with_suffix(".py").exists() or LIB.joinpath(*parts, "__init__.py").exists()), dotted


def test_the_floors_table_is_the_import_rules_table():
    rows = re.findall(r"^\| ([a-z, ]+) \| (.+?) \| .+ \|$", TEXT.split("## The floors")[1].split("## ")[0], re.M)
    rows = [(floor, packages) for floor, packages in rows if floor != "floor"]
    assert [floor for floor, _ in rows] == [floor for floor, _ in test_import_rules.FLOORS]
    for (floor, packages), (_, parts) in zip(rows, test_import_rules.FLOORS):
        for part in parts:
            if part:
                assert f"`{part}/`" in packages or f"`{part}.py`" in packages, (floor, part)


def test_the_live_drawing_names_every_package_of_live():
    drawing = TEXT.split("## The live storey")[1].split("```")[1]
    for package in sorted(p.name for p in (LIB / "live").iterdir() if (p / "__init__.py").exists()):
        assert f"{package}/" in drawing, package
    for package in sorted(p.name for p in (LIB / "live" / "kube").iterdir() if (p / "__init__.py").exists()):
        assert f"{package}/" in drawing, package
