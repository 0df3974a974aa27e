"""A student who copies the chapter's worked example fails (issue 32).

Every auto-graded lab question whose chapter works the same quantity out in a worked example gets that
example's answer, computed here the way the chapter computes it (the same courselib function on the
chapter's own inputs, each input asserted to be on the page), typed into the lab in place of the
student's answer. The question's check must reject it, while every other question of the same notebook,
answered by the reference solution, still passes: the failure is the copy, not the set-up. Seed 0 (the
lab the book shows) and, in the slow tier, two other seeds' variants.

Left out, and why: Lab 1 q1/q2, Lab 3 q2/q4 and Lab 5's questions ask for facts or names (PID 1, one
more NSpid number, exit code 137, the victim's or the jobs' names) that are the same for every case or
name jobs the chapter's example does not have; the capstone's answers follow the student's own
configuration (tests/test_labs.py::test_a_capstone_prediction_copied_from_another_configuration_fails).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from courselib.grading import build, markers
from courselib.grading.grade import grade

nbformat = pytest.importorskip("nbformat")
ROOT = Path(__file__).resolve().parents[1]
if not (ROOT / "solutions").is_dir():
    pytest.skip("no solutions/ here (the student template)", allow_module_level=True)
BOOK = ROOT / "book"
H, MIN = 3600.0, 60.0


def page(name: str) -> str:
    return (BOOK / name).read_text()


def on_page(name: str, *texts: str) -> None:
    """The worked example's inputs are the page's own (if the page changes them, change them here)."""
    text = " ".join(page(name).split())
    for t in texts:
        assert " ".join(t.split()) in text, f"book/{name} no longer has {t!r}: update this test's worked example"


# --- each worked example's answer, in the lab's answer names -----------------------------------------

def ch2_cpu_max() -> str:
    from courselib.model import cpu

    on_page("02-cgroups.md", "A container with `limits.cpu: 250m` gets quota", "A request of `500m` becomes")
    quota = cpu.milli_cpu_to_quota(cpu.parse_cpu("250m"))
    shares = cpu.milli_cpu_to_shares(cpu.parse_cpu("500m"))
    return f"cpu_max = {f'{quota} {cpu.DEFAULT_PERIOD_US}'!r}\ncpu_shares = {shares!r}\n"


def ch2_burst() -> str:
    from courselib.model import cpu

    on_page("02-cgroups.md", 'cpu.CpuLimit(cpu.milli_cpu_to_quota(cpu.parse_cpu("1"))).burst(4)',
            "with four busy threads under that limit")
    limit = cpu.CpuLimit(cpu.milli_cpu_to_quota(cpu.parse_cpu("1")))
    run_us, wait_us = limit.burst(4)
    return f"run_ms = {run_us / 1000!r}\nthrottled_ms = {wait_us / 1000!r}\nmean_cpus = {limit.cpus!r}\n"


def ch3_badness() -> str:
    from courselib.model.badness import Task, oom_badness
    from courselib.units import PAGE_SIZE

    on_page("03-oom-killer.md", 'Task("b", 60_000, oom_score_adj=10)', "memcg_limit, node_pages = GiB // PAGE_SIZE")
    b = Task("b", 60_000, oom_score_adj=10)
    return f"dataloader_points = {oom_badness(b, 2**30 // PAGE_SIZE)!r}\n"


def ch3_score_adj() -> str:
    from courselib.io.pod import read_pods
    from courselib.model.qos import pod_oom_score_adj
    from courselib.units import parse_memory

    on_page("03-oom-killer.md", 'capacity = parse_memory("16Gi")', 'read_pods(EXAMPLES / "pod.yaml")[0]')
    pod = read_pods(ROOT / "examples" / "oom" / "pod.yaml")[0]
    _, adjs = pod_oom_score_adj(pod.pod, parse_memory("16Gi"))
    # the chapter's pod has two containers too: its first's score for the trainer, its second's for the logger
    return f"trainer_oom_score_adj = {adjs[0].oom_score_adj!r}\nlogger_oom_score_adj = {adjs[-1].oom_score_adj!r}\n"


def ch4_rebuilt() -> str:
    from courselib.io.dockerfile import parse_dockerfile
    from courselib.model.layers import BuildContext, Change

    text = page("04-images.md")
    code_first = re.search(r'CODE_FIRST = """\\\n(.*?)"""', text, re.S).group(1)
    on_page("04-images.md", 'code_first.plan(Change(path="train.py"), context=IN_CONTEXT)',
            'IN_CONTEXT = BuildContext("Dockerfile")')
    plan = parse_dockerfile(code_first, file="Dockerfile.code-first").plan(Change(path="train.py"),
                                                                           context=BuildContext("Dockerfile"))
    rebuilt = {r.step.index + 1 for r in plan if r.rebuilt}
    # the lab asks for the steps each of its four edits rebuilds: the chapter's set, for each
    files = ("src/trainer/loop.py", "configs/base.yaml", "requirements.lock", "vocab/tokens.txt")
    return f"rebuilt_steps = {({f: rebuilt for f in files})!r}\n"


def ch6_held_idle() -> str:
    from courselib.io.workload import load_workload
    from courselib.sim.gang import simulate

    on_page("06-gang-deadlock.md", 'story2 = load_workload(EXAMPLES / "seed-400-of-512-25min.yaml")',
            'r2 = {p: simulate(story2, p) for p in POLICIES}')
    run = simulate(load_workload(ROOT / "examples" / "workloads" / "seed-400-of-512-25min.yaml"), "kube-default")
    held = next(held for _, held, training in run.histories["pretrain"] if held and not training)
    return f"held_by_pretrain = {held!r}\nidle_gpu_hours = {run.job('pretrain').wasted_gpu_hours!r}\n"


def ch6_two_gangs() -> str:
    """The chapter's first story: two 512-GPU jobs submitted together under kube-default on 600 GPUs, their
    pods alternating in the queue (Lab 8's question 3 asks the same of a hand-sized pair)."""
    from courselib.io.workload import load_workload
    from courselib.sim.gang import simulate

    on_page("06-gang-deadlock.md", 'story1 = load_workload(EXAMPLES / "seed-600-free-deadlock.yaml")',
            "results = {p: simulate(story1, p, horizon=4 * 3600) for p in POLICIES}")
    run = simulate(load_workload(ROOT / "examples" / "workloads" / "seed-600-free-deadlock.yaml"), "kube-default",
                   horizon=4 * H)
    bound = {j.name: j.gpus_held for j in run.jobs}
    start = {j.name: None if j.start is None else j.start / H for j in run.jobs}
    idle = {j.name: j.wasted_gpu_hours for j in run.jobs}
    return f"pair_bound_at_start = {bound!r}\npair_start_hours = {start!r}\npair_idle_gpu_hours = {idle!r}\n"


def ch7_rank_37() -> str:
    from courselib.sim.barrier import BarrierScenario, RankLoss, simulate

    on_page("07-nccl-barrier.md", "scenario = BarrierScenario(ranks=512, work_s=4 * H, checkpoint_every_s=1 * H, "
            "timeout_s=10 * MIN, restart_s=5 * MIN, losses=(RankLoss(rank=37, at_s=3 * H),))")
    result = simulate(BarrierScenario(ranks=512, work_s=4 * H, checkpoint_every_s=1 * H, timeout_s=10 * MIN,
                                      restart_s=5 * MIN, losses=(RankLoss(rank=37, at_s=3 * H),)))
    return f"stalled_ranks = {511!r}\nlost_gpu_hours = {result.lost_gpu_hours!r}\n"


def ch8_young() -> str:
    from courselib.model import checkpoint

    on_page("08-cost.md", "plan = ckpt.checkpoint_plan(60, 2 * H)")
    plan = checkpoint.checkpoint_plan(60, 2 * H)
    return f"checkpoint_every_minutes = {plan.young_s / MIN!r}\nwaste_percent = {100 * plan.waste_fraction!r}\n"


def ch7_ladder() -> str:
    from courselib.model import recovery

    on_page("07-nccl-barrier.md",
            "seed = recovery.LadderInputs(ranks=512, since_checkpoint_s=30 * MIN, replacement_wait_s=10 * MIN)")
    seed = recovery.LadderInputs(ranks=512, since_checkpoint_s=30 * MIN, replacement_wait_s=10 * MIN)
    rungs = {r.name: r for r in recovery.ladder(seed)}
    best = min((r for r in rungs.values() if r.capacity_after == seed.ranks), key=lambda r: r.lost_gpu_hours)
    return (f"restart_gpu_hours = {rungs['restart'].lost_gpu_hours!r}\n"
            f"best_full_rung, best_full_gpu_hours = {best.name!r}, {best.lost_gpu_hours!r}\n")


def ch8_seed_bill() -> str:
    from courselib.model import cost

    on_page("08-cost.md", "seed = cost.gang_wait_cost(cost.SEED)", "### Worked example: the seed's 400 GPUs")
    bill = cost.gang_wait_cost(cost.SEED)
    return (f"story_idle_gpu_hours = {bill.wasted_gpu_hours!r}\n"
            f"story_cost_usd = {bill.wasted_gpu_hours * cost.SEED.price.low!r}\n")


def ch8_split() -> str:
    """Bill three's worked split (one TP group 7 + 1, Megatron's 39B layer on H100s): its link and slowdown
    copied, and the rest of Lab 8's question 6 worked out by the reference solution from that slowdown."""
    from courselib.model import collective as cl

    on_page("08-cost.md", "shape = dict(micro_batch=1, seq=2048, hidden=8192, tp=8, efficiency=0.44)",
            "split = cl.step_slowdown(fast.comm_fraction, cl.NVLINK_H100_BPS, cl.IB_PER_GPU_BPS)")
    fast = cl.tp_layer(link_bps=cl.NVLINK_H100_BPS, micro_batch=1, seq=2048, hidden=8192, tp=8, efficiency=0.44)
    split = cl.step_slowdown(fast.comm_fraction, cl.NVLINK_H100_BPS, cl.IB_PER_GPU_BPS)
    path = ROOT / "solutions" / "08-gang-cost.ipynb"
    (cell,) = [c for c in nbformat.read(path, 4).cells if markers.has_markers(c.source) and "split_slowdown =" in c.source]
    lines = markers.solution_source(cell.source, str(path)).splitlines()
    rest = lines[next(i for i, ln in enumerate(lines) if ln.startswith("split_slowdown =")) + 1:]
    return f"split_link_gb_s = {cl.IB_PER_GPU_BPS / cl.GB!r}\nsplit_slowdown = {split!r}\n" + "\n".join(rest) + "\n"


#: lab -> question -> the chapter's worked example, as the answer a student would copy
WORKED = {
    "01-namespaces-cgroups": {"q3": ch2_cpu_max, "q4": ch2_burst},
    "03-oom-killer": {"q1": ch3_badness, "q3": ch3_score_adj},
    "04-images": {"q1": ch4_rebuilt},
    "06-gang-deadlock": {"q2": ch6_held_idle},
    "07-barrier": {"q3": ch7_rank_37, "q4": ch8_young, "q6": ch7_ladder},
    "08-gang-cost": {"q2": ch8_seed_bill, "q3": ch6_two_gangs, "q6": ch8_split},
}


def copied_lab(name: str, seed: int, dest: Path) -> Path:
    """Seed ``seed``'s lab: the worked example's answer where WORKED names one, the reference solution elsewhere."""
    solution_path = ROOT / "solutions" / f"{name}.ipynb"
    solution = nbformat.read(solution_path, 4)
    by_id = {c["id"]: c for c in solution.cells}
    nb = nbformat.reads(build.variant_text(solution, str(solution_path), seed)[0], 4)
    for cell in nb.cells:
        question = markers.course_meta(cell).get("question")
        if not markers.course_meta(cell).get("answer"):
            continue
        if question in WORKED[name]:
            cell.source = WORKED[name][question]()
        else:
            cell.source = markers.solution_source(by_id[cell["id"]].source, str(solution_path))
    dest.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, dest)
    return dest


@pytest.mark.parametrize("seed", [0, pytest.param(7, marks=pytest.mark.slow), pytest.param(23, marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", sorted(WORKED))
def test_the_worked_examples_answer_fails_the_labs_question(name, seed, tmp_path):
    report = grade(copied_lab(name, seed, tmp_path / f"{name}.ipynb"), source=ROOT / "solutions" / f"{name}.ipynb")
    assert report.seed == seed
    auto = {r.question: r for r in report.questions if r.kind == "auto"}
    copied = set(WORKED[name])
    assert copied <= set(auto), f"{name}: WORKED names {sorted(copied - set(auto))}, which are not auto-graded"
    accepted = {q: auto[q].feedback for q in copied if auto[q].passed}
    assert not accepted, f"{name} seed {seed}: the chapter's worked example passes {sorted(accepted)}"
    spoilt = {q: r.feedback for q, r in auto.items() if q not in copied and not r.passed}
    assert not spoilt, f"{name} seed {seed}: the reference answers failed {spoilt}"


def test_every_worked_example_is_computed_from_the_page():
    """Each answer above is made (and its inputs found on its page) without grading anything."""
    for questions in WORKED.values():
        for make in questions.values():
            src = make()
            assert "= ..." not in src and compile(src, make.__name__, "exec")
