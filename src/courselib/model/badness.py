"""How the kernel scores a process for the OOM killer, and how it picks the one to kill.

Everything here is integer arithmetic in pages, done the way the kernel's C does it, so a
prediction can be compared with a real kernel number for number.
Sources: FACTS §1.1-1.4 — kernel ``mm/oom_kill.c`` (``oom_badness()``, ``oom_evaluate_task()``,
``select_bad_process()``, ``constrained_alloc()``), ``mm/memcontrol.c`` (``mem_cgroup_get_max()``)
and ``fs/proc/base.c`` (``proc_oom_score()``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from courselib.units import PAGE_SIZE

OOM_SCORE_ADJ_MIN = -1000  # include/uapi/linux/oom.h; "never kill" (FACTS §1.1)
OOM_SCORE_ADJ_MAX = 1000
LONG_MIN = -(2 ** 63)  # what oom_badness() returns for a task it will not consider


@dataclass(frozen=True)
class Task:
    """One process as the OOM killer sees it: its memory and its ``oom_score_adj``.

    ``rss`` and ``swap`` are in pages (``get_mm_rss`` and ``MM_SWAPENTS``); ``pagetables`` is in
    bytes (``mm_pgtables_bytes``), because the kernel divides it by ``PAGE_SIZE`` itself.
    ``unkillable`` stands for the cases ``oom_unkillable_task()`` and ``MMF_OOM_SKIP`` cover:
    kernel threads, global init, a task already reaped. ``exiting_victim`` is a task an earlier OOM
    kill chose that is still exiting, its memory not yet marked ``MMF_OOM_SKIP``: a scan that meets
    it aborts (:func:`select_victim`).
    """

    name: str
    rss: int
    swap: int = 0
    pagetables: int = 0
    oom_score_adj: int = 0
    unkillable: bool = False
    exiting_victim: bool = False

    def __post_init__(self):
        if not OOM_SCORE_ADJ_MIN <= self.oom_score_adj <= OOM_SCORE_ADJ_MAX:
            # fs/proc/base.c oom_score_adj_write(): anything outside [-1000, 1000] is -EINVAL.
            raise ValueError(f"oom_score_adj {self.oom_score_adj} is outside [-1000, 1000]")
        if min(self.rss, self.swap, self.pagetables) < 0:
            raise ValueError("rss, swap and pagetables cannot be negative")


def _cdiv(a: int, b: int) -> int:
    """C integer division: truncates toward zero (Python's ``//`` floors)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def adj_unit(totalpages: int) -> int:
    """Pages that one point of ``oom_score_adj`` is worth: ``totalpages / 1000``, rounded down.

    See FACTS §1.1: ``adj *= totalpages / 1000`` is unsigned long division.
    """
    return totalpages // 1000


def oom_badness(task: Task, totalpages: int) -> int:
    """The kernel's badness of ``task`` in pages, or ``LONG_MIN`` if it is never a candidate.

    ``points = rss + swap + pagetables/PAGE_SIZE + oom_score_adj * (totalpages/1000)``.
    See FACTS §1.1: kernel mm/oom_kill.c oom_badness(). No root bonus, no floor at 1: a task
    with a negative ``oom_score_adj`` can score below zero and is still eligible.
    """
    if task.unkillable or task.oom_score_adj == OOM_SCORE_ADJ_MIN:
        return LONG_MIN
    points = task.rss + task.swap + task.pagetables // PAGE_SIZE
    return points + task.oom_score_adj * adj_unit(totalpages)


@dataclass(frozen=True)
class Choice:
    """The result of one scan: the victim's index (None if no task was eligible) and every score."""

    victim: int | None
    points: tuple[int, ...]  # oom_badness per task, in scan order; LONG_MIN = not a candidate
    aborted: bool = False    # the scan met an earlier victim still exiting: nobody is chosen

    @property
    def chosen_points(self) -> int | None:
        return None if self.victim is None else self.points[self.victim]


def select_victim(tasks: Sequence[Task], totalpages: int) -> Choice:
    """Scan ``tasks`` in order and keep the one with the most points, as the kernel does.

    See FACTS §1.2: ``oom_evaluate_task()`` skips a task only ``if (points == LONG_MIN ||
    points < oc->chosen_points)``, so a task with *equal* points replaces the current choice:
    among equals the **last one scanned** wins. ``chosen_points`` starts at ``LONG_MIN``, so any
    eligible task beats "nothing". The scan order is the order of ``tasks`` (courselib assumes the
    scenario's process order; the kernel's ``mem_cgroup_scan_tasks`` order is not documented).

    A task an earlier kill chose that is still exiting (``exiting_victim``) **aborts** the scan,
    whatever was chosen before it: ``if (tsk_is_oom_victim(task)) { if (MMF_OOM_SKIP) goto next;
    goto abort; }``, and ``abort`` sets ``oc->chosen = -1``, so ``out_of_memory()`` kills nobody,
    does not panic, and the allocation waits for the first victim's memory (mm/oom_kill.c
    ``oom_evaluate_task()``, ``out_of_memory()``). A reaped victim (``unkillable``) is skipped.
    """
    points = tuple(oom_badness(t, totalpages) for t in tasks)
    chosen, chosen_points = None, LONG_MIN
    for i, (t, p) in enumerate(zip(tasks, points)):
        if t.exiting_victim and not t.unkillable:
            return Choice(None, points, aborted=True)
        if p == LONG_MIN or p < chosen_points:
            continue
        chosen, chosen_points = i, p
    return Choice(chosen, points)


#: The OOM reaper starts on a victim that has not exited this long after the kill (OOM_REAPER_DELAY,
#: 2*HZ), tries to take its mm's lock up to MAX_OOM_REAP_RETRIES times HZ/10 apart, and then sets
#: MMF_OOM_SKIP whether it freed the memory or not (mm/oom_kill.c queue_oom_reaper(), oom_reap_task()).
OOM_REAPER_DELAY_S = 2.0
MAX_OOM_REAP_RETRIES = 10
OOM_REAP_RETRY_S = 0.1


def oom_skip_after_s(failed_tries: int = MAX_OOM_REAP_RETRIES) -> float:
    """Seconds after a kill until the reaper marks a victim that has not exited ``MMF_OOM_SKIP``.

    Until then every new scan aborts. ``failed_tries`` lock attempts fail first (each followed by a
    wait of HZ/10); after the last allowed one the reaper sets the flag anyway, so a victim that
    cannot exit holds back the next kill about ``2 + 10 × 0.1 = 3`` s (the time to unmap not counted).
    """
    if failed_tries < 0:
        raise ValueError("failed_tries cannot be negative")
    return OOM_REAPER_DELAY_S + min(failed_tries, MAX_OOM_REAP_RETRIES) * OOM_REAP_RETRY_S


def global_totalpages(totalram_pages: int, total_swap_pages: int = 0) -> int:
    """``totalpages`` of a global OOM: usable RAM plus swap, in pages.

    See FACTS §1.3: kernel mm/oom_kill.c constrained_alloc(),
    ``oc->totalpages = totalram_pages() + total_swap_pages``.
    """
    return totalram_pages + total_swap_pages


def memcg_totalpages(max_pages: int, *, cgroup: str = "v2", total_swap_pages: int = 0,
                     swap_max_pages: int | None = None, memsw_max_pages: int | None = None,
                     swappiness: int = 60) -> int:
    """``totalpages`` of a memcg OOM: the cgroup's limit in pages, plus the swap it may use.

    See FACTS §1.3: ``oc->totalpages = mem_cgroup_get_max(oc->memcg) ?: 1``. On v2, when
    swappiness is not 0, ``max += min(memory.swap.max, total_swap_pages)``; on v1 the swap part
    is ``memsw.max - max``, again capped by ``total_swap_pages``. ``None`` means "max" (no limit).
    """
    if cgroup not in ("v1", "v2"):
        raise ValueError(f"cgroup must be 'v1' or 'v2', not {cgroup!r}")
    total = max_pages
    if swappiness:
        if cgroup == "v2":
            swap = total_swap_pages if swap_max_pages is None else swap_max_pages
        else:
            swap = total_swap_pages if memsw_max_pages is None else max(memsw_max_pages - max_pages, 0)
        total += min(swap, total_swap_pages)
    return total or 1


def proc_oom_score(task: Task, global_pages: int) -> int:
    """The number ``/proc/PID/oom_score`` shows, 0..2000.

    ``(1000 + badness*1000/totalpages) * 2/3`` in C long arithmetic, with the **global**
    ``totalpages`` (RAM + swap) even for a task inside a memory cgroup; 0 for a task that is
    never a candidate. See FACTS §1.4: fs/proc/base.c proc_oom_score().
    """
    badness = oom_badness(task, global_pages)
    if badness == LONG_MIN:
        return 0
    return _cdiv((1000 + _cdiv(badness * 1000, global_pages)) * 2, 3)
