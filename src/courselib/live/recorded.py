"""Recorded runs: what a reader without the privilege (or the time) sees instead of a live run.

Every real experiment of the course runs live where this machine allows it and otherwise shows a
run recorded on the course's CI machine *by the same code*, labelled as recorded and saying why.
That rule is one function here, with one call shape::

    shown = live_or_recorded(source)          # a Shown: (value, label)
    value, label = shown                      # label is None for a live run

A :class:`Source` says how to run the thing live (``run``), why it cannot run here
(``unavailable``: ``None`` when it can) and how to read its recording (``recorded``: a
:class:`Recording`, the value with where and when it was recorded). A live run that raises
:class:`~courselib.errors.PrivilegeError` (nothing touched) or :class:`OutOfTime` (what it ran was
stopped) falls back to the recording too; any other error is not hidden behind it. Each system
builds its sources (``courselib.live.kube.replay.source``, ``courselib.live.memcg.source``, …).

Writing recordings: :func:`write` never overwrites a file; :func:`write_own` (a replay's
``--record``) overwrites only a file that it wrote itself (same ``recorded_by``). Reading:
:func:`load` (shipped in ``courselib/data/recorded/``) and :func:`read` (a shipped name or a path).
"""
from __future__ import annotations

import json
import os
import platform
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Callable, Generic, NamedTuple, TypeVar

from courselib.errors import CourseError, InputError, PrivilegeError
from courselib.io.policy import read_text

T = TypeVar("T")


class OutOfTime(CourseError):
    """A live run that would not finish within the time it was given (what it ran was stopped)."""


@dataclass(frozen=True)
class Recording(Generic[T]):
    """A recorded value, and where and when it was recorded (``recorded_at``: a date, or empty)."""
    value: T
    recorded_on: str
    recorded_at: str = ""

    def label(self, why: str) -> str:
        """``RECORDED run (Linux 6.18, Kubernetes v1.37.2, 2026-12-01), shown because …``."""
        when = f", {self.recorded_at}" if self.recorded_at else ""
        return f"RECORDED run ({self.recorded_on}{when}), shown because {why}"


def _available() -> None:
    return None


@dataclass(frozen=True)
class Source(Generic[T]):
    """A thing a page shows: how to run it live, why it cannot run here, and its recording."""
    run: Callable[[], T]
    recorded: Callable[[], Recording[T]]
    unavailable: Callable[[], str | None] = _available


class Shown(NamedTuple, Generic[T]):
    """What was shown — a live value, or a recorded one with its label (``None`` when live)."""
    value: T
    label: str | None

    @property
    def recorded(self) -> bool:
        return self.label is not None


def live_or_recorded(source: Source[T]) -> Shown[T]:
    """``source`` live where it can run here, else its recording and the label that says why."""
    why = source.unavailable()
    if why is None:
        try:
            return Shown(source.run(), None)
        except OutOfTime as err:
            why = f"the live run on this machine did not finish in time ({err.message})"
        except PrivilegeError as err:
            why = str(err)
    rec = source.recorded()
    return Shown(rec.value, rec.label(why))


# ----------------------------------------------------------------------------- files

def load(name: str) -> dict:
    """A recording shipped in ``courselib/data/recorded/NAME`` (JSON)."""
    return json.loads(resources.files("courselib.data").joinpath("recorded", name).read_text())


def read(name_or_path, prefix: str) -> dict:
    """A recording given as a path (``….json``, read under the file policy) or a shipped name
    (``courselib/data/recorded/<prefix><name>.json``)."""
    p = Path(str(name_or_path))
    if p.suffix == ".json":
        return json.loads(read_text(p, "record"))
    return load(f"{prefix}{name_or_path}.json")


def machine_note() -> str:
    """Where a run was recorded: ``Linux 6.18.44, 2 CPUs``."""
    return f"{platform.system()} {platform.release()}, {os.cpu_count()} CPUs"


def _one_row_a_line(data: dict, rows: str) -> str:
    """``data`` as JSON with the list under ``rows`` one entry a line (compact), the other keys first."""
    head = "".join(f" {json.dumps(k)}: {json.dumps(v)},\n" for k, v in data.items() if k != rows)
    return ("{\n" + head + f" {json.dumps(rows)}: [\n"
            + ",\n".join("  " + json.dumps(r, separators=(",", ":")) for r in data[rows]) + "\n ]\n}")


def write(path: str | Path, data: dict, *, rows: str | None = None) -> Path:
    """Write ``data`` as a recording at ``path``; a file that exists is never overwritten. ``rows``: the
    key of a long list written one entry a line (a small file that still diffs entry by entry)."""
    path = Path(path)
    try:
        with open(path, "x") as fh:
            fh.write((_one_row_a_line(data, rows) if rows else json.dumps(data, indent=1)) + "\n")
    except FileExistsError:
        raise InputError("exists; not overwritten", file=str(path),
                         hint="remove it first or choose another path") from None
    return path


def write_own(path: str | Path, data: dict) -> Path:
    """Write ``data`` (which names its ``recorded_by``) at ``path``, replacing only a file that the
    same command wrote (the same ``recorded_by``); any other file is a one-line error."""
    path = Path(path)
    if path.exists():
        try:
            ours = json.loads(read_text(path, "record")).get("recorded_by") == data["recorded_by"]
        except (ValueError, AttributeError, RecursionError, CourseError):
            ours = False
        if not ours:
            raise CourseError(f"{path} exists and was not written by a replay; not overwriting it",
                              hint="choose another file")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path
