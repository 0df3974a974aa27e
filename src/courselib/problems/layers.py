"""Practice: after one change, which Dockerfile steps rebuild and which come from the cache?

The generator writes a Dockerfile and a build context, then changes one thing: a file in the
context or one line of the Dockerfile. The solution is :mod:`courselib.io.dockerfile` (which
reads with BuildKit's own parser) and :func:`courselib.model.layers.rebuild_plan`: the first step
whose instruction text or copied files changed misses the cache, and every later step of its
stage rebuilds. Traps by difficulty:

- easy: one stage; ``COPY . .`` before or after ``RUN pip install``; a file that is or is not copied.
- medium: instructions continued over several lines, globs (``COPY requirements*.txt``), ``ENV``
  edits, a comment edit (rebuilds nothing), a ``CMD`` edit (only the last step).
- hard: several stages (a wheel builder, a runtime ``COPY --from`` it, a test stage ``FROM`` the
  runtime), a global ``ARG`` used in ``FROM``: a change reaches every stage that depends on it.
"""
from __future__ import annotations

from courselib.io.dockerfile import is_install, parse_dockerfile
from courselib.model.layers import Change, rebuild_plan, source_matches
from courselib.problems.base import Problem, Solution, rng

TOPIC = "layers"
SUMMARY = "which Dockerfile layers rebuild after a change (the build cache, COPY order, stages)"

_PROJECTS = ("llm-finetune", "vision", "recsys", "speech", "forecast", "ranker", "segment",
             "tabular", "diffusion", "embed", "ocr", "agent", "detector", "tts", "qa")
_BASES = ("python:3.11-slim", "python:3.12-slim", "pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime",
          "nvcr.io/nvidia/pytorch:24.08-py3", "ubuntu:22.04")
_APT = ("git", "curl", "libgl1", "ffmpeg", "build-essential", "libsndfile1", "ca-certificates")
_CODE = ("src/train.py", "src/model.py", "src/data.py", "src/utils.py")
_OTHER = ("configs/base.yaml", "README.md", "scripts/launch.sh", "tests/test_model.py", "notebooks/eda.ipynb")


def _apt(r, packages, multiline: bool) -> list[str]:
    pk = " ".join(packages)
    if not multiline:
        return [f"RUN apt-get update && apt-get install -y --no-install-recommends {pk} && rm -rf /var/lib/apt/lists/*"]
    return ["RUN apt-get update \\",
            f"    && apt-get install -y --no-install-recommends {pk} \\",
            "    && rm -rf /var/lib/apt/lists/*"]


def _single_stage(r, difficulty: str, project: str) -> list[str]:
    base = r.choice(_BASES)
    lines = [f"# {project}: training image"]
    lines.append(f"FROM {base}")
    if difficulty != "easy" or r.random() < 0.5:
        lines.append(r.choice(("ENV PYTHONDONTWRITEBYTECODE=1", "ENV PIP_NO_CACHE_DIR=1",
                               f"ENV OMP_NUM_THREADS={r.choice((1, 2, 4, 8))}")))
    if base == "ubuntu:22.04" or r.random() < 0.6:
        pk = sorted(r.sample(_APT, r.randint(1, 3)))
        if base == "ubuntu:22.04":
            pk = sorted(set(pk) | {"python3-pip"})
        lines += _apt(r, pk, multiline=difficulty != "easy" and r.random() < 0.6)
    lines.append(f"WORKDIR /opt/{project}")
    pip = "pip" if base != "ubuntu:22.04" else "pip3"
    req = "requirements.txt"
    if difficulty != "easy" and r.random() < 0.4:
        req_copy = r.choice(("COPY requirements*.txt ./", "COPY *.txt ./"))
    else:
        req_copy = f"COPY {req} ."
    order = r.choice(("good", "bad", "mixed"))
    if order == "bad":                    # the trap: every code edit reinstalls every package
        lines += ["COPY . .", f"RUN {pip} install -r {req}"]
    elif order == "good":
        lines += [req_copy, f"RUN {pip} install -r {req}"]
        if difficulty != "easy" and r.random() < 0.5:
            lines.append("# code last: editing it reuses the installed packages")
        lines += ["COPY src/ src/"]
        if r.random() < 0.6:
            lines.append("COPY configs/ configs/")
    else:
        lines += [req_copy, f"RUN {pip} install -r {req}", "COPY . ."]
    if difficulty != "easy" and r.random() < 0.6:
        lines.append(f"ENV LOG_LEVEL={r.choice(('info', 'warning'))}")
    lines.append(f'CMD ["python", "src/{r.choice(("train", "main", "serve"))}.py"]')
    return lines


def _multi_stage(r, project: str) -> list[str]:
    py = r.choice(("3.10", "3.11", "3.12"))
    lines = ["# syntax=docker/dockerfile:1", f"ARG PY={py}", "FROM python:${PY}-slim AS builder",
             "WORKDIR /build"]
    if r.random() < 0.5:
        lines += _apt(r, sorted(r.sample(("build-essential", "git", "cmake", "ninja-build"), 2)),
                      multiline=r.random() < 0.5)
    lines += [r.choice(("COPY requirements.txt .", "COPY requirements*.txt ./")),
              "RUN pip wheel --wheel-dir /wheels -r requirements.txt", ""]
    runtime_base = r.choice(("python:${PY}-slim", f"python:{py}-slim"))   # the ARG, or a pinned copy
    lines += [f"FROM {runtime_base} AS runtime", f"WORKDIR /opt/{project}",
              "COPY --from=builder /wheels /wheels", "RUN pip install --no-index /wheels/*"]
    lines += r.choice((["COPY src/ src/", "COPY configs/ configs/"], ["COPY . ."], ["COPY src/ src/"]))
    lines.append(f'CMD ["python", "src/{r.choice(("train", "main", "serve"))}.py"]')
    if r.random() < 0.6:
        lines += ["", "FROM runtime AS test", "COPY tests/ tests/", "RUN python -m pytest -q tests"]
    return lines


def _edit(r, lines: list[str], difficulty: str) -> dict | None:
    """A Dockerfile line the learner edits: (line number, old text, new text)."""
    options = []
    for i, text in enumerate(lines, 1):
        if text.startswith("ENV LOG_LEVEL="):
            options.append((i, text, "ENV LOG_LEVEL=debug" if not text.endswith("debug") else "ENV LOG_LEVEL=info"))
        elif text.startswith("ENV OMP_NUM_THREADS="):
            options.append((i, text, "ENV OMP_NUM_THREADS=16"))
        elif text.startswith("CMD "):
            options.append((i, text, text.replace('.py"]', '.py", "--resume"]')))
        elif text.startswith("# ") and not text.startswith("# syntax"):
            options.append((i, text, text + " (see README)"))
        elif text.startswith("    && apt-get install"):
            options.append((i, text, text.replace("install -y", "install -y htop")))
        elif text.startswith("RUN apt-get update && apt-get install"):
            options.append((i, text, text.replace("install -y", "install -y htop")))
        elif text.startswith("ARG PY="):
            options.append((i, text, "ARG PY=3.13"))
        elif text.startswith("RUN pip install -r") or text.startswith("RUN pip3 install -r"):
            options.append((i, text, text.replace("install -r", "install --upgrade -r")))
    if not options:
        return None
    line, old, new = r.choice(options)
    return {"line": line, "old": old, "new": new}


def generate(seed: int, difficulty: str) -> Problem:
    r = rng(TOPIC, seed, difficulty)
    project = r.choice(_PROJECTS)
    lines = _multi_stage(r, project) if difficulty == "hard" else _single_stage(r, difficulty, project)
    dockerfile = "\n".join(lines) + "\n"
    context = sorted({"requirements.txt", *r.sample(_CODE, r.randint(2, 4)),
                      *r.sample(_OTHER, r.randint(1 if difficulty == "easy" else 2, 4))})
    change = None
    if difficulty != "easy" and r.random() < 0.45:
        change = _edit(r, lines, difficulty)
    if change is None:
        pool = list(context)
        weights = [3 if p == "requirements.txt" or p.startswith("src/") else 1 for p in pool]
        change = {"path": r.choices(pool, weights)[0]}
    numbered = "\n".join(f"{i:>3} | {t}" for i, t in enumerate(lines, 1))
    if "path" in change:
        what = f"You edit {change['path']} (its content changes) and build again."
    else:
        what = (f"You edit line {change['line']} of the Dockerfile and build again:\n"
                f"    before: {change['old']}\n    after:  {change['new']}")
    question = ("Which steps run again (give their line numbers) and which come from the cache? "
                "Does any package install run again?")
    text = "\n".join(["The image was built once; every step is in the build cache. The Dockerfile:", "",
                      numbered, "", f"Build context: {', '.join(context)} (and the Dockerfile; .dockerignore lists "
                      "Dockerfile, .dockerignore and .git, so no COPY ever copies them).", what, "", question])
    data = {"dockerfile": dockerfile, "context": context, "change": change}
    return Problem(TOPIC, seed, difficulty, text, data, question)


def solve(problem: Problem) -> Solution:
    data = problem.data
    reading = parse_dockerfile(data["dockerfile"], file="Dockerfile")
    ch = data["change"]
    change = Change(path=ch["path"]) if "path" in ch else Change(line=ch["line"])
    plan = rebuild_plan(reading.steps, change, reading.global_arg_lines(),
                        inert_lines=reading.inert_lines)
    steps = ["The cache rule (Docker build cache): a step is reused only if its parent step was reused, "
             "its instruction text is unchanged and, for COPY/ADD, the copied files' checksums match; "
             "the first miss rebuilds every later step of its stage, a stage built FROM a rebuilt stage "
             "rebuilds too, and a COPY --from misses when a rebuilt step of that stage may have written "
             "what it copies (a RUN may write anything)."]
    if "path" in ch:
        copiers = [s for s in reading.steps if s.instruction in ("COPY", "ADD") and s.from_stage is None
                   and any(source_matches(src, ch["path"]) for src in s.sources)]
        if copiers:
            steps.append(f"{ch['path']} is copied by " + ", ".join(
                f"line {s.line} ({s.text})" for s in copiers) + ": that checksum changes.")
        else:
            steps.append(f"No COPY/ADD picks up {ch['path']}: no cache key contains it.")
    else:
        hit = [s for s in reading.steps if s.line <= ch["line"] <= s.end_line]
        if hit:
            steps.append(f"Line {ch['line']} belongs to step {hit[0].index + 1} ({hit[0].instruction}, lines "
                         f"{hit[0].line}-{hit[0].end_line}): its instruction text changes.")
        elif any(a == ch["line"] for a in reading.global_arg_lines().values()):
            name = next(a for a, ln in reading.global_arg_lines().items() if ln == ch["line"])
            users = [s for s in reading.steps if name in s.uses_args]
            steps.append(f"Line {ch['line']} is the global ARG {name}; it is part of the FROM of "
                         + (", ".join(f"line {s.line}" for s in users) or "no stage") + ".")
        else:
            steps.append(f"Line {ch['line']} is a comment or blank: it is part of no step, so no cache key changes.")
    if "line" in ch and any(s.instruction in ("COPY", "ADD") and "." in s.sources for s in reading.steps):
        steps.append("COPY . . does not see the edit: .dockerignore keeps the Dockerfile out of the build "
                     "context (without that line, the edited Dockerfile would be copied and COPY . . would "
                     "miss the cache too).")
    stage_names = {st.index: (st.name or f"stage {st.index}") for st in reading.stages}
    for res in plan:
        s = res.step
        mark = "REBUILT" if res.rebuilt else "cached "
        steps.append(f"line {s.line:>2} [{stage_names[s.stage]}] {mark}  {s.text[:70]}"
                     + ("" if not res.rebuilt else f"  <- {res.reason}"))
    rebuilt = [res.step for res in plan if res.rebuilt]
    installs = [s for s in rebuilt if is_install(s)]
    if installs:
        steps.append("The package install at line " + ", ".join(str(s.line) for s in installs)
                     + " runs again: that is the slow part. Copying only the dependency files before the "
                       "install, and the code after it, keeps code edits from reaching it.")
    elif rebuilt:
        steps.append("No package install is in the rebuilt part: the slow layers stay cached.")
    else:
        steps.append("Nothing rebuilds: the build reuses every layer.")
    answer = {
        "rebuilt_lines": [s.line for s in rebuilt],
        "cached_lines": [res.step.line for res in plan if not res.rebuilt],
        "first_rebuilt_line": rebuilt[0].line if rebuilt else None,
        "rebuilt_steps": len(rebuilt),
        "reinstalls_packages": bool(installs),
    }
    return Solution(answer, steps)
