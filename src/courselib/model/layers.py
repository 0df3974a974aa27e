"""The image build cache as a computation: after a change, which build steps run again?

Docker's (BuildKit's) cache rule, reduced to what a learner can check by hand
(Docker docs, "Docker build cache" / "Optimize cache usage"):

1. A step is reused only if its **parent** was reused and its own **instruction text** is the
   same; for ``COPY``/``ADD`` the **checksums of the copied files** must also match.
2. So the first step that misses invalidates **every later step of the same stage**.
3. A stage built ``FROM`` another stage, or a ``COPY --from=`` that stage, depends on it: when the
   earlier stage rebuilds, so does what uses it (conservatively — BuildKit may still hit if the
   copied bytes happen to be identical).
4. Comments and blank lines are not part of any step: editing them rebuilds nothing.

Hence the seed's lesson, "system dependencies first, code last": a ``COPY . .`` placed before
``RUN pip install`` makes every code edit reinstall every package.

Pure: no file access. ``courselib.io.dockerfile`` turns a Dockerfile into :class:`Step` s.
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """One build instruction of one stage, e.g. ``RUN pip install -r requirements.txt``."""

    index: int                       # position among all steps, 0-based
    stage: int                       # stage index, 0-based
    instruction: str                 # FROM, RUN, COPY, ADD, ENV, ...
    line: int                        # 1-based first line in the Dockerfile
    end_line: int                    # last line (continuations, heredocs)
    text: str                        # the instruction as the cache key sees it
    sources: tuple[str, ...] = ()    # COPY/ADD sources from the build context
    from_stage: int | None = None    # FROM <stage> / COPY --from=<stage> (index), if any
    uses_args: tuple[str, ...] = ()  # ARG names the instruction expands (FROM lines)


@dataclass(frozen=True)
class Change:
    """What the learner changed: a file in the build context, or a line of the Dockerfile."""

    path: str | None = None
    line: int | None = None

    def __post_init__(self):
        if (self.path is None) == (self.line is None):
            raise ValueError("a Change is either a path or a line")


@dataclass(frozen=True)
class StepResult:
    step: Step
    rebuilt: bool
    reason: str


def _norm(p: str) -> str:
    p = p.replace("\\", "/").strip()
    while p.startswith("./"):
        p = p[2:]
    return p.lstrip("/")


def source_matches(pattern: str, path: str) -> bool:
    """Does ``COPY <pattern>`` pick up ``path`` (both relative to the build context)?

    ``.`` is the whole context; a directory copies everything below it; ``*``/``?``/``[ ]``
    are globs as in Go's ``filepath.Match`` (``*`` stops at ``/``).
    """
    pat, p = _norm(pattern), _norm(path)
    if pat in ("", "."):
        return True
    pat = pat.rstrip("/")
    if p == pat or p.startswith(pat + "/"):
        return True
    if any(ch in pat for ch in "*?["):
        parts = p.split("/")
        n = pat.count("/") + 1
        head = "/".join(parts[:n])
        # fnmatch's '*' crosses '/', Go's does not: compare segment by segment
        if len(parts) >= n and all(fnmatch.fnmatchcase(a, b) for a, b in
                                   zip(head.split("/"), pat.split("/"))):
            return True
    return False


def rebuild_plan(steps: tuple[Step, ...] | list[Step], change: Change,
                 global_args: dict[str, int] | None = None) -> tuple[StepResult, ...]:
    """Which steps rebuild after ``change``, each with the reason (rules 1–4 above).

    ``global_args`` maps an ``ARG`` declared before the first ``FROM`` to its line, so editing
    that line rebuilds the stages whose ``FROM`` uses it.
    """
    steps = sorted(steps, key=lambda s: s.index)
    global_args = global_args or {}
    edited_arg = None
    if change.line is not None:
        edited_arg = next((a for a, ln in global_args.items() if ln == change.line), None)
    stage_dirty: dict[int, bool] = {}
    dirty_reason: dict[int, str] = {}
    out: list[StepResult] = []
    for s in steps:
        if stage_dirty.get(s.stage):
            out.append(StepResult(s, True, dirty_reason[s.stage]))
            continue
        reason = None
        if change.line is not None and s.line <= change.line <= s.end_line:
            reason = f"line {change.line} edited: the instruction text changed"
        elif edited_arg and edited_arg in s.uses_args:
            reason = f"ARG {edited_arg} (line {global_args[edited_arg]}) edited: the base changed"
        elif change.path is not None and s.instruction in ("COPY", "ADD") and s.from_stage is None \
                and any(source_matches(src, change.path) for src in s.sources):
            reason = f"copies {change.path}, whose checksum changed"
        elif s.from_stage is not None and stage_dirty.get(s.from_stage):
            what = "its base stage" if s.instruction == "FROM" else "the stage it copies from"
            reason = f"{what} (stage {s.from_stage}) was rebuilt"
        if reason:
            out.append(StepResult(s, True, reason))
            stage_dirty[s.stage] = True
            dirty_reason[s.stage] = f"after step {s.index + 1} (line {s.line}) rebuilt: parent layer changed"
        else:
            out.append(StepResult(s, False, "cache hit"))
    return tuple(out)


def rebuilt_count(plan) -> int:
    """How many steps run again."""
    return sum(1 for r in plan if r.rebuilt)
