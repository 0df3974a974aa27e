"""The private view the student's code runs in: ``python -m courselib.grading.jail CONFIG`` (the sandbox starts it).

The sandbox starts this module in new mount, PID, IPC and network namespaces (and, in same-user mode,
a new user namespace in which the grader's own user is root). It forks the process that becomes PID 1
of the new PID namespace, and that process, before any student code exists:

1. mounts a fresh, empty tmpfs as the new root and binds into it, **read-only**, only what Python
   needs: ``/usr``, ``/bin``, ``/lib*``, a few files of ``/etc``, the interpreter's prefix, its
   ``site-packages`` and courselib's own folder; a private ``/proc`` (only its own processes), a
   minimal ``/dev`` (null, zero, full, random, urandom, a private ``shm``), and two small private
   tmpfs, ``/tmp`` (``TMPDIR``) and ``/home/student`` (``HOME``, the working folder), which vanish
   with the namespace;
2. ``pivot_root``\\ s into it and detaches the machine's root, so the checkout (its ``.git``,
   ``solutions/``), other submissions, the instructor's hidden checks and the grader's own state are
   not *hidden* but simply absent;
3. becomes the student: the claimed unprivileged uid (root mode), or, in same-user mode, the grader's
   own uid in a nested user namespace that owns no mount; sets ``no_new_privs``; and ``exec``\\ s the
   worker (:mod:`courselib.grading.worker`), so no privilege survives into the student's process.

Its parent stays outside, waits for it and exits with its status; when PID 1 dies the kernel kills
every process left in the namespace. Anything that fails here ends this process with a message on
stderr: the sandbox then gives the student zero points with that reason (it never falls back to a
weaker sandbox).
"""
from __future__ import annotations

import ctypes
import json
import os
import platform
import signal
import sys

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID = 0x00020000, 0x10000000, 0x20000000
CLONE_NEWIPC, CLONE_NEWNET = 0x08000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC = 32, 1024, 2048, 4096, 16384
MS_PRIVATE, MS_RELATIME, MS_STRICTATIME = 1 << 18, 1 << 21, 1 << 24
ST_RDONLY, ST_NOSUID, ST_NODEV, ST_NOEXEC, ST_NOATIME, ST_NODIRATIME, ST_RELATIME = 1, 2, 4, 8, 1024, 2048, 4096
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "arm64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}
DEVICES = ("null", "zero", "full", "random", "urandom")
ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "nsswitch.conf", "fonts", "ssl",
       "mime.types", "alternatives", "passwd", "group", "hosts", "matplotlibrc")
HOME, TMP = "/home/student", "/tmp"

_libc = ctypes.CDLL(None, use_errno=True)


class JailError(Exception):
    pass


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise JailError(f"{what}: {os.strerror(err)}")


def mount(source, target, fstype, flags, data=None) -> None:
    enc = (lambda x: None if x is None else str(x).encode())
    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def unshare(flags: int, what: str) -> None:
    _check(_libc.unshare(ctypes.c_int(flags)), f"unshare({what})")


def _prctl(option: int, arg: int) -> None:
    _libc.prctl(option, ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))


def write_maps(inside: int, outside_uid: int, outside_gid: int) -> None:
    """Map ``inside`` in the newest user namespace to the caller's uid/gid outside it."""
    for name, text in (("setgroups", "deny"), ("uid_map", f"{inside} {outside_uid} 1"),
                       ("gid_map", f"{inside} {outside_gid} 1")):
        try:
            fd = os.open(f"/proc/self/{name}", os.O_WRONLY)
            try:
                os.write(fd, text.encode())
            finally:
                os.close(fd)
        except OSError as err:
            if name != "setgroups":
                raise JailError(f"writing /proc/self/{name}: {err.strerror}") from None


def _locked_flags(path: str) -> int:
    """The flags of the mount holding ``path`` that a bind-remount must keep (locked in a user namespace)."""
    try:
        f = os.statvfs(path).f_flag
    except OSError:
        return 0
    out = 0
    for st, ms in ((ST_NOEXEC, MS_NOEXEC), (ST_NOATIME, MS_NOATIME), (ST_NODIRATIME, MS_NODIRATIME),
                   (ST_RELATIME, MS_RELATIME)):
        if f & st:
            out |= ms
    return out


def _makedirs(path: str) -> None:
    os.makedirs(path, mode=0o755, exist_ok=True)


def bind_ro(root: str, source: str, target: str | None = None) -> None:
    """Bind ``source`` at ``root + target`` read-only, nosuid, nodev (a symlink is copied as a symlink)."""
    target = target or source
    dest = root + target
    if os.path.islink(source):
        _makedirs(os.path.dirname(dest))
        if not os.path.lexists(dest):
            os.symlink(os.readlink(source), dest)
        return
    if os.path.isdir(source):
        _makedirs(dest)
    else:
        _makedirs(os.path.dirname(dest))
        if not os.path.exists(dest):
            os.close(os.open(dest, os.O_CREAT | os.O_WRONLY, 0o644))
    mount(source, dest, None, MS_BIND | MS_REC)
    mount(None, dest, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | _locked_flags(source))


def _covered(path: str, done: list[str]) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in done)


def build_view(root: str, binds: list[str], owner: tuple[int, int] | None) -> None:
    """Make ``root`` (an empty folder) the student's whole file system (see the module docstring)."""
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16m")
    # /proc of the new PID namespace: the student's own processes only
    _makedirs(root + "/proc")
    mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    # a minimal /dev
    _makedirs(root + "/dev")
    mount("tmpfs", root + "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k")
    for dev in DEVICES:
        if os.path.exists(f"/dev/{dev}"):
            os.close(os.open(f"{root}/dev/{dev}", os.O_CREAT | os.O_WRONLY, 0o666))
            mount(f"/dev/{dev}", f"{root}/dev/{dev}", None, MS_BIND)
    for name, to in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                     ("stderr", "/proc/self/fd/2")):
        os.symlink(to, f"{root}/dev/{name}")
    ids = "" if owner is None else f",uid={owner[0]},gid={owner[1]}"
    _makedirs(root + "/dev/shm")
    mount("tmpfs", root + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, f"mode=0700,size=64m{ids}")
    _makedirs(root + TMP)
    mount("tmpfs", root + TMP, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=0700,size=256m,nr_inodes=20000{ids}")
    _makedirs(root + HOME)
    mount("tmpfs", root + HOME, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=0700,size=64m,nr_inodes=20000{ids}")
    # then the machine's read-only parts (a needed path under /tmp lands inside the private /tmp)
    done: list[str] = []
    for top in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.lexists(top):
            bind_ro(root, top)
            done.append(top)
    for name in ETC:
        path = f"/etc/{name}"
        if os.path.lexists(path):
            bind_ro(root, path)
    for path in sorted({os.path.abspath(p) for p in binds}, key=len):
        if not os.path.exists(path) or _covered(path, done):
            continue
        real = os.path.realpath(path)
        if not _covered(real, done):
            bind_ro(root, real)
            done.append(real)
        if real != path and not _covered(path, done):
            bind_ro(root, real, path)
            done.append(path)


def pivot(root: str) -> None:
    """Make ``root`` the root and drop every other mount of the machine from this namespace."""
    nr = SYS_PIVOT_ROOT.get(platform.machine())
    os.chdir(root)
    if nr is None:
        raise JailError(f"pivot_root is not known on {platform.machine()}")
    _check(_libc.syscall(ctypes.c_long(nr), b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", ctypes.c_int(MNT_DETACH)), "umount the old root")
    os.chdir("/")
    mount(None, "/", None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def child(config: dict) -> None:
    """PID 1 of the new PID namespace: build the view, become the student, exec the worker."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.umask(0o022)                  # the view's folders must be enterable by the student
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    uid = config.get("uid")
    same_user = uid is None
    owner = None if same_user else (uid, uid)
    build_view(config["root"], config["binds"], owner)
    pivot(config["root"])
    if same_user:
        # a nested user namespace: the grader's uid again, owning no mount (every mount above is locked)
        outer_uid, outer_gid = config["outer"]
        unshare(CLONE_NEWUSER | CLONE_NEWNS, "CLONE_NEWUSER|CLONE_NEWNS")
        write_maps(outer_uid, 0, 0)
        # the files created above belong to uid 0 of the first namespace = the grader's user
    else:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        if os.getuid() != uid or os.geteuid() != uid:
            raise JailError("could not become the unprivileged user")
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    os.umask(0o077)
    os.chdir(HOME)
    argv = config["argv"]
    os.execve(argv[0], argv, config["env"])


def main(argv: list[str]) -> int:
    config = json.loads(argv[0])
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # the grader interrupts the student, not us
    try:
        pid = os.fork()
    except OSError as err:
        os.write(2, f"courselib sandbox: fork: {err.strerror}\n".encode())
        return 70
    if pid == 0:
        try:
            child(config)
        except BaseException as err:  # noqa: BLE001 — the reason goes to the grader's log
            os.write(2, f"courselib sandbox: {err}\n".encode())
        os._exit(70)
    for fd in config.get("close", []):
        try:
            os.close(fd)
        except OSError:
            pass
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except ChildProcessError:
            return 70
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):     # die of the same signal, so the grader reads what killed the student
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        return 128 + sig
    return os.WEXITSTATUS(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
