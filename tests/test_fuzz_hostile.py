"""Fuzzing every reader and command (issue 23): the course's own example files, mutated by
hypothesis (hostile tokens inserted, numbers swapped for NaN, -1 or 400 digits, lines doubled,
bytes cut), and numeric options drawn from hostile values. Each case runs the real CLI in a forked
child with a time and memory budget (tests/hostile.py) and fails on a traceback, an exit status
other than 0, 1 or 2, or a run past its budget. Derandomised: the same cases on every machine.

The hostile corpus (tests/hostile.py ``write_corpus``) is also fed to every reader here.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings, strategies as st

from budget import examples
from hostile import HUGE, run_cli, write_corpus

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples"
# made when the first test of this module runs, removed when the last one ends (_remove_work_folder)
WORK = Path(tempfile.gettempdir()) / f"courselib-fuzz-{os.getpid()}-{secrets.token_hex(4)}"
FAILED = WORK / "failed"

POLICIES = ["kube-default", "volcano", "kueue", "slurm"]


def _seeds(*globs: str) -> list[bytes]:
    out = []
    for g in globs:
        out += [p.read_bytes() for p in sorted(EX.glob(g))]
    return out


CSV_TRACE = (b"job_id,num_gpu,submit_time,duration,status\n1,8,0,3600,Pass\n2,16,60,1800,Pass\n"
             b"3,1,120,60,Killed\n")

# family -> (file suffix, seed files, argv variants with {f} for the file)
FAMILIES: dict[str, tuple[str, list[bytes], list[list[str]]]] = {
    "workload": (".yaml", _seeds("workloads/*.yaml", "slurm/*.yaml"),
                 [["gang", "simulate", "{f}", "--policy", p] for p in POLICIES] + [["slurm", "replay", "{f}"]]),
    "scenario": (".yaml", _seeds("oom/basic.yaml", "oom/group.yaml", "oom/growing.yaml", "oom/node.yaml"),
                 [["oom", "simulate", "{f}"], ["oom", "simulate", "{f}", "--json"]]),
    "pod": (".yaml", _seeds("oom/pod.yaml", "files/gpu-job-*.yaml"),
            [["oom", "score-adj", "{f}", "--node-memory", "16Gi"]]),
    "sbatch": (".sbatch", _seeds("files/*.sbatch"), [["sbatch", "parse", "{f}"], ["sbatch", "parse", "{f}", "--json"],
                                                      ["lint", "{f}"]]),
    "manifest": (".yaml", _seeds("files/*.yaml"), [["manifest", "parse", "{f}"], ["manifest", "parse", "{f}", "--json"],
                                                   ["manifest", "parse", "{f}", "--no-validate"], ["lint", "{f}"]]),
    "dockerfile": (".Dockerfile", _seeds("files/Dockerfile.*"),
                   [["docker", "layers", "{f}"], ["docker", "layers", "{f}", "--edited-line", "3"], ["lint", "{f}"]]),
    "trace": (".swf", _seeds("files/toy.swf") + [CSV_TRACE],
              [["trace", "load", "{f}"], ["slurm", "replay-swf", "{f}"], ["slurm", "replay-swf", "{f}", "--json"]]),
}

TOKENS = [b"*a", b"&a ", b"[", b"]", b"{", b"}", b": ", b"\n", b"\t", b"- ", b"nan", b".inf", b"-1", b"0",
          b"1e999", HUGE.encode(), b"\x00", b"\xff\xfe", b"---\n", b"<<: *a\n", b" hetjob ", b"#SBATCH --gres=gpu:",
          b"--mem=", b"%", b"\\", b'"', b"'", b"!!binary ", b"!!python/object/apply:os.system ['true']", b"? ",
          b"|\n", b"\r\n", b"\xe2\x80\xae", b"{{ .Values.x }}", b"$NUM_NODES", b"FROM ", b"COPY --from=", b"; MaxProcs: "]
NUMBERS = [b"0", b"-1", b"nan", b".nan", b"inf", b"-.inf", b"1e308", HUGE.encode(), b"4294967296", b"1.5", b"-0",
           b"99999999", b"0x10", b"1_000"]


@st.composite
def mutated(draw, seeds: list[bytes]) -> bytes:
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["insert", "delete", "replace", "number", "number", "dupline", "bytes"]))
        pos = draw(st.integers(0, len(data)))
        if kind == "insert":
            data[pos:pos] = draw(st.sampled_from(TOKENS))
        elif kind == "delete":
            del data[pos:pos + draw(st.integers(1, 40))]
        elif kind == "replace":
            data[pos:pos + draw(st.integers(1, 8))] = draw(st.sampled_from(TOKENS))
        elif kind == "bytes":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "dupline":
            lines = bytes(data).split(b"\n")
            i = draw(st.integers(0, len(lines) - 1))
            lines[i:i] = [lines[i]] * draw(st.integers(1, 3))
            data = bytearray(b"\n".join(lines))
        else:
            runs = [m.span() for m in re.finditer(rb"\d+(\.\d+)?", bytes(data))]
            if runs:
                a, b = draw(st.sampled_from(runs))
                data[a:b] = draw(st.sampled_from(NUMBERS))
    return bytes(data)


def _sleeps(argv):
    import time
    time.sleep(30)
    return 0


def _hogs(argv):
    return len(bytearray(4 << 30))  # more than the 1 GiB budget


def _raises(argv):
    raise ValueError("a bug")


def _exits_3(argv):
    return 3


@pytest.mark.parametrize("entry,problem", [(_sleeps, "ran past its 2 s budget"),
                                           (_hogs, "ended in a traceback: MemoryError"),
                                           (_raises, "ended in a traceback: ValueError: a bug"),
                                           (_exits_3, "exit status 3")])
def test_the_harness_catches_what_it_promises_to(entry, problem):
    out = run_cli([], cwd=WORK, budget_s=2.0, entry=entry)
    assert out.problem() is not None and out.problem().startswith(problem), out.describe()
    assert out.seconds < 10


@pytest.fixture(scope="module", autouse=True)
def _remove_work_folder():
    """The fuzz folder goes when the module ends, unless a failing case's input is kept in it."""
    WORK.mkdir(mode=0o700)
    yield
    if not (FAILED.is_dir() and any(FAILED.iterdir())):
        shutil.rmtree(WORK, ignore_errors=True)


def _check(out, what: str) -> None:
    problem = out.problem()
    if problem:
        pytest.fail(f"{what}: {problem}\n{out.describe()}")


def _keep(content: bytes, suffix: str) -> Path:
    """Write a case's input where a failure message can point to it (kept until the run ends)."""
    FAILED.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkstemp(suffix=suffix, dir=FAILED)[1])
    path.write_bytes(content)
    return path


#: Cases per test in `make test`; COURSELIB_FUZZ_EXAMPLES=500 digs deeper (COURSELIB_FUZZ_RANDOM=1: new
#: cases each run instead of the same derandomised ones).
EXAMPLES = int(os.environ.get("COURSELIB_FUZZ_EXAMPLES", "18"))
FUZZ_SETTINGS = settings(max_examples=examples(EXAMPLES), deadline=None,
                         derandomize=not os.environ.get("COURSELIB_FUZZ_RANDOM"), database=None,
                         phases=(Phase.explicit, Phase.generate),  # no shrinking: a failure prints its input
                         suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_mutated_files_keep_the_promise(family, monkeypatch):
    suffix, seeds, variants = FAMILIES[family]
    monkeypatch.setenv("COURSELIB_STATE_DIR", str(WORK / "private"))

    @FUZZ_SETTINGS
    @given(content=mutated(seeds), argv=st.sampled_from(variants))
    def case(content, argv):
        path = _keep(content, suffix)
        out = run_cli([str(path) if a == "{f}" else a for a in argv], cwd=WORK)
        _check(out, f"input {path} ({content[:200]!r}...)")
        path.unlink()

    case()


def _value():
    return st.one_of(st.sampled_from([v.decode() for v in NUMBERS]),
                     st.builds(lambda n, u: n.decode() + u, st.sampled_from(NUMBERS),
                               st.sampled_from(["", "s", "m", "h", "d", "Gi", "Mi", "p", "x", "%"])),
                     st.text(alphabet="0123456789.-+eEinfa ", max_size=12))


OPTION_COMMANDS = [
    ["cost", "--gpus", "{v}", "--wait", "25m"],
    ["cost", "--gpus", "400", "--wait", "{v}"],
    ["cost", "--gpus", "400", "--wait", "25m", "--price", "{v}"],
    ["cost", "--gpus", "400", "--wait", "25m", "--gang-size", "{v}"],
    ["checkpoint", "--cost", "{v}", "--mtbf", "2h"],
    ["checkpoint", "--cost", "60s", "--mtbf", "{v}", "--gpus", "512"],
    ["checkpoint", "--cost", "60s", "--mtbf", "2h", "--gpus", "{v}", "--price", "3"],
    ["checkpoint", "--cost", "60s", "--mtbf", "2h", "--gpus", "8", "--interval", "{v}"],
    ["split-cost", "--gpus", "512", "--run", "{v}", "--comm-fraction", "0.1"],
    ["split-cost", "--gpus", "512", "--run", "30d", "--comm-fraction", "{v}", "--slow-gbps", "{v}"],
    ["oom", "score-adj", str(EX / "oom" / "pod.yaml"), "--node-memory", "{v}"],
    ["gang", "simulate", str(EX / "workloads" / "seed-400-of-512-25min.yaml"), "--policy", "volcano", "--horizon", "{v}"],
    ["gang", "simulate", str(EX / "workloads" / "seed-400-of-512-25min.yaml"), "--policy", "volcano",
     "--set", "overcommit_factor={v}"],
    ["gang", "simulate", str(EX / "workloads" / "seed-400-of-512-25min.yaml"), "--policy", "kueue", "--set", "timeout={v}"],
    ["gang", "simulate", str(EX / "workloads" / "slurm-backfill.yaml"), "--policy", "slurm", "--set", "bf_window={v}"],
    ["gang", "simulate", str(EX / "workloads" / "seed-400-of-512-25min.yaml"), "--policy", "slurm", "--seed", "{v}"],
    ["slurm", "replay-swf", str(EX / "files" / "toy.swf"), "--cores", "{v}"],
    ["trace", "replay", str(EX / "files" / "toy.swf"), "--policy", "kueue", "--topology", "{v}"],
    ["slurm", "replay-swf", str(EX / "files" / "toy.swf"), "--limit", "{v}"],
    ["docker", "layers", str(EX / "files" / "Dockerfile.deps-first"), "--edited-line", "{v}"],
    ["problem", "cost", "--seed", "{v}"],
]


@FUZZ_SETTINGS
@given(argv=st.sampled_from(OPTION_COMMANDS), value=_value())
def test_hostile_option_values_keep_the_promise(argv, value):
    out = run_cli([value if a == "{v}" else a for a in argv], cwd=WORK)
    _check(out, f"value {value!r}")


# Real experiments only with values that must be refused before anything starts.
REFUSED_BEFORE_START = [
    ["oom", "real", "--limit", v] for v in ("nan", "-1", "0x10", HUGE + "Gi", "1e999")
] + [["live", "cpu-throttle", "--cpu", v] for v in ("nan", "-1", "0", HUGE, "1e999m")] + [
    ["live", "cpu-throttle", "--seconds", v] for v in ("nan", "-1s", HUGE + "s", "1e999s")
] + [["oom", "real", "--repeat", "0"], ["oom", "real", "--scenario", "nope"]]


@pytest.mark.parametrize("argv", REFUSED_BEFORE_START, ids=lambda a: " ".join(a)[:60])
def test_real_experiments_refuse_hostile_values_before_starting(argv):
    out = run_cli(argv, cwd=WORK, budget_s=10)
    _check(out, "a real experiment's option")
    assert out.status == 2, out.describe()


@pytest.fixture(scope="module")
def corpus():
    return write_corpus(WORK / "corpus")


EVERY_READER = [["gang", "simulate", "{f}", "--policy", "kueue"], ["oom", "simulate", "{f}"],
                ["oom", "score-adj", "{f}", "--node-memory", "16Gi"], ["sbatch", "parse", "{f}"],
                ["manifest", "parse", "{f}"], ["docker", "layers", "{f}"], ["lint", "{f}"], ["trace", "load", "{f}"],
                ["slurm", "replay-swf", "{f}"], ["slurm", "replay", "{f}"], ["grade", "{f}"]]
SKIP_BIG = {"pod-1001-containers.yaml", "oom-many-processes.yaml", "hetjob-100000.sbatch", "longline.yaml"}


@pytest.mark.parametrize("argv", EVERY_READER, ids=lambda a: " ".join(a[:2]))
def test_every_reader_on_the_whole_hostile_corpus(corpus, argv):
    """Every hostile file to every reader: any answer is fine but a traceback, a hang, an OOM kill."""
    bad = []
    for name, path in corpus.items():
        if name in SKIP_BIG:  # read by the reader they target in test_hostile_cases.py
            continue
        out = run_cli([str(path) if a == "{f}" else a for a in argv], cwd=WORK)
        if out.problem():
            bad.append(f"{name}: {out.problem()}\n{out.describe()}")
    assert not bad, "\n\n".join(bad)


# ----------------------------------------------------------------- slurm down on mutated records

@pytest.fixture(scope="module")
def bystander():
    """A process and a directory that are not ours to stop or remove, named by every record below."""
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    victim = WORK / "victim"
    victim.mkdir(exist_ok=True)
    (victim / "precious").write_text("keep")
    yield p, victim
    p.kill()
    p.wait()


def _record_seed(pid: int, victim: Path) -> bytes:
    return json.dumps({"shape": {"nodes": 2, "gpus_per_node": 4, "features": [["nvlink", 1]]},
                       "state_dir": str(victim), "token": "0123456789abcdef0123456789abcdef",
                       "started_at": 1700000000.5,
                       "procs": [{"role": "munged", "pid": pid, "argv": ["/usr/sbin/munged"],
                                  "start_ticks": 12345, "boot_id": "not-this-boot"},
                                 {"role": "slurmctld", "pid": pid, "argv": [], "start_ticks": 0,
                                  "boot_id": "not-this-boot"}]}, indent=1).encode()


def test_slurm_down_on_mutated_records_never_touches_what_is_not_ours(bystander, monkeypatch):
    proc, victim = bystander
    private = WORK / "slurm-private"
    private.mkdir(mode=0o700, exist_ok=True)
    monkeypatch.setenv("COURSELIB_STATE_DIR", str(private))
    monkeypatch.delenv("COURSELIB_SLURM_STATE", raising=False)

    @FUZZ_SETTINGS
    @given(content=mutated([_record_seed(proc.pid, victim)]), argv=st.sampled_from([["slurm", "down"],
                                                                                  ["slurm", "status", "--json"]]))
    def case(content, argv):
        (private / "slurm.json").write_bytes(content)
        out = run_cli(argv, cwd=WORK)
        _check(out, f"record {content[:300]!r}")
        assert proc.poll() is None, f"`slurm down` killed a process it did not start: {content!r}"
        assert (victim / "precious").exists(), f"`slurm down` removed a directory it did not make: {content!r}"

    case()
