"""The clean-up machinery every real experiment shares (courselib.live.cleanup)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from courselib.errors import InputError
from courselib.live import cleanup, recorded


def test_sigterm_inside_becomes_keyboard_interrupt_and_the_old_handler_comes_back():
    before = signal.getsignal(signal.SIGTERM)
    ran_finally = []
    with pytest.raises(KeyboardInterrupt):
        with cleanup.cleanup_on_signals():
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


def _state(pid: int) -> str | None:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def test_a_child_whose_leader_exits_first_counts_as_alive_until_it_is_reaped():
    """A multi-threaded daemon (node, Go) can show its leader as a zombie while its other threads still
    exit; it cannot be reaped until they have. Seen in CI: configurable-http-proxy stopped by SIGTERM,
    judged gone while 'Z', never reaped, left to a PID 1 that does not reap. Here the leader calls
    pthread_exit while a thread sleeps on."""
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import ctypes, threading, time
        threading.Thread(target=time.sleep, args=(1.5,)).start()
        print('ready', flush=True)
        ctypes.CDLL(None).pthread_exit(None)
        """)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "ready"
    deadline = time.monotonic() + 5
    while _state(child.pid) != "Z" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _state(child.pid) == "Z", "the leader never showed as a zombie"
    assert cleanup.alive(child.pid), "a zombie leader whose threads still run is not gone yet"
    deadline = time.monotonic() + 10
    while cleanup.alive(child.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _state(child.pid) is None, "alive() said gone but the process is still there (not reaped)"
    child.stdout.close()


def test_write_recorded_never_overwrites(tmp_path):
    path = recorded.write(tmp_path / "run.json", {"a": 1})
    assert json.loads(path.read_text()) == {"a": 1}
    with pytest.raises(InputError, match="not overwritten"):
        recorded.write(path, {"a": 2})
    assert json.loads(path.read_text()) == {"a": 1}


def test_a_recording_with_rows_reads_back_and_puts_one_row_a_line(tmp_path):
    """``rows``: Lab 1's table of 151 runs diffs run by run (courselib.live.cpu.record_runs writes it so)."""
    data = {"recorded_on": "Linux", "not_quiet": [625], "runs": [{"milli_cpu": 150, "x": [1, 2]}, {"milli_cpu": 155}]}
    path = recorded.write(tmp_path / "table.json", data, rows="runs")
    assert json.loads(path.read_text()) == data
    lines = path.read_text().splitlines()
    assert '  {"milli_cpu":150,"x":[1,2]},' in lines and '  {"milli_cpu":155}' in lines
    shipped = recorded.load("cpu_throttle_lab1.json")   # the shipped table is in this very layout
    assert recorded.write(tmp_path / "again.json", shipped, rows="runs").read_bytes() == \
        (Path(recorded.__file__).parent.parent / "data" / "recorded" / "cpu_throttle_lab1.json").read_bytes()
    with pytest.raises(InputError, match="not overwritten"):
        recorded.write(path, data, rows="runs")


def test_load_recorded_reads_the_shipped_recordings():
    assert "runs" in recorded.load("oom_real.json")


_SCRIPT = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from courselib.live.cleanup import cleanup_on_signals
    out = Path(sys.argv[1])
    try:
        with cleanup_on_signals():
            try:
                out.write_text("started")
                time.sleep(30)
            finally:
                time.sleep(0.3)          # a second signal arrives here and must not cut this short
                out.write_text("cleaned")
    except KeyboardInterrupt as err:
        sys.exit(getattr(err, "exit_status", 130))
""")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_every_ending_signal_runs_the_cleanup(tmp_path, sig):
    out = tmp_path / "out"
    p = subprocess.Popen([sys.executable, "-c", _SCRIPT, str(out)])
    deadline = time.monotonic() + 20
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    p.send_signal(sig)
    time.sleep(0.1)
    p.send_signal(sig)
    assert p.wait(timeout=20) == 128 + sig
    assert out.read_text() == "cleaned"


def test_handlers_are_restored_after_the_block():
    before = signal.getsignal(signal.SIGTERM)
    with cleanup.cleanup_on_signals():
        assert signal.getsignal(signal.SIGTERM) is not before
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_signal_inside_signals_held_takes_effect_at_its_end():
    recorded = []
    with pytest.raises(cleanup.Terminated) as err:
        with cleanup.cleanup_on_signals():
            with cleanup.signals_held():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)
                recorded.append("child")   # still runs: the start and its record are not split
            recorded.append("after")       # never runs
    assert recorded == ["child"] and err.value.exit_status == 128 + signal.SIGTERM
