"""Practice: what a process sees of itself and of the others, inside a container and on the host.

A host runs a container runtime; each container is a new PID namespace (and a new UTS namespace, its
own hostname). The solution numbers every process the way the kernel does
(:class:`courselib.model.pidns.PidTree`): a PID in its own namespace and in every ancestor, each
namespace counting from its own next number; ``ps`` inside a container lists only that namespace
and the ones below it; ``getppid()`` is 0 when the parent is outside; ``NSpid`` reads outermost
first (sources: ``man-pid-namespaces``, ``man-proc``, ``man-namespaces``). Traps by difficulty:

- easy: one container; its PID 1 is not the host's PID 1, and its parent (the runtime's shim) is
  invisible inside.
- medium: two containers started one after the other (each has a PID 1), the second sharing the
  first's UTS namespace (one hostname, two process trees), and host processes started between them.
- hard: a process inside a container runs ``unshare --pid --fork``: three PIDs for one process, and
  the question of what dies when the container's PID 1 exits.
"""
from __future__ import annotations

from courselib.model.pidns import HOST, PidNamespace, PidTree, Proc
from courselib.problems.base import Problem, Solution, cite, rng
from courselib.problems.render import table

TOPIC = "namespaces"
SUMMARY = "PIDs inside and outside a container: what ps shows, NSpid, getppid, the hostname, who dies with PID 1"

_APPS = (("train", "python train.py"), ("dataloader", "python loader.py"), ("serve", "python serve.py"),
         ("tb", "tensorboard --logdir runs"), ("nccl-test", "all_reduce_perf -b 8 -e 1G"))


def _tree(data: dict) -> PidTree:
    return PidTree([PidNamespace(**n) for n in data["namespaces"]], [Proc(**p) for p in data["procs"]])


def generate(seed: int, difficulty: str) -> Problem:
    r = rng(TOPIC, seed, difficulty)
    host_next = r.randrange(2_000, 60_000)
    namespaces = [{"name": HOST, "parent": None, "first_pid": host_next}]
    procs = [{"name": "containerd", "ns": HOST, "parent": None, "uts": HOST}]
    containers = ["c1"] if difficulty == "easy" else ["c1", "c2"]
    shared_uts = difficulty != "easy" and r.random() < 0.6      # c2 started in c1's UTS namespace
    apps = r.sample(_APPS, len(_APPS))
    for i, c in enumerate(containers):
        namespaces.append({"name": c, "parent": HOST, "first_pid": 1})
        if i and r.random() < 0.7:                          # other work on the host in between
            for k in range(r.randint(1, 3)):
                procs.append({"name": f"sshd-{c}-{k}", "ns": HOST, "parent": None, "uts": HOST})
        shim = f"shim-{c}"
        uts = "c1" if (c == "c2" and shared_uts) else c
        procs.append({"name": shim, "ns": HOST, "parent": "containerd", "uts": HOST})
        main, _cmd = apps[i]
        procs.append({"name": f"{c}-{main}", "ns": c, "parent": shim, "uts": uts})
        for k in range(r.randint(1, 2) if difficulty != "hard" else 1):
            procs.append({"name": f"{c}-worker{k}", "ns": c, "parent": f"{c}-{main}", "uts": uts})
    if difficulty == "hard":
        inner = "c1-inner"
        namespaces.append({"name": inner, "parent": "c1", "first_pid": 1})
        procs.append({"name": "c1-unshare", "ns": "c1", "parent": f"c1-{apps[0][0]}", "uts": "c1"})
        procs.append({"name": "c1-sandboxed", "ns": inner, "parent": "c1-unshare", "uts": "c1"})
        procs.append({"name": "c1-sandboxed-child", "ns": inner, "parent": "c1-sandboxed", "uts": "c1"})
    data = {"namespaces": namespaces, "procs": procs, "containers": containers, "shared_uts": shared_uts}
    question = ("For every process in a container: its PID inside and on the host, and the NSpid line the host reads. "
                "What does `ps` inside each container list? What does getppid() return in each container's "
                "first process? Which processes share the first container's hostname?"
                + (" If the first container's PID 1 exits, which processes does the kernel kill?"
                   if difficulty == "hard" else ""))
    return Problem(TOPIC, seed, difficulty, _text(data, difficulty, question), data, question)


def _text(d: dict, difficulty: str, question: str) -> str:
    lines = [f"A Linux host has been up for a while: the next PID it will hand out is {d['namespaces'][0]['first_pid']}.",
             "These processes start, in this order (each line: who forks whom):"]
    parents = {p["name"]: p["parent"] for p in d["procs"]}
    for p in d["procs"]:
        where = "on the host" if p["ns"] == HOST else (
            f"as the first process of container {p['ns']}'s new PID namespace"
            if not any(q["ns"] == p["ns"] for q in d["procs"][:d["procs"].index(p)]) else f"in {p['ns']}")
        if p["ns"] == "c1-inner":
            where = ("as the first process of a new PID namespace inside c1 (`unshare --pid --fork`)"
                     if p["name"] == "c1-sandboxed" else "in that inner namespace")
        by = f", forked by {parents[p['name']]}" if parents[p["name"]] else ""
        lines.append(f"  - {p['name']} {where}{by}")
    lines.append("Each container gets its own PID namespace and its own UTS namespace (hostname)"
                 + (", except that c2 is started in c1's UTS namespace, as the containers of one pod are."
                    if d["shared_uts"] else "."))
    lines += ["", question]
    return "\n".join(lines)


def solve(problem: Problem) -> Solution:
    d = problem.data
    t = _tree(d)
    inside = [p for p in t.procs if t.procs[p].ns != HOST]
    steps = [f"Every namespace hands out its own numbers in order; a process gets one PID in its own namespace and one "
             f"in every namespace above it {cite('man-pid-namespaces')}. The host's next PID is "
             f"{d['namespaces'][0]['first_pid']}; a new namespace starts at 1."]
    rows = [("process", "namespace", "PID inside", "PID on the host", "NSpid (host reads)")]
    for p in inside:
        rows.append((p, t.procs[p].ns, str(t.pid(p, t.procs[p].ns)), str(t.pid(p, HOST)),
                     " ".join(map(str, t.nspid(p)))))
    steps.append("Numbered in creation order (NSpid lists the PIDs from the host's namespace down to the process's "
                 f"own {cite('man-proc')}):\n" + table(rows, indent=""))
    ps = {}
    for c in d["containers"]:
        seen = t.visible_from(c)
        ps[c] = [f"{p} ({t.pid(p, c)})" for p in seen]
        steps.append(f"`ps` in {c} reads a /proc mounted for {c}'s PID namespace: it lists the processes of that namespace "
                     f"and of the namespaces below it, {', '.join(ps[c])}; the host's processes (containerd, the shims) "
                     "are not there.")
    first = {c: next(p for p in t.procs if t.procs[p].ns == c) for c in d["containers"]}
    ppids = {first[c]: t.ppid_seen(first[c]) for c in d["containers"]}
    steps.append("getppid() in " + ", ".join(first.values()) + ": the parent is a shim in the host's namespace, "
                 "outside the caller's, so the kernel returns 0 " + cite("man-pid-namespaces") + ".")
    same = [p for p in t.procs if t.procs[p].ns != HOST and t.same_hostname(p, first["c1"])]
    pod = (f" (containers of one pod see the pod's name as their hostname {cite('k8s-docs-pods')}, each in a PID "
           "namespace of its own)" if d["shared_uts"] else "")
    steps.append(f"Hostnames follow UTS namespaces, not PID namespaces {cite('man-namespaces')}{pod}: sharing "
                 f"{first['c1']}'s hostname: {', '.join(same)}.")
    answer = {"pid_inside": {p: t.pid(p, t.procs[p].ns) for p in inside},
              "pid_on_host": {p: t.pid(p, HOST) for p in inside},
              "nspid_on_host": {p: " ".join(map(str, t.nspid(p))) for p in inside},
              "ps_inside": ps, "getppid_of_first_process": ppids, "same_hostname_as_c1": same}
    if problem.difficulty == "hard":
        dead = [p for p in t.procs if "c1" in t.pids[p] and p != first["c1"]]
        steps.append(f"When the init process of a PID namespace ends, the kernel sends SIGKILL to every process in it "
                     f"{cite('man-pid-namespaces')} — and the inner namespace's processes are in c1's namespace too "
                     f"(they have a PID there): with {first['c1']} gone, {', '.join(dead)} die; c2 and the host's "
                     "processes do not. (A container runtime reports the container as exited when its PID 1 does.)")
        answer["killed_when_c1_pid1_exits"] = dead
    return Solution(answer, steps)
