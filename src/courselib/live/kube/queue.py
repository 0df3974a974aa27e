"""The order in which the real kube-scheduler takes PodGroups from its queue (gang scheduling on).

A replay with native gang scheduling submits several PodGroups at one instant; which the scheduler
tries first decides which gangs get the GPUs. This module holds the rule, from the source of
``k8s.io/kubernetes@v1.37.2`` (``pkg/scheduler/``; line numbers of that version):

1. *A group is queued with its first pod.* The first pod of a PodGroup the scheduling queue sees
   creates the group's queue entry (``backend/queue/scheduling_queue.go`` ``addPodGroupMember``
   L900–928), and the entry's timestamp is that pod's (L414–427): the moment the pod's add event
   reached the queue (``newQueuedPodInfo``, L2204–2218). Later pods join the entry (L949–962) and do
   not change its timestamp (``moveToActiveQ`` sets only the first-attempt time, L811–839).
2. *It waits, gated, for its quorum.* GangScheduling's PreEnqueue refuses the group until
   ``minCount`` of its pods exist (``framework/plugins/gangscheduling/gangscheduling.go`` L208–213,
   L250–281; ``CompositePodGroup`` is off, ``pkg/features/kube_features.go`` L1429–1431); a gated
   group waits outside the activeQ (``scheduling_queue.go`` L821–831). Each new pod's event re-runs
   the check (``eventhandlers.go`` L238–248: ``Add``, then ``MoveAllToActiveOrBackoffQueue``; never
   tried, the group has no backoff, ``backoff_queue.go`` L232–236), so the group enters the activeQ
   with the pod that completes its quorum.
3. *The activeQ is sorted by priority, then that timestamp* (``framework/plugins/queuesort/
   priority_sort.go`` L43–47), and one scheduling goroutine pops its head, one group per cycle
   (``scheduler.go`` L552, ``schedule_one.go`` L67–90; ``backend/queue/active_queue.go`` L322–350).

So each pop takes, **among the groups that have reached their quorum by then**, the one of highest
priority whose first pod came first. When the scheduler pops depends on how long its earlier cycles
took, which nothing outside it shows: a group whose first pod came later but whose quorum came
first goes first if the scheduler was idle when its quorum came, and second if the scheduler was
still busy until the other's quorum came too. The *quorum order* is the idle case only; ordering
by first pods is the busy case only; neither is the rule.

What we can observe: the pods' arrival order (the API server's watch delivers them in etcd's
revision order, as it does to the scheduler's informer: the replay's ``pod_order``) and, going
forward, the scheduler's own record of its cycles: at ``--v=2`` it logs every PodGroup cycle's
outcome from the scheduling goroutine, in cycle order (``schedule_one_podgroup.go`` L896–908:
"Successfully scheduled a pod group", "Pod group is waiting for preemption", "Unable to schedule a
pod group"). :func:`pod_group_cycles` reads those lines; :func:`order_allowed` checks that the
order they show is one the rule allows given the pods' arrival order; :func:`allowed_orders` lists
every order the rule allows, for a recording made before the cycles were kept.
"""
from __future__ import annotations

import re
from itertools import product

from courselib.model.workload import Workload

#: kube-scheduler's words for a PodGroup cycle's outcome (``schedule_one_podgroup.go`` L896,
#: L906, L908), as courselib names them
OUTCOMES = {"Successfully scheduled a pod group": "scheduled",
            "Pod group is waiting for preemption": "preempting",
            "Unable to schedule a pod group": "unschedulable"}
_CYCLE = re.compile(r'"(' + "|".join(map(re.escape, OUTCOMES)) + r')"[^\n]*?\bpodGroup="([^"/]+)/([^"]+)"')
#: more orders than this are not listed (a recording of many jobs at one instant)
MAX_ORDERS = 720


def pod_group_cycles(log_text: str, namespace: str, jobs) -> list[list]:
    """The PodGroup cycles of ``jobs`` (names) in ``namespace`` that kube-scheduler's log records,
    in cycle order, as runs ``[[job, outcome, times], ...]``."""
    names = set(jobs)
    out: list[list] = []
    for m in _CYCLE.finditer(log_text):
        what, ns, name = m.groups()
        if ns != namespace or name not in names:
            continue
        outcome = OUTCOMES[what]
        if out and out[-1][:2] == [name, outcome]:
            out[-1][2] += 1
        else:
            out.append([name, outcome, 1])
    return out


def first_tries(cycles: list[list]) -> list[str]:
    """Jobs in the order of their PodGroup's first cycle."""
    out: list[str] = []
    for name, _, _ in cycles:
        if name not in out:
            out.append(name)
    return out


def marks(workload: Workload, pod_order: list[str], batches: list[list[str]]) -> list[dict]:
    """Per submission instant, each job's ``(first, quorum)``: the positions, in that instant's pod
    arrival order, of its first pod and of the pod that completed its ``min_member``."""
    jobs = {j.name: j for j in workload.jobs}
    out, pos = [], 0
    for batch in batches:
        total = sum(jobs[n].pods for n in batch)
        seg = pod_order[pos:pos + total]
        first: dict[str, int] = {}
        quorum: dict[str, int] = {}
        seen: dict[str, int] = {}
        for i, name in enumerate(seg):
            first.setdefault(name, i)
            seen[name] = seen.get(name, 0) + 1
            if seen[name] == (jobs[name].min_member or jobs[name].pods):
                quorum[name] = i
        out.append({n: (first.get(n, len(seg)), quorum.get(n, len(seg))) for n in batch})
        pos += total
    return out


def _key(workload: Workload, mark: dict):
    prio = {j.name: j.priority for j in workload.jobs}
    return lambda name: (-prio[name], mark[name][0])


def _next_ok(name: str, left, t: int, mark: dict, key) -> int | None:
    """The earliest position at which the scheduler may pop ``name`` next (after position ``t``),
    or ``None`` if a group it must take first has its quorum by then."""
    at = max(t, mark[name][1])
    if any(h != name and mark[h][1] <= at and key(h) < key(name) for h in left):
        return None
    return at


def batch_order_allowed(workload: Workload, mark: dict, order: list[str]) -> str | None:
    """``None`` if the rule allows the scheduler to have tried the jobs of one instant in ``order``,
    else why not. Popping each group as early as it can is never worse: the set of groups with
    their quorum only grows."""
    key, left, t = _key(workload, mark), set(mark), -1
    for name in order:
        at = _next_ok(name, left, t, mark, key)
        if at is None:
            ahead = min((h for h in left if h != name and mark[h][1] <= max(t, mark[name][1])), key=key)
            return (f"{name} was tried before {ahead}, whose quorum had come by then and whose first "
                    f"pod came first (or whose priority is higher)")
        left.discard(name)
        t = at
    return None


def order_allowed(workload: Workload, pod_order: list[str], batches: list[list[str]],
                  order: list[str]) -> str | None:
    """``None`` if the rule allows ``order`` (jobs by their PodGroup's first cycle) at every
    submission instant, given the pods' arrival order; else why not."""
    for batch, mark in zip(batches, marks(workload, pod_order, batches)):
        mine = [n for n in order if n in mark]
        mine += [n for n in sorted(mark, key=_key(workload, mark)) if n not in mine]
        why = batch_order_allowed(workload, mark, mine)
        if why is not None:
            return why
    return None


def batch_orders(workload: Workload, mark: dict, cap: int = MAX_ORDERS) -> list[tuple]:
    """Every order the rule allows for one instant's groups (at most ``cap``)."""
    key, found = _key(workload, mark), []

    def walk(left: frozenset, t: int, acc: tuple) -> None:
        if len(found) >= cap:
            return
        if not left:
            found.append(acc)
            return
        for name in sorted(left, key=key):
            at = _next_ok(name, left, t, mark, key)
            if at is not None:
                walk(left - {name}, at, acc + (name,))
    walk(frozenset(mark), -1, ())
    return found


def allowed_orders(workload: Workload, pod_order: list[str], batches: list[list[str]],
                   cap: int = MAX_ORDERS) -> list[list[str]]:
    """Every order of first cycles the rule allows over the whole replay (at most ``cap``); the
    quorum order (the scheduler idle at every quorum) is among them."""
    per = [batch_orders(workload, m, cap) for m in marks(workload, pod_order, batches)]
    out: list[list[str]] = []
    for combo in product(*per):
        out.append([n for part in combo for n in part])
        if len(out) >= cap:
            break
    return out


def quorum_order(workload: Workload, pod_order: list[str], batches: list[list[str]]) -> list[str]:
    """Jobs in the order they reached ``min_member`` arrived pods, batch by batch: the order the
    scheduler tries them if it is idle whenever a quorum comes (one order the rule allows)."""
    out: list[str] = []
    for mark in marks(workload, pod_order, batches):
        out += sorted(mark, key=lambda n: (mark[n][1], mark[n][0]))
    return out
