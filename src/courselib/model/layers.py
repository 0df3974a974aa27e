"""The image build cache as a computation: after a change, which build steps run again?

Docker's (BuildKit's) cache rule, reduced to what a learner can check by hand
(Docker docs, "Docker build cache" / "Optimize cache usage"):

1. A step is reused only if its **parent** was reused and its own **instruction text** is the
   same; for ``COPY``/``ADD`` the **checksums of the copied files** must also match.
2. So the first step that misses invalidates **every later step of the same stage**.
3. A stage built ``FROM`` another stage depends on it: when the earlier stage rebuilds, so does
   every step of the stage built on it (rule 6 is the finer rule for ``COPY --from``).
4. Comments and blank lines are not part of any step (BuildKit drops comment lines even inside a
   ``\\`` continuation): editing them changes no instruction.
5. An ``ARG`` whose value changes does not rebuild its own step: the value enters the cache key of
   the first ``RUN`` after it (every ``RUN`` sees build arguments in its environment) and of any
   step that expands it; that step misses, and with it the rest of the stage.
6. ``COPY --from=<stage>`` compares the checksums of the files it copies: when the other stage was
   rebuilt, the copy misses only if a rebuilt step there may have written those paths (a ``RUN``
   may write anything; a ``COPY``/``ADD`` writes its destination). This is the one rule that
   cannot be exact without running the build: a ``RUN`` that runs again and writes the same bytes
   leaves the copy cached in the real builder, where courselib predicts a rebuild.
7. But the Dockerfile is itself a file of the build context: a ``COPY . .`` copies it, so *any*
   edit of the Dockerfile — a comment included — changes that step's checksum, unless
   ``.dockerignore`` leaves the Dockerfile out.
8. A file that ``.dockerignore`` leaves out is not in the context at all: editing it rebuilds
   nothing (patterns as Docker reads them: ``*``, ``?``, ``**``, ``!`` exceptions, last match wins).

The rules are checked against a real builder (buildah ``--layers``, Debian 1.28) by
``courselib docker rebuild --compare`` and tests/test_container_live.py; where the real builder
disagreed, the rule was changed to what it does.

Hence the seed's lesson, "system dependencies first, code last": a ``COPY . .`` placed before
``RUN pip install`` makes every code edit reinstall every package.

Pure: no file access. ``courselib.io.dockerfile`` turns a Dockerfile into :class:`Step` s.
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field, replace
from itertools import permutations


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
    declares_args: tuple[str, ...] = ()  # ARG steps: the names they declare
    writes: tuple[str, ...] = ()     # absolute paths the step changes in the image ("*": anything)
    from_paths: tuple[str, ...] = ()  # COPY --from: the paths it copies out of the other stage


@dataclass(frozen=True)
class Change:
    """What the learner changed: a file in the build context, or a line of the Dockerfile."""

    path: str | None = None
    line: int | None = None

    def __post_init__(self):
        if (self.path is None) == (self.line is None):
            raise ValueError("a Change is either a path or a line")


@dataclass(frozen=True)
class BuildContext:
    """Where the Dockerfile sits in the build context, and what ``.dockerignore`` leaves out."""

    dockerfile: str | None = "Dockerfile"   # its path inside the context; None: outside it
    ignore: tuple[str, ...] = field(default=())  # .dockerignore patterns, in file order

    def ignored(self, path: str) -> bool:
        return dockerignore_matches(self.ignore, path)


def parse_dockerignore(text: str) -> tuple[str, ...]:
    """The patterns of a ``.dockerignore`` file: comments and blank lines dropped, each trimmed."""
    out = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        out.append(line)
    return tuple(out)


def clean_path(p: str) -> str:
    """Go's filepath.Clean for relative slash paths (``./a//b/../c`` -> ``a/c``), no leading /."""
    parts: list[str] = []
    for part in p.replace("\\", "/").split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return "/".join(parts) or "."


def _ignore_regex(pattern: str) -> re.Pattern:
    """A .dockerignore pattern as a regular expression (moby/patternmatcher's translation)."""
    out, i, n = "", 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "*":
            if i + 1 < n and pattern[i + 1] == "*":
                i += 1
                if i + 1 < n and pattern[i + 1] == "/":   # "**/" : zero or more directories
                    i += 1
                    out += "(.*/)?"
                else:
                    out += ".*"
            else:
                out += "[^/]*"
        elif ch == "?":
            out += "[^/]"
        elif ch == "[":
            j = pattern.find("]", i + 1)
            if j < 0:
                out += re.escape(ch)
            else:
                body = pattern[i + 1:j]
                if body.startswith("^"):
                    body = "!" + body[1:]
                out += "[" + ("^" + body[1:] if body.startswith("!") else body).replace("\\", "\\\\") + "]"
                i = j
        elif ch == "\\" and i + 1 < n:
            i += 1
            out += re.escape(pattern[i])
        else:
            out += re.escape(ch)
        i += 1
    return re.compile(out + r"\Z")


def dockerignore_matches(patterns: tuple[str, ...] | list[str], path: str) -> bool:
    """Is ``path`` (relative to the context) left out by these ``.dockerignore`` patterns?

    A pattern leaves out a path it matches or a path below a directory it matches; a ``!pattern``
    brings a path back; the last pattern that matches decides (Docker docs, ".dockerignore file").
    """
    p = clean_path(path)
    parents = []
    parts = p.split("/")
    for k in range(1, len(parts) + 1):
        parents.append("/".join(parts[:k]))
    ignored = False
    for raw in patterns:
        negate = raw.startswith("!")
        pat = clean_path(raw[1:].strip() if negate else raw)
        rx = _ignore_regex(pat)
        if any(rx.match(q) for q in parents):
            ignored = not negate
    return ignored


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


def _overlaps(a: str, b: str) -> bool:
    """Do two absolute paths name the same file or one lie below the other? (``*``: anything)."""
    if a == "*" or b == "*":
        return True
    a, b = "/" + clean_path(a).strip("/"), "/" + clean_path(b).strip("/")
    a, b = a.rstrip("/") or "/", b.rstrip("/") or "/"
    return a == b or a == "/" or b == "/" or a.startswith(b + "/") or b.startswith(a + "/")


def _arg_refs(text: str, name: str) -> bool:
    return re.search(r"\$\{?" + re.escape(name) + r"(?![A-Za-z0-9_])", text) is not None


def rebuild_plan(steps: tuple[Step, ...] | list[Step], change: Change,
                 global_args: dict[str, int] | None = None, *, inert_lines=frozenset(),
                 context: BuildContext | None = None) -> tuple[StepResult, ...]:
    """Which steps rebuild after ``change``, each with the reason (rules 1–8 above).

    ``global_args`` maps an ``ARG`` declared before the first ``FROM`` to its line, so editing
    that line rebuilds the stages whose ``FROM`` uses it, and acts like an ``ARG`` edit in each
    stage that declares the same name again. ``inert_lines`` are the Dockerfile's blank and
    comment lines. ``context`` places the Dockerfile in the build context (a Dockerfile edit is
    then also a changed file) and carries ``.dockerignore``; without it the Dockerfile is outside
    the context and nothing is ignored.
    """
    steps = sorted(steps, key=lambda s: s.index)
    global_args = global_args or {}
    context = context or BuildContext(dockerfile=None)
    edited_global = None
    changed_path = change.path
    if change.line is not None:
        edited_global = next((a for a, ln in global_args.items() if ln == change.line), None)
        changed_path = context.dockerfile          # the Dockerfile's own bytes changed too
    if changed_path is not None and context.ignored(changed_path):
        changed_path = None
    line_edit = change.line is not None and change.line not in inert_lines
    stage_dirty: dict[int, bool] = {}
    dirty_reason: dict[int, str] = {}
    written: dict[int, list[str]] = {}      # per stage: what rebuilt steps may have changed
    pending_arg: dict[int, tuple[str, int]] = {}   # per stage: an edited ARG not yet used by a RUN
    out: list[StepResult] = []
    for s in steps:
        if stage_dirty.get(s.stage):
            out.append(StepResult(s, True, dirty_reason[s.stage]))
            written.setdefault(s.stage, []).extend(s.writes)
            continue
        reason = None
        edited_here = line_edit and s.line <= change.line <= s.end_line
        if s.instruction == "ARG" and (edited_here or (line_edit and edited_global
                                                       and edited_global in s.declares_args)):
            # an ARG's own step is reused: its value enters the cache key of the RUN steps after it
            name = s.declares_args[0] if edited_here and s.declares_args else edited_global
            pending_arg[s.stage] = (name, s.line)
            out.append(StepResult(s, False, f"cache hit (ARG {name} changed: the first RUN after it misses)"))
            continue
        arg = pending_arg.get(s.stage)
        if edited_here:
            reason = f"line {change.line} edited: the instruction text changed"
        elif line_edit and edited_global and edited_global in s.uses_args:
            reason = f"ARG {edited_global} (line {global_args[edited_global]}) edited: the base changed"
        elif arg and (s.instruction == "RUN" or _arg_refs(s.text, arg[0])):
            reason = (f"ARG {arg[0]} (line {arg[1]}) changed: " +
                      ("every RUN after an ARG sees it in its environment" if s.instruction == "RUN"
                       else f"the instruction uses ${arg[0]}"))
        elif changed_path is not None and s.instruction in ("COPY", "ADD") and s.from_stage is None \
                and any(source_matches(src, changed_path) for src in s.sources):
            reason = f"copies {changed_path}, whose checksum changed"
        elif s.instruction == "FROM" and s.from_stage is not None and stage_dirty.get(s.from_stage):
            reason = f"its base stage (stage {s.from_stage}) was rebuilt"
        elif s.instruction != "FROM" and s.from_stage is not None and stage_dirty.get(s.from_stage):
            hits = [w for w in written.get(s.from_stage, []) for p in (s.from_paths or ("/",)) if _overlaps(w, p)]
            if hits:
                what = "a RUN step (it may write anything)" if "*" in hits else ", ".join(sorted(set(hits)))
                reason = f"stage {s.from_stage} rebuilt what it copies from there: {what}"
        if reason:
            out.append(StepResult(s, True, reason))
            stage_dirty[s.stage] = True
            dirty_reason[s.stage] = f"after step {s.index + 1} (line {s.line}) rebuilt: parent layer changed"
            if s.instruction == "FROM":
                base = written.get(s.from_stage, ["*"]) if s.from_stage is not None else ["*"]
                written.setdefault(s.stage, []).extend(base)
            written.setdefault(s.stage, []).extend(s.writes)
        elif s.from_stage is not None and s.instruction != "FROM" and stage_dirty.get(s.from_stage):
            out.append(StepResult(s, False, f"cache hit: no rebuilt step of stage {s.from_stage} wrote "
                                             f"{', '.join(s.from_paths) or 'what it copies'}, so the copied "
                                             "files' checksums are unchanged"))
        else:
            out.append(StepResult(s, False, "cache hit"))
    return tuple(out)


def rebuilt_count(plan) -> int:
    """How many steps run again."""
    return sum(1 for r in plan if r.rebuilt)


def history_rebuilds(steps, history) -> int:
    """Steps rebuilt over an edit history: the sum of ``times × rebuilt_count(plan)`` over
    ``history``, a sequence of ``(Change, times)`` pairs (each edit built once)."""
    return sum(times * rebuilt_count(rebuild_plan(steps, change)) for change, times in history)


def reorder(steps, order) -> tuple[Step, ...]:
    """A one-stage Dockerfile's steps in another order (``order`` lists old indexes), renumbered.

    Each step keeps its instruction text and sources; its index and (one-line) position become the
    new ones, so ``rebuild_plan`` reads the reordered file as a builder would.
    """
    steps = sorted(steps, key=lambda s: s.index)
    if sorted(order) != list(range(len(steps))):
        raise ValueError(f"order {order!r} is not a permutation of 0..{len(steps) - 1}")
    if any(s.stage != 0 or s.from_stage is not None for s in steps):
        raise ValueError("reorder handles one stage without --from references")
    return tuple(replace(steps[o], index=i, line=i + 1, end_line=i + 1) for i, o in enumerate(order))


def fewest_rebuilds(steps, history, *, fixed_first: int = 1, fixed_last: int = 1,
                    before: tuple[tuple[int, int], ...] = ()) -> tuple[int, tuple[int, ...]]:
    """The fewest steps rebuilt over ``history`` by any order of a one-stage Dockerfile's steps.

    The first ``fixed_first`` and last ``fixed_last`` steps stay where they are (``FROM``; ``CMD``);
    every ``(a, b)`` in ``before`` (old indexes) keeps step ``a`` before step ``b`` (a file is copied
    before the ``RUN`` that reads it). Returns the minimum and one order reaching it. Exhaustive over
    the orders that keep the constraints (fine for the dozen steps of a lab's Dockerfile).
    """
    n = len(steps)
    head, middle, tail = list(range(fixed_first)), list(range(fixed_first, n - fixed_last)), \
        list(range(n - fixed_last, n))
    best: tuple[int, tuple[int, ...]] | None = None
    for perm in permutations(middle):
        pos = {o: i for i, o in enumerate(perm)}
        if any(a in pos and b in pos and pos[a] > pos[b] for a, b in before):
            continue
        order = tuple(head + list(perm) + tail)
        total = history_rebuilds(reorder(steps, order), history)
        if best is None or total < best[0]:
            best = (total, order)
    if best is None:
        raise ValueError("no order keeps every constraint in `before`")
    return best
