"""A PID namespace of your own: ``unshare --pid --fork --mount-proc`` run for real where permitted.

Inside the new namespace the first process is PID 1 and ``/proc`` (remounted) shows only the
processes of that namespace — the "container" illusion with no container runtime at all
(unshare(1), pid_namespaces(7)). Creating a PID namespace needs CAP_SYS_ADMIN, or an
unprivileged user namespace (``--user --map-root-user``) where the kernel allows them.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from courselib.errors import PrivilegeError
from courselib.live import recorded

# Runs inside the new namespaces: run SETUP_RUNS (argv[2]) children to their end, one after the other, then start
# WORKERS children (argv[1]); report what the process sees, as JSON.
_INSIDE = r"""
import json, os, socket, sys
socket.sethostname("inside-demo")
setup = []
for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 0):
    pid = os.fork()
    if pid == 0:                      # a setup command: it ends at once
        os._exit(0)
    os.waitpid(pid, 0)
    setup.append(pid)
hold_r, hold_w = os.pipe()
workers = []
for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 0):
    pid = os.fork()
    if pid == 0:                      # a worker: wait until the first process has looked, then leave
        os.close(hold_w)
        os.read(hold_r, 1)
        os._exit(0)
    workers.append(pid)
procs = []
for d in sorted(os.listdir("/proc"), key=lambda x: (len(x), x)):
    if d.isdigit():
        try:
            comm = open(f"/proc/{d}/comm").read().strip()
        except OSError:
            continue
        procs.append({"pid": int(d), "comm": comm})
nspid = [l.split()[1:] for l in open("/proc/self/status") if l.startswith("NSpid")][0]
print(json.dumps({"kernel": os.uname().release, "pid": os.getpid(), "ppid": os.getppid(), "hostname": socket.gethostname(),
                  "pid_ns": os.readlink("/proc/self/ns/pid"), "visible_processes": procs, "workers": workers,
                  "setup_runs": setup,
                  "nspid_inside": [int(x) for x in nspid]}), flush=True)
sys.stdin.read()  # stay alive until the outside has looked at us
os.close(hold_w)
for pid in workers:
    os.waitpid(pid, 0)
"""


def _outside_view(unshare_pid: int) -> dict:
    """The host's view of the namespace's PID 1: its host PID and its NSpid line (host PID, 1)."""
    try:
        children = open(f"/proc/{unshare_pid}/task/{unshare_pid}/children").read().split()
        child = int(children[0])
        nspid = [l.split()[1:] for l in open(f"/proc/{child}/status") if l.startswith("NSpid")][0]
        return {"host_pid": child, "nspid_outside": [int(x) for x in nspid],
                "host_kernel": os.uname().release,
                "host_pid_ns": os.readlink("/proc/self/ns/pid")}
    except (OSError, IndexError, ValueError):
        return {"host_pid": None, "nspid_outside": None, "host_kernel": os.uname().release,
                "host_pid_ns": None}


def run_in_new_pid_namespace(*, timeout: float = 20.0, workers: int = 0, setup_runs: int = 0) -> dict:
    """Start a Python process in fresh PID, mount and UTS namespaces and return what it saw.

    With ``setup_runs`` it first forks that many children one after the other, each ending before the
    next starts (``setup_runs`` in the result: the PIDs they had). With ``workers`` it then forks that many
    children (they wait, then exit with it), so the listing shows a namespace of ``1 + workers``
    processes. Raises PrivilegeError (nothing touched) where unshare is missing or not permitted. Tries the
    privileged form first, then an unprivileged user namespace.
    """
    unshare = shutil.which("unshare")
    if unshare is None:
        raise PrivilegeError("the unshare command is not installed",
                             hint="install util-linux (Debian: apt-get install util-linux)")
    attempts = [
        [unshare, "--pid", "--fork", "--mount-proc", "--uts"],
        [unshare, "--user", "--map-root-user", "--pid", "--fork", "--mount-proc", "--uts"],
    ]
    errors = []
    for cmd in attempts:
        try:
            child = subprocess.Popen(cmd + [sys.executable, "-c", _INSIDE, str(int(workers)), str(int(setup_runs))],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        except OSError as err:
            errors.append(str(err))
            continue
        try:
            line = child.stdout.readline()
            outside = _outside_view(child.pid) if line else {}
            _, err_text = child.communicate(input="", timeout=timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            errors.append("timed out")
            continue
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        if child.returncode == 0 and line:
            result = json.loads(line)
            result.update(outside)
            result["command"] = " ".join(["unshare"] + cmd[1:] + ["python3", "-c", "…"])
            result["recorded"] = False
            return result
        err_text = err_text.strip()
        errors.append(err_text.splitlines()[-1] if err_text else f"exit {child.returncode}")
    raise PrivilegeError("creating a PID namespace is not permitted here (" + "; ".join(errors) + ")",
                         hint="run as root, or on a kernel that allows unprivileged user namespaces; "
                              "the chapter shows a recorded run instead")


def recorded_run() -> dict:
    """The run recorded on the course's CI machine (root, Linux 6.18), labelled as recorded."""
    data = recorded.load("unshare.json")
    data["recorded"] = True
    return data


def source() -> recorded.Source[dict]:
    """A new PID namespace, live where permitted (:func:`courselib.live.recorded.live_or_recorded`)."""
    def recording() -> recorded.Recording[dict]:
        data = recorded_run()
        return recorded.Recording(data, data.get("recorded_on") or "the course's CI machine")
    return recorded.Source(run_in_new_pid_namespace, recording)
