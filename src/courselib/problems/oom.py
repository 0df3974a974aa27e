"""Practice: which process does the OOM killer kill, with what ``oom_score``, exit code and counters?

The problem is an OOM scenario in the format ``courselib oom simulate`` reads (``problem.data
["scenario"]``): a cgroup (or a node) that is full, its processes, and one process that asks for
one more page. The solution runs :func:`courselib.sim.memcg.simulate` on it, which scores the
candidates with :mod:`courselib.model.badness` and kills with :mod:`courselib.model.memcg`
(linux-oom-kill, linux-proc-base, kernel-cgroup-v2, kernel-cgroup-v1-memory). Traps by difficulty:

- easy: one container cgroup, two or three processes, ``oom_score_adj`` mostly 0.
- medium: more processes; ``oom_score_adj`` that outweighs size, ``-1000`` (never killed), a tie
  (the last one scanned wins), swap entries and page tables that count, ``memory.swap.max`` that
  enlarges ``totalpages``, tmpfs pages that count toward the limit but belong to no process, VSZ
  (which never counts), cgroup v1 (no ``memory.oom.group``) or v2 with ``memory.oom.group=1``.
- hard: a Kubernetes pod whose container cgroups each have a limit (only that container's tasks are
  candidates; the group kill; ``memory.events`` is hierarchical), or a node-wide OOM across pods of
  every QoS class (``oom_score_adj`` from the kubelet, kubelet -999, sshd -1000, init unkillable;
  ``totalpages`` = RAM + swap; a global OOM does not raise ``oom``).
"""
from __future__ import annotations

from courselib.io.scenario import scenario_from_mapping
from courselib.model.badness import LONG_MIN, Task, adj_unit, oom_badness
from courselib.model.memcg import ExitStatus, is_ancestor, memcg_totalpages
from courselib.model.restart import terminated_by_oom
from courselib.problems.base import Problem, Solution, rng
from courselib.problems.render import table
from courselib.units import PAGE_SIZE, parse_memory

TOPIC = "oom"
SUMMARY = "which process the OOM killer kills, its oom_score, the exit code, memory.events"

MiB_PAGES = 2 ** 20 // PAGE_SIZE   # 256
GiB_PAGES = 1024 * MiB_PAGES
_NAMES = ("python", "dataloader", "redis-server", "java", "node", "postgres", "nginx", "gunicorn",
          "tokenizer", "prefetch", "ray-worker", "triton", "jupyter", "celery", "rsync", "ffmpeg")
ONE_PAGE = {"grow": f"{10 * PAGE_SIZE // 1024}Ki", "grow_by": f"{PAGE_SIZE // 1024}Ki"}  # 1 page in 1 step


# --- generation helpers ----------------------------------------------------------------------

def _split(r, total: int, n: int, minimum: int) -> list[int]:
    """``n`` sizes of at least ``minimum`` pages that add up to ``total``."""
    weights = [r.uniform(0.15, 1.0) for _ in range(n)]
    spare = total - n * minimum
    parts = [minimum + int(spare * w / sum(weights)) for w in weights]
    parts[-1] += total - sum(parts)
    return parts


def _proc(name: str, rss: int, *, adj: int = 0, swap: int = 0, pt_kib: int = 0, cgroup: str = "/",
          unkillable: bool = False) -> dict:
    p = {"name": name, "rss": f"{rss}p"}
    if swap:
        p["swap"] = f"{swap}p"
    if pt_kib:
        p["pagetables"] = f"{pt_kib}Ki"
    p["oom_score_adj"] = adj
    if cgroup != "/":
        p["cgroup"] = cgroup
    if unkillable:
        p["unkillable"] = True
    return p


def _pages(q: str) -> int:
    return int(q[:-1])


def _charge(p: dict) -> int:
    pt = parse_memory(p.get("pagetables", "0Ki"))
    return _pages(p["rss"]) + pt // PAGE_SIZE


def _points(p: dict, totalpages: int) -> int:
    t = Task(p["name"], _pages(p["rss"]), _pages(p.get("swap", "0p")),
             parse_memory(p.get("pagetables", "0Ki")), p["oom_score_adj"], p.get("unkillable", False))
    return oom_badness(t, totalpages)


def _make_tie(r, procs: list[dict], totalpages: int, slack: int) -> int:
    """Give a second process exactly the top score, moving pages from a third (or the slack).

    Returns the slack left. A tie is the kernel's `points < chosen_points` rule at work: among
    equal scores the one scanned last is killed (linux-oom-kill).
    """
    for _ in range(8):
        pts = [_points(p, totalpages) for p in procs]
        eligible = [i for i, x in enumerate(pts) if x != LONG_MIN]
        if len(eligible) < 2:
            return slack
        top = max(eligible, key=lambda i: pts[i])
        q = r.choice([i for i in eligible if i != top])
        delta = pts[top] - pts[q]          # pages q must gain
        new_rss = _pages(procs[q]["rss"]) + delta
        if new_rss < MiB_PAGES:
            continue
        donors = [i for i in range(len(procs)) if i not in (top, q) and _pages(procs[i]["rss"]) - delta >= MiB_PAGES]
        trial = [dict(p) for p in procs]
        trial[q]["rss"] = f"{new_rss}p"
        new_slack = slack
        if delta <= slack:
            new_slack = slack - delta
        elif donors:
            d = r.choice(donors)
            trial[d]["rss"] = f"{_pages(trial[d]['rss']) - delta}p"
        else:
            continue
        pts2 = [_points(p, totalpages) for p in trial]
        best = max(x for x in pts2 if x != LONG_MIN)
        if sorted(i for i, x in enumerate(pts2) if x == best) == sorted((top, q)):
            procs[:] = trial
            return new_slack
    return slack


def _names(r, n: int) -> list[str]:
    return r.sample(_NAMES, n)


# --- the three shapes --------------------------------------------------------------------------

def _container(r, difficulty: str) -> dict:
    """One container cgroup at its memory.max (easy, medium)."""
    medium = difficulty == "medium"
    limit = r.choice((256, 512, 768, 1024, 2048) if not medium else (512, 1024, 1536, 2048, 3072, 4096)) * MiB_PAGES
    node_gib = r.choice((4, 8, 16) if not medium else (8, 16, 32, 64))
    cgroup_v = "v2"
    oom_group = False
    swap_max = node_swap = 0
    if medium:
        cgroup_v = r.choice(("v1", "v2", "v2"))
        oom_group = cgroup_v == "v2" and r.random() < 0.45
        if r.random() < 0.4:
            node_swap = r.choice((2, 4, 8)) * GiB_PAGES
            swap_max = r.choice((128, 256, 512, 1024)) * MiB_PAGES
    n = r.randint(2, 3) if not medium else r.randint(3, 5)
    names = _names(r, n)
    tmpfs = r.choice((0, 0, 16, 32, 64, 96)) * MiB_PAGES if medium else 0
    charges = _split(r, limit - tmpfs, n, 4 * MiB_PAGES)
    procs = []
    for i, (name, charge) in enumerate(zip(names, charges)):
        pt_kib = r.choice((0, 256, 1028, 2050, 3900, 8190)) if medium else 0
        adj = 0
        if medium:
            adj = r.choice((0, 0, 0, -1000, -500, -100, 100, 250, 500, 1000))
        elif r.random() < 0.35:
            adj = r.choice((-800, -300, -100, 100, 300, 600))
        swap = r.randrange(0, 40 * MiB_PAGES) if swap_max and r.random() < 0.6 else 0
        procs.append(_proc(name, charge - pt_kib * 1024 // PAGE_SIZE, adj=adj, swap=swap, pt_kib=pt_kib))
    if all(p["oom_score_adj"] == -1000 for p in procs):
        procs[0]["oom_score_adj"] = 0
    total = memcg_totalpages(limit, cgroup=cgroup_v, total_swap_pages=node_swap, swap_max_pages=swap_max,
                             memsw_max_pages=swap_max and limit + swap_max)
    if medium and n >= 3 and r.random() < 0.45:
        tmpfs = _make_tie(r, procs, total, tmpfs)
    trigger = r.choice(procs)
    trigger.update(ONE_PAGE)
    sc = {"scope": "memcg", "cgroup": cgroup_v, "limit": f"{limit}p", "swap": f"{swap_max}p",
          "oom_group": oom_group, "node_memory": f"{node_gib}Gi", "node_swap": f"{node_swap}p",
          "usage": f"{limit}p", "processes": procs, "duration": "1s", "step": "0.1s"}
    story = {"kind": "container", "trigger": trigger["name"], "tmpfs_pages": tmpfs,
             "runtime": ("Kubernetes (kubelet on cgroup v2 sets memory.oom.group=1)" if oom_group
                         else r.choice(("docker run --memory", "podman run --memory", "a systemd service with MemoryMax"))),
             "events_of": ["/"], "labels": {"/": "the container's cgroup"}}
    if medium:
        story["vsz_pages"] = {p["name"]: _pages(p["rss"]) * r.choice((3, 4, 6, 10)) + r.randrange(0, 9999)
                              for p in procs}
    return {"scenario": sc, "story": story}


def _pod(r) -> dict:
    """Hard: a pod cgroup with one cgroup per container, each with its own memory.max."""
    n_cont = r.choice((2, 3))
    cnames = ["app"] + r.sample(("sidecar", "proxy", "logger", "metrics"), n_cont - 1)
    guaranteed = r.random() < 0.35     # else Burstable: the kubelet's adj follows each container's request
    cgroups, procs = [], []
    full = cnames[0] if r.random() < 0.75 else cnames[1]
    used_names = set()
    pod_limit = 0
    for c in cnames:
        limit = r.choice((256, 512, 1024, 2048, 3072)) * MiB_PAGES
        pod_limit += limit
        cgroups.append({"path": f"/{c}", "max": f"{limit}p", "oom_group": True})
        n = r.randint(2, 3) if c == full else r.randint(1, 2)
        fill = limit if c == full else int(limit * r.uniform(0.35, 0.9))
        charges = _split(r, fill, n, 8 * MiB_PAGES)
        adj = -997 if guaranteed else r.randrange(300, 990)
        for charge in charges:
            name = r.choice([x for x in _NAMES if x not in used_names])
            used_names.add(name)
            pt_kib = r.choice((256, 1028, 2050, 4100))
            p_adj = adj
            if c == full and r.random() < 0.3:
                p_adj = r.choice((1000, -1000, min(1000, adj + 300)))   # a process that changed its own adj
            procs.append(_proc(name, charge - pt_kib * 1024 // PAGE_SIZE, adj=p_adj, pt_kib=pt_kib,
                               cgroup=f"/{c}"))
    full_procs = [p for p in procs if p.get("cgroup") == f"/{full}"]
    if all(p["oom_score_adj"] == -1000 for p in full_procs):
        full_procs[0]["oom_score_adj"] = 0
    trigger = r.choice(full_procs)
    trigger.update(ONE_PAGE)
    node_gib = r.choice((16, 32, 64))
    sc = {"scope": "memcg", "cgroup": "v2", "limit": f"{pod_limit}p", "swap": "0p", "oom_group": False,
          "node_memory": f"{node_gib}Gi", "node_swap": "0p", "cgroups": cgroups, "processes": procs,
          "duration": "1s", "step": "0.1s"}
    labels = {"/": "the pod's cgroup (kubepods/.../pod<uid>)"}
    labels.update({f"/{c}": f"container {c}" for c in cnames})
    story = {"kind": "pod", "trigger": trigger["name"], "tmpfs_pages": 0,
             "runtime": "Kubernetes on cgroup v2: memory.oom.group=1 on every container cgroup",
             "events_of": [f"/{full}", "/"], "labels": labels,
             "vsz_pages": {p["name"]: _pages(p["rss"]) * r.choice((3, 5, 8)) + r.randrange(0, 9999) for p in procs}}
    return {"scenario": sc, "story": story}


def _node(r) -> dict:
    """Hard: the whole node runs out of memory; pods of every QoS class are candidates."""
    ram_gib = r.choice((8, 16, 32))
    ram = ram_gib * GiB_PAGES
    swap = r.choice((0, 0, 2, 4)) * GiB_PAGES
    pods = [("trainer", "guaranteed", -997)]
    for _ in range(r.randint(1, 2)):
        pods.append((r.choice(("api", "etl", "worker", "ingest")) + str(len(pods)), "burstable", r.randrange(200, 999)))
    if r.random() < 0.7:
        pods.append(("notebook", "besteffort", 1000))
    if r.random() < 0.4:
        pods.append(("scratch", "besteffort", 1000))
    cgroups = [{"path": "/kubepods"}]
    procs = [_proc("systemd", 3 * MiB_PAGES + r.randrange(0, 256), cgroup="/init.scope", unkillable=True),
             _proc("sshd", 2 * MiB_PAGES + r.randrange(0, 256), adj=-1000, cgroup="/system.slice/sshd"),
             _proc("kubelet", r.randrange(80, 200) * MiB_PAGES, adj=-999, cgroup="/system.slice/kubelet")]
    cgroups += [{"path": "/init.scope"}, {"path": "/system.slice"}, {"path": "/system.slice/sshd"},
                {"path": "/system.slice/kubelet"}]
    kernel = r.randrange(300, 700) * MiB_PAGES          # slab, kernel stacks: charged to nobody
    budget = ram - kernel - sum(_charge(p) for p in procs)
    shares = _split(r, budget, len(pods), 32 * MiB_PAGES)
    # the Guaranteed trainer is the biggest process on the node: the classic wrong answer
    order = sorted(range(len(pods)), key=lambda i: -shares[i])
    shares = [shares[order[0]]] + [shares[i] for i in order[1:]]
    for (pod, qos, adj), share in zip(pods, shares):
        pod_path = f"/kubepods/{qos}/pod-{pod}"
        cgroups.append({"path": pod_path})
        cgroups.append({"path": f"{pod_path}/main", "oom_group": True})
        pt_kib = r.choice((512, 2052, 8196))
        procs.append(_proc(f"{pod}-main", share - pt_kib * 1024 // PAGE_SIZE, adj=adj, pt_kib=pt_kib,
                           cgroup=f"{pod_path}/main"))
    best_effort = [p for p in procs if p["oom_score_adj"] == 1000]
    if len(best_effort) >= 2 and r.random() < 0.5:
        # two BestEffort pods of exactly the same size: the one scanned last dies (book/references.bib: linux-oom-kill);
        # the pages this frees or takes go to the kernel's share (usage stays = RAM)
        a, b = best_effort[:2]
        each = (_charge(a) + _charge(b)) // 2 - 128
        a["rss"] = b["rss"] = f"{each}p"
        a["pagetables"] = b["pagetables"] = "512Ki"
    trigger = r.choice([p for p in procs if not p.get("unkillable")])
    trigger.update(ONE_PAGE)
    sc = {"scope": "node", "cgroup": "v2", "limit": f"{ram}p", "swap": f"{swap}p",
          "usage": f"{ram}p", "cgroups": cgroups, "processes": procs, "duration": "1s", "step": "0.1s"}
    story = {"kind": "node", "trigger": trigger["name"], "kernel_pages": ram - sum(_charge(p) for p in procs),
             "runtime": "Kubernetes node on cgroup v2 (kubelet sets memory.oom.group=1 on container cgroups)",
             "events_of": ["/kubepods"], "labels": {"/kubepods": "/kubepods (parent of every pod)"},
             "vsz_pages": {p["name"]: _pages(p["rss"]) * r.choice((2, 4, 7)) + r.randrange(0, 9999) for p in procs}}
    return {"scenario": sc, "story": story}


# --- the problem text ------------------------------------------------------------------------

def _mib(pages: int) -> str:
    return f"{pages / MiB_PAGES:,.1f} MiB"


def generate(seed: int, difficulty: str) -> Problem:
    r = rng(TOPIC, seed, difficulty)
    if difficulty == "hard":
        data = _pod(r) if r.random() < 0.5 else _node(r)
    else:
        data = _container(r, difficulty)
    return Problem(TOPIC, seed, difficulty, _text(data), data, _question(data))


def _question(data: dict) -> str:
    st, sc = data["story"], data["scenario"]
    where = " and ".join(st["labels"][p] for p in st["events_of"])
    counters = ("memory.oom_control's oom_kill" if sc["cgroup"] == "v1"
                else "the oom and oom_kill counters of memory.events")
    return (f"Which process(es) does the OOM killer kill? What did the victim's /proc/PID/oom_score show "
            f"just before? What exit status does a killed process report? What do {counters} of {where} "
            f"read afterwards (they were 0)?")


def _text(data: dict) -> str:
    sc, st = data["scenario"], data["story"]
    node_pages = (_pages(sc["limit"]) if sc["scope"] == "node"
                  else int(sc["node_memory"][:-2]) * GiB_PAGES)
    node_swap = _pages(sc["swap"] if sc["scope"] == "node" else sc["node_swap"])
    lines = []
    if st["kind"] == "container":
        lim = _pages(sc["limit"])
        lines.append(f"A container runs under {st['runtime']}, in its own cgroup {sc['cgroup']} with "
                     f"{'memory.limit_in_bytes' if sc['cgroup'] == 'v1' else 'memory.max'} = {lim} pages "
                     f"({_mib(lim)}; a page is {PAGE_SIZE} bytes)"
                     + (f", memory.oom.group = {1 if sc['oom_group'] else 0}" if sc["cgroup"] == "v2" else "")
                     + ".")
        if _pages(sc["swap"]):
            lines.append(f"Swap: {'memory.memsw.limit_in_bytes allows' if sc['cgroup'] == 'v1' else 'memory.swap.max ='} "
                         f"{_pages(sc['swap'])} pages of swap for the cgroup; vm.swappiness = 60.")
        if st["tmpfs_pages"]:
            lines.append(f"{st['tmpfs_pages']} pages of the charge are tmpfs files in /dev/shm that no "
                         f"process maps (they count toward the limit but are in no process's RSS).")
    elif st["kind"] == "pod":
        lines.append(f"A pod runs under {st['runtime']}. Its cgroups:")
        rows = [("cgroup", "memory.max (pages)", "memory.oom.group")]
        rows.append((st["labels"]["/"], _pages(sc["limit"]), 0))
        rows += [(st["labels"][c["path"]], _pages(c["max"]), 1) for c in sc["cgroups"]]
        lines.append(table(rows))
    else:
        lines.append(f"A {st['runtime']}: nothing on it has a memory limit that is reached, but RAM runs out. "
                     f"{st['kernel_pages']} pages are kernel memory (slab, stacks) that belongs to no process.")
    lines.append(f"The node: {node_pages} pages of RAM ({_mib(node_pages)}), "
                 + (f"{node_swap} pages of swap." if node_swap else "no swap."))
    lines.append("")
    lines.append("Processes, in the order the kernel scans them (rss in pages; page tables in bytes):")
    vsz = st.get("vsz_pages")
    head = ["#", "name"] + (["cgroup"] if st["kind"] != "container" else []) + \
        ["rss", "swap", "pagetables", "oom_score_adj"] + (["VSZ (pages)"] if vsz else [])
    rows = [tuple(head)]
    for i, p in enumerate(sc["processes"], 1):
        pt = parse_memory(p.get("pagetables", "0Ki"))
        row = [i, p["name"]]
        if st["kind"] != "container":
            row.append(p.get("cgroup", "/"))
        adj = "unkillable (init)" if p.get("unkillable") else p["oom_score_adj"]
        row += [_pages(p["rss"]), _pages(p.get("swap", "0p")), pt, adj]
        if vsz:
            row.append(vsz[p["name"]])
        rows.append(tuple(row))
    lines.append(table(rows))
    lines.append("")
    if st["kind"] == "node":
        lines.append(f"All RAM is in use and nothing is left to reclaim. {st['trigger']} faults in one more page.")
    else:
        full = st["events_of"][0]
        lines.append(f"{st['labels'][full][0].upper() + st['labels'][full][1:]} is full (usage = its limit, nothing "
                     f"left to reclaim). {st['trigger']} faults in one more page.")
    lines += ["", _question(data)]
    return "\n".join(lines)


# --- the solution ----------------------------------------------------------------------------

def solve(problem: Problem) -> Solution:
    from courselib.sim.memcg import simulate

    data = problem.data
    sc_map, st = data["scenario"], data["story"]
    scenario = scenario_from_mapping(sc_map, file="<problem>")
    timeline = simulate(scenario)
    if not timeline.kills:
        raise RuntimeError("the generated scenario produced no OOM")   # a generator bug, never the user's
    first = timeline.kills[0]
    kill = first.oom
    steps: list[str] = []
    procs = {p.name: p for p in scenario.processes}
    # 1. scope and candidates
    if kill.scope == "memcg":
        label = st["labels"].get(kill.domain, kill.domain)
        steps.append(f"{st['trigger']} cannot charge its page: {label} ({kill.domain}) is at its limit, so the "
                     "OOM killer runs in that cgroup ('Memory cgroup out of memory'). Only tasks in its subtree "
                     f"are candidates: {', '.join(kill.candidates)} [linux-oom-kill].")
        outside = [p.name for p in scenario.processes if p.name not in kill.candidates]
        if outside:
            big = max(outside, key=lambda n: procs[n].task.rss)
            steps.append(f"{', '.join(outside)} live in other cgroups and are not candidates, however big "
                         f"({big}: {procs[big].task.rss} pages).")
    else:
        steps.append(f"{st['trigger']} cannot get a page and no cgroup limit is involved: a global OOM. "
                     "Every task on the node is a candidate [linux-oom-kill].")
    # 2. totalpages
    g = scenario.global_totalpages()
    if kill.scope == "memcg":
        lim = [c for c in scenario.tree() if c.path == kill.domain][0].max
        extra = kill.totalpages - lim
        steps.append(f"totalpages = mem_cgroup_get_max = {lim} (the limit)"
                     + (f" + {extra} (swap it may use: min(swap limit, node swap))" if extra else "")
                     + f" = {kill.totalpages}; one oom_score_adj point is worth {kill.totalpages}//1000 = "
                       f"{adj_unit(kill.totalpages)} pages.")
    else:
        steps.append(f"totalpages = RAM + swap = {scenario.limit} + {scenario.swap} = {kill.totalpages}; one "
                     f"oom_score_adj point is worth {adj_unit(kill.totalpages)} pages.")
    # 3. points
    unit = adj_unit(kill.totalpages)
    rows = [("#", "name", "rss", "+swap", "+pt/4096", "+adj*unit", "= points")]
    for i, name in enumerate(kill.candidates, 1):
        t = procs[name].task
        pts = kill.points[name]
        if pts is None:
            why = "unkillable (init/kthread)" if t.unkillable else "adj -1000: never"
            rows.append((i, name, t.rss, t.swap, t.pagetables // PAGE_SIZE, why, "-"))
        else:
            rows.append((i, name, t.rss, t.swap, t.pagetables // PAGE_SIZE,
                         f"{t.oom_score_adj}*{unit}={t.oom_score_adj * unit}", pts))
    note = " VSZ and tmpfs/kernel pages are in no one's points." if st.get("vsz_pages") or st.get("tmpfs_pages") else ""
    steps.append("oom_badness = rss + swap entries + pagetables/PAGE_SIZE + oom_score_adj*(totalpages/1000) "
                 f"[linux-oom-kill].{note}\n" + table(rows, indent=""))
    # 4. the choice
    best = kill.points[kill.victim]
    tied = [n for n in kill.candidates if kill.points[n] == best]
    if len(tied) > 1:
        steps.append(f"{' and '.join(tied)} tie at {best} points; the kernel skips a task only if its points are "
                     f"lower (`points < chosen_points`), so the last one scanned wins: {kill.victim} [linux-oom-kill].")
    else:
        steps.append(f"The most points: {kill.victim} ({best}).")
    biggest = max(kill.candidates, key=lambda n: procs[n].task.rss)
    if biggest != kill.victim:
        steps.append(f"Not the biggest process ({biggest}): oom_score_adj moved the choice.")
    # 5. group kill
    if kill.group is not None:
        spared = [p.name for p in scenario.processes if p.name not in kill.killed
                  and is_ancestor(kill.group, p.cgroup) and p.task.oom_score_adj == -1000]
        steps.append(f"memory.oom.group = 1 on {st['labels'].get(kill.group, kill.group)}: the whole group dies "
                     f"with the victim: {', '.join(kill.killed)}"
                     + (f"; {', '.join(spared)} (adj -1000) is spared" if spared else "") + " [kernel-cgroup-v2].")
    elif scenario.cgroup == "v1":
        steps.append("cgroup v1 has no memory.oom.group: only the victim dies [kernel-cgroup-v1-memory].")
    else:
        steps.append(f"No memory.oom.group: only {kill.victim} dies.")
    # 6. oom_score
    victim_task = procs[kill.victim].task
    badness_g = oom_badness(victim_task, g)
    score = first.oom_score[kill.victim]
    steps.append(f"/proc/PID/oom_score uses the node's totalpages (RAM + swap = {g}) even inside a cgroup: "
                 f"badness = {badness_g}, oom_score = (1000 + {badness_g}*1000/{g}) * 2/3 = {score} "
                 f"(C integer division) [linux-proc-base].")
    top_score = max(first.oom_score, key=lambda n: (first.oom_score[n], n == kill.victim))
    if first.oom_score[top_score] > score:
        steps.append(f"Note: {top_score} shows a higher oom_score ({first.oom_score[top_score]}) than the victim: "
                     "oom_score ranks with the node's totalpages, not the cgroup's, and covers processes outside "
                     "the OOMing cgroup.")
    # 7. exit status
    status = ExitStatus()
    term = terminated_by_oom()
    steps.append(f"The kill is SIGKILL ({status.signal}): a shell or the container runtime reports 128 + 9 = "
                 f"{status.exit_code}; Python's subprocess shows {status.returncode}; Kubernetes shows reason "
                 f"{term.reason}, exit code {term.exit_code} when the container's main process dies [containerd-cri-helpers].")
    # 8. counters
    ev_answer = {}
    for path in st["events_of"]:
        c = timeline.events[path]
        label = st["labels"].get(path, path)
        if scenario.cgroup == "v1":
            ev_answer[path] = {"oom_kill": c.oom_kill}
            steps.append(f"{label}: memory.oom_control shows oom_kill {c.oom_kill} (v1 has no memory.events).")
            continue
        ev_answer[path] = {"oom": c.oom, "oom_kill": c.oom_kill, "oom_group_kill": c.oom_group_kill}
        why = []
        if kill.scope == "node":
            why.append("oom stays 0: no memory.max was reached, it was the whole node")
        elif path != kill.domain:
            why.append(f"memory.events is hierarchical: the OOM in {kill.domain} below counts here too")
        else:
            why.append("oom +1: the cgroup reached its limit")
        why.append(f"oom_kill {c.oom_kill}: one per __oom_kill_process on a task of this subtree")
        if kill.group is not None and is_ancestor(path, kill.group):
            why.append("the group scan reaches the victim again, so the model counts it twice; the kernel "
                       f"guarantees oom_kill ≥ {len(kill.killed)} and oom_group_kill = 1 [kernel-cgroup-v2]")
        steps.append(f"{label}: memory.events oom {c.oom}, oom_kill {c.oom_kill}, oom_group_kill "
                     f"{c.oom_group_kill} — " + "; ".join(why) + ".")
    answer = {
        "scope": kill.scope, "oom_domain": kill.domain, "totalpages": kill.totalpages,
        "victim": kill.victim, "victim_points": best, "killed": list(kill.killed),
        "victim_oom_score": score, "exit_code": status.exit_code,
        "memory_events": ev_answer,
    }
    return Solution(answer, steps)
