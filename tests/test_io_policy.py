"""The input policy (courselib.io.policy) and the bounded YAML loader (courselib.io.yamlfile):
regular files only, a size cap per kind saying how to raise it, located decoding errors, YAML
nesting and alias budgets, duplicate keys with both lines."""
from __future__ import annotations

import gzip
import io
import os
import signal
import tarfile
from pathlib import Path

import pytest

from courselib.errors import InputError
from courselib.io import policy
from courselib.io.yamlfile import duplicate_keys, load_all_text


@pytest.fixture(autouse=True)
def _alarm():
    """A reader that blocks (a FIFO opened for reading) fails the test instead of hanging it."""
    def boom(signum, frame):
        raise TimeoutError("the reader blocked")
    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def test_a_named_pipe_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="is a named pipe, not a regular file.*regular files only"):
        policy.read_text(fifo, "manifest")


@pytest.mark.parametrize("path,what", [("/dev/zero", "character device"), ("/dev/null", "character device")])
def test_a_device_is_refused(path, what):
    with pytest.raises(InputError, match=what):
        policy.read_bytes(path, "workload")


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(InputError, match="directory"):
        policy.read_text(tmp_path, "sbatch")


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        policy.read_text(tmp_path / "nope.sbatch", "sbatch")


def test_size_cap_names_itself_and_how_to_raise_it(tmp_path, monkeypatch):
    big = tmp_path / "big.sbatch"
    with open(big, "wb") as fh:
        fh.truncate(200 * 2 ** 20)  # sparse: refused from its size, never read
    with pytest.raises(InputError) as err:
        policy.read_text(big, "sbatch")
    msg = str(err.value)
    assert "200.0 MiB is more than courselib reads of an sbatch script (1.0 MiB)" in msg
    assert "COURSELIB_MAX_SBATCH_BYTES=SIZE" in msg and str(big) in msg
    small = tmp_path / "s.sbatch"
    small.write_text("x" * 3000)
    monkeypatch.setenv("COURSELIB_MAX_SBATCH_BYTES", "2Ki")
    with pytest.raises(InputError, match=r"2.9 KiB is more .* \(2.0 KiB\)"):
        policy.read_text(small, "sbatch")
    monkeypatch.setenv("COURSELIB_MAX_SBATCH_BYTES", "4Ki")
    assert policy.read_text(small, "sbatch") == "x" * 3000


@pytest.mark.parametrize("bad", ["lots", "-1", "0", "1.5x"])
def test_a_bad_limit_setting_is_itself_a_clear_error(tmp_path, monkeypatch, bad):
    (tmp_path / "f").write_text("x")
    monkeypatch.setenv("COURSELIB_MAX_SBATCH_BYTES", bad)
    with pytest.raises(InputError, match="COURSELIB_MAX_SBATCH_BYTES"):
        policy.read_text(tmp_path / "f", "sbatch")


def test_every_kind_has_a_cap_and_an_env_name():
    for kind, cap in policy.FILE_LIMITS.items():
        assert cap.value > 0 and cap.env.startswith("COURSELIB_MAX_") and cap.unit == "bytes", kind
    assert len({c.env for c in policy.MODEL_LIMITS.values()}) == len(policy.MODEL_LIMITS)


def test_decoding_error_is_located(tmp_path):
    f = tmp_path / "w.yaml"
    f.write_bytes(b"cluster:\n  nodes: 2\n  na\xffme: x\n")
    with pytest.raises(InputError) as err:
        policy.read_text(f, "workload")
    assert str(err.value).startswith(f"{f}:3: not UTF-8 text (byte 0xff at column 5)")


def test_model_limit_check_is_located_and_names_the_limit():
    with pytest.raises(InputError) as err:
        policy.check_count("nodes", 10 ** 100, file="w.yaml", line=1, field="cluster.nodes")
    msg = str(err.value)
    assert msg.startswith("w.yaml:1: cluster.nodes: a 101-digit number is more than courselib accepts "
                          "for the nodes of a cluster (100,000 nodes)")
    assert "COURSELIB_MAX_NODES=N" in msg
    policy.check_count("nodes", 100_000)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 10 ** 400, "1", True])
def test_finite_refuses_what_is_not_a_number(value):
    with pytest.raises(InputError):
        policy.finite(value, field="x")


def test_finite_minimum():
    assert policy.finite(0.5, field="x", minimum=0) == 0.5
    with pytest.raises(InputError, match="below 0"):
        policy.finite(-1, field="x", minimum=0)


# ---------------------------------------------------------------- YAML

def _laughs(levels: int = 9) -> str:
    text = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    prev = "a"
    for k in "bcdefghijk"[:levels - 1]:
        text += f"{k}: &{k} [" + ",".join([f"*{prev}"] * 9) + "]\n"
        prev = k
    return text


def test_billion_laughs_is_refused_at_the_line_that_explodes():
    with pytest.raises(InputError) as err:
        load_all_text(_laughs(), file="bomb.yaml")
    assert str(err.value).startswith("bomb.yaml:5: *d: YAML aliases here expand to more than 10,000 nodes")
    assert "COURSELIB_MAX_YAML_ALIAS_NODES" in str(err.value)


def test_ordinary_aliases_and_merge_keys_still_load():
    docs = load_all_text("base: &b {x: 1, y: 2}\none:\n  <<: *b\n  x: 5\ntwo: *b\n")
    assert docs[0]["one"] == {"x": 5, "y": 2} and docs[0]["two"] == {"x": 1, "y": 2}
    assert duplicate_keys(docs[0]) == []  # overriding a merged key is what '<<' is for


def test_a_recursive_alias_is_refused():
    with pytest.raises(InputError, match=r"^f:1: the alias \*a refers to a node that contains it"):
        load_all_text("a: &a [1, *a]\n", file="f")


@pytest.mark.parametrize("text,line", [
    ("[" * 500 + "]" * 500, 1),
    ("[" * 10_000 + "]" * 10_000, 1),
    ("{a: " * 10_000 + "1" + "}" * 10_000, 1),
    ("".join("  " * i + f"k{i}:\n" for i in range(2000)) + "  " * 2000 + "v\n", 101),
    ("- " * 5000 + "x\n", 1),
])
def test_deep_nesting_is_a_located_error_not_a_traceback(text, line):
    with pytest.raises(InputError) as err:
        load_all_text(text, file="deep.yaml")
    assert str(err.value).startswith(f"deep.yaml:{line}: nested more than 100 levels deep")


def test_nesting_at_the_limit_loads():
    assert load_all_text("[" * 100 + "]" * 100)


def test_duplicate_key_is_an_error_with_both_lines():
    with pytest.raises(InputError) as err:
        load_all_text("cluster: {nodes: 2, gpus_per_node: 8}\njobs: []\ncluster: {nodes: 100}\n", file="w.yaml")
    assert str(err.value).startswith("w.yaml:3: cluster: key 'cluster' appears twice (lines 1 and 3)")


def test_duplicate_keys_can_be_kept_for_a_finding():
    docs = load_all_text("a:\n  b: 1\n  c: 2\n  b: 3\n  b: 4\n", duplicates="keep")
    assert docs[0]["a"]["b"] == 4
    assert duplicate_keys(docs[0]) == [("a.b", "b", [2, 4, 5])]


# ---------------------------------------------------------------- readers use the policy

def test_every_reader_refuses_a_device_and_a_fifo(tmp_path):
    from courselib.io.dockerfile import read_dockerfile
    from courselib.io.manifests import read_manifests
    from courselib.io.pod import read_pods
    from courselib.io.sbatch import read_sbatch
    from courselib.io.scenario import read_scenario
    from courselib.io.traces import read_trace
    from courselib.io.workload import load_workload
    from courselib.grading.build import read_notebook
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for reader in (read_dockerfile, read_manifests, read_pods, read_sbatch, read_scenario, read_trace,
                   load_workload, read_notebook):
        for path in ("/dev/zero", fifo):
            with pytest.raises(InputError, match="not a regular file"):
                reader(path)


def test_manifest_duplicate_keys_are_problems_with_both_lines(tmp_path):
    from courselib.io.manifests import read_manifests
    f = tmp_path / "job.yaml"
    f.write_text("apiVersion: batch/v1\nkind: Job\nmetadata: {name: a}\nspec:\n  parallelism: 4\n"
                 "  parallelism: 2\n  template:\n    spec:\n      containers: [{name: c, image: i}]\n")
    (r,) = read_manifests(f, validate=False)
    assert r.gang_size == 2
    assert any(ln == 6 and fld == "spec.parallelism" and "lines 5, 6" in msg for ln, fld, msg in r.problems)


def test_a_gzip_bomb_trace_is_refused(tmp_path, monkeypatch):
    payload = io.BytesIO()
    with tarfile.open(fileobj=payload, mode="w") as tar:
        info = tarfile.TarInfo("jobs.csv")
        info.size = 8 * 2 ** 20
        tar.addfile(info, io.BytesIO(b"0" * info.size))
    bomb = tmp_path / "t.tar.gz"
    bomb.write_bytes(gzip.compress(payload.getvalue()))
    assert bomb.stat().st_size < 100_000
    monkeypatch.setenv("COURSELIB_MAX_TRACE_BYTES", "1Mi")
    from courselib.io.traces import read_trace
    with pytest.raises(InputError, match="unpacks to more than 1.0 MiB"):
        read_trace(bomb)


def test_lint_applies_the_cap_of_the_kind_it_found(tmp_path, monkeypatch):
    from courselib.cli.files import lint_file
    f = tmp_path / "train.sbatch"
    f.write_text("#!/bin/bash\n#SBATCH -N1\n" + "# padding\n" * 500)
    monkeypatch.setenv("COURSELIB_MAX_SBATCH_BYTES", "1Ki")
    with pytest.raises(InputError, match="an sbatch script"):
        lint_file(str(f))
    assert Path(f).exists()
