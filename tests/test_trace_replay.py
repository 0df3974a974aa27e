"""``courselib trace replay``: every reader's jobs replayed as gangs, the paper's summary checked by
hand on small traces written here, and malformed lines refused with their file and line."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from courselib.cli.main import main
from courselib.io.traces import read_trace
from courselib.sim.traces import default_cluster, idle_over_time, replay, waits, workload_of

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "traces"

# one small file per reader that has jobs with run times; the job that matters is 2 pods x 4 GPUs
READERS = {
    "t.swf": ("swf", "; MaxProcs: 8\n1 0 0 100 8 -1 -1 8 200 -1 1 1 1 -1 1 -1 -1 -1\n"
                     "2 0 0 50 8 -1 -1 8 100 -1 1 1 1 -1 1 -1 -1 -1\n"),
    "tiresias.csv": ("tiresias", "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
                                 "0,8,0,10,vgg19,100,1\n1,8,0,10,vgg11,50,1\n"),
    "pods.csv": ("alibaba-2023-pods", "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
                                      "creation_time,deletion_time,scheduled_time\n"
                                      "p0,1,1,8,1000,,LS,Running,0,100,0\np1,1,1,8,1000,,LS,Running,0,50,0\n"),
    "sim.csv": ("slurm-sim", '"","sim_job_id","sim_submit","sim_wclimit","sim_duration","sim_tasks",'
                             '"sim_submit_ts","sim_gres"\n"1",1,x,10,100,8,1000,"gpu:8"\n'
                             '"2",2,x,10,50,8,1000,"gpu:8"\n'),
}
# the same files with one malformed field each: (text, line, field named in the error)
BROKEN = {
    "t.swf": ("1 0 0 1oo 8 -1 -1 8 200 -1 1 1 1 -1 1 -1 -1 -1\n", 1, "run_time"),
    "tiresias.csv": ("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
                     "0,8,0,10,vgg19,100,1\n1,eight,0,10,vgg11,50,1\n", 3, "num_gpu"),
    "pods.csv": (READERS["pods.csv"][1].replace("0,50,0", "0,5O,0"), 3, "deletion_time"),
    "sim.csv": (READERS["sim.csv"][1].replace(",50,8,", ",fifty,8,"), 3, "sim_duration"),
    "g.trace": ("A\tcmd\t-n\t1\t100\t0.0\t1\nB\tcmd\t-n\t1\t100\tsoon\t1\n", 2, "arrival_time"),
}


@pytest.mark.parametrize("name", sorted(READERS))
def test_each_reader_replays_the_same_two_gangs(tmp_path, name):
    """Two 8-GPU jobs submitted together on 2 nodes x 4 GPUs: each is 2 pods x 4 GPUs. Pod by pod
    they take one node each and deadlock; Volcano runs them one after the other (wait 100 s)."""
    fmt, text = READERS[name]
    p = tmp_path / name
    p.write_text(text)
    reading = read_trace(p)
    assert reading.format == fmt
    w = workload_of(reading, (2, 4))[0]
    assert [(j.pods, j.gpus_per_pod) for j in w.jobs] == [(2, 4), (2, 4)]
    kd = replay(reading, "kube-default", (2, 4)).summary()
    assert kd["deadlock"] is True and kd["never_started"] == 2
    vo = replay(reading, "volcano", (2, 4))
    s = vo.summary()
    assert not s["deadlock"] and s["idle_gpu_hours"] == 0
    assert waits(vo.result) == [0.0, 100.0]
    assert s["queueing_delay_s"] == {"n": 2, "mean": 50.0, "p50": 0.0, "p90": 100.0, "p99": 100.0}
    assert s["jct_s"]["p99"] == 150.0
    assert s["by_gang_size"] == [{"gpus": "2-8", "jobs": 2, "never_started": 0, "idle_gpu_hours": 0.0,
                                  "queueing_delay_s": s["queueing_delay_s"]}]
    # 8 GPUs busy 150 s of the 150 s window
    assert s["utilisation"] == 1.0


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_malformed_line_is_refused_with_its_file_line_and_field(tmp_path, capsys, name):
    text, line, fld = BROKEN[name]
    p = tmp_path / name
    p.write_text(text)
    assert main(["trace", "replay", str(p), "--policy", "volcano"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert f"{p}:{line}" in err and fld in err


def test_idle_gpu_hours_over_time_add_up_to_the_run_total(tmp_path):
    p = tmp_path / "tiresias.csv"
    p.write_text(READERS["tiresias.csv"][1])
    r = replay(read_trace(p), "kube-default", (2, 4)).result
    times, idle = idle_over_time(r)
    assert times == sorted(times) and idle == sorted(idle)
    assert idle[-1] == pytest.approx(r.wasted_gpu_hours)
    assert r.wasted_gpu_hours > 0  # the deadlock holds 8 GPUs to the horizon


def test_the_cli_prints_the_table_and_json(tmp_path, capsys):
    p = tmp_path / "tiresias.csv"
    p.write_text(READERS["tiresias.csv"][1])
    assert main(["trace", "replay", str(p), "--policy", "all", "--cluster", "2x4"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"ARG trace {p}\nARG --cluster 2x4\n")
    assert "kube-default" in out and "YES" in out and "slurm" in out
    assert main(["trace", "replay", str(p), "--policy", "slurm", "--cluster", "2x4", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["policy"] == "slurm" and d["queueing_delay_s"]["p90"] == 100.0


@pytest.mark.parametrize("args, words", [
    (["--cluster", "4by8"], "NODESxGPUS"), (["--cluster", "0x8"], "at least 1"),
    (["--limit", "0"], "at least one job")])
def test_bad_options_are_one_line_errors(tmp_path, capsys, args, words):
    p = tmp_path / "tiresias.csv"
    p.write_text(READERS["tiresias.csv"][1])
    assert main(["trace", "replay", str(p), "--policy", "volcano", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and "\n" not in err


def test_default_cluster_holds_the_peak_and_the_largest_job():
    from courselib.model.workload import Job
    jobs = [Job("a", 1, 4, submit=0, duration=10), Job("b", 1, 4, submit=5, duration=10),
            Job("c", 2, 8, submit=100, duration=1)]
    nodes, rule = default_cluster(jobs, 8)
    assert nodes == 2 and "peak demand of 16 GPUs" in rule  # 0.8 x 16 < 16 (the largest job)


def test_tables_without_jobs_say_why(tmp_path, capsys):
    p = tmp_path / "runtime.csv"
    p.write_text("runtime\n1.0\n2.0\n")
    assert main(["trace", "replay", str(p), "--policy", "volcano"]) == 2
    assert "has no jobs" in capsys.readouterr().err
    g = tmp_path / "g.trace"
    g.write_text("A\tcmd\t-n\t1\t100\t0.0\t1\n")
    assert main(["trace", "replay", str(g), "--policy", "volcano"]) == 2
    assert "training steps" in capsys.readouterr().err


def _corpus(name):
    p = CORPUS / name
    if not p.exists():
        pytest.skip(f"../shared/corpus/traces/{name} is not here (the corpus sits beside the repo)")
    return p


@pytest.mark.parametrize("name", [
    "SymbioticLab__Tiresias__simulator__60_job.csv",
    "erangvee__slurm_sim_vanilla__slurm_sim_tools__tutorials__micro_cluster__test_trace.csv",
    "cgalleguillosm__accasim__tests__data__workload.swf"])
def test_corpus_traces_replay_under_every_policy(name, capsys):
    from courselib.model.policies import policy_names
    assert main(["trace", "replay", str(_corpus(name)), "--policy", "all", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["policy"] for r in rows] == policy_names()
    for r in rows:
        assert r["jobs"] > 0 and r["queueing_delay_s"]["n"] + r["never_started"] == r["jobs"]
        if r["policy"] in ("volcano", "slurm"):
            assert r["idle_gpu_hours"] == 0  # all-or-nothing placement never holds GPUs idle


def test_a_slurm_simulator_gres_without_a_count_is_refused(tmp_path, capsys):
    p = tmp_path / "sim.csv"
    p.write_text(READERS["sim.csv"][1].replace('"gpu:8"\n"2"', '"gpu:many"\n"2"'))
    assert main(["trace", "replay", str(p), "--policy", "slurm"]) == 2
    err = capsys.readouterr().err
    assert f"{p}:2" in err and "sim_gres" in err


def test_the_figure_draws_both_panels(tmp_path):
    from courselib.plots.traces import trace_comparison
    p = tmp_path / "tiresias.csv"
    p.write_text(READERS["tiresias.csv"][1])
    reading = read_trace(p)
    fig = trace_comparison({pol: replay(reading, pol, (2, 4)) for pol in ("kube-default", "volcano")}, "t")
    ax1, ax2 = fig.axes
    assert ax1.get_xscale() == "log" and "GPU-hours" in ax2.get_ylabel()
    assert len(ax1.lines) == 1  # kube-default deadlocked: no job started, no CDF drawn
    assert ax2.lines[0].get_ydata()[-1] > 0 and ax2.lines[1].get_ydata()[-1] == 0


def test_the_chapter_falls_back_to_a_recorded_run_of_the_same_code(tmp_path, monkeypatch):
    """Chapter 9 replays the corpus trace where it is; elsewhere it shows the run courselib ships,
    which must be what the same code gives today (regenerate it with record_chapter_comparison)."""
    import json
    from importlib import resources

    from courselib.sim.traces import CHAPTER_TRACE, RECORDED, chapter_comparison, series
    monkeypatch.chdir(tmp_path)  # no ../shared here
    rows, ser, live = chapter_comparison()
    assert not live and [r["policy"] for r in rows][:2] == ["kube-default", "volcano"]
    path = _corpus(CHAPTER_TRACE)
    rec = json.loads(resources.files("courselib.data").joinpath("recorded", RECORDED).read_text())
    reading = read_trace(path)
    for row in rec["rows"]:
        rep = replay(reading, row["policy"])
        now = rep.summary()
        now["file"] = row["file"]
        assert now == row, f"{row['policy']}: the recorded run is stale; run record_chapter_comparison"
        assert json.loads(json.dumps(series(rep.result))) == rec["series"][row["policy"]]
