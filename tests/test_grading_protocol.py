"""The worker channel under fuzzing (issue 36): whatever the student's process sends — bytes that are
not JSON, JSON of any shape, nesting past what a parser can follow, frames larger than the limit —
the grader reads a reply of the expected shape, skips noise, or stops that process with a reason.
It never raises anything else, never crashes, and decodes answers only into data."""
from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from courselib.grading import encode
from courselib.grading.sandbox import MAX_MESSAGE, Sandbox, Stopped, parse_reply
from budget import examples

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30)
tagged = st.dictionaries(st.sampled_from(["$tuple", "$set", "$frozenset", "$dict", "$dataclass", "$object",
                                          "$float", "$ellipsis", "fields", "type", "repr", "callable", "x"]),
                         json_values, max_size=3)


def _shape_ok(reply: dict, ident: int) -> None:
    assert reply["id"] == ident and isinstance(reply["ready"], bool)
    err = reply["error"]
    assert err is None or (isinstance(err, list) and len(err) == 2 and all(isinstance(x, str) for x in err))
    assert isinstance(reply.get("values", {}), dict)


@settings(max_examples=examples(400), deadline=None)
@given(st.one_of(json_values, st.dictionaries(st.sampled_from(["id", "error", "values", "value", "ready"]),
                                              json_values, max_size=5)), st.integers(0, 3))
def test_any_json_reply_is_read_in_shape_or_skipped(message, ident):
    reply = parse_reply(json.dumps(message).encode(), ident)
    if reply is not None:
        _shape_ok(reply, ident)


@settings(max_examples=examples(300), deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_are_skipped_or_read(body):
    try:
        reply = parse_reply(body, 1)
    except Stopped:
        return
    if reply is not None:
        _shape_ok(reply, 1)


@pytest.mark.parametrize("depth", [10_000, 200_000, 2_000_000])
def test_nesting_past_the_parser_stops_the_process_cleanly(depth):
    body = ("[" * depth + "]" * depth).encode()
    try:
        reply = parse_reply(body, 1)
    except Stopped as stop:
        assert "nested too deeply" in stop.detail
    else:
        assert reply is None           # a shallow enough list is just noise (not a reply object)
    deep = json.dumps({"id": 1, "value": None}).replace("null", "[" * 100_000 + "]" * 100_000).encode()
    with pytest.raises(Stopped, match="nested too deeply"):
        parse_reply(deep, 1)


@settings(max_examples=examples(400), deadline=None)
@given(st.one_of(json_values, tagged, st.lists(tagged, max_size=3)))
def test_decoding_any_data_gives_data_or_a_decode_error(data):
    try:
        value = encode.decode(data)
    except encode.DecodeError:
        return
    assert not callable(value) or isinstance(value, encode.StudentCallable)


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=64).map(lambda b: ("raw", b)),
                          json_values.map(lambda v: ("json", json.dumps(v).encode())),
                          st.integers(0, 5).map(lambda i: ("reply", json.dumps({"id": i, "error": None}).encode()))),
                max_size=6))
def test_frames_on_a_real_socket(frames):
    """A fake worker writes frames (noise, JSON, replies to other requests, then the awaited one)."""
    ours, theirs = socket.socketpair()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    box = Sandbox.__new__(Sandbox)          # only the channel: no process of the student's is started
    box.sock, box.proc, box.grace = ours, sleeper, 1.0
    box.kill_all = lambda *a, **k: None
    try:
        data = b"".join(struct.pack(">Q", len(body)) + body for _, body in frames)
        data += struct.pack(">Q", 30) + json.dumps({"id": 7, "error": ["E", "m"]}).encode().ljust(30)
        theirs.sendall(data)
        reply = box._receive(7, 10)
        assert reply["id"] == 7 and reply["error"] == ["E", "m"]
    finally:
        sleeper.kill()
        sleeper.wait()
        ours.close()
        theirs.close()


def test_a_frame_larger_than_the_limit_stops_the_process():
    ours, theirs = socket.socketpair()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    box = Sandbox.__new__(Sandbox)
    box.sock, box.proc, box.grace = ours, sleeper, 1.0
    box.kill_all = lambda *a, **k: None
    try:
        theirs.sendall(struct.pack(">Q", MAX_MESSAGE + 1))
        with pytest.raises(Stopped, match="more than"):
            box._receive(1, 10)
    finally:
        sleeper.kill()
        sleeper.wait()
        ours.close()
        theirs.close()


def test_a_grader_that_is_not_root_refuses_unless_same_user_is_asked_for(tmp_path, monkeypatch):
    """Fail closed: not root and no --same-user means the student's code does not run: zero points,
    with the reason on every question, and the report says nothing ran (no weaker sandbox)."""
    from pathlib import Path

    from courselib.grading import sandbox
    from courselib.grading.grade import grade

    root = Path(__file__).resolve().parents[1]
    solution = root / "solutions" / "08-gang-cost.ipynb"
    if not solution.is_file():
        pytest.skip("no solutions/ here")
    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 1000)
    path = tmp_path / solution.name
    path.write_bytes(solution.read_bytes())
    report = grade(path, source=solution)
    assert report.total == 0 and report.isolation == "none: the student's code did not run"
    assert all(q.feedback.startswith("not graded: the grader is not root") for q in report.questions if q.kind == "auto")
    assert any("--same-user" in n for n in report.notes)
