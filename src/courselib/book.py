"""Helpers for the book's executed cells: put a computed value into the prose.

``glue_text("pid", 4711)`` makes ``{glue:text}`pid``` show ``4711`` in the page — numbers in
the prose always come from an executed cell, never from the author's keyboard.
"""
from __future__ import annotations
from pathlib import Path


class _Plain:
    """A value shown in prose exactly as ``text``.

    myst-nb's ``{glue:text}`` passes the text/plain form through ``ast.literal_eval`` (to strip
    quotes), so the form must be a Python string literal: a bare ``60, 120`` would become a tuple.
    """

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return repr(self.text)


def glue_text(name: str, value, fmt: str | None = None) -> None:
    """Glue ``value`` (formatted with ``fmt`` if given) for ``{glue:text}`name```.

    Returns nothing, so a cell that ends with it shows no stray value on the page.
    """
    text = format(value, fmt) if fmt else str(value)
    try:
        from myst_nb import glue
    except ImportError:  # plain Jupyter without the book toolchain: nothing to glue into
        return
    glue(name, _Plain(text), display=False)


class _Block:
    """A block of text (a table a cell printed) shown as it is, for ``{glue}`` inside an aside."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


def glue_block(name: str, text: str) -> None:
    """Glue printed ``text`` for a ```` ```{glue} name``` ```` block: a cell's output shown inside a
    dropdown aside (a code cell cannot sit inside one)."""
    try:
        from myst_nb import glue
    except ImportError:
        return
    glue(name, _Block(str(text)), display=False)


def glue_figure(name: str, fig) -> None:
    """Glue a matplotlib figure for a ``{glue:figure}`` directive (with caption and alt text)."""
    import matplotlib.pyplot as plt

    try:
        from myst_nb import glue
    except ImportError:
        return
    glue(name, fig, display=False)
    plt.close(fig)


def examples_dir(kind: str = ""):
    """The repository's ``examples/<kind>`` folder, from a chapter (run in ``book/``) or the root."""
    for base in (Path("..") / "examples", Path("examples")):
        if (base / kind).is_dir():
            return base / kind
    raise FileNotFoundError(f"examples/{kind} not found from {Path.cwd()}")
