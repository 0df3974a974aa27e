"""Units, parsed carefully: durations (``30s``, ``25m``, ``0.417h``, ``1d``) and memory
quantities (Kubernetes ``Ki/Mi/Gi``, SI ``k/M/G``, and kernel pages with a ``p`` suffix).

Minutes versus hours is the classic mistake in GPU-hour arithmetic, so a bare number is
only accepted where the caller says what it means.
"""
from __future__ import annotations

import math
import re
from decimal import Decimal, ROUND_HALF_EVEN

from courselib.errors import InputError

PAGE_SIZE = 4096  # bytes; x86-64 and arm64 default (the kernel's PAGE_SIZE)

_DURATION_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
YEAR = 365.25 * 86400.0
#: The longest duration courselib reads: a million years (a job, a timeout, an MTBF, a simulation);
#: beyond it, sums and products of durations head for float overflow.
MAX_SECONDS = 1_000_000 * YEAR
#: The largest memory size courselib reads: 2**63 - 1 bytes, the kernel's and Kubernetes' int64
#: ceiling (8 EiB), beyond any machine.
MAX_BYTES = 2 ** 63 - 1
_DURATION_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([smhd]?)\s*$")


def parse_duration(value, *, field: str = "duration", bare: str = "s") -> float:
    """Seconds in ``value``: a number (in unit ``bare``) or a string like ``25m``, ``1500s``, ``2h``, ``1d``."""
    if isinstance(value, bool):
        raise InputError(f"expected a duration such as 25m or 2h, got {value!r}", field=field)
    try:
        if isinstance(value, (int, float)):
            seconds = float(value) * _DURATION_UNITS[bare]
        elif isinstance(value, str):
            m = _DURATION_RE.match(value)
            if not m:
                raise InputError(f"{_short(value)!r} is not a duration", field=field,
                                 hint="write a number with a unit: 30s, 25m, 0.417h, 1d")
            seconds = float(m.group(1)) * _DURATION_UNITS[m.group(2) or bare]
        else:
            raise InputError(f"expected a duration such as 25m or 2h, got {_short(value)!r}", field=field)
    except OverflowError:
        seconds = math.inf
    if not math.isfinite(seconds) or seconds < 0:
        raise InputError(f"{_short(value)!r} is not a non-negative duration", field=field,
                         hint="durations are finite: 30s, 25m, 0.417h, 1d")
    if seconds > MAX_SECONDS:
        raise InputError(f"{_short(value)!r} is longer than {MAX_SECONDS / YEAR:,.0f} years", field=field,
                         hint="no job, timeout or simulation is that long; check the unit")
    return seconds


def _short(value, width: int = 40):
    """``value`` for a message: a number or text of hundreds of digits is shortened."""
    text = str(value)
    if len(text) <= width:
        return value
    return f"{text[:12]}...({len(text)} characters)"


def format_duration(seconds: float) -> str:
    """A short human form: ``1500`` -> ``25m``, ``5400`` -> ``1h30m``, ``42.5`` -> ``42.5s``."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:g}s"
    d, rem = divmod(int(round(seconds)), 86400)
    h, rem = divmod(rem, 3600)
    m, s = divmod(rem, 60)
    parts = [f"{d}d" if d else "", f"{h}h" if h else "", f"{m}m" if m else "", f"{s}s" if s else ""]
    return "".join(parts) or "0s"


_MEM_UNITS = {
    "": 1, "b": 1,
    "ki": 1024, "mi": 1024 ** 2, "gi": 1024 ** 3, "ti": 1024 ** 4,
    "k": 1000, "m": 1000 ** 2, "g": 1000 ** 3, "t": 1000 ** 4,
    "p": PAGE_SIZE,
}
_MEM_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*$")


def parse_memory(value, *, field: str = "memory") -> int:
    """Bytes in ``value``: an int (bytes) or ``512Mi``, ``1Gi``, ``2G``, ``150000p`` (pages of 4 KiB).

    Kubernetes quantities are case-sensitive (``M`` is 10^6, ``m`` would be milli); we accept the
    suffixes a memory field can sensibly carry and reject the rest with a hint.
    """
    if isinstance(value, bool):
        raise InputError(f"expected a memory size such as 1Gi, got {value!r}", field=field)
    if isinstance(value, int):
        if value < 0:
            raise InputError(f"{_short(value)} is negative", field=field)
        return _at_most_max_bytes(value, value, field)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer() and value >= 0:
        return _at_most_max_bytes(int(value), value, field)
    if not isinstance(value, str):
        raise InputError(f"expected a memory size such as 1Gi, got {_short(value)!r}", field=field)
    m = _MEM_RE.match(value)
    unit = m.group(2) if m else None
    if not m or (unit.lower() not in _MEM_UNITS) or unit == "m":
        raise InputError(f"{_short(value)!r} is not a memory size", field=field,
                         hint="use Ki/Mi/Gi (powers of 2), k/M/G (powers of 10), or pages with p (150000p)")
    # Exact decimal arithmetic: a float would overflow on hundreds of digits (and round 2**60).
    exact = Decimal(m.group(1)) * _MEM_UNITS[unit.lower()]
    if exact > MAX_BYTES:
        return _at_most_max_bytes(MAX_BYTES + 1, value, field)
    return int(exact.to_integral_value(rounding=ROUND_HALF_EVEN))


def _at_most_max_bytes(n: int, value, field: str) -> int:
    if n > MAX_BYTES:
        raise InputError(f"{_short(value)!r} is more than 8 EiB (2**63 - 1 bytes), more memory than any "
                         "machine has", field=field, hint="check the unit: Ki/Mi/Gi, k/M/G, or pages with p")
    return n


def bytes_to_pages(nbytes: int) -> int:
    """Whole pages in ``nbytes`` (rounded down, as the kernel counts a limit)."""
    return nbytes // PAGE_SIZE


def format_usd(value) -> str:
    """``$1,234.56``, or ``$333.33–$666.67`` for a (low, high) pair: how the course prints dollars."""
    if isinstance(value, (list, tuple)):
        return f"${value[0]:,.2f}–${value[1]:,.2f}"
    return f"${value:,.2f}"


def format_bytes(nbytes: float) -> str:
    """Binary units: ``1073741824`` -> ``1.0 GiB``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(nbytes) < 1024 or unit == "TiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    return f"{nbytes} B"
