"""Traces: SWF (header, any whitespace, CRLF) and the GPU-trace CSVs of the corpus."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from courselib.errors import CourseError, InputError
from courselib.io.traces import parse_csv_trace, parse_swf, parse_trace_text, read_trace
from budget import examples

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "files"


def test_swf_header_whitespace_and_crlf():
    r = read_trace(EXAMPLES / "toy.swf")
    assert r.format == "swf" and len(r.jobs) == 3
    assert dict(r.header)["MaxNodes"] == "4" and dict(r.cluster)["MaxProcs"] == 32
    j = r.jobs[2]      # tab-separated line
    assert (j.id, j.submit, j.duration, j.procs, j.requested_time) == ("3", 120, 600, 32, 900)
    assert r.jobs[1].duration == 1800 and r.jobs[0].line == 6


def test_swf_minus_one_is_unknown_and_requested_procs_fill_in():
    r = parse_swf("1 0 -1 -1 -1 -1 -1 4 -1 -1 1 -1 -1 -1 -1 -1 -1 -1\n")
    j = r.jobs[0]
    assert (j.duration, j.procs, j.requested_time) == (None, 4, None)
    assert r.notes  # no header: machine size unknown


def test_swf_errors_are_located():
    with pytest.raises(InputError) as e:
        parse_swf("; h\n1 2 3\n", file="t.swf")
    assert (e.value.file, e.value.line) == ("t.swf", 2)
    with pytest.raises(InputError) as e:
        parse_swf("1 0 x 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1\n", file="t.swf")
    assert e.value.field == "wait"


def test_tiresias_csv():
    r = parse_csv_trace("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\r\n"
                        "0,8,30,100,vgg19,3600,10\r\n")
    assert r.format == "tiresias" and r.jobs[0].gpus == 8 and r.summary()["gpu_hours"] == 8.0


def test_unrecognised_csv_is_a_located_error():
    with pytest.raises(InputError, match="unrecognised"):
        parse_csv_trace("a,b\n1,2\n", file="x.csv")


def corpus_files():
    from conftest import CORPUS
    d = CORPUS / "traces"
    return sorted(d.glob("*")) if d.is_dir() else []


EXPECTED_KIND = {
    "lublin_256.swf": ("swf", 10000), "workload.swf": ("swf", 25), "60_job.csv": ("tiresias", 60),
    "openb_pod_list_default.csv": ("alibaba-2023-pods", 8152), "test_trace.csv": ("slurm-sim", 500),
    "23dbec.trace": ("gavel-legacy", 9), "n32g4.csv": ("tiresias-cluster", 0),
    "philly_runtime.csv": ("runtimes", 0), "cluster_throughput.csv": ("aggregate", 0),
    "pai_machine_spec.tar.gz": ("node-list", 0), "pai_job_table.header": ("schema", 0),
}


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name[:60])
def test_every_corpus_trace_reads(path):
    r = read_trace(path)
    r.summary()
    for suffix, (fmt, jobs) in EXPECTED_KIND.items():
        if path.name.endswith(suffix):
            assert (r.format, len(r.jobs)) == (fmt, jobs)


def test_corpus_cluster_specs(corpus):
    t = read_trace(corpus / "traces" / "SymbioticLab__Tiresias__simulator__n32g4.csv")
    assert dict(t.cluster)["gpus"] == 128
    swf = read_trace(corpus / "traces" / "DIR-LAB__deep-batch-scheduler__data__lublin_256.swf")
    assert dict(swf.cluster)["MaxNodes"] == 256


LINES = st.sampled_from(["; MaxNodes: 8", ";", "1 0 0 10 2 -1 -1 2 20 -1 1 1 1 -1 1 -1 -1 -1",
                         "  2\t5 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1", "3 1e400 0",
                         "job_id,num_gpu,submit_time,duration", "0,1,2,3", "x,y", "nan", "\x0c",
                         "a\tb\tc\td\te\tf\tg", "\"unterminated", ",", ""])


@given(st.lists(LINES, max_size=8), st.sampled_from(["\n", "\r\n"]), st.sampled_from(["t.swf", "t.csv", "t"]))
@settings(max_examples=examples(150), deadline=None)
def test_generated_traces_never_raise_anything_but_course_errors(lines, eol, name):
    try:
        parse_trace_text(eol.join(lines), file=name, name=name).summary()
    except CourseError as err:
        assert err.file == name


def test_trace_to_jobs_splits_big_gangs_over_nodes():
    from courselib.io.traces import split_gang, trace_to_jobs
    assert split_gang(4, 8) == (1, 4) and split_gang(32, 8) == (4, 8) and split_gang(12, 8) == (2, 6)
    jobs = trace_to_jobs(read_trace(EXAMPLES / "toy.swf"), gpus_per_node=8)
    assert [(j.name, j.submit, j.pods, j.gpus_per_pod, j.duration) for j in jobs] == [
        ("job1", 0, 2, 8, 3600), ("job2", 60, 1, 8, 1800), ("job3", 120, 4, 8, 600)]
    assert jobs[0].time_limit == 7200
    with pytest.raises(InputError):
        trace_to_jobs(parse_csv_trace("runtime\n1.0\n"))


def test_corpus_gpu_trace_becomes_a_workload(corpus):
    from courselib.io.traces import trace_to_jobs
    from courselib.model.workload import ClusterSpec, Workload
    jobs = trace_to_jobs(read_trace(corpus / "traces" / "SymbioticLab__Tiresias__simulator__60_job.csv"),
                         gpus_per_node=4)
    w = Workload(ClusterSpec(32, 4), jobs)
    assert len(w.jobs) == 60 and max(j.gpus for j in jobs) <= 128
