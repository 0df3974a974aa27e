"""What every real system's replay shares: its result shape, its agreement with the model, its recording.

A replay (``courselib slurm replay``, ``courselib kube replay``) submits a workload's jobs to a real
scheduler, records what it did, and compares that with courselib's model of the same scheduler.
The systems differ in how they submit and watch; what they report has one shape:

- :class:`JobsResult` — a result's jobs by name and its start order;
- :class:`Agreement` — a comparison's checks, how many agreed, the agreement, and its dictionary
  (``--json``); :func:`order_pairs` counts the pairs of jobs the model starts at clearly different
  times and whether the real scheduler started them in the same order; :func:`order_lines` prints
  both start orders and the pairs out of order;
- :class:`Recorded` and :func:`read_replay` — a replay written by ``--record`` (the workload's text
  inside it, so the plan is rebuilt from the file alone) and read back; :func:`record` writes one.

Each system keeps its own result fields, checks and table (:mod:`courselib.live.slurm.result`,
:mod:`courselib.live.kube.result`); the CLI prints either through the same helper.
"""
from __future__ import annotations

import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable

from courselib.io.workload import parse_workload
from courselib.io.yamlfile import load_all_text
from courselib.live import recorded


class JobsResult:
    """A replay's result: ``jobs`` (each with ``name`` and ``start``), by name and in start order."""
    jobs: list

    def job(self, name: str):
        return next(j for j in self.jobs if j.name == name)

    def start_order(self) -> list[str]:
        """The jobs that started, in the order they started (ties: as listed, or by job ID)."""
        started = [j for j in self.jobs if j.start is not None]
        return [j.name for j in sorted(started, key=lambda j: (j.start, getattr(j, "job_id", 0) or 0))]


@dataclass
class Agreement:
    """A comparison with the model: the start orders, and ``checks`` and ``agreed`` (properties
    each system defines over its own fields)."""
    workload: str
    jobs: list
    real_order: list[str]
    model_order: list[str]
    order_pairs: int
    order_agree: int
    order_disagreements: list[tuple[str, str]]

    @property
    def checks(self) -> int:  # pragma: no cover - every system counts its own
        raise NotImplementedError

    @property
    def agreed(self) -> int:  # pragma: no cover
        raise NotImplementedError

    @property
    def agreement(self) -> float:
        return self.agreed / self.checks if self.checks else 1.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["checks"], d["agreed"], d["agreement"] = self.checks, self.agreed, self.agreement
        return d


def order_pairs(rows: Iterable[Any], tolerance: float) -> tuple[int, int, list[tuple[str, str]]]:
    """Over jobs started in both runs (``real_start``, ``model_start``): the pairs the model starts
    more than ``tolerance`` s apart, how many of them the real run started in the same order, and
    the pairs it did not."""
    both = [r for r in rows if r.real_start is not None and r.model_start is not None]
    pairs = agree = 0
    bad = []
    for a in both:
        for b in both:
            if a.model_start + tolerance < b.model_start:
                pairs += 1
                if a.real_start < b.real_start:
                    agree += 1
                else:
                    bad.append((a.name, b.name))
    return pairs, agree, bad


def max_start_error(rows: Iterable[Any], digits: int) -> float | None:
    """The largest gap between a job's real and model start, over jobs started in both runs."""
    errs = [abs(r.real_start - r.model_start) for r in rows
            if r.real_start is not None and r.model_start is not None]
    return round(max(errs), digits) if errs else None


def model_start_order(model) -> list[str]:
    """The jobs the model started, in the order it started them."""
    return [j.name for j in sorted((j for j in model.jobs if j.start is not None), key=lambda j: j.start)]


def order_lines(real_order: list[str], model_order: list[str],
                disagreements: list[tuple[str, str]]) -> list[str]:
    lines = [f"start order  real: {' '.join(real_order) or '-'}",
             f"             model: {' '.join(model_order) or '-'}"]
    if disagreements:
        lines.append("  out of order: " + ", ".join(f"{a} before {b}" for a, b in disagreements))
    return lines


# ----------------------------------------------------------------------------- recordings

@dataclass
class Recorded:
    """A replay read back from JSON, with where and when it was recorded."""
    result: Any
    recorded_on: str
    recorded_at: str
    workload_file: str

    def recording(self) -> recorded.Recording:
        return recorded.Recording(self.result, self.recorded_on, self.recorded_at)


def host() -> str:
    """What a recording says it ran on: ``Linux 6.1.0-…`` (the kernel the real daemons ran under)."""
    return f"{platform.system()} {platform.release()}"


def record(path, *, recorded_by: str, recorded_on: str, recorded_at: str | float,
           workload_text: str, workload_file: str, **more) -> Path:
    """Write a replay as JSON (a chapter's recorded run); only overwrites a file it wrote itself.
    ``recorded_at``: a date, or an epoch time made one."""
    if not isinstance(recorded_at, str):
        recorded_at = time.strftime("%Y-%m-%d", time.gmtime(recorded_at))
    return recorded.write_own(path, {"recorded_by": recorded_by, "recorded_on": recorded_on,
                                     "recorded_at": recorded_at, "workload_file": workload_file,
                                     "workload_text": workload_text, **more})


def read_replay(name_or_path, prefix: str):
    """A recorded replay's JSON and its workload (parsed from the text stored in it): a path
    (``….json``) or a shipped name (``courselib/data/recorded/<prefix><name>.json``)."""
    data = recorded.read(name_or_path, prefix)
    workload = parse_workload(load_all_text(data["workload_text"], file=data["workload_file"])[0],
                              file=data["workload_file"])
    return data, workload


def recorded_from(data: dict, result) -> Recorded:
    return Recorded(result, data["recorded_on"], data["recorded_at"], data["workload_file"])
