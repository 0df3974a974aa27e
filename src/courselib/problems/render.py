"""A problem and its worked solution as text (the CLI, the notebook, the chapters) or as one JSON document.

Answers are plain data; a key ending in ``_s`` holds seconds and is shown as a duration
(``start_s: 5400`` prints as ``start: 1h30m``), a key ending in ``usd`` holds dollars (a pair is a
range: ``$800.00–$1,600.00``), a float is shown with two decimals, ``None`` as ``-``.
"""
from __future__ import annotations

from courselib import problems
from courselib.problems.base import Problem, Solution
from courselib.units import format_duration


def args_lines(problem: Problem) -> list[str]:
    """``ARG topic gang`` … : enough to generate the same problem again anywhere."""
    return [f"ARG {k} {v}" for k, v in problem.args.items()]


def command(problem: Problem, solve: bool = True) -> str:
    """The shell command that prints this problem (and, with ``solve``, its worked solution)."""
    extra = " --solve" if solve else ""
    return f"courselib problem {problem.topic} --seed {problem.seed} --difficulty {problem.difficulty}{extra}"


def value_text(key: str, value) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key.endswith("_s") and isinstance(value, (int, float)):
        return format_duration(value)
    if key.endswith("usd") and isinstance(value, (int, float)):
        return f"${value:,.2f}"
    if isinstance(value, float):
        return f"{value:,.4f}" if key.endswith("_h") or key.startswith("waste_") else f"{value:,.2f}"
    if isinstance(value, (list, tuple)):
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value) and len(value) == 2 \
                and key.endswith("usd"):
            return f"{value_text(key, value[0])}–{value_text(key, value[1])}"
        return ", ".join(value_text(key, v) for v in value) if value else "none"
    return str(value)


def _label(key: str) -> str:
    return key[:-2] if key.endswith("_s") else key


def answer_lines(answer: dict, indent: str = "  ") -> list[str]:
    """Nested answer dicts as indented ``key: value`` lines, in the answer's own order; a small flat
    dict (a job's start, end and state) on one line."""
    out = []
    for key, value in answer.items():
        small = isinstance(value, dict) and 0 < len(value) <= 4 and not any(
            isinstance(v, (dict, list, tuple)) for v in value.values())
        if small:  # a row such as a job's start, end and state: one line
            row = ", ".join(f"{_label(k)} {value_text(k, v)}" for k, v in value.items())
            if len(indent) + len(key) + len(row) <= 100:
                out.append(f"{indent}{_label(key)}: {row}")
                continue
        if isinstance(value, dict):
            out.append(f"{indent}{_label(key)}:")
            out += answer_lines(value, indent + "  ")
        else:
            out.append(f"{indent}{_label(key)}: {value_text(key, value)}")
    return out


def text(problem: Problem, solution: Solution | None = None) -> str:
    """What ``courselib problem`` prints: the arguments, the problem; with a solution, the answer and why."""
    lines = args_lines(problem) + ["", problem.text.rstrip()]
    if solution is None:
        lines += ["", f"(answer and worked solution: {command(problem)})"]
        return "\n".join(lines)
    return "\n".join(lines + ["", solution_text(solution)])


def solution_text(solution: Solution) -> str:
    """The answer, then the numbered steps of why."""
    lines = ["ANSWER"] + answer_lines(solution.answer) + ["", "WHY, STEP BY STEP"]
    width = len(str(len(solution.steps)))
    for i, step in enumerate(solution.steps, 1):
        first, *rest = step.split("\n")
        lines.append(f"{i:>{width}}. {first}")
        lines += [" " * (width + 2) + r for r in rest]
    return "\n".join(lines)


def practice(topic: str, seed: int, difficulty: str = "easy") -> str:
    """A chapter's practice problem: the problem as ``courselib problem`` prints it (no answer)."""
    return text(problems.generate(topic, seed, difficulty))


def practice_solution(topic: str, seed: int, difficulty: str = "easy") -> str:
    """The answer and worked steps of :func:`practice`'s problem."""
    return solution_text(problems.solve(problems.generate(topic, seed, difficulty)))


def document(problem: Problem, solution: Solution | None = None) -> dict:
    """The ``--json`` document: the arguments, the problem, and with a solution its answer and steps."""
    doc = {"args": problem.args, "text": problem.text, "question": problem.question, "data": problem.data,
           "command": command(problem)}
    if solution is not None:
        doc["answer"] = solution.answer
        doc["steps"] = solution.steps
    return doc


def table(rows: list[tuple], indent: str = "  ") -> str:
    """Rows of cells (the first is the header) as left-aligned text columns."""
    cells = [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(cells[0]))]
    return "\n".join((indent + "  ".join(c.ljust(w) for c, w in zip(r, widths))).rstrip() for r in cells)
