"""What the grader trusts: each lab's questions, points and check code, from the instructor's source.

A :class:`Manifest` is compiled from ``solutions/NAME.ipynb`` by :func:`courselib.grading.build.compile_lab`.
``courselib labs build`` also writes the student edition of every manifest to ``labs/manifest.json``
(no hidden checks, no rubrics), so that a repository without ``solutions/`` (the student template)
can still be graded against the instructor's checks rather than against the student's notebook.

Where a manifest comes from is :mod:`courselib.grading.source`; this module is pure data.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from courselib.errors import InputError
from courselib.grading import variant

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
    hidden: int = 0           # how many hidden checks the instructor has for it (their code: instructor only)


@dataclass(frozen=True)
class Manifest:
    lab: str
    source: str
    questions: tuple[QuestionSpec, ...]
    steps: tuple[Step, ...]
    origin: str = ""          # where this manifest was read from (for the report)
    hidden_from: str = ""     # where the hidden checks came from, if any
    notes: tuple[str, ...] = field(default=())
    parameters: str = ""      # the id of the given cell tagged `parameters` (seed 0's numbers), if any
    variant: str = ""         # the source of the lab's `variant(rng)` cell, if it has variants
    seed: int = 0             # the seed whose numbers the parameters step holds
    path: str = ""            # the file it was read from (absolute), to hand to another grading process

    def for_seed(self, seed: int) -> "Manifest":
        """The manifest whose parameters cell holds ``seed``'s numbers (:mod:`courselib.grading.variant`)."""
        if not seed or not self.parameters:
            return replace(self, seed=seed)
        steps = tuple(replace(s, source=variant.parameters_for(s.source, self.variant, seed, self.origin or self.lab))
                      if s.id == self.parameters else s for s in self.steps)
        return replace(self, steps=steps, seed=seed)

    @classmethod
    def from_plan(cls, lab, source, questions, plan, rubrics) -> "Manifest":
        hidden: dict[str, int] = {}
        for p in plan:
            if p["role"] == "hidden":
                hidden[p["question"]] = hidden.get(p["question"], 0) + 1
        return cls(lab, source,
                   tuple(QuestionSpec(q.name, q.points, q.manual, tuple(q.answers), rubrics.get(q.name, ""),
                                      tuple(q.uses), hidden.get(q.name, 0)) for q in questions),
                   tuple(Step(p["id"], p["role"], p["source"], p.get("question")) for p in plan))

    def question(self, name: str) -> QuestionSpec:
        return next(q for q in self.questions if q.name == name)

    def held_back(self, name: str) -> bool:
        """Whether question ``name`` has hidden checks that this manifest does not carry (graded elsewhere)."""
        loaded = sum(1 for s in self.steps if s.role == "hidden" and s.question == name)
        return self.question(name).hidden > loaded

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
                               **({"hidden": q.hidden} if q.hidden else {}),
                               **({"rubric": q.rubric} if q.rubric else {})} for q in self.questions],
                "cells": [{"id": s.id, "role": s.role, "source": s.source,
                           **({"question": s.question} if s.question else {})} for s in self.steps],
                **({"parameters": self.parameters, "variant": self.variant} if self.parameters else {})}

    @classmethod
    def from_dict(cls, data, where: str) -> "Manifest":
        try:
            questions = tuple(QuestionSpec(str(q["name"]), _points(q["points"]), bool(q.get("manual", False)),
                                           tuple(str(a) for a in q.get("answers", ())), str(q.get("rubric", "")),
                                           tuple(str(u) for u in q.get("uses", ())), _count(q.get("hidden", 0)))
                              for q in data["questions"])
            steps = tuple(Step(str(c["id"]), _role(c["role"]), str(c["source"]),
                               None if c.get("question") is None else str(c["question"])) for c in data["cells"])
            lab, source = str(data["lab"]), str(data["source"])
            parameters, variant_src = str(data.get("parameters", "")), str(data.get("variant", ""))
        except (KeyError, TypeError, ValueError) as err:
            raise InputError(f"not a lab manifest ({err.__class__.__name__}: {err})", file=where,
                             hint="rebuild it with `courselib labs build`") from None
        names = {q.name for q in questions}
        for s in steps:
            if s.role in ("answer", "check", "hidden", "written") and s.question not in names:
                raise InputError(f"cell {s.id} belongs to an unknown question {s.question!r}", file=where)
        if parameters and not any(s.id == parameters and s.role == "given" for s in steps):
            raise InputError(f"parameters cell {parameters!r} is not a given cell of this lab", file=where)
        return cls(lab, source, questions, steps, origin=where, parameters=parameters, variant=variant_src)


def _points(p) -> int:
    if isinstance(p, bool) or not isinstance(p, int) or p <= 0:
        raise ValueError(f"points {p!r}")
    return p


def _count(n) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"hidden {n!r}")
    return n


def _role(r) -> str:
    if r not in ROLES:
        raise ValueError(f"role {r!r}")
    return r


def write_all(manifests: list[Manifest], *, instructor: bool = False) -> str:
    """``labs/manifest.json``: every lab's student-edition manifest, as sorted, stable JSON.

    ``instructor``: the instructor's edition instead (hidden checks and rubrics: an autograder bundle,
    a private repository; never the student template)."""
    data = {"format": FORMAT, "labs": {m.lab: (m if instructor else m.student_edition()).to_dict()
                                       for m in sorted(manifests, key=lambda m: m.lab)}}
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
