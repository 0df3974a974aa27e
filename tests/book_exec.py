"""Each page of the book executed once per run: one execution cache shared by the page tests and the builds.

tests/test_book.py's page test and tests/test_site.py's two builds (the instructor's and the student
edition) read and fill one jupyter-cache, the one Jupyter Book's ``execute_notebooks: cache`` uses. A
page is looked up as myst-nb reads it (the same notebook, so the same hash: its code cells and their
metadata, and the kernel); on a miss it is executed as myst-nb executes it (jupyter-cache's
``single_nb_execution`` in the page's folder, the book's timeout, errors not allowed) and stored. So
whichever comes first executes a chapter, and the other finds it.

jupyter-cache keys a notebook on its code only, never on what the code imports. The folder of the
cache is therefore keyed on everything a page's output can depend on (:func:`source_key`): every file
of the repository outside tests/ (the library, its recorded runs, the chapters, the examples), the
Python version, the installed distributions, which real systems are built here (the build steps' folder,
``courselib.live.daemons.cache_dir``: ``$COURSELIB_CACHE``, else ``~/.cache/allornothing``) and
``COURSELIB_LIVE``. Change any of them and the pages run again; a fresh clone (CI) always runs them
once. ``COURSE_EXEC_CACHE=DIR`` names another folder.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
import subprocess
import sys
from contextlib import suppress
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
#: Not part of the key: the tests themselves and CI's scripts do not change what a page shows.
UNKEYED = ("tests/", ".ci/")


@functools.lru_cache(maxsize=1)
def source_key() -> str:
    try:
        files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                               capture_output=True, check=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):  # not a git checkout (an archive): every file but builds
        skip = {".git", ".venv", "_build", "__pycache__", ".ipynb_checkpoints", ".hypothesis", ".pytest_cache"}
        files = [str(f.relative_to(ROOT)) for f in ROOT.rglob("*")
                 if f.is_file() and not skip.intersection(f.relative_to(ROOT).parts)]
    h = hashlib.sha256()
    for rel in sorted(f for f in files if f and not f.startswith(UNKEYED)):
        path = ROOT / rel
        if path.is_file():
            h.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    h.update(sys.version.encode())
    h.update("\n".join(sorted(f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions()
                              if d.metadata["Name"])).encode())
    from courselib.live.daemons import cache_dir as builds_dir     # where the build steps put them
    built = builds_dir()
    h.update(" ".join(sorted(p.name for p in built.iterdir()) if built.is_dir() else ()).encode())
    h.update(os.environ.get("COURSELIB_LIVE", "").encode())
    return h.hexdigest()[:16]


def cache_dir() -> Path:
    """The execution cache of this state of the sources (created when first used)."""
    given = os.environ.get("COURSE_EXEC_CACHE")
    return Path(given).resolve() if given else ROOT / "_build" / ".test-exec" / source_key()


def book_config() -> dict:
    return yaml.safe_load((ROOT / "_config.yml").read_text())


def read_page(page: Path):
    """The page as myst-nb reads it for Jupyter Book (so jupyter-cache computes the same hash)."""
    from myst_nb.core.config import NbParserConfig
    from myst_nb.core.read import create_nb_reader
    from myst_parser.config.main import MdParserConfig

    parse = book_config().get("parse", {})
    md_config = MdParserConfig(enable_extensions=set(parse.get("myst_enable_extensions", ())),
                               heading_anchors=parse.get("myst_heading_anchors", 0))
    text = page.read_text()
    reader = create_nb_reader(str(page), md_config, NbParserConfig(), text)
    if reader is None:
        raise ValueError(f"{page.relative_to(ROOT)}: not a notebook page (no kernelspec top-matter)")
    return reader.read(text)


def executed_page(page: Path):
    """The page's notebook with its outputs: from the cache, or executed now (and cached).

    Raises ``AssertionError`` with the failing cell's traceback when a cell fails."""
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn
    from jupyter_cache.executors.utils import single_nb_execution

    nb = read_page(page)
    cache = get_cache(str(cache_dir()))
    with suppress(KeyError):
        cache.match_cache_notebook(nb)
        return cache.merge_match_into_notebook(nb)[1]
    timeout = book_config().get("execute", {}).get("timeout", 120)
    result = single_nb_execution(nb, cwd=str(page.parent), allow_errors=False, timeout=timeout, meta_override=True)
    assert result.err is None, f"{page.relative_to(ROOT)}: a cell failed\n{result.exc_string}"
    cache.cache_notebook_bundle(CacheBundleIn(nb, str(page), data={"execution_seconds": result.time}),
                                check_validity=False, overwrite=True)
    return nb


def jupyter_book() -> list[str]:
    """The ``jupyter-book`` command (its arguments follow), less the iri parser that nbformat's jsonschema
    builds when it starts (:data:`courselib.grading.notebook.IRI_PARSER`: 39 parsers, 1.5-3.5 s of each
    build, for a format that neither a page nor the book's configuration is checked against)."""
    from courselib.grading.notebook import without_the_iri_parser

    return without_the_iri_parser("from jupyter_book.cli.main import main; sys.exit(main())")


def build_config(path: Path, **changes) -> Path:
    """Write the book's _config.yml to ``path`` with the shared execution cache (and ``changes``:
    ``hide_solutions=True`` for the student edition), for ``jupyter-book build --config``."""
    text = (ROOT / "_config.yml").read_text()
    old = "  cache: _build/.jupyter_cache"
    assert old in text, "_config.yml: execute.cache is no longer _build/.jupyter_cache (update tests/book_exec.py)"
    text = text.replace(old, f"  cache: {cache_dir()}")
    for key, value in changes.items():
        old = f"{key}: {str(not value).lower()}"
        assert old in text, f"_config.yml: no {old!r} to change"
        text = text.replace(old, f"{key}: {str(value).lower()}")
    path.write_text(text)
    return path
