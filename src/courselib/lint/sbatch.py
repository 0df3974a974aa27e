"""Lint rules for sbatch scripts (codes S0xx): the seed's failure modes, before a cluster finds them.

Each rule reads an :class:`~courselib.io.sbatch.SbatchReading` (read with ``strict=False``, so
that a bad value is a finding, not an error) or one of its heterogeneous-job components.
"""
from __future__ import annotations

from dataclasses import dataclass

from courselib.io.sbatch import SbatchComponent, SbatchReading, directive_words, has_placeholder
from courselib.lint.registry import rule, rules_for
from courselib.model.lint import Finding, time_confusion


@dataclass(frozen=True)
class Context:
    file: str | None
    lines: list          # the script's text, line by line ([] when not given)
    tag: str = ""        # "component N: " in a heterogeneous job


def lint_sbatch(reading: SbatchReading, text: str | None = None) -> list[Finding]:
    """Findings for an sbatch script (codes S0xx). ``reading`` should come from ``strict=False``."""
    ctx = Context(reading.file, text.splitlines() if text is not None else [])
    out = [f for r in rules_for("sbatch", "file") for f in r.check(reading, ctx)]
    for c in reading.components:
        each = Context(ctx.file, ctx.lines, f"component {c.index}: " if len(reading.components) > 1 else "")
        out += [f for r in rules_for("sbatch", "component") for f in r.check(c, each)]
    return out


# ---- the script as a whole ------------------------------------------------------------------------
@rule("S001", "sbatch", "file", "error", "the script does not start with '#!'",
      why="sbatch refuses a batch script whose first two bytes are not '#!'; a comment or a blank line "
          "above the '#!' line is enough.",
      fix="put '#!/bin/bash' on line 1, before any comment")
def s001(reading: SbatchReading, ctx: Context):
    if not reading.has_shebang:
        where = (f"'#!' is on line {reading.shebang_line}" if reading.shebang_line
                 else "there is no '#!' line")
        yield Finding("S001", "error", ctx.file, 1,
                      f"sbatch refuses this script: its first two bytes are not '#!' ({where})",
                      "put '#!/bin/bash' on line 1, before any comment")


@rule("S002", "sbatch", "file", "error", "an #SBATCH line after the first command",
      why="sbatch stops reading #SBATCH directives at the first line that is not a comment or blank "
          "(sbatch(1)): a directive below it is silently ignored, so the job runs without it.",
      fix="move every #SBATCH line above the first command")
def s002(reading: SbatchReading, ctx: Context):
    fc, lines = reading.first_command_line, ctx.lines
    for line, txt in reading.ignored_directives:
        cmd = lines[fc - 1].strip() if lines and fc and fc <= len(lines) else ""
        yield Finding("S002", "error", ctx.file, line,
                      f"Slurm ignores this directive: '{txt.split()[0]} "
                      f"{' '.join(directive_words(txt[len(txt.split()[0]):])[0])[:60]}' "
                      f"comes after the first command "
                      f"(line {fc}{': ' + cmd[:40] if cmd else ''}), where sbatch stops reading #SBATCH lines",
                      f"move it above line {fc}, with the other #SBATCH lines")


@rule("S012", "sbatch", "file", "warning", "'hetjob' inside a directive's value or comment",
      why="sbatch looks for the word 'hetjob' (or 'packjob') anywhere in an #SBATCH line and starts a "
          "new heterogeneous-job component there, even inside a value or a comment.",
      fix="rename the value (or reword the comment) so the line does not contain 'hetjob'")
def s012(reading: SbatchReading, ctx: Context):
    for line in reading.hidden_separator_lines:
        yield Finding("S012", "warning", ctx.file, line,
                      "this directive contains 'hetjob'/'packjob' inside a value or comment: sbatch looks for "
                      "the word anywhere in the line and starts a new heterogeneous-job component here",
                      "rename the value (or reword the comment) so the line does not contain 'hetjob'")


@rule("S013", "sbatch", "file", "info", "the old #SLURM spelling",
      why="#SLURM is an old spelling of #SBATCH; sbatch still reads it but warns.",
      fix="write #SBATCH")
def s013(reading: SbatchReading, ctx: Context):
    for line in reading.old_magic_lines:
        yield Finding("S013", "info", ctx.file, line, "#SLURM is an old spelling; sbatch still reads it but warns",
                      "write #SBATCH")


@rule("S003", "sbatch", "file", "error", "a value sbatch rejects",
      why="sbatch checks each option's value before it queues the job; a value it cannot read makes it "
          "refuse the whole script.",
      fix="fix the value the finding names")
def s003(reading: SbatchReading, ctx: Context):
    for p in reading.problems:
        yield Finding("S003", "error", ctx.file, p.line, f"{p.field}: {p.message} (sbatch rejects the script)",
                      p.hint or "fix the value")


@rule("S004", "sbatch", "file", "warning", "an option sbatch does not know",
      why="plain Slurm rejects a script with an unknown option; only a site's SPANK plugin can add options.",
      fix="remove the option, or check your site's documentation for it")
def s004(reading: SbatchReading, ctx: Context):
    for line, opt in reading.unknown_options:
        yield Finding("S004", "warning", ctx.file, line,
                      f"{opt} is not an sbatch option: plain Slurm rejects the script "
                      f"(unless a site SPANK plugin defines it)",
                      f"remove {opt}, or check your site's documentation for it")


@rule("S005", "sbatch", "file", "warning", "a word in a directive that is not an option",
      why="an #SBATCH line holds options only; a stray word is not passed to the script as you may expect.",
      fix="write options as --name=value; put arguments for the script on the sbatch command line")
def s005(reading: SbatchReading, ctx: Context):
    for line, word in reading.stray_arguments:
        yield Finding("S005", "warning", ctx.file, line,
                      f"'{word}' in a directive is not an option; sbatch does not use it as you may expect",
                      "write options as --name=value; put arguments for the script on the sbatch command line")


# ---- each component of the job --------------------------------------------------------------------
@rule("S006", "sbatch", "component", "warning", "a --time that reads as minutes but looks meant as hours",
      why="Slurm reads a bare number as minutes and A:B as minutes:seconds (sbatch(1) --time), so "
          "--time=48 is 48 minutes and --time=100:00 is 100 minutes: the job is killed (TIMEOUT) long "
          "before it was meant to end.",
      fix="write hours as H:MM:SS (--time=48:00:00), or 0:MM:00 when minutes are meant")
def s006(c: SbatchComponent, ctx: Context):
    if c.time_limit is None:
        return
    why = time_confusion(c.time_limit.minutes, c.time_limit.form)
    if why:
        a = c.time_limit.text.strip()
        if c.time_limit.form == "M":
            fix = (f"if you meant {a} hours write --time={int(a)}:00:00; "
                   f"if minutes are right, write --time=0:{int(a):02d}:00 to say so")
        else:
            m_, s_ = a.split(":")
            fix = (f"if you meant {int(m_)} h {int(s_)} min write "
                   f"--time={int(m_)}:{int(s_):02d}:00")
        yield Finding("S006", "warning", ctx.file, c.line_of("time"), f"{ctx.tag}--time={a}: {why}", fix)


@rule("S007", "sbatch", "component", "error or warning", "GPUs requested twice per node",
      why="two per-node GPU options that disagree leave the job's size to whichever Slurm reads last; "
          "even when they agree, Slurm 26.05+ rejects --gpus-per-node together with --gres=gpu.",
      fix="keep one GPU option, e.g. only --gpus-per-node")
def s007(c: SbatchComponent, ctx: Context):
    node_srcs = [s for s in c.gpu_sources if s.per == "node"]
    if len({s.option for s in node_srcs}) <= 1:
        return
    if len({s.count for s in node_srcs}) > 1:
        yield Finding("S007", "error", ctx.file, node_srcs[-1].line,
                      f"{ctx.tag}GPU requests disagree: " + ", ".join(
                          f"{s.option} asks {s.count} per node (line {s.line})" for s in node_srcs),
                      "keep one GPU option, e.g. only --gpus-per-node")
    else:
        yield Finding("S007", "warning", ctx.file, node_srcs[-1].line,
                      f"{ctx.tag}GPUs are requested twice ({' and '.join(s.option for s in node_srcs)}); "
                      f"Slurm 26.05+ rejects --gpus-per-node together with --gres=gpu",
                      "keep only --gpus-per-node (or only --gres=gpu:N)")


@rule("S008", "sbatch", "component", "error", "a placeholder never filled in",
      why="a value such as <partition> or $PARTITION in an #SBATCH line is not expanded by sbatch: "
          "the job asks for a partition, account or QOS of that literal name and is refused.",
      fix="replace it with your cluster's value (see `sinfo`/`sacctmgr show assoc`)")
def s008(c: SbatchComponent, ctx: Context):
    for opt in ("partition", "account", "job-name", "qos", "reservation"):
        v = c.option(opt)
        if v and has_placeholder(v):
            yield Finding("S008", "error", ctx.file, c.line_of(opt),
                          f"{ctx.tag}--{opt}={v} is a placeholder that was never filled in",
                          f"replace it with your cluster's {opt} (see `sinfo`/`sacctmgr show assoc`)")


@rule("S009", "sbatch", "component", "info", "the job's total GPUs cannot be worked out",
      why="without --nodes (or a per-job GPU count) the script alone does not say how many GPUs the job "
          "holds: neither a reader nor backfill knows the gang's size until submission.",
      fix="set --nodes in the script")
def s009(c: SbatchComponent, ctx: Context):
    if c.total_gpus is None and c.gpu_sources:
        yield Finding("S009", "info", ctx.file, c.line_of("nodes") or c.first_line,
                      f"{ctx.tag}total GPUs unknown: {c.total_gpus_reason}",
                      "set --nodes in the script so readers (and backfill) know the job's size")


@rule("S010", "sbatch", "component", "info", "a multi-node GPU job with no --time",
      why="without --time the partition's DefaultTime (else its MaxTime) applies, and backfill needs "
          "realistic limits to fit jobs into gaps [slurm-sched-config].",
      fix="set --time to a realistic upper bound, e.g. --time=12:00:00")
def s010(c: SbatchComponent, ctx: Context):
    multi = (c.nodes or 0) > 1 or c.nodes is None and c.ntasks and c.ntasks > 1
    if c.time_limit is None and c.gpu_sources and multi:
        yield Finding("S010", "info", ctx.file, c.first_line,
                      f"{ctx.tag}no --time: the partition's DefaultTime (else its MaxTime) applies, and "
                      f"backfill needs realistic limits to fit jobs into gaps [slurm-sched-config]",
                      "set --time to a realistic upper bound, e.g. --time=12:00:00")


@rule("S011", "sbatch", "component", "warning", "--gpus that does not divide over the nodes",
      why="a per-job --gpus count that the node count does not divide gives the nodes, and so the ranks, "
          "unequal GPU counts.",
      fix="use --gpus-per-node so every node gets the same number")
def s011(c: SbatchComponent, ctx: Context):
    job_total = next((s for s in c.gpu_sources if s.per == "job"), None)
    if job_total and c.nodes and job_total.count % c.nodes:
        yield Finding("S011", "warning", ctx.file, job_total.line,
                      f"{ctx.tag}--gpus={job_total.count} does not divide over {c.nodes} nodes: ranks get "
                      f"unequal GPU counts",
                      "use --gpus-per-node so every node gets the same number")
