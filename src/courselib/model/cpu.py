"""CPU limits as the kernel enforces them, and how Kubernetes turns ``resources.cpu`` into them.

- CFS bandwidth control: a cgroup may run for ``quota`` microseconds of CPU time in every
  ``period`` microseconds, summed over all CPUs; then it is throttled until the next period
  (Documentation/scheduler/sched-bwc.rst; cgroup-v2.rst ``cpu.max``; v1 ``cpu.cfs_quota_us``).
- kubelet: ``limits.cpu`` -> quota = milliCPU * period / 1000, at least 1000 µs, with the default
  period 100000 µs (pkg/kubelet/kuberuntime/helpers_linux.go ``milliCPUToQuota``);
  ``requests.cpu`` -> cpu.shares = milliCPU * 1024 / 1000, clamped to [2, 262144]
  (pkg/kubelet/cm/helpers_linux.go ``MilliCPUToShares``).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction

from courselib.errors import InputError

DEFAULT_PERIOD_US = 100_000   # kubelet quotaPeriod; also the kernel's default cfs_period_us
MIN_QUOTA_US = 1_000          # kubelet minQuotaPeriod (the kernel refuses less than 1 ms)
SHARES_PER_CPU = 1024
MIN_SHARES = 2
MAX_SHARES = 262_144
MAX_MILLI_CPU = 10 ** 12      # a billion CPUs: beyond any machine, and beyond it floats would overflow


def parse_cpu(value, *, field: str = "cpu") -> int:
    """milliCPU in a Kubernetes CPU quantity: ``"250m"`` -> 250, ``"1.5"`` -> 1500, ``2`` -> 2000."""
    if isinstance(value, bool) or value is None:
        raise InputError(f"expected a CPU quantity such as 250m or 2, got {value!r}", field=field)
    shown = value if len(str(value)) <= 40 else f"{str(value)[:12]}...({len(str(value))} characters)"
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError(f"{value!r} is not a CPU quantity", field=field)
        milli = Fraction(value) * 1000
    else:
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(m?)\s*", str(value))
        if not m:
            raise InputError(f"{shown!r} is not a CPU quantity", field=field,
                             hint="write cores (2, 0.5) or millicores (250m)")
        milli = Fraction(m.group(1)) * (1 if m.group(2) else 1000)  # exact: 400 digits do not overflow
    if milli < 0:
        raise InputError(f"{shown!r} is negative", field=field)
    if milli > MAX_MILLI_CPU:
        raise InputError(f"{shown!r} is more than {MAX_MILLI_CPU // 1000:,} CPUs, more than any machine has",
                         field=field, hint="write cores (2, 0.5) or millicores (250m)")
    # Kubernetes rounds CPU quantities up to whole millicores.
    return math.ceil(milli)


def milli_cpu_to_quota(milli_cpu: int, period_us: int = DEFAULT_PERIOD_US) -> int | None:
    """CFS quota (µs per period) for a CPU limit; None for no limit (kubelet ``milliCPUToQuota``)."""
    if milli_cpu == 0:
        return None
    return max(milli_cpu * period_us // 1000, MIN_QUOTA_US)


def milli_cpu_to_shares(milli_cpu: int) -> int:
    """cgroup v1 ``cpu.shares`` for a CPU request (kubelet ``MilliCPUToShares``)."""
    if milli_cpu == 0:
        return MIN_SHARES
    return min(max(milli_cpu * SHARES_PER_CPU // 1000, MIN_SHARES), MAX_SHARES)


@dataclass(frozen=True)
class CpuLimit:
    """A CFS bandwidth limit: at most ``quota_us`` of CPU time per ``period_us`` (None: no limit)."""

    quota_us: int | None
    period_us: int = DEFAULT_PERIOD_US

    @property
    def cpus(self) -> float | None:
        """The limit in CPUs: quota / period (0.25 means a quarter of one CPU)."""
        return None if self.quota_us is None else self.quota_us / self.period_us

    def expected_usage(self, demand_cpus: float, online_cpus: int) -> float:
        """CPUs a workload that wants ``demand_cpus`` gets: min(demand, limit, CPUs on the machine)."""
        cap = online_cpus if self.cpus is None else min(self.cpus, online_cpus)
        return min(demand_cpus, cap)

    def burst(self, busy_threads: int) -> tuple[float, float]:
        """(µs running, µs throttled) per period for ``busy_threads`` threads on as many idle CPUs.

        The quota is CPU time summed over CPUs, so n busy threads use it up n times faster
        (sched-bwc.rst): they run quota/n µs of wall-clock time, then wait out the period.
        """
        if self.quota_us is None:
            return float(self.period_us), 0.0
        run = min(self.period_us, self.quota_us / max(1, busy_threads))
        return run, self.period_us - run

    def v1_files(self) -> dict[str, str]:
        return {"cpu.cfs_quota_us": str(self.quota_us if self.quota_us is not None else -1),
                "cpu.cfs_period_us": str(self.period_us)}

    def v2_files(self) -> dict[str, str]:
        return {"cpu.max": f"{self.quota_us if self.quota_us is not None else 'max'} {self.period_us}"}


def parse_cpu_max(text: str) -> CpuLimit:
    """Read a cgroup v2 ``cpu.max`` line: ``"max 100000"`` or ``"25000 100000"``."""
    parts = text.split()
    quota = None if parts[0] == "max" else int(parts[0])
    period = int(parts[1]) if len(parts) > 1 else DEFAULT_PERIOD_US
    return CpuLimit(quota, period)


def parse_cfs(quota_text: str, period_text: str) -> CpuLimit:
    """Read cgroup v1 ``cpu.cfs_quota_us`` (-1 = no limit) and ``cpu.cfs_period_us``."""
    quota = int(quota_text)
    return CpuLimit(None if quota < 0 else quota, int(period_text))
