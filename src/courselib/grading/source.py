"""Where the grader's trusted manifest comes from (the instructor's side, never the student's notebook).

:func:`find_source`, in this order: the ``--source`` the grader was given (a solution notebook, a folder
of them, or a ``manifest.json``); without one, ``solutions/LAB.ipynb`` then ``labs/manifest.json`` in
the grader's working folder (the course it runs in) — never a folder beside the graded notebook, where
a student could put a ``solutions/`` or a ``manifest.json`` of their own. A solution notebook brings
its hidden checks; the student-edition ``labs/manifest.json`` only their number per question (so the
report can say how many points are held back). See the threat model in :mod:`courselib.grading` for
which of these a student controls in each grading place.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from courselib.errors import InputError
from courselib.grading.build import compile_lab
from courselib.grading.manifest import MANIFEST, Manifest, read_all
from courselib.grading.notebook import read_notebook_json


def from_solution(path: Path) -> Manifest:
    """The instructor's manifest (hidden checks and rubrics included) compiled from a solution notebook."""
    _, _, manifest = compile_lab(read_notebook_json(path, "solution"), str(path))
    return replace(manifest, origin=str(path))


def find_source(lab: Path, source: Path | None = None, name: str | None = None) -> Manifest:
    """The trusted manifest for the lab at ``lab`` (see the module docstring for the search order).

    ``name``: the lab to grade it as (default: the file's name, ``labs/NAME.ipynb``)."""
    name = name or Path(lab).stem
    candidates: list[Path] = []
    if source is not None:
        source = Path(source)
        if source.is_dir():
            candidates = [source / f"{name}.ipynb", source / MANIFEST]
        elif source.exists():
            candidates = [source]
        else:
            raise InputError("no such file or folder", file=str(source), field="--source",
                             hint="give a solutions/ notebook or folder, or a manifest.json")
    else:
        # the course the grader runs in (its working folder), never a folder beside the graded notebook:
        # a student can put a solutions/ or a manifest.json beside their own notebook
        candidates = [Path("solutions") / f"{name}.ipynb", Path("labs") / MANIFEST]
    for path in candidates:
        if not path.is_file():
            continue
        if path.suffix == ".ipynb":
            return replace(from_solution(path), path=str(path.resolve()))   # the instructor's own: hidden checks too
        labs = read_all(path)
        if name in labs:
            return replace(labs[name], path=str(path.resolve()))
        if source is not None:
            raise InputError(f"no lab {name!r} in this manifest (it has {sorted(labs)})", file=str(path),
                             hint="grade a file named after its lab, e.g. labs/02-…ipynb")
    raise InputError(f"no instructor source for lab {name!r}: no solutions/{name}.ipynb and no {MANIFEST} "
                     f"that lists it", file=str(lab),
                     hint="a student: pass --source labs/manifest.json (the course's copy; it grades what "
                          "the visible checks can); an instructor: --source solutions/")


def hidden_checks(manifest: Manifest, folder: Path) -> Manifest:
    """``manifest`` with the hidden checks of ``folder/LAB.ipynb`` (an instructor's notebook)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError("no such folder", file=str(folder), field="--hidden",
                         hint="give the folder that holds the instructor's notebooks (e.g. solutions/)")
    path = folder / f"{manifest.lab}.ipynb"
    if not path.is_file():
        return replace(manifest, notes=manifest.notes + (f"no hidden checks for {manifest.lab} in {folder}",))
    instructor = from_solution(path)
    return manifest.with_hidden(instructor, str(path))
