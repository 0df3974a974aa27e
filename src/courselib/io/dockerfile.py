"""Read a Dockerfile into build stages and steps for the layer-cache model.

Parsing is ``dockerfile-parse`` (content passed in memory: nothing is ever written), repaired
where it falls short of BuildKit: heredocs (``RUN <<EOF ... EOF`` is one step, not one per line),
``ARG`` before the first ``FROM`` (global build arguments that ``FROM`` may expand), parser
directives (``# syntax=...`` on line 1), ``COPY --from=<stage>`` and ``FROM <stage>``.
"""
from __future__ import annotations

import io
import json
import re
import shlex
from dataclasses import dataclass

from courselib.errors import InputError
from courselib.model.layers import Change, Step, StepResult, rebuild_plan

_HEREDOC = re.compile(r"<<(-?)([\"']?)([A-Za-z_][A-Za-z0-9_]*)\2")
_ARG_REF = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")
_DIRECTIVE = re.compile(r"^#\s*([a-zA-Z]+)\s*=\s*(\S+)\s*$")
INSTALL_RE = re.compile(r"\b(pip3?|uv pip|uv sync|poetry install|conda (env )?(install|create|update)|"
                        r"mamba install|apt-get install|apt install|yum install|dnf install|"
                        r"apk add|npm (ci|install)|yarn install|cargo build|go mod download)\b")


@dataclass(frozen=True)
class Stage:
    """``FROM <base> [AS <name>]``: where a stage starts and what it builds on."""

    index: int
    name: str | None
    base: str                 # as written, e.g. "nvcr.io/nvidia/cuda:${CUDA_VERSION}-devel"
    base_resolved: str | None  # with global ARG defaults substituted (None if an ARG has none)
    base_stage: int | None
    line: int


@dataclass(frozen=True)
class DockerfileReading:
    file: str | None
    directives: tuple[tuple[str, str], ...]        # parser directives, e.g. ("syntax", "...")
    global_args: tuple[tuple[str, str | None, int], ...]   # (name, default, line) before FROM
    stages: tuple[Stage, ...]
    steps: tuple[Step, ...]

    def global_arg_lines(self) -> dict[str, int]:
        return {n: ln for n, _, ln in self.global_args}

    def plan(self, change: Change) -> tuple[StepResult, ...]:
        """The layer-cache model's answer for this Dockerfile (see ``courselib.model.layers``)."""
        return rebuild_plan(self.steps, change, self.global_arg_lines())

    def to_dict(self) -> dict:
        return {
            "file": self.file,
            "directives": dict(self.directives),
            "global_args": [{"name": n, "default": d, "line": ln} for n, d, ln in self.global_args],
            "stages": [{"index": s.index, "name": s.name, "base": s.base,
                        "base_resolved": s.base_resolved, "base_stage": s.base_stage,
                        "line": s.line} for s in self.stages],
            "steps": [{"index": s.index, "stage": s.stage, "instruction": s.instruction,
                       "line": s.line, "end_line": s.end_line, "text": s.text,
                       "sources": list(s.sources), "from_stage": s.from_stage}
                      for s in self.steps],
        }


def _structure(text: str, file: str | None) -> list[dict]:
    try:
        from dockerfile_parse import DockerfileParser
    except ImportError:  # pragma: no cover - optional extra courselib[io]
        raise InputError("reading Dockerfiles needs dockerfile-parse",
                         hint="pip install 'courselib[io]'") from None
    try:
        parser = DockerfileParser(fileobj=io.BytesIO(text.encode("utf-8")), env_replace=False)
        return [dict(s) for s in parser.structure]
    except Exception as err:  # noqa: BLE001 - the library's own errors: report, located
        raise InputError(f"cannot parse the Dockerfile: {err}", file=file) from None


def _split_flags(value: str) -> tuple[dict[str, str], list[str]]:
    """``--from=build --chown=1:1 a b /dst`` -> ({"from": "build", ...}, ["a", "b", "/dst"])."""
    v = value.strip()
    flags: dict[str, str] = {}
    while v.startswith("--"):
        word, _, rest = v.partition(" ")
        k, _, val = word[2:].partition("=")
        flags[k] = val
        v = rest.strip()
    if v.startswith("["):
        try:
            args = json.loads(v)
            if isinstance(args, list) and all(isinstance(a, str) for a in args):
                return flags, args
        except ValueError:
            pass
    try:
        return flags, shlex.split(v, comments=False, posix=True)
    except ValueError:
        return flags, v.split()


def parse_dockerfile(text: str, *, file: str | None = None) -> DockerfileReading:
    """A Dockerfile's text -> :class:`DockerfileReading` (errors name file and line)."""
    if "\x00" in text:
        raise InputError("this is a binary file, not a Dockerfile", file=file, line=1)
    lines = text.splitlines()
    directives: list[tuple[str, str]] = []
    for raw in lines:       # parser directives: only at the very top, before anything else
        m = _DIRECTIVE.match(raw)
        if not m:
            break
        directives.append((m.group(1).lower(), m.group(2)))
    entries = sorted((e for e in _structure(text, file) if e.get("instruction") != "COMMENT"),
                     key=lambda e: e["startline"])
    # repair heredocs: the body belongs to the instruction that opened it
    merged: list[dict] = []
    skip_until = -1
    for e in entries:
        if e["startline"] <= skip_until:
            continue
        e = dict(e)
        if e["instruction"] in ("RUN", "COPY", "ADD"):
            pos = e["endline"]
            for m in _HEREDOC.finditer(e["value"]):
                strip_tabs, word = m.group(1) == "-", m.group(3)
                end = None
                for k in range(pos + 1, len(lines)):
                    candidate = lines[k].lstrip("\t") if strip_tabs else lines[k]
                    if candidate.rstrip("\r") == word:
                        end = k
                        break
                if end is None:
                    raise InputError(f"heredoc <<{word} is never closed",
                                     file=file, line=e["startline"] + 1,
                                     hint=f"end it with a line holding only {word}")
                pos = end
            if pos != e["endline"]:
                e["value"] = "\n".join([e["value"]] + lines[e["endline"] + 1:pos + 1])
                e["endline"] = pos
                skip_until = pos
        merged.append(e)

    stages: list[Stage] = []
    steps: list[Step] = []
    global_args: list[tuple[str, str | None, int]] = []
    names: dict[str, int] = {}
    for e in merged:
        ins = e["instruction"].upper()
        line, end = e["startline"] + 1, e["endline"] + 1
        value = e["value"]
        if ins == "ARG" and not stages:
            for word in value.split():
                n, eq, d = word.partition("=")
                global_args.append((n, d.strip("\"'") if eq else None, line))
            continue
        if not stages and ins != "FROM":
            raise InputError(f"{ins} before the first FROM", file=file, line=line,
                             hint="only ARG (and parser directives) may come before FROM")
        from_stage = None
        sources: tuple[str, ...] = ()
        uses = ()
        if ins == "FROM":
            flags, words = _split_flags(value)
            if not words:
                raise InputError("FROM needs an image", file=file, line=line,
                                 hint="write FROM python:3.11-slim")
            base = words[0]
            name = words[2] if len(words) >= 3 and words[1].lower() == "as" else None
            base_stage = names.get(base.lower())
            uses = tuple(_ARG_REF.findall(base))
            defaults = {n: d for n, d, _ in global_args}
            resolved = base
            for a in uses:
                if defaults.get(a) is None:
                    resolved = None
                    break
                resolved = re.sub(r"\$\{?" + re.escape(a) + r"\}?",
                                  lambda _m, v=defaults[a]: v, resolved)
            stage = Stage(len(stages), name, base, resolved, base_stage, line)
            stages.append(stage)
            if name:
                names[name.lower()] = stage.index
            from_stage = base_stage
        elif ins in ("COPY", "ADD"):
            flags, words = _split_flags(value.splitlines()[0] if "<<" in value else value)
            if "from" in flags:
                ref = flags["from"]
                from_stage = names.get(ref.lower())
                if from_stage is None and ref.isdigit() and int(ref) < len(stages):
                    from_stage = int(ref)
                if from_stage is None:  # an external image: not a build-context source
                    sources = ()
            elif len(words) >= 2:
                sources = tuple(w for w in words[:-1] if not w.startswith("<<"))
        elif ins == "RUN":
            flags, _ = _split_flags(value)
            m = re.search(r"--mount=\S*from=([^,\s]+)", value)
            if m and m.group(1).lower() in names:
                from_stage = names[m.group(1).lower()]
        text_key = " ".join(value.split()) if "<<" not in value else value
        steps.append(Step(index=len(steps), stage=len(stages) - 1, instruction=ins, line=line,
                          end_line=end, text=f"{ins} {text_key}", sources=sources,
                          from_stage=from_stage, uses_args=uses))
    if not stages:
        raise InputError("no FROM instruction: this is not a Dockerfile", file=file,
                         line=1 if lines else None, hint="a Dockerfile starts with FROM <image>")
    return DockerfileReading(file, tuple(directives), tuple(global_args), tuple(stages),
                             tuple(steps))


def read_dockerfile(path) -> DockerfileReading:
    """Read the Dockerfile at ``path`` (opened read-only)."""
    from courselib.io.yamlfile import read_text
    return parse_dockerfile(read_text(path, "dockerfile"), file=str(path))


def is_install(step: Step) -> bool:
    """Does this step install packages (the slow layer that should stay cached)?"""
    return step.instruction == "RUN" and bool(INSTALL_RE.search(step.text))


def lint_dockerfile(reading: DockerfileReading) -> list:
    """Findings for a Dockerfile (codes D0xx); D001 is the layer-cache model's verdict."""
    from courselib.model.layers import Change, rebuild_plan
    from courselib.model.lint import Finding

    f = reading.file
    out: list[Finding] = []
    for s in reading.steps:
        if s.instruction not in ("COPY", "ADD") or s.from_stage is not None or not s.sources:
            continue
        broad = [src for src in s.sources if src.rstrip("/") in (".", "", "src", "app", "code")
                 or (src.endswith("/") and "*" not in src)]
        if not broad:
            continue
        probe = broad[0].rstrip("/").lstrip("./")
        probe = (probe + "/" if probe else "") + "train.py"
        plan = rebuild_plan(reading.steps, Change(path=probe), reading.global_arg_lines())
        installs = [r.step for r in plan if r.rebuilt and is_install(r.step) and r.step.index > s.index]
        if installs:
            first = installs[0]
            n = sum(1 for r in plan if r.rebuilt)
            out.append(Finding(
                "D001", "warning", f, s.line,
                f"{s.text} comes before {len(installs)} install step(s) "
                f"(first: line {first.line}, {first.text[:50]}...): editing any copied file, "
                f"e.g. {probe}, rebuilds {n} steps including every package install",
                "copy only the dependency files first (requirements.txt, pyproject.toml + lock), "
                "install, then COPY the code last"))
    for st in reading.stages:
        if st.base_stage is not None or st.base.lower() == "scratch":
            continue
        base = st.base_resolved or st.base
        if st.base_resolved is None:
            missing = [a for a, d, _ in reading.global_args if d is None and a in st.base]
            out.append(Finding(
                "D002", "warning", f, st.line,
                f"FROM {st.base} uses ARG {', '.join(missing) or '?'} with no default: the build "
                f"fails unless every --build-arg is given",
                "give the ARG a default (ARG TAG=24.04) or document the required --build-arg"))
            continue
        if "@sha256:" in base:
            continue
        tail = base.rsplit("/", 1)[-1]
        if ":" not in tail or tail.endswith(":latest"):
            out.append(Finding(
                "D003", "info", f, st.line,
                f"base image {base} is not pinned: ':latest' moves, so the same Dockerfile builds "
                f"a different image (and CUDA/driver pairing) next month",
                "pin a version tag, or a digest (@sha256:...)"))
    _inst = re.compile(r"apt-get\s+(-\S+\s+)*install")
    for s in reading.steps:
        if s.instruction == "RUN" and re.search(r"apt-get\s+update", s.text) and \
                not _inst.search(s.text):
            later = next((t for t in reading.steps if t.stage == s.stage and t.index > s.index
                          and t.instruction == "RUN" and _inst.search(t.text)
                          and not re.search(r"apt-get\s+update", t.text)), None)
            if later is None:
                continue
            out.append(Finding(
                "D004", "warning", f, s.line,
                f"apt-get update runs in its own RUN, but the install is on line {later.line}: "
                f"the update layer stays cached, so the install can use a stale package index",
                "run 'apt-get update && apt-get install -y ...' in the same RUN"))
    return out
