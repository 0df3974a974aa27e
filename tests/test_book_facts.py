"""The facts issue 32 asked the book to teach: each is on its page with its primary source, and each
number or verdict the page shows is recomputed here a second way (by the rule, by hand, or from the
upstream text on this machine), so the page and the rule cannot drift apart.
"""
from __future__ import annotations

import gzip
import math
import re
from dataclasses import replace
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"


def page(name: str) -> str:
    return (BOOK / f"{name}.md").read_text()


def section(text: str, start: str, length: int = 2500) -> str:
    i = text.index(start)
    return text[i:i + length]


def cites(text: str, key: str) -> bool:
    return any(key in [k.strip() for k in group.split(",")] for group in re.findall(r"\{cite(?::t|:p)?\}`([^`]+)`", text))


def test_every_fact_cites_an_entry_of_the_bibliography():
    keys = set(re.findall(r"@\w+\{([^,]+),", (BOOK / "references.bib").read_text()))
    for key in ("linux-oom-kill", "k8s-docs-qos", "k8s-docs-pod-lifecycle", "kueue-cluster-queue", "volcano-proportion",
                "volcano-group-name-keys", "slurm-conf", "torchrun-elastic", "torchrun-elastic-quickstart", "daly-2006"):
        assert key in keys, key


# ---- chapter 3 ---------------------------------------------------------------------------------

def test_a_memcg_oom_with_every_task_immune_kills_nobody_and_does_not_panic():
    from courselib.model.badness import Task
    from courselib.model.memcg import Process, memcg_oom, node_oom

    text = section(page("03-oom-killer"), "**When nobody may die.**")
    assert cites(text, "linux-oom-kill") and "does **not** panic" in text and "−999" in text
    immune = [Process(Task("a", 300_000, oom_score_adj=-1000)), Process(Task("b", 1_000, oom_score_adj=-1000))]
    # by the rule: -1000 never scores; no candidate -> memcg: no kill, no panic; node: panic
    assert memcg_oom(immune, 524_288).victim is None and memcg_oom(immune, 524_288).panic is None
    assert node_oom(immune, 4_000_000).panic == "System is deadlocked on memory"
    # -999 still scores (points may be negative) and beats "nobody" (chosen_points starts at LONG_MIN)
    almost = [Process(Task("a", 300_000, oom_score_adj=-999)), immune[1]]
    pts = 300_000 + (-999) * (524_288 // 1000)
    out = memcg_oom(almost, 524_288)
    assert out.victim == "a" and out.points["a"] == pts < 0


def test_a_scan_aborts_while_the_previous_victim_is_still_exiting():
    from courselib.model import badness
    from courselib.model.badness import Task
    from courselib.model.memcg import Process, memcg_oom, node_oom

    text = section(page("03-oom-killer"), "**When the last victim is still dying.**", 900)
    assert "**aborts**" in text and "MMF_OOM_SKIP" in text and cites(text, "linux-oom-kill")
    exercise = section(page("03-oom-killer"), ":label: ex-ch3-edge", 3600)
    question, answer = exercise.split("```{solution-start} ex-ch3-edge")
    assert "(d)" in question and "still exiting" in question and "how many seconds" in question
    d = answer[answer.index("(d)"):answer.index("```{code-cell}")]
    assert "{glue:text}`ch3_ex_second`" in d and "**aborts**" in d and cites(d, "linux-oom-kill")
    assert "{glue:text}`ch3_ex_skip_after`" in d
    # the page's case, computed by the model: big (killed, still exiting) and small in a 262,144-page cgroup
    code = answer[answer.index("```{code-cell}"):]
    assert 'Task("big", 200_000, exiting_victim=True)), small], 262_144)' in code
    assert 'glue_text("ch3_ex_second", "No, not yet" if dying.victim is None' in code
    assert 'glue_text("ch3_ex_skip_after", f"{_b.oom_skip_after_s():g}")' in code
    small, big = Task("small", 50_000), Task("big", 200_000, exiting_victim=True)
    # a second way, the kernel's rule by hand (oom_evaluate_task): a victim not yet MMF_OOM_SKIP sets
    # chosen = -1 and stops the scan, wherever it is in the scan and whatever was chosen before it;
    # out_of_memory() then kills nobody and, chosen being non-NULL, does not panic
    for order in ([small, big], [big, small]):
        procs = [Process(t) for t in order]
        for oom in (memcg_oom(procs, 262_144), node_oom(procs, 4_000_000)):
            assert (oom.victim, oom.killed, oom.panic, oom.aborted) == (None, (), None, True), order
    # once reaped (MMF_OOM_SKIP) the dying one is skipped ("goto next") and the small one is chosen
    reaped = replace(big, unkillable=True)
    assert memcg_oom([Process(reaped), Process(small)], 262_144).victim == "small"
    # the reaper: OOM_REAPER_DELAY = 2*HZ, then at most MAX_OOM_REAP_RETRIES = 10 tries with HZ/10
    # between them (a wait after each failed try), then MMF_OOM_SKIP regardless: 2 + 10 x 0.1 = 3 s
    assert badness.oom_skip_after_s() == 2 + 10 * 0.1 == 3.0
    assert badness.oom_skip_after_s(0) == 2.0 and badness.oom_skip_after_s(50) == 3.0


def test_a_pod_that_sets_only_cpu_is_burstable_and_scores_999():
    from courselib.model.qos import Container, Pod, pod_oom_score_adj, qos_class

    text = section(page("03-oom-killer"), "**A pod that sets only CPU.**", 1200)
    assert "**Burstable**" in text and cites(text, "k8s-docs-qos")
    pod = Pod("p", (Container("app", requests={"cpu": 1000}, limits={"cpu": 1000}),))
    # by hand: a cpu request is set (not BestEffort), no memory limit (not Guaranteed) -> Burstable;
    # 1000 - 1000 * 0 // capacity = 1000, clamped to 999 so it never ties with BestEffort
    by_hand = min(999, max(3, 1000 - 1000 * 0 // (16 * 2 ** 30)))
    assert qos_class(pod) == "Burstable"
    assert [a.oom_score_adj for a in pod_oom_score_adj(pod, 16 * 2 ** 30)[1]] == [by_hand] == [999]


def test_crashloopbackoff_resets_after_ten_minutes_of_clean_running():
    from courselib.model import restart

    text = section(page("03-oom-killer"), "**When the container restarts.**", 900)
    assert "resets its" in text and cites(text, "k8s-docs-pod-lifecycle") and "ch3_reset_min" in text
    assert restart.BACKOFF_RESET == 10 * 60
    with pytest.raises(ValueError, match="resets its backoff"):
        restart.restart_times(crash_after=10 * 60, restarts=3)
    # the exercise's reset: six restarts, then 12 clean minutes; by hand the next crash is the first again
    # (immediate), where 30 s of running would have met the cap, min(10 * 2 ** 5, 300) = 300 s
    exercise = section(page("03-oom-killer"), ":label: ex-ch3-crashloop", 2500)
    assert "runs cleanly\nfor 12 minutes" in exercise and "next_restart_delay(12 * 60, 6)" in exercise
    assert restart.next_restart_delay(12 * 60, 6) == 0.0
    assert restart.next_restart_delay(30, 6) == min(10 * 2 ** 5, 300) == 300
    assert restart.next_restart_delay(10 * 60 - 1, 1) == 10 and restart.next_restart_delay(10 * 60, 1) == 0


# ---- chapter 5 ---------------------------------------------------------------------------------

def test_slurm_gang_time_slices_are_30_s_by_default():
    from courselib.model.slurm_states import SCHEDULER_TIME_SLICE_S

    text = page("05-slurm")
    assert "ch5_time_slice" in text and cites(section(text, "SchedulerTimeSlice", 400), "slurm-conf")
    assert SCHEDULER_TIME_SLICE_S == 30
    man = Path("/usr/share/man/man5/slurm.conf.5.gz")      # a second way: the installed manual page
    if man.is_file():
        m = re.search(r"SchedulerTimeSlice\\fR\n(.*?)\n\.TP", gzip.open(man, "rt", errors="replace").read(), flags=re.S)
        assert m and f"default value is {SCHEDULER_TIME_SLICE_S:g} seconds" in m.group(1)
    # the exercise asks it of the reader: two jobs, the default slice, an hour of compute
    from courselib.model.slurm_states import gang_time_slicing

    exercise = section(text, ":label: ch5-ex-timeslice", 2500)
    assert "Two jobs" in exercise and "does not set `SchedulerTimeSlice`" in exercise and "one hour of compute" in exercise
    assert cites(exercise, "slurm-gang")
    assert "ts = gang_time_slicing(compute_s=3600.0)" in exercise
    for key, field in (("slice", "ts.slice_s:g"), ("cycle", "ts.cycle_s:g"), ("per_hour", "ts.suspensions_per_hour:g"),
                       ("wall", "ts.wall_s / 3600:g")):
        assert f'glue_text("ch5_ts_{key}", f"{{{field}}}")' in exercise, key
    ts = gang_time_slicing(compute_s=3600.0)
    # a second way, by hand from the gang-scheduling page: the new job waits a slice, then the two take
    # 30 s turns (a 60 s cycle, so 60 suspensions an hour each); the new job's 120th turn of 30 s ends at
    # 120 x 60 s = 2 h; an hour of compute needs 120 turns
    assert (ts.slice_s, ts.cycle_s, ts.suspensions_per_hour) == (30, 60, 3600 / 60) == (30, 60, 60)
    assert ts.wall_s / 3600 == (3600 // 30) * 60 / 3600 == 2
    # turn by turn, as a list of the new job's turns: [30, 60), [90, 120), ...; a 45 s job ends at 105 s
    def ends(compute, slice_s=30.0):
        t, left = slice_s, compute                  # it waits one slice first
        while left > slice_s:
            t, left = t + 2 * slice_s, left - slice_s
        return t + left
    assert all(gang_time_slicing(c).wall_s == ends(c) for c in (1.0, 29.0, 30.0, 45.0, 100.0, 3600.0))


# ---- chapter 6 ---------------------------------------------------------------------------------

def test_cohort_borrowing_and_lending_limits_as_the_page_says():
    from courselib.io.workload import load_workload
    from courselib.sim.gang import simulate

    text = section(page("06-gang-deadlock"), "### Quota between teams", 2600)
    assert "borrowingLimit" in text and "lendingLimit" in text and cites(text, "kueue-cluster-queue")
    w = load_workload(ROOT / "examples" / "kueue" / "cohort-borrow.yaml")

    def limit(queue, **kw):
        return replace(w, queues=tuple(replace(q, **kw) if q.name == queue else q for q in w.queues))

    def starts(x):
        return {j.name: j.start for j in simulate(x, "kueue", horizon=4 * 3600).jobs}
    # by hand, 16 + 16 GPUs in one cohort: a1 takes 24 (borrows 8), b1 wants 16 at 10 min, a2 wants 8 at 20 min
    quota, a1, b1, a2 = 16, 24, 16, 8
    assert a1 - quota <= quota                                        # a1 may borrow team-b's idle 8
    assert starts(w) == {"a1": 0, "b1": 3600, "a2": 20 * 60}           # 32 - 24 = 8 left for a2, not 16 for b1
    assert a1 - quota + a2 > 8                                         # borrowingLimit 8: a2 would borrow 16
    assert starts(limit("team-a", borrowing_limit=8)) == {"a1": 0, "b1": 3600, "a2": 3600}
    assert a1 > quota and b1 <= quota                                  # lendingLimit 0: a1 never fits its own 16
    assert starts(limit("team-b", lending_limit=0)) == {"a1": None, "b1": 600, "a2": 1200}


def test_overcommit_and_proportion_refuse_for_different_reasons():
    from courselib.model.workload import ClusterSpec, Job, Queue, Workload
    from courselib.sim.gang import simulate

    text = section(page("06-gang-deadlock"), "**Two plugins, two different refusals.**", 1600)
    assert cites(text, "volcano-proportion")
    total, used, need, capability = 512, 200, 128, 256
    assert need <= total * 1.2 - used and need + used > capability    # passes overcommit, fails proportion
    w = Workload(ClusterSpec(64, 8), (Job("running", 25, 8, 0, 3600.0, queue="research"),
                                      Job("new", 16, 8, 60, 3600.0, queue="research")),
                 queues=(Queue("research", nominal_quota=capability),))
    said = [e.what for e in simulate(w, "volcano").trace if e.job == "new"]
    assert any("queue resource quota insufficient (proportion)" in x for x in said)
    assert not any("overused" in x for x in said)
    # the exercise on proportion: by hand, (256 - 200) // 8 = 7 pods fit the queue now; 128 GPUs wait for
    # `running` to end at 60 min; overcommit's idle budget 512 x 1.2 - 200 = 414.4 would hold them
    exercise = section(page("06-gang-deadlock"), ":label: ex-ch6-proportion", 2600)
    assert "with_new(k)" in exercise and cites(exercise, "volcano-proportion")
    # the page's case is the one recomputed here: 25 pods running and 16 new, in a 256-GPU queue
    for code in (text, exercise):
        flat = " ".join(code.split())
        assert 'Job("running", 25, 8, 0, 3600.0, queue="research")' in flat
        assert 'queues=(Queue("research", nominal_quota=256),))' in flat
    assert 'Job("new", 16, 8, 60, 3600.0, queue="research")' in " ".join(text.split())
    assert 'glue_text("ch6_prop_pods", at_once)' in exercise and "== 60)" in exercise
    fits = (capability - used) // 8
    assert fits == 7 and round(total * 1.2 - used, 1) == 414.4 >= need

    def start(pods):
        return simulate(Workload(w.cluster, (w.jobs[0], Job("new", pods, 8, 60, 3600.0, queue="research")), queues=w.queues),
                        "volcano").job("new").start

    assert start(fits) == 60 and start(fits + 1) == start(16) == 3600


def test_the_group_name_key_volcano_reads_and_its_look_alike():
    from courselib.io.manifests import GROUP_ANNOTATION

    text = page("06-gang-deadlock")
    assert GROUP_ANNOTATION == "scheduling.k8s.io/group-name"
    near = section(text, "Beware the look-alike", 500)
    assert "scheduling.volcano.sh/group-name" in near and cites(near, "volcano-group-name-keys")
    # the page's self-check offers the look-alike, in the right place, as the tempting wrong answer
    from courselib.static import selfchecks

    assert re.search(r"Beware the look-alike.*?```\{self-check\} ch6-annotation", text, flags=re.S)
    check = selfchecks.get("ch6-annotation")
    right, wrong = check.answer_text, [c for i, c in enumerate(check.choices) if i != check.answer]
    assert right.startswith("`scheduling.k8s.io/group-name") and "pod template" in right
    assert any(c.startswith("`scheduling.volcano.sh/group-name") and "pod template" in c for c in wrong)
    assert "scheduling.volcano.sh/group-name" in check.why and "one at a time" in check.why
    # a second way, through the manifest reader and the linter: write each choice as a Job of 4 GPU pods
    # for Volcano; only the choice the self-check marks right puts the pods in a gang (no K006)
    from courselib.io.manifests import read_manifests_text
    from courselib.lint.manifests import gang_mechanism, lint_manifests

    def joins_the_gang(choice: str) -> bool:
        key = re.match(r"`([^:`]+): train`", choice).group(1)
        line = f"{{{key}: train}}"
        in_template = "pod template" in choice
        assert in_template or "own metadata" in choice, choice
        text = ("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n"
                + ("" if in_template else f"  annotations: {line}\n")
                + "spec:\n  parallelism: 4\n  completions: 4\n  template:\n    metadata:\n"
                + (f"      annotations: {line}\n" if in_template else "      labels: {app: j}\n")
                + "    spec:\n      schedulerName: volcano\n      restartPolicy: Never\n      containers:\n"
                  "      - name: c\n        image: x\n        resources: {limits: {nvidia.com/gpu: 8}}\n")
        readings = read_manifests_text(text, file="job.yaml", validate=False)
        return gang_mechanism(readings[0]) == "podgroup" and "K006" not in {f.code for f in lint_manifests(readings)}

    assert [i for i, c in enumerate(check.choices) if joins_the_gang(c)] == [check.answer]


# ---- chapters 7 and 8 --------------------------------------------------------------------------

def test_torchrun_elastic_scale_down_restarts_everyone_and_counts():
    text = section(page("07-nccl-barrier"), "**Elastic jobs shrink instead of waiting.**", 1400)
    for words in ("--nnodes=MIN:MAX", "`RANK`", "`WORLD_SIZE`", "--max-restarts", "scaling"):
        assert words in text, words
    assert cites(text, "torchrun-elastic") and cites(text, "torchrun-elastic-quickstart")
    # the exercise: 4 nodes x 8, MIN 2, one restart allowed, two nodes leave. By hand: the first leave
    # restarts everyone with WORLD_SIZE 3 x 8 = 24; the second finds no restart left and stops the job,
    # although 2 nodes still meet MIN
    from courselib.model.elastic import nodes_leave

    exercise = section(page("07-nccl-barrier"), ":label: ex-ch7-elastic", 2200)
    assert "--nnodes=2:4 --nproc-per-node=8 --max-restarts=1" in exercise
    assert "nodes_leave(nodes=4, min_nodes=2, nproc_per_node=8, max_restarts=1, leaves=2)" in exercise
    first, second = nodes_leave(nodes=4, min_nodes=2, nproc_per_node=8, max_restarts=1, leaves=2)
    assert (first.nodes, first.world_size, first.restarts_used, first.state) == (3, 3 * 8, 1, "training")
    assert (second.nodes, second.world_size, second.state) == (2, 0, "failed: restarts used up")
    assert [s.world_size for s in nodes_leave(4, 2, 8, max_restarts=2, leaves=2)] == [24, 16]
    with pytest.raises(ValueError, match="below MIN"):
        nodes_leave(4, 2, 8, max_restarts=5, leaves=3)


def test_daly_interval_is_the_mtbf_once_the_checkpoint_costs_twice_it():
    from courselib.model import checkpoint as ckpt

    text = section(page("08-cost"), "**When a checkpoint costs more than the failures allow.**", 1200)
    assert cites(text, "daly-2006") and "8M/9" in text
    m = 3600.0
    for c in (2 * m, 2.5 * m, 10 * m):
        assert ckpt.daly_interval(c, m) == m
    # just below the boundary, by Daly's series written out: sqrt(2cM)(1 + sqrt(f)/3 + f/9) - c, f = c/2M -> 8M/9
    c = 2 * m * (1 - 1e-12)
    f = c / (2 * m)
    assert math.isclose(math.sqrt(2 * c * m) * (1 + math.sqrt(f) / 3 + f / 9) - c, 8 * m / 9, rel_tol=1e-6)
    assert math.isclose(ckpt.daly_interval(c, m), 8 * m / 9, rel_tol=1e-6)


def test_the_nvl72_example_uses_the_nvl72_generations_nvlink():
    from courselib.model import collective as cl

    text = page("05-slurm")
    assert "nvlink_bps=cl.NVLINK5_BPS" in text and cites(section(text, "with fifth-generation NVLink at", 300), "nvidia-gb200-nvl72")
    # a second way: the rack's 130 TB/s shared by its 72 GPUs, halved for one direction
    assert math.isclose(130e12 / cl.NVL72_DOMAIN / 2, cl.NVLINK5_BPS, rel_tol=0.01)
    assert cl.NVLINK5_BPS == 2 * cl.NVLINK_H100_BPS



def test_a_split_tensor_parallel_group_is_priced_by_the_nics_of_its_emptier_side():
    """A split group's ring crosses through the NICs of its GPUs and runs at the side with the fewest
    (NCCL's channels cross through the communicator's GPUs' NICs, every rank at the slowest node's
    channels: nccl-topology-search; a node's egress 8 x 400 Gb/s: scaling-book gpus.md). Both pages
    name the case each figure is (one GPU alone across, 4 + 4, whole nodes), cite both sources, and
    glue the ratios from courselib rather than type them. Before, ch5 glued ~10 for two whole nodes
    (every split through one NIC) and ch8 had no figure for an even split."""
    from courselib.model import collective as cl

    for name, start in (("08-cost", "**The link.**"), ("05-slurm", "A group of 16 on 8-GPU nodes")):
        text = " ".join(section(page(name), start, 1100).split())
        assert "one GPU on another node" in text or "One rank alone" in text, name
        assert "every GPU's NIC" in text and ("7 + 1" in text or "4 + 4" in text), name
        assert cites(text, "scaling-book-gpus") and cites(text, "nccl-topology-search"), name
        assert "$r = 9$" not in text, name
    assert "{glue:text}`ch8_tp_r_even`" in section(page("08-cost"), "**The link.**", 1100)
    assert "{glue:text}`ch5_tp_worst`" in section(page("05-slurm"), "A group of 16 on 8-GPU nodes", 900)
    # a second way: eight 400 Gb/s NICs a node, one per GPU, in bytes a second
    assert 8 * 400e9 / 8 == 8 * cl.IB_PER_GPU_BPS == cl.split_link_bps([8, 8])
    # the chapter-5 example: a 16-rank group over two whole nodes is ~1.2x TP 8 on NVLink, 7 + 1 is 9x
    g16, g8, msg = cl.tp_groups(64, 16)[0], cl.tp_groups(64, 8)[0], 256 * 2 ** 20
    whole = cl.group_allreduce_s(g16, 8, msg) / cl.group_allreduce_s(g8, 8, msg)
    worst = cl.ring_allreduce_s(msg, 8, cl.split_link_bps([7, 1])) / cl.group_allreduce_s(g8, 8, msg)
    assert round(whole, 1) == 1.2 and round(worst) == 9
    # chapter 8's even split: 450 / (4 x 50) = 2.25
    assert cl.NVLINK_H100_BPS / cl.split_link_bps([4, 4]) == 2.25


# ---- chapter 9 ---------------------------------------------------------------------------------

def test_googles_50000_chip_run_is_examined_from_its_sources():
    text = page("09-choosing")
    bullet = section(text, "- **Google's {glue:text}`ch9_tpu_chips` TPU chips", 1800)
    bullet = bullet[:bullet.index("\n- **")]
    for key in ("gcloud-blog-50k-tpu-v5e", "gcloud-blog-tpu-v5e-ga", "gcloud-blog-multislice", "gcloud-multislice-overview",
                "gcloud-tpu-v5e", "gcloud-gke-multislice", "gcloud-tpu-failure-recovery"):
        assert cites(bullet, key), key
    assert "{glue:text}`ch9_tpu_slices`" in bullet and "```{self-check} ch9-tpu-slice" in text
    # the page's constants are its sources' own words: the post's "50000+" and the v5e docs' "256 chips"
    chips, pod = (int(v) for v in re.search(r"TPU_RUN_CHIPS, V5E_POD_CHIPS = ([\d_]+), (\d+)", text).groups())
    bib = (BOOK / "references.bib").read_text()
    assert f"across {chips}+ {{TPU}} v5e chips" in bib and f'"TPU Pod size: {pod} chips"' in bib
    # a second way to the slices shown: the fewest whole 256-chip slices whose chips reach the run's
    slices = next(k for k in range(1, chips + 1) if k * pod >= chips)
    assert slices == -(-chips // pod) == math.ceil(chips / pod) == 196


# ---- the glossary ------------------------------------------------------------------------------

#: the PodGroup's four owners as the glossary names them -> (API group and version, the source cited)
PODGROUP_OWNERS = {"Volcano's": ("scheduling.volcano.sh/v1beta1", "volcano-podgroup-api"),
                   "Kubernetes' own": ("scheduling.k8s.io", "k8s-v1372-feature-gates"),
                   "KAI's": ("scheduling.run.ai/v2alpha2", "kai-podgroup-api"),
                   "scheduler-plugins'": ("scheduling.x-k8s.io/v1alpha1", "scheduler-plugins-coscheduling")}


def podgroup_owners(glossary: str) -> dict[str, str]:
    """The glossary's PodGroup entry, owner by owner: each bold owner -> the words up to the next."""
    entry = glossary[glossary.index("\nPodGroup\n"):]
    entry = entry[:entry.index("\n\n")]
    parts = re.split(r"\*\*([^*]+)\*\*", entry)
    assert "Four projects have one, each" in parts[0] and "API group" in parts[0], parts[0]
    return dict(zip(parts[1::2], parts[2::2]))


def test_the_glossarys_podgroup_names_its_four_owners_each_with_its_api_group_and_source():
    """audit32 D6: "PodGroup: Volcano's object" was one owner of four. The first code span after each owner
    is its API group (with its version, except Kubernetes', whose version the words give per release)."""
    owners = podgroup_owners((BOOK / "glossary.md").read_text())
    assert list(owners) == list(PODGROUP_OWNERS)
    for owner, (group, key) in PODGROUP_OWNERS.items():
        words = owners[owner]
        spans = re.findall(r"(?<!})`([^`]+)`", words)                                  # not a role's
        assert spans[:1] == [group], (owner, words)
        assert cites(words, key), (owner, key)
    assert len({g.split("/")[0] for g, _ in PODGROUP_OWNERS.values()}) == 4            # four API groups
    assert "`v1alpha2` in\n  v1.36, `v1beta1` in v1.37" in owners["Kubernetes' own"]
    assert "GenericWorkload" in owners["Kubernetes' own"] and "PodGrouper" in owners["KAI's"]


GO_API = Path.home() / "go" / "pkg" / "mod" / "k8s.io"


@pytest.mark.skipif(not (GO_API / "api@v0.37.2").is_dir(), reason=f"k8s.io/api v0.37.2 is not in {GO_API} (make setup-k8s)")
def test_kubernetes_own_podgroup_is_in_the_api_group_and_versions_the_glossary_names():
    """A second way, the Kubernetes API's own source (k8s.io/api v0.36.0 and v0.37.2, the releases' staging
    modules): a PodGroup type in scheduling.k8s.io/v1alpha2 in 1.36 and scheduling.k8s.io/v1beta1 in 1.37."""
    for release, version in (("0.36.0", "v1alpha2"), ("0.37.2", "v1beta1")):
        folder = GO_API / f"api@v{release}" / "scheduling" / version
        if not folder.is_dir():
            pytest.skip(f"{folder} is not here")
        assert "type PodGroup struct" in (folder / "types.go").read_text()
        assert "+groupName=scheduling.k8s.io" in (folder / "doc.go").read_text()
