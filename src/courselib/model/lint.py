"""Lint findings: what a check found, how bad it is, where it is, and how to fix it.

A finding is a value, not a print: the readers in ``courselib.io`` produce them, the CLI sorts
and prints them, tests compare them. The checks that need more than one number live beside the
reader of the file they check; the arithmetic they share (gang size versus pods, minutes versus
hours) lives here, pure.
"""
from __future__ import annotations

from dataclasses import dataclass, asdict

SEVERITIES = ("error", "warning", "info")
_RANK = {s: i for i, s in enumerate(SEVERITIES)}


@dataclass(frozen=True)
class Finding:
    """One thing a practitioner should look at, e.g. ``S001 error train.sbatch:12``."""

    code: str
    severity: str
    file: str | None
    line: int | None
    message: str
    fix: str

    def __post_init__(self):
        if self.severity not in _RANK:
            raise ValueError(f"severity must be one of {SEVERITIES}, got {self.severity!r}")

    @property
    def where(self) -> str:
        file = self.file or "<input>"
        return f"{file}:{self.line}" if self.line is not None else file

    def format(self) -> str:
        """``file:line: CODE severity: message (fix: ...)`` — one line, like a compiler."""
        return f"{self.where}: {self.code} {self.severity}: {self.message}\n    fix: {self.fix}"

    def to_dict(self) -> dict:
        return asdict(self)


def sort_findings(findings) -> list[Finding]:
    """File order, then line order, then the worst first: the order a reader fixes them in."""
    return sorted(findings, key=lambda f: (f.file or "", f.line if f.line is not None else 0,
                                           _RANK[f.severity], f.code))


def gang_mismatch(min_member: int | None, pods: int | None) -> str | None:
    """How a gang minimum relates to the pods that exist: ``"below"``, ``"above"`` or ``None``.

    See FACTS §3.1 (Volcano gang plugin ``JobValid``/``JobReady``): a job is ready when
    ``ReadyTaskNum() >= MinAvailable``. A minimum *below* the pod count lets a partial gang start
    (the rest may never come, and a synchronous job then waits at its first collective); a minimum
    *above* the pod count can never be met (``NotEnoughTasks``) and the job is never scheduled.
    """
    if min_member is None or pods is None:
        return None
    if min_member < pods:
        return "below"
    if min_member > pods:
        return "above"
    return None


def time_confusion(minutes: int | None, form: str | None) -> str | None:
    """Why a Slurm ``--time`` value looks like minutes-vs-hours confusion, or ``None``.

    Slurm reads a bare number as **minutes** and ``A:B`` as **minutes:seconds**
    (sbatch(1) ``--time``; FACTS §3.4), so ``--time=48`` is 48 minutes and ``--time=100:00`` is
    100 minutes, although both are often meant as hours. ``form`` is the shape of the value:
    ``"M"``, ``"M:S"``, ``"H:M:S"``, ``"D-H"``, ...
    """
    if minutes is None or form is None:
        return None
    if form == "M" and 0 < minutes <= 72:
        return (f"a bare number is minutes in Slurm: this is {minutes} minute"
                f"{'s' if minutes != 1 else ''}, not {minutes} hours")
    if form == "M:S" and minutes >= 2:
        return (f"A:B is minutes:seconds in Slurm, not hours:minutes: this is about "
                f"{minutes} minutes")
    return None
