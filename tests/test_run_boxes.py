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

The labs (``labs/*.ipynb``, the student edition that ``courselib labs build`` writes from ``solutions/``)
are held to the same rule, cell by cell: a code cell that calls a run function, or calls anything it
imports from ``courselib.live`` (a real kernel, runtime or builder, or its recording), needs a Markdown
cell in its section, within ``NEAR_CELLS`` cells, that opens with "> **What this run shows, and what it
does not.**" (a blockquote, which JupyterLab and the book both render; a MyST admonition would show as
its raw fence in JupyterLab).
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


# ---- the labs ----------------------------------------------------------------------------------------

import json  # noqa: E402

NEAR_CELLS = 2      # cells between a lab's run cell and its box (today's: the next cell)
LAB_BOX = re.compile(r"^>\s*\*\*What .+, and what (it |they )?do(es)? not\.?\*\*")


def labs() -> list[Path]:
    return sorted((ROOT / "labs").glob("*.ipynb"))


def live_calls(source: str) -> tuple[str, ...]:
    """What a cell calls that it imported from ``courselib.live`` (``from courselib.live import memcg`` then
    ``memcg.source(…)``; ``from courselib.live.rebuild import rebuild`` then ``rebuild(…)``)."""
    tree = ast.parse(source)
    live = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("courselib.live"):
            live.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.Import):
            live.update((a.asname or a.name).split(".")[0] for a in node.names if a.name.startswith("courselib.live"))
    called = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            while isinstance(f, ast.Attribute):
                f = f.value
            if isinstance(f, ast.Name) and f.id in live:
                called.append(ast.unparse(node.func))
    return tuple(called)


def lab_cells(nb: dict, runs: set[str]) -> list[Block]:
    """A lab's run cells and boxes; ``first``/``last`` are the cell's index, ``section`` its heading."""
    out, section = [], "(before the first section)"
    for i, cell in enumerate(nb["cells"]):
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            heading = re.match(r"^#{1,6} (.+)", source)
            if heading:
                section = heading.group(1).strip()
            elif LAB_BOX.match(source):
                out.append(Block("box", i, i, section))
        elif cell["cell_type"] == "code":
            called = cell_calls(source, set(runs)) + live_calls(source)
            if called:
                out.append(Block("run", i, i, section, called))
    return out


def missing_lab_boxes(nb: dict, name: str, runs: set[str]) -> list[str]:
    found = lab_cells(nb, runs)
    boxes = [b for b in found if b.kind == "box"]
    return [f"{name} cell {run.first} ({run.section!r}) shows a run ({', '.join(sorted(set(run.calls)))}) with no "
            f"'What this run shows, and what it does not' cell in its section within {NEAR_CELLS} cells"
            for run in found if run.kind == "run"
            and not any(b.section == run.section and abs(b.first - run.first) <= NEAR_CELLS for b in boxes)]


@pytest.mark.parametrize("lab", labs(), ids=lambda p: p.stem)
def test_every_run_a_lab_shows_has_its_box(lab):
    assert missing_lab_boxes(json.loads(lab.read_text()), lab.name, RUNS) == []


def test_the_lab_finder_sees_live_calls_and_boxes():
    def md(s):
        return {"cell_type": "markdown", "source": s}

    def code(s):
        return {"cell_type": "code", "source": s}

    nb = {"cells": [md("## Q1"), code("from courselib.live.memcg import MiB\nx = 64 * MiB"),
                    code("from courselib.live import memcg\nrun = memcg.source(('a',))"),
                    md("> **What this run shows, and what it does not.**\n>\n> **It shows** a."),
                    md("### A builder"), code("from courselib.live.rebuild import rebuild as rb\nrb('.')"),
                    md("## Q2"), code("r = unshare.recorded_run()"),
                    md("> **What this run shows, and what it does not.**")]}
    found = lab_cells(nb, RUNS)
    assert [(b.kind, b.first, b.section) for b in found] == [
        ("run", 2, "Q1"), ("box", 3, "Q1"), ("run", 5, "A builder"), ("run", 7, "Q2"), ("box", 8, "Q2")]
    assert found[0].calls == ("memcg.source",) and found[2].calls == ("rb",)
    missing = missing_lab_boxes(nb, "x", RUNS)
    assert len(missing) == 1 and "cell 5 ('A builder')" in missing[0]


def every_lab_box() -> list[tuple[Path, int]]:
    return [(p, b.first) for p in labs() for b in lab_cells(json.loads(p.read_text()), RUNS) if b.kind == "box"]


@pytest.mark.parametrize("lab, index", every_lab_box(), ids=lambda x: x.stem if isinstance(x, Path) else str(x))
def test_removing_any_lab_box_fails_the_check(lab, index):
    nb = json.loads(lab.read_text())
    del nb["cells"][index]
    assert missing_lab_boxes(nb, lab.name, RUNS), f"{lab.name} cell {index}: its box can go without the check noticing"


def test_there_are_lab_boxes_to_remove():
    assert len(every_lab_box()) >= 4      # lab 1: unshare and the CPU quota; lab 3: the memcg OOM; lab 4: buildah
