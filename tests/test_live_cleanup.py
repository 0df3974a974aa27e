"""The clean-up machinery every real experiment shares (courselib.live.cleanup)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from courselib.errors import InputError
from courselib.live import cleanup


def test_sigterm_inside_becomes_keyboard_interrupt_and_the_old_handler_comes_back():
    before = signal.getsignal(signal.SIGTERM)
    ran_finally = []
    with pytest.raises(KeyboardInterrupt):
        with cleanup.sigterm_as_interrupt():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
            finally:
                ran_finally.append(True)
    assert ran_finally == [True]
    assert signal.getsignal(signal.SIGTERM) is before


def test_stop_pids_kills_a_process_that_ignores_sigterm():
    child = subprocess.Popen([sys.executable, "-c",
                              "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
                              "print('ready', flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "ready"
    assert cleanup.alive(child.pid)
    assert cleanup.stop_pids([child.pid], grace=0.3) == []
    assert not cleanup.alive(child.pid)   # gone, and reaped by stop_pids (no zombie left)


def test_write_recorded_never_overwrites(tmp_path):
    path = cleanup.write_recorded(tmp_path / "run.json", {"a": 1})
    assert cleanup.json.loads(path.read_text()) == {"a": 1}
    with pytest.raises(InputError, match="not overwritten"):
        cleanup.write_recorded(path, {"a": 2})
    assert cleanup.json.loads(path.read_text()) == {"a": 1}


def test_load_recorded_reads_the_shipped_recordings():
    assert "runs" in cleanup.load_recorded("oom_real.json")
