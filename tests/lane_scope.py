"""What belongs to this lane of ``make test`` (tests/lanes.py), for the checks that look machine-wide.

The real kernel, container and MPI tests prove they left nothing: no ``courselib-container-*``
directory, no ``courselib-ctr-*``, ``courselib-oom-*`` or ``courselib-cpu-*`` cgroup, no container
mount, no rank process. ``make test`` runs several lanes at once, and two of them (``rest`` and ``labs``)
both run the course's experiments (a chapter's container, a lab's OOM kill); a check must count its own
lane's leftovers, not another lane's experiment in flight. So:

- each lane runs with ``COURSE_TEST_LANE`` set to its name, inherited by every process it starts;
- each computing lane has a ``TMPDIR`` of its own, so its container directories and their mounts are
  under it (``tempfile.gettempdir()``);
- a cgroup is named after the process that made it (``courselib-oom-<pid>-…``): it is another lane's
  while that process is alive and carries another lane's name. A cgroup whose maker is gone and which
  is still there was left behind, whoever made it: that fails, as it should.

Outside the lanes (``make test LANES=1``, a single test run by hand) nothing is another lane's: every
check is machine-wide, as before.
"""
from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

ENV = "COURSE_TEST_LANE"
#: the prefix of a computing lane's temporary directory (tests/lanes.py makes one for each)
LANE_TMP = "courselib-lane-"
_MAKER = re.compile(r"^courselib-[a-z]+-(\d+)-")


def lane_tmp() -> str | None:
    """This computing lane's own temporary directory; None outside one (there /tmp is shared)."""
    tmp = tempfile.gettempdir()
    return tmp if os.path.basename(tmp).startswith(LANE_TMP) else None


def tmp_entries(place: str) -> set[str]:
    """What is in ``place``, pytest's own ``pytest-of-*`` folder aside (empty where it cannot be read)."""
    try:
        return {n for n in os.listdir(place) if not n.startswith("pytest-of-")}
    except OSError:
        return set()


def lane_of(pid: int) -> str | None:
    """The lane a live process belongs to ("" for none); None if it is gone or unreadable."""
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    prefix = f"{ENV}=".encode()
    return next((e[len(prefix):].decode() for e in env if e.startswith(prefix)), "")


def another_lanes(pid: int) -> bool:
    """Whether ``pid`` is a live process of another lane of ``make test``."""
    ours = os.environ.get(ENV)
    if not ours:
        return False
    theirs = lane_of(pid)
    return theirs is not None and theirs != ours


def ours(paths) -> list[Path]:
    """The cgroups (or other paths named ``courselib-<what>-<pid>-…``) that are not another lane's work
    in flight: those whose maker is alive in this lane, or gone while the path is still there."""
    out = []
    for p in paths:
        m = _MAKER.match(Path(p).name)
        if m and another_lanes(int(m.group(1))):
            continue
        out.append(p)
    return out


def our_mounts(lines) -> list[str]:
    """Mount lines under this lane's temporary directory (every one outside the lanes)."""
    if not os.environ.get(ENV):
        return list(lines)
    tmp = tempfile.gettempdir()
    return [ln for ln in lines if tmp in ln]
