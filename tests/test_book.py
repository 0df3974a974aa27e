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


def _citation_label(entry) -> str:
    """What an author-year citation of ``entry`` reads as: "Last", "A and B" or "A et al.", then the year."""
    people = entry.persons.get("author") or entry.persons.get("editor") or []
    last = [" ".join(p.last_names) or str(p) for p in people]
    who = last[0] + " et al." if len(last) >= 3 else " and ".join(last)
    return f"{who}, {entry.fields.get('year', 'n.d.')}"


def test_no_two_citations_read_the_same():
    """Two sources must not both render as "The Kubernetes Authors, 2025": give them 2025a, 2025b."""
    from collections import defaultdict

    from pybtex.database import parse_file

    db = parse_file(str(ROOT / "book" / "references.bib"))
    by_label = defaultdict(list)
    for key, entry in db.entries.items():
        by_label[_citation_label(entry)].append(key)
    clashes = {label: keys for label, keys in by_label.items() if len(keys) > 1}
    assert not clashes, ("these entries would cite identically; add letters to their years (2025a, 2025b, "
                         f"in the order of their titles): {clashes}")


def _bib_keys() -> set[str]:
    return set(re.findall(r"@\w+\{([^,]+),", (ROOT / "book" / "references.bib").read_text()))


def test_practice_output_cites_the_bibliography_not_the_fact_sheet():
    """Readers see worked solutions on the pages: sources there are bibliography keys, never "FACTS §"."""
    from courselib import problems
    from courselib.problems import render

    keys, cited = _bib_keys(), set()
    for topic in problems.available():
        for difficulty in problems.DIFFICULTIES:
            for seed in range(4):
                p = problems.generate(topic, seed, difficulty)
                text = render.text(p, problems.solve(p))
                assert "FACTS" not in text, (topic, seed, difficulty)
                for group in re.findall(r"\[([a-z][a-z0-9]*(?:-[a-z0-9]+)+(?:, [a-z][a-z0-9-]+)*)\]", text):
                    cited.update(k.strip() for k in group.split(","))
    assert cited, "worked solutions should name their sources"
    assert cited <= keys, f"not in references.bib: {sorted(cited - keys)}"


def test_no_page_shows_the_fact_sheet():
    """The fact sheet is the authors' notes; a page (prose, code or output) cites the bibliography instead."""
    pages = [*(ROOT / "book").glob("*.md"), *(ROOT / "notebooks").glob("*.ipynb"), *(ROOT / "labs").glob("*.ipynb")]
    offenders = [p.relative_to(ROOT).as_posix() for p in pages if "FACTS §" in p.read_text()]
    assert not offenders, f"'FACTS §' on a page: {offenders}"
