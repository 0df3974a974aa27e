"""Every real or recorded run a chapter shows has a "What this run shows, and what it does not" box near
it (issue 32: "every real or recorded run in the book gets a short box: what this run proves … and what it
does not").

A chapter shows a run through a code cell that calls one of courselib's run functions: ``live_or_recorded``
(the live value, or the recording with its label) and the readers of a recording (``load_recorded``,
``feature_gates_or_recorded``, ``container.recorded``, …). Their names are read from the library itself
(every public function of ``courselib.live`` whose name says ``recorded``), so a new reader is covered
without a change here. A box is an ``{admonition}`` titled "What … , and what it does not" (or "they do
not"). Near means: in the same section (the text between two headings) and within ``NEAR`` lines of the
cell. Each box is also shown to be needed: removing any one of today's boxes fails the check.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NEAR = 60           # lines between a run's cell and its box (today's farthest: 48, chapter 3)
BOX_TITLE = re.compile(r"^What .+, and what (it |they )?do(es)? not$")

#: run cells that show no run, each with its reason; an entry that no longer matches a cell fails the test
EXEMPT = {
    ("06-native-gang-and-failures", "(before the first section)"):
        "a hidden set-up cell: reads the recorded run only for its Kubernetes version, which the boxes below glue",
}


def chapters() -> list[Path]:
    return sorted((ROOT / "book").glob("[0-9][0-9]-*.md"))


def run_functions() -> set[str]:
    """The public functions of ``courselib.live`` that give a run or a recording, by name."""
    names = set()
    for path in (ROOT / "src" / "courselib" / "live").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and "recorded" in node.name and not node.name.startswith("_"):
                names.add(node.name)
    return names


@dataclass
class Block:
    kind: str           # "run" or "box"
    first: int          # 1-based lines
    last: int
    section: str        # the heading above it
    calls: tuple[str, ...] = ()


def blocks(text: str, runs: set[str]) -> list[Block]:
    """The page's run cells and boxes, each with its section and lines."""
    out: list[Block] = []
    lines = text.splitlines()
    aliases = set(runs)
    section, stack, cell = "(before the first section)", [], None
    for i, line in enumerate(lines, 1):
        s = line.strip()
        if stack and s == stack[-1][0]:
            fence, kind, first = stack.pop()
            if kind == "code-cell":
                source = "\n".join(ln for ln in lines[first:i - 1] if not re.match(r"^:[\w-]+:", ln))
                called = cell_calls(source, aliases)
                if called:
                    out.append(Block("run", first, i, section, called))
            elif kind == "box":
                out.append(Block("box", first, i, section))
            continue
        m = re.match(r"^(`{3,}|:{3,})(.*)$", s)
        if m and (not stack or m.group(2)):      # an opening fence (a bare fence inside a block closes it)
            directive = re.match(r"\{([\w:-]+)\}\s*(.*)", m.group(2).strip())
            name, title = (directive.group(1), directive.group(2).strip()) if directive else ("", "")
            kind = "code-cell" if name == "code-cell" else "box" if (name == "admonition"
                                                                       and BOX_TITLE.match(title)) else name
            stack.append((m.group(1), kind, i))
            continue
        if not stack and re.match(r"^#{2,6} ", line):
            section = line.lstrip("#").strip()
    return out


def cell_calls(source: str, aliases: set[str]) -> tuple[str, ...]:
    """The run functions a cell calls (``aliases`` grows with ``from … import load_recorded as x``)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            aliases.update(a.asname for a in node.names if a.asname and a.name in aliases)
    called = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if name in aliases:
                called.append(name)
    return tuple(called)


def missing_boxes(text: str, page: str, runs: set[str]) -> list[str]:
    """Run cells with no box in their section within ``NEAR`` lines (exempt cells aside)."""
    found = blocks(text, runs)
    boxes = [b for b in found if b.kind == "box"]
    out = []
    for run in (b for b in found if b.kind == "run"):
        if (page, run.section) in EXEMPT:
            continue
        near = [b for b in boxes if b.section == run.section
                and (0 <= b.first - run.last <= NEAR or 0 <= run.first - b.last <= NEAR)]
        if not near:
            out.append(f"{page}.md:{run.first} ({run.section!r}) shows a run ({', '.join(run.calls)}) with no "
                       f"'What this run shows, and what it does not' box in its section within {NEAR} lines")
    return out


RUNS = run_functions()


def test_the_run_functions_are_read_from_the_library():
    assert {"live_or_recorded", "load_recorded", "feature_gates_or_recorded", "recorded"} <= RUNS


@pytest.mark.parametrize("page", chapters(), ids=lambda p: p.stem)
def test_every_run_a_chapter_shows_has_its_box(page):
    assert missing_boxes(page.read_text(), page.stem, RUNS) == []


def test_the_finder_sees_runs_and_boxes():
    page = ("# T\n\n## A run\n\n```{code-cell} ipython3\n:tags: [remove-input]\n"
            "from courselib.live.kube.result import load_recorded as old\nx = old('a')\n```\n\nText.\n\n"
            "```{admonition} What this run shows, and what it does not\n:class: note\n**It shows** a.\n```\n\n"
            "## Another\n\n```{code-cell} ipython3\nshown = recorded.live_or_recorded(src)\n```\n\n"
            "```{admonition} How we know\n:class: dropdown\nnot a box\n```\n")
    found = blocks(page, RUNS)
    assert [(b.kind, b.section) for b in found] == [("run", "A run"), ("box", "A run"), ("run", "Another")]
    assert found[0].calls == ("old",)
    assert len(missing_boxes(page, "x", RUNS)) == 1 and "'Another'" in missing_boxes(page, "x", RUNS)[0]


def test_every_exemption_still_names_a_run_cell():
    for (page, section), why in EXEMPT.items():
        found = blocks((ROOT / "book" / f"{page}.md").read_text(), RUNS)
        assert any(b.kind == "run" and b.section == section for b in found), (page, section, why)
        assert not any(b.kind == "box" and b.section == section for b in found), (
            f"{page}: {section!r} has a box now; drop its exemption")


def every_box() -> list[tuple[Path, int]]:
    return [(p, b.first) for p in chapters() for b in blocks(p.read_text(), RUNS) if b.kind == "box"]


@pytest.mark.parametrize("page, first", every_box(), ids=lambda x: x.stem if isinstance(x, Path) else str(x))
def test_removing_any_box_fails_the_check(page, first):
    """Planted: each box in turn is cut out of its page, and the check must name the run it covered."""
    lines = page.read_text().splitlines()
    box = next(b for b in blocks(page.read_text(), RUNS) if b.kind == "box" and b.first == first)
    cut = "\n".join(lines[:box.first - 1] + lines[box.last:]) + "\n"
    assert missing_boxes(cut, page.stem, RUNS), f"{page.name}:{first}: its box can go without the check noticing"


def test_there_are_boxes_to_remove():
    assert len(every_box()) >= 20      # ch1 2, ch2 1, ch3 2, ch4 2, ch5 3, 6a 4, 6b 3, ch7 2, ch9 1
