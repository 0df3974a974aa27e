"""Read a Dockerfile into build stages and steps for the layer-cache model.

The reader is BuildKit's own parser: the PyPI package ``dockerfile`` (3.4.0, a binding to
``github.com/moby/buildkit/frontend/dockerfile/parser`` v0.12.5; imported lazily, extra
``courselib[io]``). So an instruction ends where BuildKit ends it: a ``\\`` continuation runs across
blank and comment lines, a file that ends in ``\\`` keeps its last instruction, an escaped
``\\\\`` is no continuation, heredocs (``RUN <<EOF``, ``<<-``, quoted and dotted names, several per
line) are one step, and ``RUN "<<X"`` or ``RUN ["<<X"]`` are none. The content is passed in memory;
nothing is ever written. On top of the parser's instructions this module adds what the layer
model needs: stages (``FROM ... AS``), ``ARG`` before the first ``FROM`` (global build arguments
that ``FROM`` may expand), parser directives (``# syntax=...``), ``COPY --from=<stage>`` and the
build-context sources of each ``COPY``/``ADD``.

tests/test_io_dockerfile.py checks the reading against BuildKit's own parser test files
(tests/data/buildkit_parser_cases.json) and the third-party corpus.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from courselib.errors import InputError
from courselib.io.yamlfile import read_text
from courselib.model.layers import BuildContext, Change, Step, StepResult, clean_path, rebuild_plan

_ARG_REF = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")
# BuildKit's parser directives: "# name=value" lines before anything else (parser.go reDirectives).
_DIRECTIVE = re.compile(r"^#\s*([a-zA-Z][a-zA-Z0-9]*)\s*=\s*(.+?)\s*$")
_KNOWN_DIRECTIVES = ("syntax", "escape")
INSTALL_RE = re.compile(r"\b(pip3?|uv pip|uv sync|poetry install|conda (env )?(install|create|update)|"
                        r"mamba install|apt-get install|apt install|yum install|dnf install|"
                        r"apk add|npm (ci|install)|yarn install|cargo build|go mod download)\b")
#: What reads Dockerfiles here (named in the book and in ``courselib docker`` output).
PARSER = "BuildKit v0.12.5 frontend/dockerfile/parser (PyPI dockerfile 3.4.0)"


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
    inert_lines: frozenset[int] = frozenset()   # blank and comment lines (outside heredoc bodies)

    def global_arg_lines(self) -> dict[str, int]:
        return {n: ln for n, _, ln in self.global_args}

    def plan(self, change: Change, *, context: BuildContext | None = None) -> tuple[StepResult, ...]:
        """The layer-cache model's answer for this Dockerfile (see ``courselib.model.layers``).

        ``context`` says where the Dockerfile sits in the build context and what ``.dockerignore``
        leaves out; without it, the Dockerfile is taken to be outside the context.
        """
        return rebuild_plan(self.steps, change, self.global_arg_lines(), inert_lines=self.inert_lines,
                            context=context)

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


def _official():
    try:
        import dockerfile
    except ImportError:  # pragma: no cover - optional extra courselib[io]
        raise InputError("reading Dockerfiles needs BuildKit's parser, the Python package dockerfile",
                         hint="pip install 'courselib[io]' (or pip install dockerfile)") from None
    return dockerfile


def buildkit_commands(text: str, *, file: str | None = None) -> tuple:
    """BuildKit's reading of ``text``: its instructions (``dockerfile.Command``), in order.

    A parse error is located at the first line where a prefix of the file stops parsing.
    """
    dockerfile = _official()
    try:
        return dockerfile.parse_string(text)
    except dockerfile.GoParseError as err:
        message = str(err)
    lines = text.splitlines(keepends=True)
    bad = None
    for n in range(1, len(lines) + 1):
        try:
            dockerfile.parse_string("".join(lines[:n]))
        except dockerfile.GoParseError as err:
            if str(err) == message:
                bad = n
                break
    raise InputError(f"BuildKit's parser: {message}", file=file,
                     line=bad if bad is not None else (1 if message == "file with no instructions" else None),
                     hint="a Dockerfile starts with FROM <image>" if "no instructions" in message else
                     "see https://docs.docker.com/reference/dockerfile/")


def _directives(lines: list[str]) -> list[tuple[str, str]]:
    """Parser directives: leading ``# name=value`` comments, as BuildKit reads them."""
    out: list[tuple[str, str]] = []
    for i, raw in enumerate(lines):
        line = raw.lstrip("\ufeff") if i == 0 else raw
        m = _DIRECTIVE.match(line.lstrip())
        if not m or m.group(1).lower() not in _KNOWN_DIRECTIVES:
            break
        out.append((m.group(1).lower(), m.group(2)))
    return out


def _flags(flags) -> dict[str, str]:
    """``("--from=build", "--chown=1:1")`` -> ``{"from": "build", "chown": "1:1"}``."""
    out: dict[str, str] = {}
    for f in flags:
        k, _, v = f[2:].partition("=")
        out[k.lower()] = v
    return out


def parse_dockerfile(text: str, *, file: str | None = None) -> DockerfileReading:
    """A Dockerfile's text -> :class:`DockerfileReading` (errors name file and line)."""
    if "\x00" in text:
        raise InputError("this is a binary file, not a Dockerfile", file=file, line=1)
    commands = buildkit_commands(text, file=file)
    directives = _directives(text.splitlines())
    stages: list[Stage] = []
    steps: list[Step] = []
    global_args: list[tuple[str, str | None, int]] = []
    names: dict[str, int] = {}
    workdir: dict[int, str] = {}     # per stage: the WORKDIR so far (relative COPY destinations)
    for c in commands:
        if not c.cmd:   # BuildKit keeps an empty instruction (a lone "\\"); the build then fails
            raise InputError("an empty instruction: this line holds only a line continuation",
                             file=file, line=c.start_line, hint="remove the stray \\ or finish the instruction")
        ins = c.cmd.upper()
        line, end = c.start_line, c.end_line
        value = tuple(c.value)
        if ins == "ARG" and not stages:
            for word in value:
                n, eq, d = word.partition("=")
                global_args.append((n, _unquote(d) if eq else None, line))
            continue
        if not stages and ins != "FROM":
            raise InputError(f"{ins} before the first FROM", file=file, line=line,
                             hint="only ARG (and parser directives) may come before FROM")
        flags = _flags(c.flags)
        from_stage = None
        sources: tuple[str, ...] = ()
        uses: tuple[str, ...] = ()
        if ins == "FROM":
            if not value:
                raise InputError("FROM needs an image", file=file, line=line,
                                 hint="write FROM python:3.11-slim")
            base = value[0]
            name = value[2] if len(value) >= 3 and value[1].lower() == "as" else None
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
            heredocs = {h.name for h in c.heredocs}
            if "from" in flags:
                ref = flags["from"]
                from_stage = names.get(ref.lower())
                if from_stage is None and ref.isdigit() and int(ref) < len(stages):
                    from_stage = int(ref)
                # an external image (from_stage None) is not a build-context source either
            elif len(value) >= 2:
                sources = tuple(w for w in value[:-1]
                                if not (w.startswith("<<") and w.lstrip("<-").strip("'\"") in heredocs))
        elif ins == "RUN":
            for mount in (v for k, v in ((f[2:].partition("=")[0], f[2:].partition("=")[2]) for f in c.flags)
                          if k == "mount"):
                m = re.search(r"(?:^|,)from=([^,]+)", mount)
                if m and m.group(1).lower() in names:
                    from_stage = names[m.group(1).lower()]
        text_key = c.original if c.heredocs else " ".join(c.original.split())
        stage_no = len(stages) - 1
        if ins == "FROM":
            workdir[stage_no] = workdir.get(from_stage, "/") if from_stage is not None else "/"
        wd = workdir.get(stage_no, "/")
        writes: tuple[str, ...] = ()
        from_paths: tuple[str, ...] = ()
        declares: tuple[str, ...] = ()
        if ins == "RUN":
            writes = ("*",)
        elif ins == "WORKDIR" and value:
            wd = _join(wd, value[0])
            workdir[stage_no] = wd
            writes = (wd,)
        elif ins in ("COPY", "ADD") and value:
            writes = (_join(wd, value[-1]),)
            if from_stage is not None:
                from_paths = tuple(_join("/", v) for v in value[:-1])
        elif ins == "ARG":
            declares = tuple(w.partition("=")[0] for w in value)
        steps.append(Step(index=len(steps), stage=stage_no, instruction=ins, line=line,
                          end_line=end, text=_canonical(ins, text_key), sources=sources,
                          from_stage=from_stage, uses_args=uses, declares_args=declares,
                          writes=writes, from_paths=from_paths))
    if not stages:
        raise InputError("no FROM instruction: this is not a Dockerfile", file=file,
                         line=1 if text.strip() else None, hint="a Dockerfile starts with FROM <image>")
    return DockerfileReading(file, tuple(directives), tuple(global_args), tuple(stages),
                             tuple(steps), inert_lines=_inert_lines(text, steps))


def _canonical(ins: str, text: str) -> str:
    """The instruction with its keyword upper-cased, as the book prints it (``run x`` -> ``RUN x``)."""
    head, sep, rest = text.partition(" ") if " " in text.split("\n", 1)[0] else (text, "", "")
    if head.upper() == ins:
        return ins + sep + rest
    return text


def _join(base: str, path: str) -> str:
    """``path`` resolved against the directory ``base`` (``WORKDIR``), as an absolute path."""
    p = path if path.startswith("/") else base.rstrip("/") + "/" + path
    cleaned = clean_path(p)
    return "/" if cleaned == "." else "/" + cleaned


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _inert_lines(text: str, steps: list[Step]) -> frozenset[int]:
    """Lines whose edit changes no instruction: blank lines and comments outside heredoc bodies.

    BuildKit drops comment lines even inside a ``\\`` continuation; a heredoc body is content.
    """
    body: set[int] = set()
    for s in steps:
        if "<<" in s.text and s.end_line > s.line:
            body.update(range(s.line + 1, s.end_line + 1))
    return frozenset(i for i, raw in enumerate(text.splitlines(), 1)
                     if i not in body and (not raw.strip() or raw.lstrip().startswith("#")))


def read_dockerfile(path) -> DockerfileReading:
    """Read the Dockerfile at ``path`` (opened read-only)."""
    return parse_dockerfile(read_text(path, "dockerfile"), file=str(path))


def is_install(step: Step) -> bool:
    """Does this step install packages (the slow layer that should stay cached)?"""
    return step.instruction == "RUN" and bool(INSTALL_RE.search(step.text))
