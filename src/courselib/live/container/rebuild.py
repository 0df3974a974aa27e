"""A real image build, an edit, a real rebuild — and courselib's layer-cache prediction beside it.

:func:`rebuild` copies a build context into a temporary workspace (the reader's files are never
touched), builds it with a real builder (``buildah bud --layers``, see
:class:`courselib.live.container.runtime.Builder`), rebuilds it unchanged, applies the change (``changed``
files, or an edit of one Dockerfile line) to the copy and rebuilds again. From the builder's own
output it reads, per step, whether the builder reused its cache ("Using cache") or ran the step
again, the layer each step produced, and how long each build took; beside that it puts what
``courselib docker layers --changed`` predicts (:func:`courselib.model.layers.rebuild_plan`), and
the agreement between the two.

No registry is reachable: a ``FROM`` of an external image is pointed at the course's stand-in base
image in the copy (the output says so), so the Dockerfile's steps must run offline on busybox.
"""
from __future__ import annotations

import os
import re
import shutil
import stat as st
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from courselib.errors import CourseError, InputError
from courselib.io.dockerfile import parse_dockerfile
from courselib.io.policy import limit
from courselib.io.yamlfile import read_text
from courselib.live.container.runtime import BASE_IMAGE, Builder, check_builder, workspace
from courselib.live.recorded import OutOfTime
from courselib.model.layers import BuildContext, Change, parse_dockerignore

_STEP = re.compile(r"^(?:\[(\d+)/(\d+)\]\s+)?STEP (\d+)/(\d+): (.*)$")
_CACHE = re.compile(r"^--> Using cache ([0-9a-f]{64})")
_LAYER = re.compile(r"^--> ([0-9a-f]{6,64})$")
EDIT_MARK = "courselib-edit"


@dataclass
class BuiltStep:
    """One step as the real builder reported it."""

    stage: int
    number: int          # the builder's step number within its stage, 1-based
    text: str            # the instruction as the builder printed it
    cached: bool | None  # None for FROM, which the builder does not report
    layer: str | None    # the image the step produced (short or full id)


def parse_build_output(text: str) -> list[BuiltStep]:
    """buildah's ``STEP i/N: ...``, ``--> Using cache ID`` and ``--> ID`` lines, per step."""
    steps: list[BuiltStep] = []
    stage = 0
    for raw in text.splitlines():
        line = raw.rstrip()
        m = _STEP.match(line)
        if m:
            stage = int(m.group(1)) - 1 if m.group(1) else 0
            text_ = m.group(5)
            steps.append(BuiltStep(stage, int(m.group(3)), text_,
                                   None if text_.upper().startswith("FROM ") else False, None))
            continue
        if not steps:
            continue
        c = _CACHE.match(line)
        if c:
            steps[-1].cached = True
            steps[-1].layer = c.group(1)
            continue
        lay = _LAYER.match(line)
        if lay and steps[-1].layer is None:
            steps[-1].layer = lay.group(1)
    return steps


@dataclass
class Build:
    label: str
    seconds: float
    steps: list[BuiltStep]
    image: str | None
    ok: bool
    log: str = ""

    def as_dict(self) -> dict:
        return {"label": self.label, "seconds": self.seconds, "ok": self.ok, "image": self.image,
                "steps": [asdict(s) for s in self.steps],
                "reused": sum(1 for s in self.steps if s.cached), "ran": sum(1 for s in self.steps if s.cached is False)}


@dataclass(frozen=True)
class Edit:
    """One change to the build context: files (``changed``) and/or one Dockerfile line."""

    changed: tuple[str, ...] = ()
    edited_line: int | None = None
    line_text: str | None = None
    label: str = ""

    def describe(self) -> str:
        if self.label:
            return self.label
        parts = [f"edit {c}" for c in self.changed]
        if self.edited_line is not None:
            parts.append(f"edit Dockerfile line {self.edited_line}")
        return ", ".join(parts)


@dataclass
class Comparison:
    edit: Edit
    done: list[str]
    rows: list[dict]
    build: str          # the label of the build after this edit

    @property
    def agreement(self) -> float:
        return sum(r["agree"] for r in self.rows) / len(self.rows) if self.rows else 0.0

    def as_dict(self) -> dict:
        return {"edit": self.edit.describe(), "changed": list(self.edit.changed),
                "edited_line": self.edit.edited_line, "done": self.done, "build": self.build,
                "rows": self.rows, "agreed": sum(r["agree"] for r in self.rows), "steps": len(self.rows),
                "agreement": self.agreement}


@dataclass
class Rebuild:
    builder: str
    base: dict
    dockerfile: str
    replaced_from: list[dict] = field(default_factory=list)
    builds: list[Build] = field(default_factory=list)
    comparisons: list[Comparison] = field(default_factory=list)

    @property
    def agreement(self) -> float:
        rows = [r for c in self.comparisons for r in c.rows]
        return sum(r["agree"] for r in rows) / len(rows) if rows else 0.0

    def as_dict(self) -> dict:
        comps = [c.as_dict() for c in self.comparisons]
        return {"builder": self.builder, "base": self.base, "dockerfile": self.dockerfile,
                "replaced_from": self.replaced_from, "builds": [b.as_dict() for b in self.builds],
                "comparisons": comps,
                "comparison": comps[0] if len(comps) == 1 else
                {"agreement": self.agreement, "agreed": sum(c["agreed"] for c in comps),
                 "steps": sum(c["steps"] for c in comps)}}


def check_context(src: Path) -> int:
    """The context's size in bytes; refuses a FIFO, socket or device in it (copying one could hang)
    and a context larger than ``COURSELIB_MAX_CONTEXT_BYTES`` (1 GiB), before anything is copied."""
    cap = limit("build_context")
    total = 0
    stack = [src]
    while stack:
        d = stack.pop()
        with os.scandir(d) as it:
            for e in it:
                mode = e.stat(follow_symlinks=False).st_mode
                if st.S_ISDIR(mode):
                    stack.append(Path(e.path))
                elif st.S_ISREG(mode):
                    total += e.stat(follow_symlinks=False).st_size
                    if total > cap.value:
                        cap.check(total, file=str(src))
                elif not st.S_ISLNK(mode):
                    raise InputError("is not a regular file, directory or symlink; a build context cannot "
                                     "hold it", file=e.path, hint="move it out of the build context")
    return total


def ignore_patterns(context: Path) -> tuple[str, ...]:
    """The context's ignore file as buildah reads it: ``.containerignore``, else ``.dockerignore``."""
    for name in (".containerignore", ".dockerignore"):
        p = context / name
        if p.is_file():
            return parse_dockerignore(p.read_text(errors="replace"))
    return ()


def _touch(path: Path) -> str:
    """Change a file of the context the way an editor would: append a line (or create the file)."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {EDIT_MARK}: a new file\n")
        return "created"
    data = path.read_bytes()
    sep = b"" if data.endswith(b"\n") or not data else b"\n"
    path.write_bytes(data + sep + f"# {EDIT_MARK}\n".encode())
    return "appended a line"


def edit_line(text: str, n: int, new: str | None = None) -> tuple[str, str]:
    """Text with line ``n`` edited (``new``, or a harmless change that keeps it valid); what was done."""
    lines = text.splitlines(keepends=True)
    if not 1 <= n <= len(lines):
        raise InputError(f"line {n} is not in the Dockerfile ({len(lines)} lines)", field="--edited-line")
    old = lines[n - 1]
    end = "\n" if old.endswith("\n") else ""
    body = old[:-1] if end else old
    if new is None:
        stripped = body.strip()
        cont = body.rstrip().endswith("\\")
        core = body.rstrip()[:-1].rstrip() if cont else body.rstrip()
        word = stripped.split(None, 1)[0].upper() if stripped else ""
        if not stripped:
            new = f"# {EDIT_MARK}"
        elif stripped.startswith("#"):
            new = body + f" {EDIT_MARK}"
        elif word in ("ARG", "ENV", "LABEL") and "=" in core:
            new = core + "-edited" + (" \\" if cont else "")
        elif word in ("RUN",) and not core.rstrip().endswith("]"):
            new = core + " && true" + (" \\" if cont else "")
        elif word in ("WORKDIR",):
            new = core.rstrip("/") + "-edited"
        elif not word or word not in ("FROM", "COPY", "ADD", "CMD", "ENTRYPOINT", "USER", "EXPOSE",
                                      "VOLUME", "SHELL", "STOPSIGNAL", "HEALTHCHECK", "ONBUILD"):
            new = core + " && true" + (" \\" if cont else "")   # a continuation line of a RUN
        else:
            raise InputError(f"line {n} ({stripped[:40]}) has no harmless default edit",
                             field="--edited-line", hint="give the new text with --line-text")
    lines[n - 1] = new + end
    return "".join(lines), f"line {n}: {body.strip()!r} -> {new.strip()!r}"


def _point_from_at_stand_in(text: str, stage_names: set[str]) -> tuple[str, list[dict]]:
    """Replace each ``FROM <external image>`` by the stand-in base (line structure kept)."""
    out, replaced = [], []
    for i, line in enumerate(text.splitlines(keepends=True), 1):
        m = re.match(r"^(\s*FROM\s+)((?:--\S+\s+)*)(\S+)(.*)$", line, re.IGNORECASE | re.DOTALL)
        if m and "$" not in m.group(3) and m.group(3).lower() not in stage_names \
                and m.group(3).lower() != "scratch" and not m.group(3).startswith("localhost/"):
            replaced.append({"line": i, "from": m.group(3), "to": BASE_IMAGE})
            line = m.group(1) + m.group(2) + BASE_IMAGE + m.group(4)
        out.append(line)
    return "".join(out), replaced


def _same_image(a: str | None, b: str | None) -> bool:
    """Image IDs as the builder prints them: short (11 hex) after a new step, full after a cache hit."""
    if a is None or b is None:
        return a == b
    return a.startswith(b) or b.startswith(a)


def _compare(reading, plan, before: list[BuiltStep], after: list[BuiltStep], base_ids) -> list[dict]:
    steps = reading.steps
    if len(after) != len(steps):
        raise CourseError(f"the builder ran {len(after)} steps where courselib reads {len(steps)}",
                          hint="a stage the final image does not need may have been skipped")
    rows = []
    for s, p, a, b in zip(steps, plan, after, before):
        if s.instruction == "FROM":
            real = not _same_image(base_ids(s.stage, "after"), base_ids(s.stage, "before"))
        else:
            real = a.cached is False
        rows.append({"step": s.index + 1, "stage": s.stage, "line": s.line, "instruction": s.instruction,
                     "text": s.text if len(s.text) < 70 else s.text[:66] + " ...",
                     "predicted": "rebuild" if p.rebuilt else "cached", "reason": p.reason,
                     "real": "rebuild" if real else "cached", "layer_before": b.layer, "layer_after": a.layer,
                     "agree": p.rebuilt == real})
    return rows


def rebuild(context: str | Path, *, changed: list[str] = (), edited_line: int | None = None,
            line_text: str | None = None, file: str = "Dockerfile", build_args: dict | None = None,
            variants: tuple[str, ...] = (), edits: list[Edit] | None = None, warm: bool = True,
            say=lambda msg: None, deadline: float | None = None) -> Rebuild:
    """Build ``context`` for real, change it, rebuild, and compare with courselib's prediction.

    One change (``changed`` files and/or ``edited_line``), or a sequence of ``edits``, each applied
    on top of the ones before it and compared with the prediction made from the files before it.
    ``warm`` adds a rebuild with nothing changed (every step should come from the cache).
    ``deadline`` (``time.monotonic()``): no build runs past it; :class:`~courselib.live.recorded.OutOfTime`
    is raised instead (the running build stopped).
    """

    src = Path(context)
    if not src.is_dir():
        raise InputError("is not a directory (the build context)", file=str(src))
    if not (src / file).is_file():
        raise InputError(f"no {file} in the build context", file=str(src), field="--file")
    if edits is None:
        edits = [Edit(tuple(changed), edited_line, line_text)]
    for e in edits:
        if not e.changed and e.edited_line is None:
            raise InputError("nothing to change", field="--changed",
                             hint="give --changed PATH (a file of the context) or --edited-line N")
        for c in e.changed:
            if Path(c).is_absolute() or ".." in Path(c).parts:
                raise InputError(f"{c}: give a path inside the build context", field="--changed")
    original = read_text(src / file, "dockerfile")        # the input policy: regular file, size cap
    check_context(src)
    check_builder()
    with workspace("courselib-container-") as ws:
        ctx = ws.root / "context"
        shutil.copytree(src, ctx, symlinks=True)
        df = ctx / file
        reading0 = parse_dockerfile(original, file=str(src / file))
        names = {s.name.lower() for s in reading0.stages if s.name}
        text, replaced = _point_from_at_stand_in(original, names)
        df.write_text(text)
        builder = Builder(ws)
        base = builder.load_base()
        for v in variants:
            builder.variant(v)
        result = Rebuild(builder.version, base.describe(), file, replaced)

        def build(label):
            say(f"{label} ...")
            t0 = time.monotonic()
            res = builder.build(ctx, dockerfile=file, build_args=build_args,
                                timeout=600 if deadline is None else _left(deadline, label))
            secs = round(time.monotonic() - t0, 3)
            out = res.stdout + res.stderr
            b = Build(label, secs, parse_build_output(res.stdout), None, res.returncode == 0, out[-4000:])
            if not b.ok:
                tail = [ln for ln in out.strip().splitlines() if ln.strip()][-1:] or [str(res.returncode)]
                raise CourseError(f"the real build failed ({label}): {tail[0][:300]}",
                                  hint="the steps must run offline on the busybox stand-in base")
            b.image = res.stdout.strip().splitlines()[-1] if res.stdout.strip() else None
            result.builds.append(b)
            return b

        before = build("first build (cold cache)")
        if warm:
            before = build("rebuild, nothing changed")
        rel = file if not Path(file).is_absolute() else None
        for k, e in enumerate(edits, 1):
            text_before = df.read_text()
            reading = parse_dockerfile(text_before, file=str(src / file))
            bctx = BuildContext(dockerfile=rel, ignore=ignore_patterns(ctx))
            done = [f"{c}: {_touch(ctx / c)}" for c in e.changed]
            if e.edited_line is not None:
                new_text, what = edit_line(text_before, e.edited_line, e.line_text)
                df.write_text(new_text)
                done.append(what)
            after = build(f"rebuild after edit {k}: {e.describe()}" if len(edits) > 1
                          else "rebuild after the change")
            reading_after = parse_dockerfile(df.read_text(), file=str(src / file))
            # the prediction, made from the files as they were before this edit
            plans = [reading.plan(Change(path=c), context=bctx) for c in e.changed]
            if e.edited_line is not None:
                plans.append(reading.plan(Change(line=e.edited_line), context=bctx))
            plan = [max(group, key=lambda r: r.rebuilt) for group in zip(*plans)]

            def base_ids(stage: int, when: str, before=before, after=after, reading=reading,
                         reading_after=reading_after):
                """The image a stage starts from, in the build before or after the change."""
                steps = (before if when == "before" else after).steps
                st = (reading if when == "before" else reading_after).stages[stage]
                if st.base_stage is not None:       # FROM <stage>: that stage's last layer
                    last = [s for s in steps if s.stage == st.base_stage]
                    return last[-1].layer if last else None
                ref = st.base if build_args and "$" in st.base else (st.base_resolved or st.base)
                return builder.image_id(ref)

            result.comparisons.append(Comparison(e, done, _compare(reading, plan, before.steps, after.steps,
                                                                   base_ids), after.label))
            before = after
    return result


# ----------------------------------------------------------------------------- scenarios

#: The seed's Dockerfile shape, runnable offline: ``FROM`` the stand-in, and the apt-get and pip
#: steps replaced by steps that take measurable time without a network (they sleep, then write
#: what they stand in for). The comments say so in the file itself.
SEED_DOCKERFILE = """\
FROM nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04
# stands in for "apt-get update && apt-get install -y python3 python3-pip": 3 s of work, offline
RUN sleep 3 && mkdir -p /opt/system && echo "python3 python3-pip" > /opt/system/packages
WORKDIR /app
COPY requirements.txt .
# stands in for "pip install -r requirements.txt": 2 s per requirement, offline
RUN while read -r req; do sleep 2; echo "$req" >> /opt/installed; done < requirements.txt
COPY . .
CMD ["python3", "train.py"]
"""
#: The same steps in the order many first attempts use: the code copied before the installs.
SEED_CODE_FIRST = """\
FROM nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04
WORKDIR /app
COPY . .
# stands in for "apt-get update && apt-get install -y python3 python3-pip": 3 s of work, offline
RUN sleep 3 && mkdir -p /opt/system && echo "python3 python3-pip" > /opt/system/packages
# stands in for "pip install -r requirements.txt": 2 s per requirement, offline
RUN while read -r req; do sleep 2; echo "$req" >> /opt/installed; done < requirements.txt
CMD ["python3", "train.py"]
"""
SEED_FILES = {
    "Dockerfile": SEED_DOCKERFILE,
    "requirements.txt": "numpy==1.26.4\ntorch==2.3.1\ntransformers==4.41.2\n",
    "train.py": "import torch\n\nprint('training on', torch.cuda.device_count(), 'GPUs')\n",
}
#: Chapter 4's three edits of the seed shape, one after the other.
SEED_EDITS = (Edit(("train.py",), label="edit train.py"),
              Edit(("requirements.txt",), label="edit requirements.txt"),
              Edit((), 9, 'CMD ["python3", "train.py", "--epochs", "2"]', label="edit the CMD line (9)"))

_CODE_FIRST = """\
FROM nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04
WORKDIR /app
COPY . .
RUN cat requirements.txt > /opt-installed
CMD ["python3", "train.py"]
"""
_DEPS_FIRST = """\
FROM nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04
RUN echo system > /opt-system
WORKDIR /app
COPY requirements.txt .
RUN cat requirements.txt > /opt-installed
# the code changes many times a day: copy it last
COPY . .
CMD ["python3", "train.py"]
"""
_PROJECT = {"requirements.txt": "numpy==1.26.4\n", "train.py": "print('train')\n",
            "src/model.py": "class Model: pass\n", "notes.md": "lab notes\n", "README.md": "readme\n"}
_MULTI = """\
FROM nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04 AS builder
WORKDIR /src
COPY build.sh .
RUN cp build.sh /artifact
COPY train.py .
FROM nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04
COPY --from=builder /artifact /artifact
RUN cat /artifact > /installed
CMD ["sh"]
"""
_STAGES = """\
FROM nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04 AS deps
COPY requirements.txt /r.txt
RUN cat /r.txt > /installed
FROM deps AS app
WORKDIR /app
COPY train.py .
CMD ["sh"]
"""
_ARGS = """\
ARG BASE=localhost/courselib/cuda-stand-in:busybox
FROM ${BASE}
ARG VERSION=1
COPY requirements.txt .
ENV MODE=train
RUN echo "$VERSION" > /version
COPY train.py .
CMD ["sh"]
"""
_COMMENTS = """\
FROM nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04
WORKDIR /app
RUN echo one \\
# a comment inside the continuation
  && echo two > /two
# a comment between steps
COPY . .
CMD ["sh"]
"""


def _s(name, dockerfile, edit, files=_PROJECT, ignore=None, variants=(), what=""):
    f = dict(files)
    f["Dockerfile"] = dockerfile
    if ignore is not None:
        f[".dockerignore"] = ignore
    return {"name": name, "what": what, "files": f, "edit": edit, "variants": variants}


#: The differential test's scenarios: each is built, edited and rebuilt by the real builder, and
#: courselib's prediction must agree with it on every step (tests/test_rebuild_live.py).
SCENARIOS = [
    _s("code first: edit train.py", _CODE_FIRST, Edit(("train.py",)),
       what="COPY . . before the install: a code edit reinstalls"),
    _s("deps first: edit train.py", _DEPS_FIRST, Edit(("train.py",)), what="only COPY . . and CMD"),
    _s("deps first: edit requirements.txt", _DEPS_FIRST, Edit(("requirements.txt",))),
    _s("deps first: add a new file", _DEPS_FIRST, Edit(("data/new.csv",)), what="COPY . . picks it up"),
    _s("a .dockerignore'd file", _DEPS_FIRST, Edit(("notes.md",)), ignore="notes.md\n",
       what="not in the context: nothing rebuilds"),
    _s(".dockerignore exception", _DEPS_FIRST, Edit(("README.md",)), ignore="*.md\n!README.md\n",
       what="!README.md brings it back"),
    _s("edit a comment, Dockerfile copied", _DEPS_FIRST, Edit((), 6),
       what="COPY . . copies the Dockerfile itself"),
    _s("edit a comment, Dockerfile ignored", _DEPS_FIRST, Edit((), 6), ignore="Dockerfile\n",
       what="a comment is no step"),
    _s("edit the install RUN line", _DEPS_FIRST, Edit((), 5), ignore="Dockerfile\n"),
    _s("edit the CMD line", _DEPS_FIRST, Edit((), 8, 'CMD ["python3", "train.py", "--epochs", "2"]'),
       ignore="Dockerfile\n", what="only the last step"),
    _s("comment inside a continuation", _COMMENTS, Edit((), 4), ignore="Dockerfile\n",
       what="BuildKit's parser drops it: the RUN is unchanged"),
    _s("in-stage ARG edited", _ARGS, Edit((), 3), ignore="Dockerfile\n",
       what="the ARG step is reused; the first RUN after it misses"),
    _s("global ARG selects another base", _ARGS,
       Edit((), 1, "ARG BASE=localhost/courselib/cuda-stand-in:variant"), ignore="Dockerfile\n",
       variants=("localhost/courselib/cuda-stand-in:variant",), what="FROM ${BASE} changes image"),
    _s("ENV edited", _ARGS, Edit((), 5), ignore="Dockerfile\n"),
    _s("multi-stage: edit what the builder copies", _MULTI, Edit(("build.sh",)),
       files={"build.sh": "echo build\n", "train.py": "print(1)\n"},
       what="the artifact changes: COPY --from rebuilds"),
    _s("multi-stage: builder rebuilt, artifact unchanged", _MULTI, Edit(("train.py",)),
       files={"build.sh": "echo build\n", "train.py": "print(1)\n"},
       what="COPY --from compares the copied files: cache hit"),
    _s("FROM another stage", _STAGES, Edit(("requirements.txt",)), files={"requirements.txt": "a\n",
                                                                          "train.py": "print(1)\n"},
       what="the stage built on a rebuilt stage rebuilds"),
    _s("FROM another stage: edit the second stage's file", _STAGES, Edit(("train.py",)),
       files={"requirements.txt": "a\n", "train.py": "print(1)\n"}),
]


def write_context(path: Path, files: dict[str, str]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        f = path / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    return path


def run_scenario(scenario: dict, tmp: Path) -> dict:
    """One differential scenario, for real: the table of predicted and real verdicts per step."""
    ctx = write_context(tmp / "context", scenario["files"])
    r = rebuild(ctx, edits=[scenario["edit"]], variants=scenario["variants"], warm=False)
    c = r.comparisons[0]
    return {"name": scenario["name"], "what": scenario["what"], "edit": c.edit.describe(), "done": c.done,
            "steps": len(c.rows), "agreed": sum(x["agree"] for x in c.rows), "agreement": c.agreement,
            "rebuilt_real": sum(x["real"] == "rebuild" for x in c.rows),
            "rebuilt_predicted": sum(x["predicted"] == "rebuild" for x in c.rows),
            "seconds": [b.seconds for b in r.builds], "rows": c.rows, "builder": r.builder}


def _left(deadline: float, label: str) -> float:
    """Seconds left before ``deadline`` for the build ``label``; OutOfTime when none are."""
    left = deadline - time.monotonic()
    if left <= 1.0:
        raise OutOfTime(f"the real builds ran out of their time budget before '{label}'")
    return left


def seed_rebuilds(tmp: Path | None = None, *, orders=("deps_first", "code_first"), say=lambda msg: None,
                  budget_s: float | None = None) -> dict:
    """Chapter 4's real run: the seed's shape built, then edited three times and rebuilt each time
    (``deps_first``); and the code-first order built and rebuilt after the same code edit.
    ``budget_s``: all builds end within that many seconds, or OutOfTime (a page's cell has a time
    limit; see :func:`courselib.live.container.runtime.source`)."""
    out = {}
    deadline = None if budget_s is None else time.monotonic() + budget_s
    with tempfile.TemporaryDirectory(prefix="courselib-seed-", dir=tmp) as t:
        if "deps_first" in orders:
            say("deps first: build, then edit train.py, requirements.txt and the CMD line")
            deps = write_context(Path(t) / "deps-first", SEED_FILES)
            out["deps_first"] = rebuild(deps, edits=list(SEED_EDITS), deadline=deadline).as_dict()
        if "code_first" in orders:
            say("code first: build, then edit train.py")
            code = write_context(Path(t) / "code-first", {**SEED_FILES, "Dockerfile": SEED_CODE_FIRST})
            out["code_first"] = rebuild(code, edits=[SEED_EDITS[0]], warm=False, deadline=deadline).as_dict()
    return out


def suite(*, say=lambda msg: None) -> dict:
    """The differential suite, for real: what ``docker rebuild-suite`` prints."""
    out = {"differential": []}
    with tempfile.TemporaryDirectory(prefix="courselib-suite-") as t:
        for k, sc in enumerate(SCENARIOS, 1):
            say(f"scenario {k}/{len(SCENARIOS)}: {sc['name']}")
            with tempfile.TemporaryDirectory(prefix="courselib-suite-", dir=t) as one:
                out["differential"].append(run_scenario(sc, Path(one)))
    rows = out["differential"]
    out["table"] = {"scenarios": len(rows), "agreed": sum(r["agreement"] == 1.0 for r in rows),
                    "steps": sum(r["steps"] for r in rows), "steps_agreed": sum(r["agreed"] for r in rows)}
    return out


def predicted_now(scenario: dict) -> list[str]:
    """Today's prediction for a scenario, without building (checks a recording against the model)."""

    files = scenario["files"]
    text, _ = _point_from_at_stand_in(files["Dockerfile"], {m.lower() for m in re.findall(
        r"(?im)^\s*FROM\s+\S+\s+AS\s+(\S+)", files["Dockerfile"])})
    reading = parse_dockerfile(text)
    ignore = parse_dockerignore(files.get(".containerignore", files.get(".dockerignore", "")))
    ctx = BuildContext("Dockerfile", ignore)
    e = scenario["edit"]
    plans = [reading.plan(Change(path=c), context=ctx) for c in e.changed]
    if e.edited_line is not None:
        plans.append(reading.plan(Change(line=e.edited_line), context=ctx))
    return ["rebuild" if any(p[i].rebuilt for p in plans) else "cached" for i in range(len(reading.steps))]
