"""A chapter a learner can finish in one sitting: at most 3,500 words of prose outside asides and code.

Counted: the running text, headings, lists, exercises and figure captions. Not counted: front matter,
code cells and code blocks (their output is the machine's, not prose), and the asides a reader may skip
— admonitions (objectives, takeaways, "How we know", "What this run shows"), dropdowns, worked solutions
and the ``{self-check}`` / ``{chapter-glance}`` boxes. Issue 32.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 3500
ASIDES = ("admonition", "note", "tip", "important", "warning", "seealso", "dropdown", "self-check",
          "chapter-glance")


def chapters() -> list[Path]:
    return sorted((ROOT / "book").glob("[0-9][0-9]-*.md"))


def prose(text: str) -> str:
    """The page with front matter, code and asides removed (the words a reader must read)."""
    text = re.sub(r"\A---\n.*?\n---\n", "", text, flags=re.S)
    text = re.sub(r"```\{solution-start\}.*?```\{solution-end\}\n```", "", text, flags=re.S)
    out: list[str] = []
    stack: list[tuple[str, bool]] = []      # (fence, skipped?) of each open block, innermost last
    for line in text.splitlines():
        s = line.strip()
        if stack and s == stack[-1][0]:
            stack.pop()
            continue
        m = re.match(r"^(`{3,}|:{3,})(.*)$", s)
        if m:
            name = re.match(r"\{([\w:-]+)\}", m.group(2).strip())
            skip = name is None or name.group(1) in ASIDES or name.group(1) in ("code-cell", "code", "solution")
            stack.append((m.group(1), skip or any(k for _, k in stack)))
            continue
        if stack and (stack[-1][1] or re.match(r"^:[\w-]+:", s)):
            continue                # skipped, or a directive's option line (:alt: text is not prose)
        out.append(line)
    return "\n".join(out)


def words(text: str) -> int:
    body = prose(text)
    body = re.sub(r"\{[\w:-]+\}`[^`]*`", "X", body)      # a role ({term}`…`, {cite}`…`, {glue:text}`…`) is one word
    body = re.sub(r"^\(.*\)=\s*$", "", body, flags=re.M)  # labels
    return len(re.findall(r"[\w`'’.%-]*\w[\w`'’.%-]*", body))


def test_the_counter_skips_code_asides_and_solutions():
    page = ("---\nkernelspec: x\n---\n# Title here\n\nOne two three.\n\n```{code-cell} ipython3\nprint('a b c d')\n```\n\n"
            "```{admonition} How we know\n:class: dropdown\nfour five six seven\n```\n\n"
            "````{exercise}\n:label: e\n\nEight nine.\n````\n\n```{solution-start} e\n:class: dropdown\n```\n\nten eleven\n\n"
            "```{solution-end}\n```\n\n```{glue:figure} f\n:alt: not counted here\n\nA caption {glue:text}`x` here.\n```\n")
    assert words(page) == 2 + 3 + 2 + 4, prose(page)


@pytest.mark.parametrize("page", chapters(), ids=lambda p: p.stem)
def test_a_chapter_reads_in_one_sitting(page):
    n = words(page.read_text())
    assert n <= LIMIT, (f"{page.name}: {n} words of prose outside asides and code (limit {LIMIT}): "
                        "split the chapter or move how-we-know material into a dropdown aside")


if __name__ == "__main__":      # python tests/test_book_length.py: the words per chapter
    for p in chapters():
        print(f"{words(p.read_text()):6} {p.name}")
