"""What the compiled passes share (the ``fast`` extra: numba): whether numba is installed, where it
keeps compiled code, and compiling a pass with its helpers. Light: imports neither numpy nor numba
until :func:`compile_pass` is called, so :mod:`courselib.model.replay` may ask :func:`available`.

Users: :mod:`courselib.model.policies.slurm_kernel` (a Slurm backfill pass) and
:mod:`courselib.model.replay_kernel` (EASY on a pool of cores). The only I/O of the model is
numba's cache; every decision is the same without it (the Python paths).
"""
from __future__ import annotations

import importlib.util
import os
import tempfile
import types
from pathlib import Path


def available() -> bool:
    """Whether numba is installed (the ``fast`` extra) and not turned off (``COURSELIB_NO_KERNEL``).
    Cheap: nothing is imported."""
    if os.environ.get("COURSELIB_NO_KERNEL"):
        return False
    return importlib.util.find_spec("numba") is not None


def cache_dir() -> str:
    """Where numba keeps the compiled passes: ``$NUMBA_CACHE_DIR`` if set, else the course's cache
    folder (``$XDG_CACHE_HOME`` or ``~/.cache``, ``allornothing/numba``) if it can be made there,
    else one under the temporary folder (numba refuses ``cache=True`` where it cannot write)."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return os.environ["NUMBA_CACHE_DIR"]
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    base = home
    while not base.exists() and base != base.parent:
        base = base.parent
    if os.access(base, os.W_OK | os.X_OK):
        return str(home / "allornothing" / "numba")
    return str(Path(tempfile.gettempdir()) / f"allornothing-numba-{os.getuid()}")


def compile_pass(namespace: dict, helpers: tuple[str, ...], main, constants: dict | None = None):
    """``main`` compiled with numba (cached: compiled, or read from the cache, on its first call),
    after each of ``helpers`` is compiled in place in ``namespace`` (the module's globals, where
    ``main`` finds them by name; once, however many passes are compiled) to be inlined into it:
    called as functions they cost about a quarter of a Slurm pass (benchmarks/README.md).

    ``constants``: globals that this copy of ``main`` reads with other values than ``namespace``
    holds (numba reads a global as a constant, so a branch on one is compiled out); the copy is
    cached under its own name, ``main``'s name followed by the constants'."""
    os.environ.setdefault("NUMBA_CACHE_DIR", cache_dir())
    import numba
    for name in helpers:
        if not hasattr(namespace[name], "py_func"):  # (not compiled yet)
            namespace[name] = numba.njit(cache=True, nogil=True, inline="always")(namespace[name])
    if constants:
        suffix = "_".join(f"{k}_{v}" for k, v in sorted(constants.items()))
        main = types.FunctionType(main.__code__, {**namespace, **constants}, f"{main.__name__}__{suffix}",
                                  main.__defaults__, main.__closure__)
        main.__qualname__ = main.__name__
    return numba.njit(cache=True, nogil=True)(main)
