"""courselib's layer-cache model against a real builder (buildah --layers): a differential test.

Each scenario is built, changed and rebuilt for real; for every step the builder's own verdict
("Using cache" or not) must equal courselib's prediction. Nothing is left behind.
"""
from __future__ import annotations

import json
import time
import subprocess
import sys
from pathlib import Path

import pytest

from courselib.errors import InputError
from courselib.live.container import rebuild as rb, runtime as container

REASON = container.unavailable_reason(builder=True)
real = pytest.mark.skipif(REASON is not None, reason=f"real image builds cannot run here: {REASON}")

BUILDAH_OUTPUT = """\
[1/2] STEP 1/3: FROM localhost/courselib/cuda-stand-in:busybox AS builder
[1/2] STEP 2/3: COPY build.sh .
--> Using cache 0f3e7bd74567bd252f4d49d1cf93fd19b718e25da9a8b0df5bda50d0720c37a2
--> 0f3e7bd7456
[1/2] STEP 3/3: RUN cp build.sh /artifact
--> b10c1b9e22f
[2/2] STEP 1/2: FROM localhost/courselib/cuda-stand-in:busybox
[2/2] STEP 2/2: CMD ["sh"]
COMMIT app:1
--> 9ff9be9c6c3
Successfully tagged localhost/app:1
9ff9be9c6c3a63ee54b43cf88cdf6ee34ad1de7ff43e1482d34d9e2642f40fb1
"""


def test_the_builders_output_is_read_step_by_step():
    steps = rb.parse_build_output(BUILDAH_OUTPUT)
    assert [(s.stage, s.number, s.cached) for s in steps] == [(0, 1, None), (0, 2, True), (0, 3, False),
                                                              (1, 1, None), (1, 2, False)]
    assert steps[1].layer.startswith("0f3e7bd7") and steps[2].layer == "b10c1b9e22f"
    assert steps[4].layer == "9ff9be9c6c3"


@pytest.mark.parametrize("line, n, new", [
    ("ARG V=1\n", 1, "ARG V=1-edited\n"), ("RUN make \\\n  && x\n", 1, "RUN make && true \\\n  && x\n"),
    ("# c\n", 1, "# c courselib-edit\n"), ("\n", 1, "# courselib-edit\n"),
])
def test_default_line_edits_keep_the_dockerfile_valid(line, n, new):
    assert rb.edit_line(line, n)[0] == new


def test_bad_requests_are_one_line_errors(tmp_path):
    with pytest.raises(InputError, match="not a directory"):
        rb.rebuild(tmp_path / "missing", changed=["a"])
    (tmp_path / "Dockerfile").write_text("FROM x\nCOPY a .\n")
    with pytest.raises(InputError, match="nothing to change"):
        rb.rebuild(tmp_path)
    with pytest.raises(InputError, match="inside the build context"):
        rb.rebuild(tmp_path, changed=["../etc/passwd"])
    with pytest.raises(InputError, match="no harmless default edit"):
        rb.edit_line("FROM x\nCOPY a .\n", 2)


def test_the_differential_suite_covers_what_the_issue_names():
    names = " | ".join(s["name"] for s in rb.SCENARIOS)
    assert len(rb.SCENARIOS) >= 12
    for must in ("code first", ".dockerignore", "ARG", "multi-stage", "FROM another stage"):
        assert must in names


@pytest.mark.real
@real
@pytest.mark.parametrize("scenario", rb.SCENARIOS, ids=lambda s: s["name"])
def test_courselib_predicts_the_real_builders_cache_exactly(scenario, tmp_path):
    from test_container_live import _left_behind, _ours_left
    before = _ours_left()
    d = rb.run_scenario(scenario, tmp_path)
    bad = [f"step {r['step']} line {r['line']} {r['text']}: predicted {r['predicted']}, builder {r['real']}"
           for r in d["rows"] if not r["agree"]]
    assert not bad, "\n".join(bad)
    assert d["agreement"] == 1.0
    assert not _left_behind(before)


@pytest.mark.real
@real
def test_the_cli_compares_and_exits_1_only_below_full_agreement(tmp_path):
    ctx = rb.write_context(tmp_path / "ctx", rb.SCENARIOS[1]["files"])
    res = subprocess.run([sys.executable, "-m", "courselib", "docker", "rebuild", str(ctx), "--changed", "train.py",
                          "--compare", "--json"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    assert d["comparison"]["agreement"] == 1.0
    assert [b["label"] for b in d["builds"]][0].startswith("first build")
    assert (ctx / "train.py").read_text() == rb.SCENARIOS[1]["files"]["train.py"]   # the user's files untouched


def test_the_recorded_suite_still_agrees_with_todays_model():
    """The chapter's differential table: builder verdicts recorded on CI, predictions computed now."""
    rec = container.recorded("rebuild")
    by_name = {s["name"]: s for s in rb.SCENARIOS}
    assert {r["name"] for r in rec["differential"]} == set(by_name), "re-record: courselib docker rebuild-suite"
    for r in rec["differential"]:
        assert rb.predicted_now(by_name[r["name"]]) == [row["real"] for row in r["rows"]], r["name"]
    assert rec["table"]["agreed"] == rec["table"]["scenarios"] == len(rb.SCENARIOS)


def test_the_recorded_seed_run_is_what_the_chapter_needs():
    rec = container.recorded("seed")
    deps, code = rec["deps_first"], rec["code_first"]
    assert [c["edit"] for c in deps["comparisons"]] == [e.describe() for e in rb.SEED_EDITS]
    assert all(c["agreement"] == 1.0 for c in deps["comparisons"] + code["comparisons"])
    assert deps["builds"][1]["ran"] == 0                                 # nothing changed: all cached
    assert code["builds"][-1]["seconds"] > deps["builds"][2]["seconds"]  # code first reinstalls


LIMIT = """\
FROM nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04 AS builder
COPY train.py .
RUN echo same-bytes > /artifact
FROM nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04
COPY --from=builder /artifact /artifact
CMD ["sh"]
"""


@pytest.mark.real
@real
def test_the_models_one_known_limit_is_caught_and_exits_1(tmp_path):
    """A RUN that runs again but writes the same bytes: the builder reuses the COPY --from, the model
    cannot know and predicts a rebuild. --compare must say so and exit 1 (the suite avoids this case)."""
    ctx = rb.write_context(tmp_path / "ctx", {"Dockerfile": LIMIT, "train.py": "print(1)\n"})
    res = subprocess.run([sys.executable, "-m", "courselib", "docker", "rebuild", str(ctx), "--changed", "train.py",
                          "--compare", "--json"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 1, res.stderr
    rows = json.loads(res.stdout)["comparison"]["rows"]
    bad = [r for r in rows if not r["agree"]]
    assert [(r["instruction"], r["predicted"], r["real"]) for r in bad] == [("COPY", "rebuild", "cached"),
                                                                          ("CMD", "rebuild", "cached")]


@pytest.mark.real
@real
def test_sigterm_during_a_build_leaves_no_storage_root_behind(tmp_path):
    import os
    import signal
    import tempfile
    import time
    from test_container_live import _left_behind, _ours_left
    before = _ours_left()
    tmp_before = set(os.listdir(tempfile.gettempdir()))
    ctx = rb.write_context(tmp_path / "ctx", {"Dockerfile": "FROM nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04\n"
                                                            "RUN sleep 30\n", "a": "a\n"})
    proc = subprocess.Popen([sys.executable, "-m", "courselib", "docker", "rebuild", str(ctx), "--changed", "a"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    storage = []
    while time.monotonic() < deadline and not storage:
        storage = [d for d in set(_ours_left()["dirs"]) - set(before["dirs"])
                   if (Path(d) / "storage" / "vfs").is_dir()]
        time.sleep(0.1)
    assert storage, "the build never started"
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert not _left_behind(before)
    # buildah's own temporary directory goes with the workspace (it was left in TMPDIR: buildahNNN)
    assert not [f for f in set(os.listdir(tempfile.gettempdir())) - tmp_before if f.startswith("buildah")]


def test_a_context_holding_a_fifo_or_too_many_bytes_is_refused_before_anything_is_copied(tmp_path, monkeypatch):
    import os
    ctx = rb.write_context(tmp_path / "ctx", {"Dockerfile": "FROM x\nCOPY . .\n", "data.bin": "x" * 5000})
    monkeypatch.setenv("COURSELIB_MAX_CONTEXT_BYTES", "4Ki")
    with pytest.raises(InputError, match="COURSELIB_MAX_CONTEXT_BYTES"):
        rb.rebuild(ctx, changed=["data.bin"])
    monkeypatch.delenv("COURSELIB_MAX_CONTEXT_BYTES")
    os.mkfifo(ctx / "pipe")
    with pytest.raises(InputError) as e:
        rb.rebuild(ctx, changed=["data.bin"])
    assert e.value.file.endswith("pipe") and "not a regular file" in e.value.message


def test_a_live_run_out_of_time_gives_the_recorded_run_and_says_why(monkeypatch):
    """A page's cell has a time limit: real builds that would pass it stop and the recording is shown."""
    from courselib.live import recorded
    from courselib.live.container import runtime as container
    monkeypatch.setattr(container, "unavailable_reason", lambda builder=False: None)

    def too_slow():
        rb._left(time.monotonic() - 1, "first build (cold cache)")

    d, why = recorded.live_or_recorded(container.source("seed", too_slow))
    assert d["recorded"] and "did not finish in time" in why
    assert "first build (cold cache)" in why and "deps_first" in d
    assert rb._left(time.monotonic() + 30, "x") > 28
    with pytest.raises(container.OutOfTime):
        rb._left(time.monotonic(), "y")
    # any other failure is not hidden behind the recording
    def broken():
        raise container.CourseError("the real build failed (first build): no space left")
    with pytest.raises(container.CourseError, match="no space left"):
        recorded.live_or_recorded(container.source("seed", broken))
