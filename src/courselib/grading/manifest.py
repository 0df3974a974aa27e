"""What the grader trusts: each lab's questions, points and check code, from the instructor's source.

A :class:`Manifest` is compiled from ``solutions/NAME.ipynb`` by :func:`courselib.grading.build.compile_lab`.
``courselib labs build`` also writes the student edition of every manifest to ``labs/manifest.json``
(no hidden checks, no rubrics), so that a repository without ``solutions/`` (the student template)
can still be graded against the instructor's checks rather than against the student's notebook.

:func:`find_source` says where the manifest for a lab comes from, in this order: the ``--source`` the
grader was given (a solution notebook, a folder of them, or a ``manifest.json``); the ``solutions/``
folder beside the lab's folder or in the current directory; the ``manifest.json`` beside the lab or
in ``labs/``. The student's notebook is never a source: its cells, metadata and points are ignored
except the text of its answer cells.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from courselib.errors import InputError

FORMAT = "courselib-labs/1"
ROLES = ("given", "answer", "check", "hidden", "demo", "written")
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Step:
    """One cell of the lab, as the grader replays it."""

    id: str
    role: str                 # given | answer | check | hidden | demo | written
    source: str               # given, check, hidden, demo: the instructor's code; answer, written: the stub
    question: str | None = None


@dataclass(frozen=True)
class QuestionSpec:
    name: str
    points: int
    manual: bool = False
    answers: tuple[str, ...] = ()
    rubric: str = ""          # instructor edition only
    uses: tuple[str, ...] = ()  # earlier questions' answers its check also reads


@dataclass(frozen=True)
class Manifest:
    lab: str
    source: str
    questions: tuple[QuestionSpec, ...]
    steps: tuple[Step, ...]
    origin: str = ""          # where this manifest was read from (for the report)
    hidden_from: str = ""     # where the hidden checks came from, if any
    notes: tuple[str, ...] = field(default=())

    @classmethod
    def from_plan(cls, lab, source, questions, plan, rubrics) -> "Manifest":
        return cls(lab, source,
                   tuple(QuestionSpec(q.name, q.points, q.manual, tuple(q.answers), rubrics.get(q.name, ""),
                                      tuple(q.uses)) for q in questions),
                   tuple(Step(p["id"], p["role"], p["source"], p.get("question")) for p in plan))

    def question(self, name: str) -> QuestionSpec:
        return next(q for q in self.questions if q.name == name)

    def student_edition(self) -> "Manifest":
        """Without what students must not read: hidden checks and rubrics."""
        return replace(self, questions=tuple(replace(q, rubric="") for q in self.questions),
                       steps=tuple(s for s in self.steps if s.role != "hidden"))

    def with_hidden(self, instructor: "Manifest", origin: str) -> "Manifest":
        """This manifest plus the instructor's hidden checks, each right after its question's check."""
        hidden: dict[str, list[Step]] = {}
        for s in instructor.steps:
            if s.role == "hidden":
                hidden.setdefault(s.question, []).append(s)
        unknown = sorted(set(hidden) - {q.name for q in self.questions if not q.manual})
        if unknown:
            raise InputError(f"hidden checks for questions this lab does not have: {unknown}", file=origin)
        steps: list[Step] = []
        for s in self.steps:
            if s.role == "hidden":
                continue
            steps.append(s)
            if s.role == "check":
                steps.extend(hidden.get(s.question, []))
        rubrics = {q.name: q.rubric for q in instructor.questions}
        return replace(self, steps=tuple(steps), hidden_from=origin,
                       questions=tuple(replace(q, rubric=q.rubric or rubrics.get(q.name, "")) for q in self.questions))

    def to_dict(self) -> dict:
        return {"lab": self.lab, "source": self.source,
                "questions": [{"name": q.name, "points": q.points, "manual": q.manual, "answers": list(q.answers),
                               **({"uses": list(q.uses)} if q.uses else {}),
                               **({"rubric": q.rubric} if q.rubric else {})} for q in self.questions],
                "cells": [{"id": s.id, "role": s.role, "source": s.source,
                           **({"question": s.question} if s.question else {})} for s in self.steps]}

    @classmethod
    def from_dict(cls, data, where: str) -> "Manifest":
        try:
            questions = tuple(QuestionSpec(str(q["name"]), _points(q["points"]), bool(q.get("manual", False)),
                                           tuple(str(a) for a in q.get("answers", ())), str(q.get("rubric", "")),
                                           tuple(str(u) for u in q.get("uses", ())))
                              for q in data["questions"])
            steps = tuple(Step(str(c["id"]), _role(c["role"]), str(c["source"]),
                               None if c.get("question") is None else str(c["question"])) for c in data["cells"])
            lab, source = str(data["lab"]), str(data["source"])
        except (KeyError, TypeError, ValueError) as err:
            raise InputError(f"not a lab manifest ({err.__class__.__name__}: {err})", file=where,
                             hint="rebuild it with `courselib labs build`") from None
        names = {q.name for q in questions}
        for s in steps:
            if s.role in ("answer", "check", "hidden", "written") and s.question not in names:
                raise InputError(f"cell {s.id} belongs to an unknown question {s.question!r}", file=where)
        return cls(lab, source, questions, steps, origin=where)


def _points(p) -> int:
    if isinstance(p, bool) or not isinstance(p, int) or p <= 0:
        raise ValueError(f"points {p!r}")
    return p


def _role(r) -> str:
    if r not in ROLES:
        raise ValueError(f"role {r!r}")
    return r


def from_solution(path: Path) -> Manifest:
    """The instructor's manifest (hidden checks and rubrics included) compiled from a solution notebook."""
    from courselib.grading.build import compile_lab, read_notebook_json

    _, _, manifest = compile_lab(read_notebook_json(path, "solution"), str(path))
    return replace(manifest, origin=str(path))


def write_all(manifests: list[Manifest]) -> str:
    """``labs/manifest.json``: every lab's student-edition manifest, as sorted, stable JSON."""
    data = {"format": FORMAT, "labs": {m.lab: m.student_edition().to_dict() for m in sorted(manifests, key=lambda m: m.lab)}}
    return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def read_all(path: Path) -> dict[str, Manifest]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("no such manifest", file=str(path), hint="run `courselib labs build`") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(f"cannot read this manifest: {err}", file=str(path),
                         hint="rebuild it with `courselib labs build`") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("labs"), dict):
        raise InputError(f"not a lab manifest (format is not {FORMAT!r})", file=str(path),
                         hint="rebuild it with `courselib labs build`")
    return {name: Manifest.from_dict(m, f"{path} [{name}]") for name, m in data["labs"].items()}


def find_source(lab: Path, source: Path | None = None) -> Manifest:
    """The trusted manifest for the lab at ``lab`` (see the module docstring for the search order)."""
    name = Path(lab).stem
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
        here = Path(lab).resolve().parent
        candidates = [here.parent / "solutions" / f"{name}.ipynb", Path("solutions") / f"{name}.ipynb",
                      here / MANIFEST, Path("labs") / MANIFEST]
    for path in candidates:
        if not path.is_file():
            continue
        if path.suffix == ".ipynb":
            return from_solution(path).student_edition()   # hidden checks only with --hidden
        labs = read_all(path)
        if name in labs:
            return labs[name]
        if source is not None:
            raise InputError(f"no lab {name!r} in this manifest (it has {sorted(labs)})", file=str(path),
                             hint="grade a file named after its lab, e.g. labs/02-…ipynb")
    raise InputError(f"no instructor source for lab {name!r}: no solutions/{name}.ipynb and no {MANIFEST} "
                     f"that lists it", file=str(lab),
                     hint="pass --source solutions/ (or a manifest.json written by `courselib labs build`)")


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
