"""Reading and writing notebooks: the standard-library reader the grader uses, nbformat's for the build.

Every reader goes through :mod:`courselib.io.policy` (regular files only, size-capped), and anything
unreadable is one located :class:`courselib.errors.InputError`.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from courselib.errors import InputError
from courselib.io.policy import read_text

KERNELSPEC = {"display_name": "Python 3 (courselib)", "language": "python", "name": "python3"}

#: A module nbformat's jsonschema imports for its "iri" format checker when it is installed (jsonschema
#: 4.26.0 ``_format.py`` L327-328; it comes with jsonschema's ``format-nongpl`` extra): rfc3987-syntax 1.1.0
#: builds 39 Earley parsers of RFC 3987's grammar when imported (``syntax_helpers.py`` L50, L78 on),
#: 1.5-3.5 s on a 2-core machine, for a format no notebook schema names and courselib never checks (its
#: validators take no format checker).
IRI_PARSER = "rfc3987_syntax"


def skip_the_iri_parser() -> None:
    """In courselib's own processes (the CLI, the grader's pytest): make :data:`IRI_PARSER` unimportable
    before nbformat is imported, so jsonschema leaves that one checker out (its ``suppress(ImportError)``).
    The library's functions do not call it: a reader's own process keeps the modules it has."""
    sys.modules.setdefault(IRI_PARSER, None)


def without_the_iri_parser(then: str) -> list[str]:
    """A Python command that runs ``then`` (a line of code; arguments follow the command) with
    :data:`IRI_PARSER` unimportable, as :func:`skip_the_iri_parser` does in this process."""
    return [sys.executable, "-c", f"import sys; sys.modules.setdefault({IRI_PARSER!r}, None); {then}"]


class Node(dict):
    """A notebook, cell or metadata mapping read with the standard library (attribute access like nbformat's)."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def _nodes(value):
    if isinstance(value, dict):
        return Node({k: _nodes(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_nodes(v) for v in value]
    return value


def _raw_notebook(path: Path, what: str) -> tuple[str, dict]:

    try:
        text = read_text(path, "notebook")  # regular files only, size-capped (courselib.io.policy)
    except InputError as err:
        if err.message == "no such file":
            raise InputError(f"no such {what}", file=str(path), hint="check the path") from None
        raise
    try:
        raw = json.loads(text)
    except RecursionError:
        raise InputError("not a notebook (JSON nested too deeply to read)", file=str(path),
                         hint="give the lab's .ipynb file") from None
    except json.JSONDecodeError as err:
        raise InputError(f"not a notebook (invalid JSON: {err.msg}, column {err.colno})", file=str(path),
                         line=err.lineno, hint="open it in Jupyter and save it again, or restore it with git") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("cells"), list) or raw.get("nbformat") != 4:
        raise InputError("not a Jupyter notebook in format 4 (no 'cells', or 'nbformat' is not 4)",
                         file=str(path), hint="give the lab's .ipynb file")
    return text, raw


def read_notebook(path: Path, what: str = "notebook"):
    """Parse ``path`` as a v4 notebook with nbformat; anything unreadable is one located ``InputError``."""
    import nbformat

    text, _ = _raw_notebook(path, what)
    try:
        nb = nbformat.reads(text, as_version=4)
    except Exception as err:  # nbformat raises several kinds for a damaged file
        raise InputError(f"not a readable notebook: {err.__class__.__name__}: {str(err).splitlines()[0]}",
                         file=str(path)) from None
    return nb


def read_notebook_json(path: Path, what: str = "notebook") -> Node:
    """The same notebook read with ``json`` only (the grader's path: nbformat takes seconds to import).

    Cell sources stored as lists of lines are joined; cells that are not mappings are dropped.
    """
    _, raw = _raw_notebook(path, what)
    nb = _nodes(raw)
    cells = []
    for cell in nb["cells"]:
        if not isinstance(cell, dict):
            continue
        src = cell.get("source", "")
        if isinstance(src, list):
            src = "".join(x for x in src if isinstance(x, str))
        cell["source"] = src if isinstance(src, str) else ""
        if not isinstance(cell.get("metadata"), dict):
            cell["metadata"] = Node()
        cells.append(cell)
    nb["cells"] = cells
    if not isinstance(nb.get("metadata"), dict):
        nb["metadata"] = Node()
    return nb


def render(nb) -> str:
    """The notebook as text: nbformat's sorted, one-space-indented JSON and a final newline."""
    import nbformat

    text = nbformat.writes(nb, version=4)
    return text if text.endswith("\n") else text + "\n"
