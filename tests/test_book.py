"""Every chapter in the table of contents executes without a cell error, and follows the book's rules.

Run one chapter: ``pytest tests/test_book.py -k 03``.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        for ch in part.get("chapters", []):
            files.append(ch["file"])
            files += [s["file"] for s in ch.get("sections", [])]
    return files


def page_path(entry: str) -> Path:
    for ext in (".md", ".ipynb"):
        if (ROOT / (entry + ext)).exists():
            return ROOT / (entry + ext)
    raise FileNotFoundError(entry)


CHAPTERS = [f for f in toc_files() if re.match(r"book/\d\d-", f)]
# Labs are rendered but never executed at build (their checks fail until a student answers);
# tests/test_labs.py grades them instead.
NOTEBOOK_PAGES = [f for f in toc_files() if not f.startswith("labs/")
                  and (page_path(f).suffix == ".ipynb" or "kernelspec" in page_path(f).read_text()[:400])]


@pytest.mark.parametrize("entry", NOTEBOOK_PAGES)
def test_page_executes(entry):
    import jupytext
    from nbclient import NotebookClient

    page = page_path(entry)
    nb = jupytext.read(page)
    # Run where Jupyter Book runs it: in the page's own folder.
    client = NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(page.parent)}})
    client.execute()  # raises CellExecutionError on the first failing cell
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors


@pytest.mark.parametrize("entry", CHAPTERS)
def test_chapter_follows_the_book_rules(entry):
    text = page_path(entry).read_text()
    assert "Learning objectives" in text, "a chapter opens with learning objectives"
    assert "**The crux.**" in text, "a chapter states its crux"
    assert len(re.findall(r"\{cite(:p|:t)?\}`", text)) >= 3, "at least three citations"
    assert len(re.findall(r"^`{3,4}\{exercise\}", text, flags=re.M)) >= 3, "at least three exercises"
    n_solutions = len(re.findall(r"^`{3,4}\{solution(-start)?\}", text, flags=re.M))
    assert n_solutions >= 3, "every exercise has a solution"
    assert re.search(r"\{glue:figure\}|\{figure\}", text), "at least one figure"
    assert "{term}`" in text, "links into the glossary"
    assert "popular account" in text.lower(), "says where the popular account is imprecise"
    for alt_block in re.findall(r"```\{glue:figure\}[^\n]*\n((?::[^\n]*\n)*)", text):
        assert ":alt:" in alt_block, "every figure has alt text"


def test_every_cited_key_is_in_the_bibliography():
    bib = (ROOT / "book" / "references.bib").read_text()
    keys = set(re.findall(r"@\w+\{([^,]+),", bib))
    assert len(keys) == len(re.findall(r"@\w+\{([^,]+),", bib)), "no duplicate keys"
    for page in (ROOT / "book").glob("*.md"):
        for group in re.findall(r"\{cite(?::\w+)?\}`([^`]+)`", page.read_text()):
            for key in group.split(","):
                assert key.strip() in keys, f"{page.name}: {key.strip()} is not in references.bib"
