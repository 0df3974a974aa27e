"""The versions of the real systems the course runs and checks, from one table.

``courselib/data/versions.toml`` holds one row per real system (``[slurm]``, and the rows other parts
add): the version the course runs, its release date, how it is installed, and where the defaults the
course teaches were read. The build steps (``.ci/build.d/``) read their pins from it, the live code
checks what it runs against it, the book prints it (:func:`table`), and a test holds every recorded
run to it. Nothing else states a version.

    >>> from courselib.versions import pinned
    >>> pinned("slurm").version        # doctest: +SKIP
    '26.05.5'
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

from courselib.errors import CourseError

FILE = "versions.toml"


@dataclass(frozen=True)
class Version:
    """One real system's row: ``key`` is its table name in ``versions.toml`` (``slurm``)."""
    key: str
    system: str
    version: str
    date: str
    defaults_read: str
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    def get(self, name: str, default=None):
        """Any further field of the row (``debian_version``, ``packages`` …)."""
        return self.extra.get(name, default)


@lru_cache(maxsize=1)
def _rows() -> dict[str, Version]:
    text = resources.files("courselib.data").joinpath(FILE).read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise CourseError(f"not valid TOML: {err}", file=f"courselib/data/{FILE}") from None
    rows = {}
    for key, row in data.items():
        if not isinstance(row, dict):
            raise CourseError(f"[{key}] is not a table", file=f"courselib/data/{FILE}")
        missing = [f for f in ("system", "version", "date", "defaults_read") if f not in row]
        if missing:
            raise CourseError(f"[{key}] has no {', '.join(missing)}", file=f"courselib/data/{FILE}",
                              field=missing[0])
        rest = {k: v for k, v in row.items() if k not in ("system", "version", "date", "defaults_read")}
        rows[key] = Version(key, str(row["system"]), str(row["version"]), str(row["date"]),
                            str(row["defaults_read"]), rest)
    return rows


def pinned(key: str) -> Version:
    """The row of ``key`` (``"slurm"``); a one-line error if the table has none."""
    rows = _rows()
    if key not in rows:
        raise CourseError(f"no [{key}] row", file=f"courselib/data/{FILE}",
                          hint=f"the rows are: {', '.join(rows)}")
    return rows[key]


def all_versions() -> list[Version]:
    """Every row, in the file's order."""
    return list(_rows().values())


def table() -> str:
    """The rows as a Markdown table (system, version, date, where the defaults were read)."""
    lines = ["| system | version | date | defaults read at |", "|---|---|---|---|"]
    lines += [f"| {v.system} | {v.version} | {v.date} | {v.defaults_read} |" for v in all_versions()]
    return "\n".join(lines)
