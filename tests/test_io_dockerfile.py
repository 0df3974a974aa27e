"""Dockerfiles: stages, ARG before FROM, heredocs, COPY --from, and the layer-cache model."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from courselib.errors import CourseError, InputError
from courselib.io.dockerfile import lint_dockerfile, parse_dockerfile, read_dockerfile
from courselib.model.layers import Change, Step, rebuild_plan, rebuilt_count, source_matches

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "files"

MULTI = """\
# syntax=docker/dockerfile:1
ARG BASE=python:3.11-slim
FROM ${BASE} AS deps
RUN apt-get update && apt-get install -y gcc
COPY requirements.txt .
RUN pip install -r requirements.txt

FROM deps AS app
# a comment
COPY src/ /app/src/
RUN <<EOF
python -m compileall /app/src
echo done
EOF

FROM alpine:3.20 AS final
COPY --from=app /app /app
CMD ["/app/run"]
"""


def test_stages_args_heredoc_and_copy_from():
    r = parse_dockerfile(MULTI, file="Dockerfile")
    assert r.directives == (("syntax", "docker/dockerfile:1"),)
    assert r.global_args == (("BASE", "python:3.11-slim", 2),)
    assert [(s.name, s.base_resolved, s.base_stage) for s in r.stages] == [
        ("deps", "python:3.11-slim", None), ("app", "deps", 0), ("final", "alpine:3.20", None)]
    heredoc = next(s for s in r.steps if s.instruction == "RUN" and "<<EOF" in s.text)
    assert (heredoc.line, heredoc.end_line) == (11, 14)
    assert len(r.steps) == 10   # the heredoc body is not 3 extra instructions
    copy_from = next(s for s in r.steps if s.stage == 2 and s.instruction == "COPY")
    assert copy_from.from_stage == 1 and copy_from.sources == ()


def test_code_edit_rebuilds_only_what_follows_the_code_copy():
    r = parse_dockerfile(MULTI)
    plan = r.plan(Change(path="src/model.py"))
    rebuilt = [(p.step.line, p.rebuilt) for p in plan if p.rebuilt]
    assert [ln for ln, _ in rebuilt] == [10, 11, 17, 18]   # COPY src/, RUN heredoc, COPY --from, CMD
    assert not any(p.rebuilt for p in plan if p.step.stage == 0)
    assert plan[-1].rebuilt and "parent layer" in plan[-1].reason   # CMD after the COPY --from


def test_requirements_edit_rebuilds_install_and_every_later_stage():
    plan = parse_dockerfile(MULTI).plan(Change(path="requirements.txt"))
    assert [p.step.line for p in plan if p.rebuilt] == [5, 6, 8, 10, 11, 17, 18]


def test_editing_a_comment_rebuilds_nothing_and_a_global_arg_rebuilds_its_stage():
    r = parse_dockerfile(MULTI)
    assert rebuilt_count(r.plan(Change(line=9))) == 0
    plan = r.plan(Change(line=2))
    assert plan[0].rebuilt and "ARG BASE" in plan[0].reason
    # stage 1 builds on stage 0; stage 2's own FROM alpine stays cached, its COPY --from does not
    assert rebuilt_count(plan) == 9 and not plan[7].rebuilt


def test_the_seed_lesson_as_a_number():
    bad = read_dockerfile(EXAMPLES / "Dockerfile.code-first")
    good = read_dockerfile(EXAMPLES / "Dockerfile.deps-first")
    edit = Change(path="src/train.py")
    assert rebuilt_count(bad.plan(Change(path="train.py"))) == 4       # COPY . . then both installs
    assert rebuilt_count(good.plan(edit)) == 3                          # COPY src/, RUN, CMD
    assert not any(p.rebuilt and "install" in p.step.text for p in good.plan(edit))
    assert [f.code for f in lint_dockerfile(bad)] == ["D001"]
    assert lint_dockerfile(good) == []


@pytest.mark.parametrize("pattern, path, hit", [
    (".", "a/b.py", True), ("./", "x", True), ("src/", "src/a/b.py", True), ("src", "srcx/a", False),
    ("requirements/*", "requirements/base.txt", True), ("*.txt", "a/b.txt", False),
    ("*.txt", "b.txt", True), ("./train.py", "train.py", True), ("train.py", "train.pyc", False),
])
def test_copy_source_matching(pattern, path, hit):
    assert source_matches(pattern, path) is hit


def test_change_is_a_path_or_a_line():
    with pytest.raises(ValueError):
        Change()
    with pytest.raises(ValueError):
        Change(path="a", line=1)


def test_reading_never_writes_the_file(tmp_path):
    p = tmp_path / "Dockerfile"
    p.write_text(MULTI)
    p.chmod(stat.S_IRUSR)
    before = (p.stat().st_mtime_ns, p.read_bytes())
    read_dockerfile(p)
    assert (p.stat().st_mtime_ns, p.read_bytes()) == before
    assert sorted(os.listdir(tmp_path)) == ["Dockerfile"]


@pytest.mark.parametrize("text, line", [("RUN echo\nFROM x\n", 1), ("FROM x\nRUN <<EOF\necho\n", 2),
                                        ("# only a comment\n", 1)])
def test_bad_dockerfiles_are_located_errors(text, line):
    with pytest.raises(InputError) as e:
        parse_dockerfile(text, file="Dockerfile")
    assert (e.value.file, e.value.line) == ("Dockerfile", line)


def corpus_files():
    from conftest import CORPUS
    d = CORPUS / "docker"
    return sorted(d.glob("*")) if d.is_dir() else []


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name[:60])
def test_every_corpus_dockerfile_reads_and_agrees_with_dockerfile_parse(path):
    from dockerfile_parse import DockerfileParser
    import io
    r = read_dockerfile(path)
    assert r.stages
    ref = [e for e in DockerfileParser(fileobj=io.BytesIO(path.read_bytes())).structure
           if e["instruction"] not in ("COMMENT",)]
    # no heredocs in the corpus: every instruction dockerfile-parse sees is one of ours
    ours = {(s.line, s.instruction) for s in r.steps} | {(ln, "ARG") for _, _, ln in r.global_args}
    assert {(e["startline"] + 1, e["instruction"]) for e in ref} == ours


def test_corpus_multistage_and_arg_cases(corpus):
    acc = read_dockerfile(corpus / "docker" / "huggingface__accelerate__docker__accelerate-gpu__Dockerfile")
    assert [s.name for s in acc.stages] == ["compile-image", "build-image"]
    verl = read_dockerfile(corpus / "docker" / ("aws-samples__awsome-distributed-training__3.test_cases__"
                                                "pytorch__verl__hyperpod-eks__rlvr__managed-tiered-checkpointing__Dockerfile"))
    assert verl.stages[0].base_resolved is None
    assert "D002" in [f.code for f in lint_dockerfile(verl)]


BITS = st.sampled_from(["FROM ", "python:3", " AS ", "b", "\n", "RUN ", "<<EOF", "EOF", "COPY ",
                        "--from=b ", ". .", "ARG ", "X=${Y}", "\\\n", "# c\n", "[\"a\", \"b\"]",
                        "ADD ", "src/", "\t", "$", "'", "\""])


@given(st.lists(BITS, max_size=30).map("".join), st.integers(1, 30), st.sampled_from(["a.py", "src/x", "."]))
@settings(max_examples=150, deadline=None)
def test_generated_dockerfiles_never_raise_anything_but_located_course_errors(text, line, path):
    try:
        r = parse_dockerfile(text, file="Dockerfile")
        r.plan(Change(line=line))
        r.plan(Change(path=path))
        lint_dockerfile(r)
    except CourseError as err:
        assert err.file == "Dockerfile"


def test_rebuild_plan_is_monotone_within_a_stage():
    steps = [Step(i, 0, "RUN", i + 1, i + 1, f"RUN {i}") for i in range(5)]
    plan = rebuild_plan(steps, Change(line=3))
    assert [p.rebuilt for p in plan] == [False, False, True, True, True]
