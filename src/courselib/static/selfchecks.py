"""Self-check questions inside the chapters, answered by courselib when the page is built.

A chapter writes ```` ```{self-check} ch3-adj-unit ```` and the website shows the question with its
choices (or a box for a number), a Check button that works without a kernel, and the answer with
its reason folded under it. Every answer and every number in a question or a reason is computed
here by courselib's models, never typed; ``tests/test_book.py`` recomputes each answer a second way.

Each builder returns a :class:`SelfCheck`. ``kind="choice"``: ``answer`` is the index of the right
choice. ``kind="number"``: ``answer`` is the value; the reader's number counts if it is within
``tolerance`` (absolute) of it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from courselib.io.dockerfile import parse_dockerfile
from courselib.io.manifests import GROUP_ANNOTATION, VOLCANO_GROUP_ANNOTATION
from courselib.model import checkpoint as ckpt, cost, cpu, nccl
from courselib.model.badness import Task, adj_unit
from courselib.model.eviction import EvictionPod, rank_memory_pressure
from courselib.model.generate import default_workload
from courselib.model.layers import Change, rebuilt_count
from courselib.model.memcg import Process, memcg_oom
from courselib.model.namespaces import INITIAL_NS_INODES, is_initial_namespace
from courselib.model.pidns import HOST, PidNamespace, PidTree, Proc
from courselib.model.slurm_states import slurm_time_limit_end
from courselib.model.workload import ClusterSpec, Job, Workload
from courselib.units import PAGE_SIZE
from courselib.versions import pinned

GiB = 2 ** 30


@dataclass(frozen=True)
class SelfCheck:
    id: str
    chapter: str                 # "01" … "09"
    question: str
    kind: str                    # "choice" or "number"
    answer: int | float          # the right choice's index, or the number
    why: str                     # the reason, shown with the answer
    choices: tuple[str, ...] = ()
    unit: str = ""
    tolerance: float = 0.0
    inputs: dict = field(default_factory=dict)   # what the question states, for the tests

    @property
    def answer_text(self) -> str:
        if self.kind == "choice":
            return self.choices[int(self.answer)]
        return f"{self.answer:g}{(' ' + self.unit) if self.unit else ''}"

    def to_dict(self) -> dict:
        return {"id": self.id, "chapter": self.chapter, "question": self.question, "kind": self.kind,
                "answer": self.answer, "why": self.why, "choices": list(self.choices), "unit": self.unit,
                "tolerance": self.tolerance}


_BUILDERS: dict[str, Callable[[], SelfCheck]] = {}


def _check(fn: Callable[[], SelfCheck]) -> Callable[[], SelfCheck]:
    name = fn.__name__.lstrip("_").replace("_", "-")
    _BUILDERS[name] = fn
    return fn


def ids() -> list[str]:
    return list(_BUILDERS)


def get(check_id: str) -> SelfCheck:
    if check_id not in _BUILDERS:
        raise KeyError(f"no self-check {check_id!r}; known: {', '.join(_BUILDERS)}")
    built = _BUILDERS[check_id]()
    assert built.id == check_id, (built.id, check_id)
    return built


def _choice(check_id, chapter, question, right, wrong, why, **kw) -> SelfCheck:
    """A multiple-choice check whose right answer is ``right``; the choices keep a fixed, mixed order."""
    options = [right] + [w for w in wrong if w != right]
    options = list(dict.fromkeys(options))               # no choice twice
    order = sorted(range(len(options)), key=lambda i: (sum(map(ord, check_id + options[i])) % 7, i))
    choices = tuple(options[i] for i in order)
    return SelfCheck(check_id, chapter, question, "choice", choices.index(right), why, choices=choices, **kw)


# --- chapter 1: a container is a process ------------------------------------------------------

@_check
def _ch1_pid_inside() -> SelfCheck:
    host_next = 48_212
    t = PidTree([PidNamespace(HOST, None, host_next), PidNamespace("c", HOST)],
                [Proc("shim", HOST), Proc("train", "c", "shim"), Proc("loader", "c", "train")])
    inside, outside, ppid = t.pid("train", "c"), t.pid("train", HOST), t.ppid_seen("train")
    return _choice("ch1-pid-inside", "01",
                   f"A host's next free PID is {host_next}. A runtime's shim starts, then forks a container's "
                   "entrypoint `train` as the first process of a new PID namespace. What do `os.getpid()` and "
                   "`os.getppid()` return inside `train`?",
                   f"{inside} and {ppid}",
                   [f"{outside} and {t.pid('shim', HOST)}", f"{inside} and {t.pid('shim', HOST)}", f"{outside} and {ppid}"],
                   f"The first process of a new PID namespace is PID {inside} there; the host numbers the same process "
                   f"{outside} (its NSpid line reads {' '.join(map(str, t.nspid('train')))}). Its parent, the shim, is "
                   f"outside the namespace, so getppid() returns {ppid}.",
                   inputs={"host_next": host_next})


@_check
def _ch1_ps_inside() -> SelfCheck:
    host_procs, inside = 212, 3
    procs = [Proc(f"host{i}", HOST) for i in range(host_procs)]
    procs += [Proc("entry", "c", "host0")] + [Proc(f"w{i}", "c", "entry") for i in range(inside - 1)]
    t = PidTree([PidNamespace(HOST, None, 1), PidNamespace("c", HOST)], procs)
    seen_in, seen_host = len(t.visible_from("c")), len(t.visible_from(HOST))
    return SelfCheck("ch1-ps-inside", "01",
                     f"A host runs {host_procs} processes and one container whose entrypoint has started "
                     f"{inside - 1} workers. How many processes does `ps -e` list inside the container (with the "
                     "container's own /proc mounted)?",
                     "number", seen_in,
                     f"Inside, /proc shows the container's PID namespace only: the entrypoint and its workers, "
                     f"{seen_in}. The host's /proc shows all {seen_host}: the container's processes are host "
                     "processes too.", unit="processes", inputs={"host": host_procs, "inside": inside})


@_check
def _ch1_initial_ns() -> SelfCheck:
    inode = INITIAL_NS_INODES["pid"]
    other = 4_026_532_301           # an ordinary, dynamically given inode
    verdicts = {True: "the host's initial PID namespace", False: "a PID namespace someone created",
                None: "cannot be told from the number"}
    return _choice("ch1-initial-ns", "01",
                   f"`readlink /proc/self/ns/pid` prints `pid:[{inode}]`. The process runs in …",
                   verdicts[is_initial_namespace("pid", inode)],
                   [verdicts[is_initial_namespace("pid", other)], verdicts[None]],
                   f"The kernel gives the initial PID namespace a fixed inode, {hex(inode)} = {inode}; any "
                   "other number means a new PID namespace.", inputs={"inode": inode})


# --- chapter 2: cgroups -------------------------------------------------------------------------

@_check
def _ch2_cpu_max() -> SelfCheck:
    q = "250m"
    lim = cpu.CpuLimit(cpu.milli_cpu_to_quota(cpu.parse_cpu(q)))
    right = lim.v2_files()["cpu.max"]
    milli = cpu.parse_cpu(q)
    return _choice("ch2-cpu-max", "02",
                   f"A container sets `limits.cpu: {q}`. What does the kubelet's runtime write into its cgroup v2 "
                   "`cpu.max`?",
                   right, [f"{milli} {cpu.DEFAULT_PERIOD_US}", f"{milli * 1000} {cpu.DEFAULT_PERIOD_US}",
                           f"{lim.quota_us} {cpu.DEFAULT_PERIOD_US * 10}", "max 100000"],
                   f"quota = {milli} milliCPU × {cpu.DEFAULT_PERIOD_US} µs / 1000 = {lim.quota_us} µs of CPU time "
                   f"per {cpu.DEFAULT_PERIOD_US} µs period: {lim.cpus:g} CPU.", inputs={"limit": q})


@_check
def _ch2_burst() -> SelfCheck:
    q, threads = "1", 4
    lim = cpu.CpuLimit(cpu.milli_cpu_to_quota(cpu.parse_cpu(q)))
    run_us, wait_us = lim.burst(threads)
    return SelfCheck("ch2-burst", "02",
                     f"`limits.cpu: {q}`, and the container runs {threads} busy threads on a node with idle CPUs. "
                     "For how many milliseconds of each 100 ms period do they run before the cgroup is throttled?",
                     "number", run_us / 1000,
                     f"The quota, {lim.quota_us} µs, is CPU time summed over CPUs: {threads} threads use it up in "
                     f"{run_us / 1000:g} ms, then wait {wait_us / 1000:g} ms for the next period.",
                     unit="ms", tolerance=0.05, inputs={"limit": q, "threads": threads})


@_check
def _ch2_weight() -> SelfCheck:
    a, b = "500m", "2"
    sa, sb = (cpu.milli_cpu_to_shares(cpu.parse_cpu(x)) for x in (a, b))
    wa, wb = cpu.shares_to_weight(sa), cpu.shares_to_weight(sb)
    got = cpu.contended_cpus({"a": 4.0, "b": 4.0}, {"a": wa, "b": wb}, {"a": None, "b": None}, 1.0)
    return SelfCheck("ch2-weight", "02",
                     f"Two busy containers without CPU limits share one CPU on a cgroup v2 node: `a` requests "
                     f"{a}, `b` requests {b}. What fraction of the CPU does `a` get?",
                     "number", round(got["a"], 3),
                     f"Requests become shares ({sa} and {sb}) and then cpu.weight ({wa} and {wb}); the CPU is split "
                     f"by weight: {wa} / ({wa} + {wb}) = {got['a']:.3f}. Not {cpu.parse_cpu(a)}/"
                     f"{cpu.parse_cpu(a) + cpu.parse_cpu(b)} of the requests: the conversion to weights is not linear.",
                     tolerance=0.005, inputs={"a": a, "b": b})


# --- chapter 3: the OOM killer ------------------------------------------------------------------

@_check
def _ch3_adj_unit() -> SelfCheck:
    limit = 2 * GiB // PAGE_SIZE
    return SelfCheck("ch3-adj-unit", "03",
                     "A container's `memory.max` is 2 GiB (4 KiB pages, no swap). In a memcg OOM, how many pages is "
                     "one point of `oom_score_adj` worth?",
                     "number", adj_unit(limit),
                     f"totalpages is the cgroup's limit, {limit} pages, and one point is totalpages / 1000 rounded "
                     f"down: {adj_unit(limit)} pages.", unit="pages", inputs={"limit_pages": limit})


@_check
def _ch3_victim() -> SelfCheck:
    a, b = Task("A", 300_000), Task("B", 100_000, oom_score_adj=350)
    limit = 2 * GiB // PAGE_SIZE
    kill = memcg_oom([Process(a), Process(b)], limit)
    other = "B" if kill.victim == "A" else "A"
    return _choice("ch3-victim", "03",
                   f"In that 2 GiB container, process A has {a.rss} resident pages and `oom_score_adj` 0; B has "
                   f"{b.rss} pages and `oom_score_adj` {b.oom_score_adj}. B asks for the page that does not fit. "
                   "Which one does the kernel kill?",
                   kill.victim, [other, "the one that asked: B", "both (memory.oom.group)"],
                   f"Points: A {kill.points['A']}, B {kill.points['B']}; the highest dies, whoever asked. (With "
                   "memory.oom.group set the others would die with it — after the same choice.)",
                   inputs={"a": a.rss, "b": b.rss})


@_check
def _ch3_evicted() -> SelfCheck:
    pods = [EvictionPod("trainer", request=6 * GiB, usage=7 * GiB, priority=1000),
            EvictionPod("exporter", request=0, usage=1 * GiB, priority=0),
            EvictionPod("cache", request=4 * GiB, usage=3 * GiB, priority=0)]
    order = rank_memory_pressure(pods)
    return _choice("ch3-evicted", "03",
                   "A node runs low on memory (memory.available under the kubelet's 100Mi threshold). Pods: "
                   "`trainer` uses 7 GiB of a 6 GiB request (priority 1000), `exporter` 1 GiB with no request "
                   "(priority 0), `cache` 3 GiB of a 4 GiB request (priority 0). Which pod does the kubelet evict first?",
                   order[0].name, [p.name for p in order[1:]] + ["none: the kernel's OOM killer decides"],
                   "Node-pressure eviction is the kubelet's, not the kernel's: it ranks pods whose usage exceeds "
                   "their request first, then lower priority, then usage above the request. Order: "
                   + ", ".join(p.name for p in order) + ". The pod fails with reason Evicted, not OOMKilled.",
                   inputs={"pods": [p.name for p in pods]})


# --- chapter 4: images --------------------------------------------------------------------------

_DOCKERFILE = """\
FROM python:3.12-slim
WORKDIR /app
COPY requirements.txt .
RUN pip install -r requirements.txt
COPY src/ src/
CMD ["python", "src/train.py"]
"""


@_check
def _ch4_rebuild() -> SelfCheck:
    df = parse_dockerfile(_DOCKERFILE, file="Dockerfile")
    n = rebuilt_count(df.plan(Change(path="requirements.txt")))
    return SelfCheck("ch4-rebuild", "04",
                     "This Dockerfile has " + str(len(df.steps)) + " steps:\n\n" + _DOCKERFILE.strip()
                     + "\n\nYou add a package to `requirements.txt`. How many steps run again?",
                     "number", n,
                     "`COPY requirements.txt .` copies a changed file, so it misses the cache, and every later "
                     f"step of the stage rebuilds: {n} of {len(df.steps)}.", unit="steps",
                     inputs={"dockerfile": _DOCKERFILE})


@_check
def _ch4_code_edit() -> SelfCheck:
    df = parse_dockerfile(_DOCKERFILE, file="Dockerfile")
    n = rebuilt_count(df.plan(Change(path="src/train.py")))
    return SelfCheck("ch4-code-edit", "04",
                     "In the same Dockerfile you edit `src/train.py`. How many steps run again?",
                     "number", n,
                     f"Only `COPY src/ src/` and the step after it: {n}. The install comes before the code, so it "
                     "stays cached.", unit="steps", inputs={"dockerfile": _DOCKERFILE})


@_check
def _ch4_driver() -> SelfCheck:
    return _choice("ch4-driver", "04",
                   "A CUDA training image runs on a GPU node. Which of these comes from the *host*, not from the image?",
                   "the kernel and the GPU driver (its kernel module and its user-space libcuda)",
                   ["the CUDA runtime and cuDNN", "NCCL", "PyTorch"],
                   "The image carries the CUDA runtime, cuDNN, NCCL and PyTorch; the kernel is the host's, and the "
                   "NVIDIA Container Toolkit mounts the driver's user-space libraries from the host at run time.")


# --- chapter 5: Slurm ---------------------------------------------------------------------------

def _backfill_case():
    H = 3600.0
    return Workload(ClusterSpec(4, 8), [
        Job("eval", 2, 8, 0.0, 8 * H, time_limit=8 * H),
        Job("big", 4, 8, 4 * H, 10 * H, time_limit=10 * H, priority=10),
        Job("short", 1, 8, 4 * H, 2 * H, time_limit=3 * H),
        Job("long", 1, 8, 4 * H, 6 * H, time_limit=6 * H)])


@_check
def _ch5_backfill() -> SelfCheck:
    from courselib.sim.gang import simulate

    r = simulate(_backfill_case(), "slurm")
    starts = {j.name: j.start / 3600 for j in r.jobs}
    right = "short" if starts["short"] == 4 and starts["long"] > 4 else "neither"
    return _choice("ch5-backfill", "05",
                   "Four 8-GPU nodes. `eval` holds 2 of them until its 8 h limit. At 4 h, `big` (4 nodes, highest "
                   "priority), `short` (1 node, 3 h limit) and `long` (1 node, 6 h limit) arrive. Which one does "
                   "backfill start at once?",
                   right, ["long", "both short and long", "neither", "big"],
                   f"`big` gets a reservation of every node from 8 h, when eval's limit ends. `short` would end by "
                   f"4 + 3 = 7 h, before it: it starts at {starts['short']:g} h. `long` would run to 10 h and delay "
                   f"`big`: it waits until {starts['long']:g} h.")


@_check
def _ch5_reason() -> SelfCheck:
    from courselib.sim.gang import simulate

    r = simulate(_backfill_case(), "slurm", horizon=4 * 3600 + 60)
    reasons = {j.name: j.pending_reason for j in r.jobs}
    return _choice("ch5-reason", "05",
                   "Right after they arrive, which pending reason does `squeue` show for `big` and for `long`?",
                   f"big: {reasons['big']}; long: {reasons['long']}",
                   ["big: Resources; long: Resources", "big: Priority; long: Priority", "big: Priority; long: Resources"],
                   "The first job that cannot start gets Resources; the jobs behind it get Priority, whether or not "
                   "they would fit — the reason names the first obstacle the scheduler met.")


@_check
def _ch5_timeout() -> SelfCheck:
    end = slurm_time_limit_end(60 * 60.0)
    return SelfCheck("ch5-timeout", "05",
                     "A job runs with `--time=60` (minutes) and ignores SIGTERM. With the default KillWait, how many "
                     "seconds after its start is it killed with SIGKILL?",
                     "number", end.sigkill_at_s,
                     f"At the limit ({end.limit_s:g} s) every step gets SIGTERM; KillWait ({end.kill_wait_s:g} s) later, "
                     f"SIGKILL: {end.sigkill_at_s:g} s. The job ends in state {end.state}, and a step killed this way "
                     f"shows exit code {end.exit_code} in a shell.", unit="s")


# --- chapter 6: Kubernetes gangs ----------------------------------------------------------------

@_check
def _ch6_deadlock() -> SelfCheck:
    from courselib.sim.gang import simulate

    r = simulate(default_workload(nodes=75), "kube-default", horizon=3 * 3600)
    held = [j.gpus_held for j in r.jobs]
    return SelfCheck("ch6-deadlock", "06",
                     "Two 512-rank jobs (1 GPU per rank) arrive together on 75 nodes × 8 GPUs under the default "
                     "scheduler, which binds pods one at a time as their Job controllers create them. How many GPUs "
                     "does each job hold once nothing more can be placed?",
                     "number", held[0],
                     f"Round-robin creation shares the {75 * 8} GPUs: {held[0]} and {held[1]}. Each needs "
                     f"{512 - held[0]} more, which the other holds: deadlock, {'yes' if r.deadlock else 'no'}.",
                     unit="GPUs")


@_check
def _ch6_overcommit() -> SelfCheck:
    from courselib.sim.gang import simulate

    w = Workload(ClusterSpec(64, 8), [Job("finetune", 14, 8, 0, 1500.0), Job("pretrain", 64, 8, 1, 7200.0)])
    r = simulate(w, "volcano")
    total, used, need = w.cluster.total_gpus, w.jobs[0].gpus, w.jobs[1].min_gpus
    said = [e.what for e in r.trace if e.job == "pretrain"]
    pending = any("overused (overcommit)" in x for x in said)
    verdict = f"it stays Pending: {need} GPUs exceed the idle budget" if pending else "it is enqueued at once"
    return _choice("ch6-overcommit", "06",
                   f"A Volcano cluster has {total} GPUs, {used} of them in use. A PodGroup whose minResources are "
                   f"{need} GPUs arrives. What does the enqueue action do?",
                   verdict, ["it is enqueued at once", f"it is enqueued and {total - used} of its pods are bound",
                             "it is rejected for good"],
                   f"The overcommit plugin's idle budget is {total} × 1.2 − {used} = {total * 1.2 - used:g} GPUs, less "
                   f"than {need}; it is enqueued when the running job ends, at {r.job('pretrain').start:g} s. (A "
                   "PodGroup *without* minResources would pass enqueue at once and wait at allocate instead.)")


@_check
def _ch6_annotation() -> SelfCheck:
    return _choice("ch6-annotation", "06",
                   "A plain Kubernetes Job's pods must join the Volcano PodGroup `train`. Which annotation puts them "
                   "in it, and where?",
                   f"`{GROUP_ANNOTATION}: train`, in the Job's pod template's metadata",
                   [f"`{VOLCANO_GROUP_ANNOTATION}: train`, in the Job's pod template's metadata",
                    f"`{GROUP_ANNOTATION}: train`, in the Job's own metadata",
                    f"`{VOLCANO_GROUP_ANNOTATION}: train`, in the Job's own metadata"],
                   f"Volcano maps a pod to its gang by the pod's own {GROUP_ANNOTATION} annotation; the Job controller "
                   f"copies only the template's metadata to the pods it creates. The look-alike "
                   f"{VOLCANO_GROUP_ANNOTATION} is defined in Volcano's API, but its scheduler reads it only as a "
                   "fallback in its vGPU device code: the pods would be scheduled one at a time.")


@_check
def _ch6_gate_off() -> SelfCheck:
    return _choice("ch6-gate-off", "06",
                   "On Kubernetes v1.37 with the `GenericWorkload` feature gate off (the default), you apply a Job "
                   "whose pod template sets `schedulingGroup.podGroupName`. What does the API server do?",
                   "it accepts the Job and silently drops the field: the pods are scheduled one at a time",
                   ["it rejects the Job with a validation error",
                    "it keeps the field, and the scheduler gang-schedules the pods anyway",
                    "it accepts the Job and holds its pods until the gate is turned on"],
                   "A disabled field is dropped on create, not refused (pkg/api/pod/util.go, "
                   "dropDisabledSchedulingGroup), and the PodGroup kind is not even served. The course's dry run "
                   f"on the real {pinned('kubernetes').version} API server shows exactly that.")


@_check
def _ch6_gang_holds() -> SelfCheck:
    from courselib.sim.gang import simulate

    r = simulate(default_workload(nodes=75), "kube-gang", horizon=3 * 3600)
    second = max(r.jobs, key=lambda j: j.start)
    held_waiting = max((held for t, held, training in r.histories[second.name] if not training), default=0)
    return SelfCheck("ch6-gang-holds", "06",
                     "The seed's two 512-rank jobs arrive together on 75 nodes × 8 GPUs, with Kubernetes' own gang "
                     "plugin on and a PodGroup of minCount 512 each. How many GPUs does the second job hold while "
                     "the first trains?",
                     "number", held_waiting,
                     f"{held_waiting}: a gang whose minCount does not fit is placed by nobody: the PodGroup "
                     f"scheduling cycle reverts every tentative placement. It starts at {second.start / 3600:g} h, "
                     "when the first job ends.", unit="GPUs")


# --- chapter 7: the NCCL barrier ----------------------------------------------------------------

def _lost(kind: str):
    from courselib.sim.barrier import BarrierScenario, RankLoss, simulate

    return simulate(BarrierScenario(ranks=512, losses=(RankLoss(37, 3 * 3600.0 + 30, kind),)))


@_check
def _ch7_silent() -> SelfCheck:
    r = _lost("silent")
    f = r.failures[0]
    return SelfCheck("ch7-silent", "07",
                     "512 ranks, steps of 1 minute, the default 10-minute watchdog. Rank 37's GPU hangs 30 s into a "
                     "step (no error reaches the others). How many seconds pass between the hang and the teardown?",
                     "number", f.hang_detected_after_s,
                     f"The others finish their step and enter the all-reduce at {f.stalled_at_s:g} s; the watchdog fires "
                     f"600 s later: {f.hang_detected_after_s:g} s after the hang. Up to the timeout — and more than it, "
                     "by up to a step.", unit="s")


@_check
def _ch7_error() -> SelfCheck:
    r = _lost("error")
    f = r.failures[0]
    return SelfCheck("ch7-error", "07",
                     "Same job, but rank 37's pod is preempted 30 s into a step: its process exits. With NCCL's "
                     "defaults (NCCL_IB_TIMEOUT=20, NCCL_IB_RETRY_CNT=7), about how many seconds pass before the "
                     "job is torn down?",
                     "number", round(f.hang_detected_after_s, 1),
                     f"The survivors' sends to the vanished rank fail after 8 attempts of 4.096 µs × 2^20: "
                     f"{nccl.NCCL_ERROR_AFTER_S:.1f} s after the all-reduce began at {f.stalled_at_s:g} s; the watchdog "
                     f"then tears the process down: {f.hang_detected_after_s:.1f} s after the loss.",
                     unit="s", tolerance=2.0)


@_check
def _ch7_rendezvous() -> SelfCheck:
    return _choice("ch7-rendezvous", "07",
                   "Under torchrun, one pod of a job never starts. Where do the other ranks wait, and for how long by "
                   "default?",
                   f"in torchrun's rendezvous, {nccl.RENDEZVOUS_JOIN_TIMEOUT_S / 60:g} min (its join_timeout)",
                   [f"in ncclCommInitRank, {nccl.PG_NCCL_TIMEOUT_S / 60:g} min (the watchdog)",
                    f"in the first all-reduce, {nccl.HEARTBEAT_TIMEOUT_S / 60:g} min (the heartbeat monitor)",
                    "for ever: nothing times out"],
                   "The agents rendezvous before any worker starts; the rendezvous is the first barrier and its "
                   "overall timeout ends the job as a non-retryable failure, which the job manager must retry.")


# --- chapter 8: cost ----------------------------------------------------------------------------

@_check
def _ch8_waste() -> SelfCheck:
    gpus, wait_min = 400, 25
    v = cost.wasted_gpu_hours(gpus, wait_min * 60.0)
    return SelfCheck("ch8-waste", "08",
                     f"{gpus} GPUs of a 512-GPU job are placed and wait {wait_min} min for the rest. How many GPU-hours "
                     "are wasted?", "number", round(v, 2),
                     f"{gpus} × {wait_min}/60 h = {v:.2f} GPU-hours (not {gpus * wait_min}: minutes are not hours).",
                     unit="GPU-hours", tolerance=0.01)


@_check
def _ch8_job_mtbf() -> SelfCheck:
    gpu_mtbf = cost.LLAMA3.gpu_mtbf_s
    job = cost.job_mtbf(gpu_mtbf, 512)
    return SelfCheck("ch8-job-mtbf", "08",
                     f"The Llama 3 report's 54-day snapshot gives about {gpu_mtbf / 86400 / 365:.1f} years between "
                     "interruptions per GPU. How many days, on average, between failures of a 512-GPU job?",
                     "number", round(job / 86400, 2),
                     f"Any one GPU stops the job, so (independent, constant-rate failures) the job's MTBF is the GPU's "
                     f"divided by 512: {job / 86400:.2f} days.", unit="days", tolerance=0.02)


@_check
def _ch8_young() -> SelfCheck:
    c, m = 60.0, 2 * 3600.0
    t = ckpt.young_interval(c, m)
    return SelfCheck("ch8-young", "08",
                     "A checkpoint takes 60 s and the job's MTBF is 2 h. What checkpoint interval does Young's formula "
                     "give, in minutes?", "number", round(t / 60, 2),
                     f"T = √(2 × C × M) = √(2 × {c:g} × {m:g}) = {t:.1f} s = {t / 60:.2f} min.", unit="min",
                     tolerance=0.05)


# --- chapter 9: choosing ------------------------------------------------------------------------

@_check
def _ch9_level() -> SelfCheck:
    return _choice("ch9-level", "09",
                   "At which level is Kueue all-or-nothing?",
                   "quota: a workload is admitted only if quota for all its pods is free",
                   ["placement: no pod binds unless all fit", "allocation: a job is one allocation of nodes",
                    "nowhere: pods are placed one at a time"],
                   "Kueue reserves quota for the whole workload, then leaves placement to the scheduler — its own "
                   "documentation shows an admitted 8-GPU pod stuck on 4 + 4 free GPUs.")


@_check
def _ch9_tpu_slice() -> SelfCheck:
    return _choice("ch9-tpu-slice", "09",
                   "A Multislice training job spans many TPU v5e slices. One host of one slice fails. What happens to "
                   "that slice?",
                   "it cannot run until every instance of the slice is recreated or rescheduled",
                   ["only the failed host's chips stop; the slice's other hosts keep training",
                    "nothing stops: the compiler moves the host's work onto the data-centre network"],
                   "Google's TPU documentation: a multi-host slice is recovered or rescheduled as a whole, never one "
                   "instance at a time, because the XLA compiler maps the model onto the slice's network topology; "
                   "until the slice is whole again the workload cannot run. The slice is all-or-nothing by itself.")


@_check
def _ch9_zero_waste() -> SelfCheck:
    from courselib.sim.gang import simulate

    w = default_workload(nodes=75)
    waste = {p: simulate(w, p, horizon=4 * 3600).wasted_gpu_hours for p in ("kube-default", "volcano", "kueue", "slurm")}
    zero = [p for p, v in waste.items() if v == 0]

    def said(names):
        return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]

    combos = [list(waste), ["kube-default", "kueue"], ["slurm"], ["volcano", "slurm"], ["volcano", "kueue", "slurm"]]
    return _choice("ch9-zero-waste", "09",
                   "On the seed's race (two 512-GPU jobs, 600 free GPUs), which schedulers hold no GPU idle at the "
                   "barrier?",
                   said(zero), [said(c) for c in combos if c != zero],
                   "GPU-hours held idle in 4 h: " + ", ".join(f"{p} {v:,.0f}" for p, v in waste.items())
                   + ". Volcano (placement) and Slurm (allocation) bind nothing until the whole gang fits; Kueue holds "
                   "nothing here only because its quota is the whole cluster, so the second workload is not admitted "
                   "at all — with quota left over, admitted pods can still wait for placement.")
