"""Run one ``courselib`` command on hostile input inside a time and memory budget (issue 23).

:func:`run_cli` forks this process (courselib and its readers are imported once, so a case
costs milliseconds, not a Python start-up), limits the child's address space with
``RLIMIT_AS`` and its wall time with a kill, and calls the CLI's own ``main(argv)``. The
outcome says whether it stayed in budget, its exit status and what it printed.

:func:`write_corpus` writes the hostile files the suite feeds every command: devices, a named
pipe, a directory, a sparse 200 MB file, a billion-laughs document, 10,000-level nesting,
duplicate keys, numbers with hundreds of digits, NaN, binary junk, bad UTF-8 and more. Every
file is made here, from code: the repository ships no hostile files.
"""
from __future__ import annotations

import io
import os
import resource
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

#: Wall-clock seconds one case may take. Generous for a loaded two-core CI machine: every case
#: here either fails at once or reads a few kilobytes.
TIME_BUDGET_S = 20.0
#: Address space one case may add to this process (RLIMIT_AS): a reader that tries to hold
#: /dev/zero or a 10**100-node cluster in memory hits it at once instead of the machine's OOM killer.
MEMORY_BUDGET = 1 << 30
_warmed: list[bool] = []
UNCAUGHT = 99   # the exit status the harness gives a child that raised (never one of courselib's)


@dataclass
class Outcome:
    argv: list[str]
    status: int | None      # None: killed at the time budget
    seconds: float
    stdout: str
    stderr: str
    budget_s: float = TIME_BUDGET_S

    @property
    def traceback(self) -> bool:
        return "Traceback (most recent call last)" in self.stderr or self.status == UNCAUGHT

    @property
    def timed_out(self) -> bool:
        return self.status is None

    def problem(self) -> str | None:
        """Why this outcome breaks the promise (None if it keeps it)."""
        if self.timed_out:
            return f"ran past its {self.budget_s:g} s budget"
        if self.traceback:
            tail = self.stderr.strip().splitlines()[-1:] or ["?"]
            return f"ended in a traceback: {tail[0][:300]}"
        if self.status not in (0, 1, 2):
            return f"exit status {self.status} (only 0, 1 and 2 are promised)"
        return None

    def describe(self) -> str:
        return (f"courselib {' '.join(self.argv)}: status {self.status}, {self.seconds:.2f} s\n"
                f"--- stderr ---\n{self.stderr[-2000:]}\n--- stdout ---\n{self.stdout[-1000:]}")


#: What the commands import lazily, imported once here so that each forked case starts warm.
WARM = ("courselib.cli.main", "courselib.io.workload", "courselib.io.scenario", "courselib.io.pod",
        "courselib.io.manifests", "courselib.io.sbatch", "courselib.io.dockerfile", "courselib.io.traces",
        "courselib.sim.gang", "courselib.sim.memcg", "courselib.model.qos", "courselib.model.replay",
        "courselib.model.lint", "courselib.lint", "courselib.live.slurm", "courselib.live.slurm_replay",
        "courselib.grading.grade", "courselib.model.policies.kube_default", "courselib.model.policies.volcano",
        "courselib.model.policies.kueue", "courselib.model.policies.slurm_fast", "yaml", "nbformat")


def warm() -> None:
    """Import what the commands need (and build the CLI's parser) in this process, once."""
    import importlib
    for name in WARM:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    from courselib.cli.main import build_parser
    build_parser()
    from courselib.io.yamlfile import load_all_text
    load_all_text("a: 1\n")


def _vm_size() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


def _courselib_main(argv: list[str]) -> int:
    from courselib.cli.main import main
    return main(argv)


def _child(argv: list[str], cwd: Path, out_fd: int, err_fd: int, memory: int, entry) -> int:
    os.setpgid(0, 0)                  # its own process group: a budget kill takes its children too
    os.chdir(cwd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    sys.stdin = open(0, closefd=False)
    sys.stdout = io.TextIOWrapper(open(1, "wb", closefd=False), encoding="utf-8", line_buffering=True)
    sys.stderr = io.TextIOWrapper(open(2, "wb", closefd=False), encoding="utf-8", line_buffering=True)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGALRM):
        signal.signal(sig, signal.SIG_DFL)
    limit = _vm_size() + memory
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        status = entry(argv)
    except SystemExit as exc:       # argparse: 2 for a usage error, 0 for --help
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except BaseException:           # anything else is what the suite exists to find
        traceback.print_exc()
        status = UNCAUGHT
    sys.stdout.flush()
    sys.stderr.flush()
    return int(status) & 0xFF


def run_cli(argv: list[str], *, cwd: Path, budget_s: float = TIME_BUDGET_S,
            memory: int = MEMORY_BUDGET, entry=_courselib_main) -> Outcome:
    """``courselib ARGV`` in a forked child, within ``budget_s`` seconds and ``memory`` bytes
    (``entry`` replaces courselib's ``main`` only to test the harness itself)."""
    if not _warmed:
        warm()
        _warmed.append(True)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            status = UNCAUGHT
            try:
                status = _child(argv, cwd, out.fileno(), err.fileno(), memory, entry)
            finally:
                os._exit(status)
        status: int | None = None
        while True:
            done, raw = os.waitpid(pid, os.WNOHANG)
            if done:
                status = os.waitstatus_to_exitcode(raw)
                break
            if time.monotonic() - start > budget_s:
                break
            time.sleep(0.005)
        seconds = time.monotonic() - start
        for target in (-pid, pid):    # the child's group (what it started), then the child itself
            try:
                os.kill(target, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if status is None:
            os.waitpid(pid, 0)
        out.seek(0)
        err.seek(0)
        return Outcome(list(argv), status, seconds, out.read().decode("utf-8", "replace"),
                       err.read().decode("utf-8", "replace"), budget_s)


# ------------------------------------------------------------------------------ the corpus

def _laughs(indent: str = "") -> str:
    text = indent + 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    prev = "a"
    for k in "bcdefghi":
        text += indent + f"{k}: &{k} [" + ",".join([f"*{prev}"] * 9) + "]\n"
        prev = k
    return text


HUGE = "9" * 400


def write_corpus(d: Path) -> dict[str, Path]:
    """Hostile inputs by name (written into ``d``); devices are named as they are."""
    d.mkdir(parents=True, exist_ok=True)
    files: dict[str, str | bytes] = {
        "empty.yaml": "",
        "null.yaml": "~\n",
        "scalar.yaml": "just a string\n",
        "list.yaml": "- 1\n- 2\n",
        "binary.bin": bytes(range(256)) * 8,
        "nul.yaml": "cluster:\x00 {nodes: 1}\n",
        "latin1.sbatch": b"#!/bin/bash\n#SBATCH -N1\n# caf\xe9\nsrun x\n",
        "bom.yaml": "\ufeffcluster: {nodes: 1, gpus_per_node: 8}\n",
        "crlf.sbatch": "#!/bin/bash\r\n#SBATCH -N2 --gres=gpu:8\r\nsrun x\r\n",
        "longline.yaml": "a: " + "x" * 300_000 + "\n",
        "laughs.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n" + _laughs("  "),
        "laughs-workload.yaml": _laughs() + "cluster: {nodes: 1, gpus_per_node: 8}\njobs: *i\n",
        "recursive.yaml": "a: &a [1, *a]\n",
        "deep-seq-500.yaml": "[" * 500 + "]" * 500 + "\n",
        "deep-seq-10000.yaml": "[" * 10_000 + "]" * 10_000 + "\n",
        "deep-map-10000.yaml": "{a: " * 10_000 + "1" + "}" * 10_000 + "\n",
        "deep-block-2000.yaml": "".join("  " * i + f"k{i}:\n" for i in range(2000)) + "  " * 2000 + "v\n",
        "dup-keys.yaml": "cluster: {nodes: 2, gpus_per_node: 8}\njobs:\n"
                         "  - {name: a, pods: 1, gpus_per_pod: 8, duration: 1h}\ncluster: {nodes: 100, gpus_per_node: 8}\n",
        "nodes-googol.yaml": f"cluster: {{nodes: {10 ** 100}, gpus_per_node: 8}}\n"
                             "jobs:\n  - {name: a, pods: 1, gpus_per_pod: 8, duration: 1h}\n",
        "gpus-googol.yaml": f"cluster: {{nodes: 2, gpus_per_node: {10 ** 100}}}\n"
                            "jobs:\n  - {name: a, pods: 1, gpus_per_pod: 8, duration: 1h}\n",
        "pods-googol.yaml": f"cluster: {{nodes: 2, gpus_per_node: 8}}\n"
                            f"jobs:\n  - {{name: a, pods: {10 ** 100}, gpus_per_pod: 8, duration: 1h}}\n",
        "duration-huge.yaml": "cluster: {nodes: 2, gpus_per_node: 8}\n"
                              "jobs:\n  - {name: a, pods: 1, gpus_per_pod: 8, duration: 1e308}\n",
        "duration-nan.yaml": "cluster: {nodes: 2, gpus_per_node: 8}\n"
                             "jobs:\n  - {name: a, pods: 1, gpus_per_pod: 8, duration: .nan}\n",
        # one past the limits (the 10,000 containers and 20,000 processes are refused the
        # same way; the suite keeps to the smallest file that crosses the line)
        "pod-1001-containers.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n" + "".join(
            f"    - {{name: c{i}, image: i, resources: {{limits: {{memory: 1Gi}}}}}}\n" for i in range(1001)),
        "pod-memory-huge.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
                                f"    - {{name: c, image: i, resources: {{limits: {{memory: {HUGE}Gi, nvidia.com/gpu: {HUGE}}}}}}}\n",
        "hetjob-100000.sbatch": "#!/bin/bash\n" + "#SBATCH -N1 --gres=gpu:1\n#SBATCH hetjob\n" * 20_000 + "srun x\n",
        "gres-negative.sbatch": "#!/bin/bash\n#SBATCH -N2 --gres=gpu:-1\nsrun x\n",
        "gres-fraction.sbatch": "#!/bin/bash\n#SBATCH -N2 --gres=gpu:1.5\nsrun x\n",
        "mem-bad.sbatch": "#!/bin/bash\n#SBATCH -N2 --mem=10Gx\nsrun x\n",
        "sbatch-huge-numbers.sbatch": f"#!/bin/bash\n#SBATCH -N{HUGE} --gpus-per-node={HUGE} --time={HUGE}\n"
                                      f"#SBATCH --array=0-{HUGE}\nsrun x\n",
        "oom-step-1ns.yaml": "limit: 1Gi\nduration: 60s\nstep: 0.000000001s\nprocesses:\n  - {name: a, rss: 100p, grow: 1Mi}\n",
        "oom-duration-1e308.yaml": "limit: 1Gi\nduration: 1e308s\nprocesses:\n  - {name: a, rss: 100p, grow: 1Mi}\n",
        "oom-limit-huge.yaml": f"limit: {HUGE}Gi\nprocesses:\n  - {{name: a, rss: {HUGE}p}}\n",
        "oom-many-processes.yaml": "limit: 1Gi\nprocesses:\n" + "".join(
            f"  - {{name: p{i}, rss: 10p}}\n" for i in range(10_001)),
        "swf-nan.swf": "; MaxProcs: nan\n1 0 0 10 4 -1 -1 4 20 -1 1 1 1 1 1 1 -1 -1\n",
        "swf-inf.swf": "; MaxProcs: 1e400\n; MaxNodes: -5\n1 0 0 10 4 -1 -1 4 20 -1 1 1 1 1 1 1 -1 -1\n",
        "swf-huge.swf": f"; MaxProcs: {HUGE}\n1 0 0 10 4 -1 -1 4 20 -1 1 1 1 1 1 1 -1 -1\n",
        "swf-huge-fields.swf": f"; MaxProcs: 8\n1 {HUGE} 0 {HUGE} {HUGE} -1 -1 {HUGE} nan -1 1 1 1 1 1 1 -1 -1\n"
                               "2 inf 0 nan 4 -1 -1 4 -inf -1 1 1 1 1 1 1 -1 -1\n",
        "csv-trace-junk.csv": "job_id,num_gpu,submit_time,duration\n1,nan,inf,-1\n2," + HUGE + ",0,1e999\n",
        "dockerfile-junk": "FROM\nRUN " + "\\\n" * 5000 + "\nCOPY --from=" + HUGE + " a b\n",
        "notebook-junk.ipynb": '{"cells": [' * 3000 + "]" * 3000 + "}",
        "notebook-not.ipynb": '{"nbformat": 4, "cells": "nope"}',
        "state-not-json.json": "{not json",
        "state-pid-abc.json": '{"shape": {"nodes": 1, "gpus_per_node": 0}, "state_dir": "/", '
                              '"procs": [{"role": "munged", "pid": "abc", "argv": []}]}',
    }
    out: dict[str, Path] = {}
    for name, content in files.items():
        p = d / name
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content, encoding="utf-8")
        out[name] = p
    fifo = d / "pipe.yaml"
    if not fifo.exists():
        os.mkfifo(fifo)
    out["pipe.yaml"] = fifo
    sparse = d / "sparse-200MB.yaml"
    with open(sparse, "wb") as fh:
        fh.truncate(200 * 2 ** 20)
    out["sparse-200MB.yaml"] = sparse
    (d / "a-directory.yaml").mkdir(exist_ok=True)
    out["a-directory.yaml"] = d / "a-directory.yaml"
    out["/dev/zero"] = Path("/dev/zero")
    out["/dev/urandom"] = Path("/dev/urandom")
    out["missing.yaml"] = d / "missing.yaml"
    return out
