"""The sbatch reader follows Slurm's rules (sbatch(1), opt.c; corpus README) exactly."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from courselib.errors import CourseError, InputError
from courselib.io.sbatch import (constraint_features, parse_array, parse_gres, parse_sbatch,
                                 parse_time, read_sbatch, split_directive)
from budget import examples

sys.path.insert(0, str(Path(__file__).parent))

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "files"


def script(*lines: str) -> str:
    return "#!/bin/bash\n" + "\n".join(lines) + "\n"


# --- --time --------------------------------------------------------------------------------

@pytest.mark.parametrize("text, minutes, form", [
    ("15", 15, "M"), ("3:00", 3, "M:S"), ("3:01", 4, "M:S"), ("0:10:00", 10, "H:M:S"),
    ("01:59:00", 119, "H:M:S"), ("1-0", 1440, "D-H"), ("1-2:30", 1590, "D-H:M"),
    ("3-00:00:00", 4320, "D-H:M:S"), ("UNLIMITED", None, "UNLIMITED"), ("infinite", None, "UNLIMITED"),
    ("1-", 1440, "D-"), ("0", None, "M"), ("0:0:0", None, "H:M:S"),  # zero is no limit (sbatch.1)
])
def test_time_formats(text, minutes, form):
    t = parse_time(text)
    assert (t.minutes, t.form) == (minutes, form)


@pytest.mark.parametrize("bad", ["2h", "1:2:3:4", "", "-5", "1-2:", " 30", "ten"])
def test_bad_time_is_an_input_error(bad):
    with pytest.raises(InputError):
        parse_time(bad)


@given(st.integers(0, 400), st.integers(0, 59), st.integers(0, 59))
@settings(max_examples=examples(150), deadline=None)
def test_hms_rounds_seconds_up(h, m, s):
    minutes = h * 60 + m + (1 if s else 0)
    assert parse_time(f"{h}:{m:02d}:{s:02d}").minutes == (minutes or None)  # 0 = no limit


def test_time_zero_is_no_limit_and_the_job_still_builds():
    from courselib.io.sbatch import to_job
    r = parse_sbatch(script("#SBATCH --nodes=2 --gpus-per-node=8", "#SBATCH --time=0", "srun x"))
    assert r.time_limit_min is None
    job = to_job(r, duration=600)          # was a ValueError: time_limit must be > 0
    assert (job.time_limit, job.duration) == (None, 600)
    with pytest.raises(InputError, match="means no time limit") as err:
        to_job(r)
    assert err.value.line == 3


# --- directive lines -------------------------------------------------------------------------

def test_comment_inside_directive_and_quotes():
    assert split_directive(' --nodes=2   # two nodes, it\'s "fine"') == ["--nodes=2"]
    assert split_directive(' -C "a100&nvlink" --job-name=x\\#1') == ["-C", "a100&nvlink", "--job-name=x#1"]


def test_several_options_on_one_line_and_later_overrides():
    r = parse_sbatch(script("#SBATCH --nodes=1 --ntasks-per-node=8 --gpus-per-node=8",
                            "#SBATCH -N 4", "#SBATCH -t 04:00:00 -p batch --exclusive"))
    assert (r.nodes, r.gpus_per_node, r.total_gpus) == (4, 8, 32)
    assert (r.time_limit_min, r.partition, r.exclusive) == (240, "batch", True)


def test_short_and_long_forms_and_separate_values():
    r = parse_sbatch(script("#SBATCH -N2", "#SBATCH -C v100-16g", "#SBATCH --time 20:00:00",
                            "#SBATCH --gres gpu:4"))
    assert (r.nodes, r.constraint, r.time_limit_min, r.gpus_per_node) == (2, "v100-16g", 1200, 4)


def test_unique_prefix_of_a_long_option_is_accepted_like_getopt():
    r = parse_sbatch(script("#SBATCH --partit=gpu --gpus-per-n=2 --nod=3"))
    assert (r.partition, r.gpus_per_node) == ("gpu", 2)
    assert r.nodes is None and [o for _, o in r.unknown_options] == ["--nod"]  # ambiguous


def test_parsing_stops_at_first_command_and_ignored_lines_are_reported():
    r = parse_sbatch(script("#SBATCH -N 2", "# a comment does not stop parsing", "",
                            "  # nor an indented one", "#SBATCH --gres=gpu:8",
                            "module load cuda", "#SBATCH --time=10", "cat <<EOF",
                            "#SBATCH --nodes=99", "EOF"))
    assert r.nodes == 2 and r.gpus_per_node == 8 and r.time_limit_min is None
    assert r.first_command_line == 7
    assert [ln for ln, _ in r.ignored_directives] == [8, 10]


def test_sbatch_must_start_at_column_zero():
    r = parse_sbatch(script(" #SBATCH --nodes=5", "#SBATCH --nodes=2"))
    assert r.nodes == 2


def test_gres_forms():
    assert parse_gres("gpu:a100:4,nvme:200") == [("gpu", "a100", 4), ("nvme", None, 200)]
    assert parse_gres("gpu") == [("gpu", None, 1)]
    assert parse_gres("gpu:volta") == [("gpu", "volta", 1)]
    assert parse_gres("gpu:2(S:0-1)") == [("gpu", None, 2)]


def test_gpu_derivations():
    per_task = parse_sbatch(script("#SBATCH --nodes=4 --ntasks=4 --gpus-per-task=1"))
    assert (per_task.gpus_per_node, per_task.total_gpus) == (1, 4)
    job_total = parse_sbatch(script("#SBATCH --nodes=8 --gpus=64"))
    assert (job_total.gpus_per_node, job_total.total_gpus) == (8, 64)
    typed = parse_sbatch(script("#SBATCH -N 2 --gpus-per-node=h100:4"))
    assert (typed.leader.gpu_type, typed.total_gpus) == ("h100", 8)
    unknown = parse_sbatch(script("#SBATCH -n 384 --gpus-per-node=8"))
    assert unknown.total_gpus is None and "384" in unknown.total_gpus_reason
    default = parse_sbatch(script("#SBATCH --gres=gpu:8"))
    assert default.total_gpus is None and "would give 8" in default.total_gpus_reason
    cpu = parse_sbatch(script("#SBATCH -N 1"))
    assert (cpu.gpus_per_node, cpu.total_gpus, cpu.total_gpus_reason) == (None, 0, None)


# A CPU-only preprocessing job and a heterogeneous job (written for these tests): a job that asks
# for no GPU holds none (0, not unknown); a het job's components are separate allocations whose
# nodes and GPUs add up (sbatch(1) HETEROGENEOUS JOB SUPPORT), not the first component's.
CPU_ONLY = """#!/bin/bash
#SBATCH --job-name=tokenize
#SBATCH --nodes=3
#SBATCH --ntasks-per-node=32
#SBATCH --time=02:00:00
srun python tokenize.py
"""
HET = """#!/bin/bash
#SBATCH --job-name=train-and-serve-data
#SBATCH --time=12:00:00
#SBATCH --nodes=4 --gpus-per-node=8 --partition=gpu
#SBATCH hetjob
#SBATCH --nodes=2 --partition=cpu --ntasks-per-node=16
#SBATCH hetjob
#SBATCH --nodes=1 --gres=gpu:2 --partition=gpu
srun --het-group=0 python train.py : --het-group=1 python loader.py : --het-group=2 python eval.py
"""


def test_cpu_only_job_holds_zero_gpus_and_hetjob_totals_add_up(tmp_path):
    from courselib.io.sbatch import to_job
    (tmp_path / "tokenize.sbatch").write_text(CPU_ONLY)
    (tmp_path / "het.sbatch").write_text(HET)
    cpu = read_sbatch(tmp_path / "tokenize.sbatch")
    assert (cpu.nodes, cpu.total_gpus, cpu.to_dict()["total_gpus"]) == (3, 0, 0)
    job = to_job(cpu)                     # a gang of 3 pods with no GPUs, not "GPUs per node unknown"
    assert (job.pods, job.gpus_per_pod, job.gpus) == (3, 0, 0)
    het = read_sbatch(tmp_path / "het.sbatch")
    assert [c.nodes for c in het.components] == [4, 2, 1]
    assert (het.nodes, het.total_gpus, het.gpus_per_node) == (7, 34, 8)
    assert [c.total_gpus for c in het.components] == [32, 0, 2]
    unknown = parse_sbatch(script("#SBATCH -N 2 --gpus-per-node=4", "#SBATCH hetjob", "#SBATCH -n 8"))
    assert unknown.nodes is None           # the second component's node count is not in the script


def test_array_and_constraint_expressions():
    a = parse_array("1-10%1")
    assert (a.tasks, a.max_running) == (10, 1)
    assert parse_array("0-15:4").tasks == 4 and parse_array("1,3,5-6").tasks == 4
    assert constraint_features("[rack1|rack2]&nvlink*2") == ("rack1", "rack2", "nvlink")


def test_hetjob_components_and_what_propagates():
    r = parse_sbatch(script("#SBATCH --time=1-0 --account=ml -N 4 --gres=gpu:8 -p gpu -C nvlink",
                            "#SBATCH hetjob", "#SBATCH -N 1 -p cpu"))
    a, b = r.components
    assert (a.nodes, a.partition, a.constraint, a.time_limit_min) == (4, "gpu", "nvlink", 1440)
    assert (b.nodes, b.partition, b.constraint, b.time_limit_min) == (1, "cpu", None, 1440)
    assert b.option("account") == "ml" and b.gpus_per_node is None
    assert r.total_gpus == 32
    assert len(parse_sbatch(script("#SBATCH -N 1", "#SBATCH packjob", "#SBATCH -N 2")).components) == 2


def test_unknown_options_are_reported_not_fatal():
    r = parse_sbatch(script("#SBATCH --argos=no -N 2 -Z"))
    assert r.nodes == 2
    assert [o for _, o in r.unknown_options] == ["--argos", "-Z"]


def test_bad_values_strict_vs_lenient():
    text = script("#SBATCH --nodes=two", "#SBATCH --time=2h")
    with pytest.raises(InputError) as e:
        parse_sbatch(text, file="job.sbatch")
    assert str(e.value).startswith("job.sbatch:2: --nodes:")
    r = parse_sbatch(text, file="job.sbatch", strict=False)
    assert [(p.line, p.field) for p in r.problems] == [(2, "--nodes"), (3, "--time")]


def test_shebang_rule():
    late = "# header\n#!/bin/bash\n#SBATCH -N 1\n"
    assert not parse_sbatch(late, strict=False).has_shebang
    assert parse_sbatch(late, strict=False).shebang_line == 2
    assert parse_sbatch(script("#SBATCH -N 1")).has_shebang


# sbatch's words, src/sbatch/sbatch.c L684-694 (SchedMD/slurm branch slurm-26.05 @531c4b2e)
@pytest.mark.parametrize("text, said", [
    ("#SBATCH --nodes=2\nsrun x\n", "line 1 is '#SBATCH --nodes=2'"),
    ("# header\n#!/bin/bash\n#SBATCH -N 1\n", "'#!' is on line 2"),
    ("\n#!/bin/bash\nsrun x\n", "'#!' is on line 2"),
    (" #!/bin/bash\nsrun x\n", "line 1 is '#!/bin/bash'"),
])
def test_a_script_without_a_shebang_on_line_1_is_refused_as_sbatch_does(text, said):
    """Issue 32 (Lab 5 q5): the reader accepted a script with no '#!' line, which real sbatch refuses
    ("This does not look like a batch script"). Strict reading now refuses it in one located line that
    says what to do; ``strict=False`` (courselib lint) still reads it and S001 reports it."""
    with pytest.raises(InputError) as err:
        parse_sbatch(text, file="smoke_fixed")
    msg = str(err.value)
    assert msg.startswith("smoke_fixed:1: sbatch refuses this script: its first line must start with '#!'"), msg
    assert said in msg and "put '#!/bin/bash' on line 1" in msg and "\n" not in msg, msg
    assert parse_sbatch(text, strict=False).has_shebang is False


@pytest.mark.parametrize("text", ["", "   \n\n"])
def test_an_empty_script_is_refused(text):
    with pytest.raises(InputError, match=r"^e\.sbatch:1: the script is empty"):
        parse_sbatch(text, file="e.sbatch")


def test_seed_example_reads_as_the_seed_says():
    r = read_sbatch(EXAMPLES / "train-64node.sbatch")
    assert (r.nodes, r.gpus_per_node, r.total_gpus, r.constraint, r.exclusive) == (64, 8, 512, "nvlink", True)
    assert r.time_limit_min == 2 * 24 * 60


def test_unreadable_inputs_are_located_errors(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_sbatch(tmp_path / "missing.sbatch")
    (tmp_path / "bin").write_bytes(b"#!\x00\x01")
    with pytest.raises(InputError):
        read_sbatch(tmp_path / "bin")


# --- corpus --------------------------------------------------------------------------------

def corpus_files():
    from conftest import CORPUS
    d = CORPUS / "sbatch"
    return sorted(p for p in d.glob("*") if p.name != "EXPECTED.tsv") if d.is_dir() else []


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name[:60])
def test_every_corpus_script_reads(path):
    r = read_sbatch(path, strict=False)
    assert r.components and not r.problems


def test_agreement_with_expected(corpus):
    from corpus_agreement import report, sbatch_agreement
    matched, total, bad = report("sbatch", sbatch_agreement, corpus)
    assert total == 200
    assert matched == total, bad


# --- robustness ----------------------------------------------------------------------------

FRAGMENTS = st.sampled_from([
    "#SBATCH ", "--nodes=", "-N ", "--time=", "-t", "--gres=gpu:", "--gpus=", "--gpus-per-node=",
    "--gpus-per-task=", "--ntasks=", "--array=", "hetjob", "--exclusive", "-C ", "#", "\"", "'",
    "\\", "a100", "1", "8", "0", "-", ":", "%", ",", "=", " ", "\t", "\n", "\r\n", "echo hi\n",
    "#!/bin/bash\n", "--constraint=[a|b]", "UNLIMITED", "99999999999999999999", "é",
])


@given(st.lists(FRAGMENTS, max_size=40).map("".join))
@settings(max_examples=examples(200), deadline=None)
def test_generated_scripts_never_raise_anything_but_located_course_errors(text):
    for strict in (True, False):
        try:
            r = parse_sbatch(text, file="gen.sbatch", strict=strict)
            r.to_dict()
        except CourseError as err:
            assert err.file == "gen.sbatch" and err.line is not None


@given(st.data())
@settings(max_examples=examples(100), deadline=None)
def test_mutated_corpus_scripts_never_crash(data):
    files = corpus_files() or [EXAMPLES / "train-64node.sbatch"]
    path = data.draw(st.sampled_from(files))
    text = path.read_text()
    pos = data.draw(st.integers(0, len(text)))
    cut = data.draw(st.integers(0, 20))
    insert = data.draw(st.text(alphabet="#SBATCH-=:,%0123456789 \n\"'\\gpu", max_size=12))
    mutated = text[:pos] + insert + text[pos + cut:]
    from courselib.lint import lint_sbatch
    try:
        lint_sbatch(parse_sbatch(mutated, file="m.sbatch", strict=False), mutated)
    except CourseError as err:
        assert err.file == "m.sbatch"


def test_to_job_builds_the_gang_schedulers_job():
    from courselib.io.sbatch import to_job
    job = to_job(read_sbatch(EXAMPLES / "train-64node.sbatch"), duration=3600)
    assert (job.name, job.pods, job.gpus_per_pod, job.min_member) == ("llm-pretrain", 64, 8, 64)
    assert (job.constraint, job.exclusive, job.time_limit, job.duration) == ("nvlink", True, 172800.0, 3600)
    with pytest.raises(InputError, match="node count"):
        to_job(parse_sbatch(script("#SBATCH --gres=gpu:8 -t 10"), file="x.sbatch"))
    with pytest.raises(InputError, match="duration"):
        to_job(parse_sbatch(script("#SBATCH -N 2 --gres=gpu:8"), file="x.sbatch"))


def test_quotes_escapes_and_fatal_lines_follow_get_argument():
    assert split_directive(r' --comment="a \" b # c" -J x') == ['--comment=a " b # c', "-J", "x"]
    with pytest.raises(InputError, match="unmatched"):
        split_directive(' --comment="open')
    with pytest.raises(InputError) as e:
        parse_sbatch(script("#SBATCH -N 2", "#SBATCH --comment='x"), file="q.sbatch")
    assert (e.value.line, e.value.field) == (3, "#SBATCH")
    lenient = parse_sbatch(script("#SBATCH -N 2 :x"), strict=False)
    assert lenient.nodes == 2 and lenient.problems


def test_hetjob_word_anywhere_in_the_line_splits_like_sbatch():
    r = parse_sbatch(script("#SBATCH -N 2 --gres=gpu:8", "#SBATCH --job-name=hetjob-demo", "#SBATCH -N 1"))
    assert len(r.components) == 2 and r.hidden_separator_lines == (3,)
    assert (r.components[0].nodes, r.components[1].nodes) == (2, 1)
    from courselib.lint import lint_sbatch
    assert "S012" in [f.code for f in lint_sbatch(r)]


def test_old_slurm_magic_is_read():
    r = parse_sbatch(script("#SLURM --nodes=3"))
    assert r.nodes == 3 and r.old_magic_lines == (2,)
