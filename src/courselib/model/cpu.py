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


def shares_to_weight(shares: int) -> int:
    """cgroup v2 ``cpu.weight`` for a v1 ``cpu.shares`` value, as the runtime converts it.

    opencontainers/cgroups v0.0.7 ``ConvertCPUSharesToCgroupV2Value`` (the version Kubernetes v1.37.2's
    go.mod pins; bibliography ``opencontainers-cgroups-weight``): a quadratic in log2(shares) that maps
    2 -> 1, 1024 -> 100 (both defaults) and 262144 -> 10000. Older runtimes used the straight line
    ``1 + (shares - 2) * 9999 / 262142``, which turned the default 1024 shares into weight 39.
    """
    if shares == 0:
        return 0
    if shares <= MIN_SHARES:
        return 1
    if shares >= MAX_SHARES:
        return 10_000
    lg = math.log2(shares)
    return math.ceil(10 ** ((lg * lg + 125 * lg) / 612.0 - 7.0 / 34.0))


def shares_to_weight_linear(shares: int) -> int:
    """The older linear conversion (runc before opencontainers/cgroups v0.0.6): 1024 shares -> weight 39."""
    return 0 if shares == 0 else 1 + (shares - 2) * 9999 // 262142


def contended_cpus(demand: dict[str, float], weight: dict[str, int], cap: dict[str, float | None],
                   cpus: float) -> dict[str, float]:
    """CPUs each busy cgroup gets when they compete for ``cpus`` CPUs.

    cgroup-v2.rst: a parent's CPU "is distributed by adding up the weights of all active children and
    giving each the fraction matching the ratio of its weight against the sum" (``kernel-cgroup-v2``);
    a cgroup also never gets more than its ``cpu.max`` (``cap``) or than it asks for (``demand``), and
    what it cannot use goes to the others ([derived]: the scheduler is work-conserving). Solved by
    handing out shares in rounds until every cgroup is either satisfied or at its share.
    """
    want = {k: min(demand[k], cap[k]) if cap.get(k) is not None else demand[k] for k in demand}
    got = {k: 0.0 for k in demand}
    left, active = float(cpus), {k for k in demand if want[k] > 0}
    while active and left > 1e-12:
        total = sum(weight[k] for k in active)
        share = {k: left * weight[k] / total for k in active}
        done = {k for k in active if want[k] - got[k] <= share[k] + 1e-12}
        if not done:
            for k in active:
                got[k] += share[k]
            break
        for k in done:
            left -= want[k] - got[k]
            got[k] = want[k]
        active -= done
    return got
