"""The student's side of grading: ``python -m courselib.grading.worker FD`` (started by the sandbox).

This process runs the lab's given cells and the student's answer cells in an IPython shell, exactly
as a notebook would, and answers three requests from the grader over the socket on file descriptor
FD (8-byte length, then JSON):

- ``run``: run one cell; reply whether it raised (``[exception name, message]``);
- ``export``: the named answers as data (:func:`courselib.grading.encode.encode`);
- ``probe``: define one of a check's ``@probe`` functions here (the instructor's source) and call it
  with the given data; reply with its result as data.

Nothing here is trusted: the student's code runs in this process and can change anything in it,
including this loop. The grader only ever reads data from it, and decides every mark elsewhere.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys

from courselib.grading.encode import decode, encode

MAX_MESSAGE = 64 * 1024 * 1024


def recv(sock) -> dict | None:
    head = _read(sock, 8)
    if head is None:
        return None
    (size,) = struct.unpack(">Q", head)
    if size > MAX_MESSAGE:
        raise ValueError("message too large")
    body = _read(sock, size)
    return None if body is None else json.loads(body.decode("utf-8"))


def _read(sock, n: int) -> bytes | None:
    chunks, left = [], n
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def send(sock, message: dict) -> None:
    body = json.dumps(message, separators=(",", ":")).encode("utf-8")
    sock.sendall(struct.pack(">Q", len(body)) + body)


def _error(err: BaseException) -> list[str]:
    try:
        text = str(err)
    except BaseException:  # noqa: BLE001
        text = ""
    return [type(err).__name__, text[:4000]]


def _shell():
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.enabled = False
    config.InteractiveShell.colors = "nocolor"
    # IPython's own folder in the private TMPDIR (gone with the sandbox), not in the student's HOME
    return InteractiveShell.instance(config=config, ipython_dir=os.path.join(os.environ.get("TMPDIR", "/tmp"), "ipython"))


def main(argv: list[str]) -> int:
    sock = socket.socket(fileno=int(argv[0]))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    shell = _shell()
    ns = shell.user_ns
    send(sock, {"id": 0, "ready": True})
    while True:
        try:
            msg = recv(sock)
        except KeyboardInterrupt:    # an interrupt that arrived between requests
            continue
        if msg is None or msg.get("op") == "bye":
            return 0
        reply: dict = {"id": msg.get("id")}
        try:
            op = msg["op"]
            if op == "run":
                result = shell.run_cell(msg["source"], store_history=False)
                err = result.error_before_exec or result.error_in_exec
                reply["error"] = None if err is None else _error(err)
            elif op == "export":
                reply["values"] = {name: (encode(ns[name]) if name in ns else {"$missing": True})
                                   for name in msg["names"]}
            elif op == "probe":
                exec(compile(msg["source"], f"<check {msg['name']}>", "exec"), ns)  # noqa: S102
                fn = ns[msg["name"]]
                args = decode(msg.get("args", []))
                kwargs = decode(msg.get("kwargs", {"$dict": []}))
                reply["value"] = encode(fn(*args, **kwargs))
            else:
                reply["error"] = ["ValueError", f"unknown request {op!r}"]
        except BaseException as err:  # noqa: BLE001 — the student's code may raise anything
            reply["error"] = _error(err)
        try:
            send(sock, reply)
        except KeyboardInterrupt:
            send(sock, reply)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
