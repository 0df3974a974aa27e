"""The input policy every reader follows: what courselib agrees to read, and how much of it.

A user's file can be a typo (``/dev/zero``), a named pipe that never ends, a 200 MB log handed
to the wrong command, or a YAML bomb. Every reader in :mod:`courselib.io` opens files through
:func:`read_text` / :func:`read_bytes` here, so each gets the same guarantees:

- **regular files only**: a directory, FIFO, socket or device is refused at once (the file is
  opened without blocking, so a named pipe cannot hang the command);
- **a size cap per kind of file** (:data:`FILE_LIMITS`), checked before reading and while
  reading (a file that grows is still bounded); the message says what the cap is and which
  environment variable raises it;
- **decoding errors located**: ``file:LINE: not UTF-8 text (byte 0xff at column 7)``.

Model sizes that would exhaust memory or time (nodes, GPUs per node, jobs, containers, hetjob
components, simulation steps) are :class:`Limit` s too (:data:`MODEL_LIMITS`), checked by the
readers at the ``io`` boundary with :meth:`Limit.check`, so the model never sees them.
YAML's own limits (aliases, nesting) live in :mod:`courselib.io.yamlfile` and are named here.

Every limit can be raised by the user who needs more: ``COURSELIB_MAX_<NAME>=VALUE`` (sizes
accept ``Ki/Mi/Gi``), e.g. ``COURSELIB_MAX_TRACE_BYTES=2Gi`` or ``COURSELIB_MAX_NODES=100000``.
"""
from __future__ import annotations

import math
import os
import stat
from dataclasses import dataclass

from courselib.errors import InputError
from courselib.units import format_bytes, parse_memory

ENV_PREFIX = "COURSELIB_MAX_"


@dataclass(frozen=True)
class Limit:
    """One bound on input: ``name`` (the env suffix), what it bounds, its default, its unit."""

    name: str
    what: str
    default: int
    unit: str = ""          # "bytes" prints as KiB/MiB; otherwise the noun after the number

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name

    @property
    def value(self) -> int:
        """The limit in force: ``$COURSELIB_MAX_<NAME>`` if set (a bad value is itself an error)."""
        raw = os.environ.get(self.env)
        if raw is None or not raw.strip():
            return self.default
        try:
            value = parse_memory(raw.strip(), field=self.env) if self.unit == "bytes" else int(raw)
        except (InputError, ValueError):
            raise InputError(f"{raw!r} is not a limit", field=self.env,
                             hint=f"write a whole number{' or a size such as 64Mi' if self.unit == 'bytes' else ''}"
                             ) from None
        if value < 1:
            raise InputError(f"{raw!r}: a limit must be at least 1", field=self.env)
        return value

    def show(self, n: int | float) -> str:
        if self.unit == "bytes":
            return format_bytes(n)
        return f"{n:,}" + (f" {self.unit}" if self.unit else "")

    def hint(self) -> str:
        return f"raise it with {self.env}={'SIZE' if self.unit == 'bytes' else 'N'} if you really mean it"

    def check(self, n, *, file: str | None = None, line: int | None = None,
              field: str | None = None) -> None:
        """Raise a located :class:`InputError` if ``n`` is above this limit."""
        limit = self.value
        if n > limit:
            shown = self.show(n) if n < 10 ** 30 else f"a {len(str(int(n)))}-digit number"
            raise InputError(f"{shown} is more than courselib accepts for {self.what} ({self.show(limit)})",
                             file=file, line=line, field=field, hint=self.hint())


def _kib(n: int) -> int:
    return n * 1024


#: Size caps per kind of file. Real files of each kind are far smaller (the course's largest
#: sbatch script is 7 KB, its largest manifest 4 KB, the Parallel Workloads Archive's SWF traces
#: tens of MB). Pure-Python YAML reads about 0.1-0.3 MiB a second and a trace costs about 15
#: times its size in memory, which is what the YAML and trace caps are sized to.
FILE_LIMITS: dict[str, Limit] = {
    "sbatch": Limit("SBATCH_BYTES", "an sbatch script", _kib(1024), "bytes"),
    "manifest": Limit("MANIFEST_BYTES", "a Kubernetes manifest file", _kib(2048), "bytes"),
    "pod": Limit("MANIFEST_BYTES", "a Kubernetes manifest file", _kib(2048), "bytes"),
    "dockerfile": Limit("DOCKERFILE_BYTES", "a Dockerfile", _kib(1024), "bytes"),
    "workload": Limit("WORKLOAD_BYTES", "a workload file", _kib(8192), "bytes"),
    "scenario": Limit("SCENARIO_BYTES", "an OOM scenario", _kib(1024), "bytes"),
    "trace": Limit("TRACE_BYTES", "a trace file", _kib(64 * 1024), "bytes"),
    "notebook": Limit("NOTEBOOK_BYTES", "a notebook", _kib(64 * 1024), "bytes"),
    "record": Limit("RECORD_BYTES", "a recorded run", _kib(16384), "bytes"),
    "text": Limit("TEXT_BYTES", "a text file", _kib(4096), "bytes"),
}

#: Model sizes, checked where a file (or an option) becomes model objects.
MODEL_LIMITS: dict[str, Limit] = {
    "nodes": Limit("NODES", "the nodes of a cluster", 100_000, "nodes"),
    "gpus_per_node": Limit("GPUS_PER_NODE", "the GPUs of one node", 1024, "GPUs"),
    "jobs": Limit("JOBS", "the jobs of a workload", 1_000_000, "jobs"),
    "pods": Limit("PODS", "the pods of one job", 1_000_000, "pods"),
    "containers": Limit("CONTAINERS", "the containers of one pod", 1000, "containers"),
    "components": Limit("COMPONENTS", "the components of a heterogeneous job", 1000, "components"),
    "steps": Limit("OOM_STEPS", "an OOM simulation's time steps times its processes", 2_000_000,
                   "process-steps"),
    "processes": Limit("PROCESSES", "the processes of an OOM scenario", 10_000, "processes"),
    "gpus": Limit("GPUS", "a GPU count", 100_000_000, "GPUs"),
    "yaml_depth": Limit("YAML_DEPTH", "the nesting of a YAML document", 100, "levels"),
    "yaml_aliases": Limit("YAML_ALIAS_NODES", "what YAML aliases expand to", 10_000, "nodes"),
    "build_context": Limit("CONTEXT_BYTES", "a build context copied for a real build", 1024 ** 3, "bytes"),
}


def limit(name: str) -> Limit:
    """The :class:`Limit` called ``name`` (a key of :data:`FILE_LIMITS` or :data:`MODEL_LIMITS`)."""
    return MODEL_LIMITS.get(name) or FILE_LIMITS[name]


def check_count(name: str, n, **where) -> None:
    """``limit(name).check(n, **where)``: the one-liner readers call."""
    limit(name).check(n, **where)


def finite(value, *, field: str, minimum: float | None = None, file: str | None = None,
           line: int | None = None, hint: str | None = None) -> float:
    """``value`` as a float, refusing NaN, infinities and (with ``minimum``) values below it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"expected a number, got {value!r}", file=file, line=line, field=field, hint=hint)
    try:
        x = float(value)
    except OverflowError:
        raise InputError(f"{len(str(value))}-digit number is too large", file=file, line=line,
                         field=field, hint=hint) from None
    if not math.isfinite(x):
        raise InputError(f"{value!r} is not a finite number", file=file, line=line, field=field, hint=hint)
    if minimum is not None and x < minimum:
        raise InputError(f"{value!r} is below {minimum:g}", file=file, line=line, field=field, hint=hint)
    return x


_KIND_OF_MODE = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe"),
                 (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                 (stat.S_ISBLK, "a block device"))


def _not_regular(mode: int) -> str:
    return next((name for test, name in _KIND_OF_MODE if test(mode)), "not a regular file")


def read_bytes(path, kind: str = "text") -> bytes:
    """The bytes of ``path`` under the policy for ``kind`` (a key of :data:`FILE_LIMITS`)."""
    cap = FILE_LIMITS[kind]
    name = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError("no such file", file=name, hint="check the path") from None
    except IsADirectoryError:
        raise InputError("is a directory, not a file", file=name) from None
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror}", file=name) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            what = _not_regular(st.st_mode)
            raise InputError(f"is {what}, not a regular file" if what != "not a regular file" else what,
                             file=name, hint="courselib reads regular files only; save the input to a file first")
        limit_bytes = cap.value
        if st.st_size > limit_bytes:
            raise InputError(f"{cap.show(st.st_size)} is more than courselib reads of {cap.what} "
                             f"({cap.show(limit_bytes)})", file=name, hint=cap.hint())
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit_bytes:
                raise InputError(f"grew past {cap.show(limit_bytes)} while being read, more than courselib "
                                 f"reads of {cap.what}", file=name, hint=cap.hint())
        return b"".join(chunks)
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror}", file=name) from None
    finally:
        os.close(fd)


def decode(data: bytes, *, file: str | None = None) -> str:
    """UTF-8 text, or an error naming the line and column of the first bad byte."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        col = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        raise InputError(f"not UTF-8 text (byte 0x{data[err.start]:02x} at column {col})", file=file,
                         line=line, hint="save the file as UTF-8") from None
    return text


def read_text(path, kind: str = "text") -> str:
    """The UTF-8 text of ``path`` under the policy for ``kind``; one located line if it cannot be."""
    return decode(read_bytes(path, kind), file=str(path))


def is_regular_file(path) -> bool:
    """Does ``path`` name a regular file (following links, never opening it)?"""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


__all__ = ["Limit", "FILE_LIMITS", "MODEL_LIMITS", "limit", "check_count", "finite", "read_bytes",
           "read_text", "decode", "is_regular_file"]
