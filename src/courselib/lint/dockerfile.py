"""Lint rules for Dockerfiles (codes D0xx); D001 is the layer-cache model's verdict."""
from __future__ import annotations

import re

from courselib.io.dockerfile import DockerfileReading, is_install
from courselib.lint.registry import rule, rules_for
from courselib.model.layers import Change, rebuild_plan
from courselib.model.lint import Finding

_INSTALL = re.compile(r"apt-get\s+(-\S+\s+)*install")


def lint_dockerfile(reading: DockerfileReading) -> list[Finding]:
    """Findings for a Dockerfile (codes D0xx), rule by rule."""
    return [f for r in rules_for("dockerfile", "file") for f in r.check(reading)]


@rule("D001", "dockerfile", "file", "warning", "the code is copied before the package installs",
      why="a layer is rebuilt when anything it copies changes, and so is every layer after it: with the "
          "whole source copied before the installs, editing one file reinstalls every package (the "
          "course's layer-cache model, courselib.model.layers).",
      fix="copy only the dependency files first (requirements.txt, pyproject.toml + lock), install, "
          "then COPY the code last")
def d001(reading: DockerfileReading):
    for s in reading.steps:
        if s.instruction not in ("COPY", "ADD") or s.from_stage is not None or not s.sources:
            continue
        broad = [src for src in s.sources if src.rstrip("/") in (".", "", "src", "app", "code")
                 or (src.endswith("/") and "*" not in src)]
        if not broad:
            continue
        folder = broad[0].rstrip("/").lstrip("./")
        # a file the model edits to ask what such an edit costs; it need not exist, so the message
        # names the folder, never this file
        probe = (folder + "/" if folder else "") + "train.py"
        copied = f"any file under {folder}/" if folder else "any file it copies from the build context"
        plan = rebuild_plan(reading.steps, Change(path=probe), reading.global_arg_lines())
        installs = [r.step for r in plan if r.rebuilt and is_install(r.step) and r.step.index > s.index]
        if installs:
            first = installs[0]
            n = sum(1 for r in plan if r.rebuilt)
            yield Finding(
                "D001", "warning", reading.file, s.line,
                f"{s.text} comes before {len(installs)} install step(s) "
                f"(first: line {first.line}, {first.text[:50]}...): editing {copied} "
                f"rebuilds {n} steps including every package install",
                "copy only the dependency files first (requirements.txt, pyproject.toml + lock), "
                "install, then COPY the code last")


def _external_bases(reading: DockerfileReading):
    """The stages built on an image from a registry (not on an earlier stage, not scratch)."""
    for st in reading.stages:
        if st.base_stage is None and st.base.lower() != "scratch":
            yield st


@rule("D002", "dockerfile", "file", "warning", "FROM uses an ARG with no default",
      why="an ARG without a default is empty unless the build is given --build-arg, and FROM with an "
          "empty image name fails the build.",
      fix="give the ARG a default (ARG TAG=24.04) or document the required --build-arg")
def d002(reading: DockerfileReading):
    for st in _external_bases(reading):
        if st.base_resolved is None:
            missing = [a for a, d, _ in reading.global_args if d is None and a in st.base]
            yield Finding(
                "D002", "warning", reading.file, st.line,
                f"FROM {st.base} uses ARG {', '.join(missing) or '?'} with no default: the build "
                f"fails unless every --build-arg is given",
                "give the ARG a default (ARG TAG=24.04) or document the required --build-arg")


@rule("D003", "dockerfile", "file", "info", "the base image is not pinned",
      why="':latest' (or no tag) moves: the same Dockerfile builds a different image, and a different "
          "CUDA/driver pairing, next month.",
      fix="pin a version tag, or a digest (@sha256:...)")
def d003(reading: DockerfileReading):
    for st in _external_bases(reading):
        base = st.base_resolved
        if base is None or "@sha256:" in base:
            continue
        tail = base.rsplit("/", 1)[-1]
        if ":" not in tail or tail.endswith(":latest"):
            yield Finding(
                "D003", "info", reading.file, st.line,
                f"base image {base} is not pinned: ':latest' moves, so the same Dockerfile builds "
                f"a different image (and CUDA/driver pairing) next month",
                "pin a version tag, or a digest (@sha256:...)")


@rule("D004", "dockerfile", "file", "warning", "apt-get update in a RUN of its own",
      why="the layer of a RUN that only updates the package index stays cached, so a later install "
          "can use a stale index.",
      fix="run 'apt-get update && apt-get install -y ...' in the same RUN")
def d004(reading: DockerfileReading):
    for s in reading.steps:
        if s.instruction == "RUN" and re.search(r"apt-get\s+update", s.text) and \
                not _INSTALL.search(s.text):
            later = next((t for t in reading.steps if t.stage == s.stage and t.index > s.index
                          and t.instruction == "RUN" and _INSTALL.search(t.text)
                          and not re.search(r"apt-get\s+update", t.text)), None)
            if later is None:
                continue
            yield Finding(
                "D004", "warning", reading.file, s.line,
                f"apt-get update runs in its own RUN, but the install is on line {later.line}: "
                f"the update layer stays cached, so the install can use a stale package index",
                "run 'apt-get update && apt-get install -y ...' in the same RUN")
