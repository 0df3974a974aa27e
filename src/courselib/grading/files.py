"""Files the grader writes: created with ``O_EXCL | O_NOFOLLOW`` beside their target and renamed into place.

A report, a gradebook or a lab is never written through a path a student could have planted (a
symlink, a file of theirs, a predictable temporary name), and never in a folder other users can write
(a student's process could race the grader there): :func:`atomic_write` refuses such a folder.
"""
from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from courselib.errors import InputError


def check_folder(folder: Path, what: str, field: str | None = None) -> None:
    """Refuse a folder other users may write (group- or world-writable: sticky or not, a race is possible)."""
    try:
        st = os.stat(folder)
    except OSError:
        raise InputError("its folder does not exist", file=str(folder), field=field,
                         hint=f"create it first, or give another path for {what}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise InputError("is not a folder", file=str(folder), field=field)
    if st.st_mode & (stat.S_IWOTH | stat.S_IWGRP):
        raise InputError(f"other users can write this folder (mode {stat.S_IMODE(st.st_mode):o}): a student's "
                         f"process could race the grader there", file=str(folder), field=field,
                         hint=f"write {what} into a folder only you can write")


def atomic_write(path, text: str | bytes, *, mode: int = 0o644, field: str | None = None) -> None:
    """Write ``path`` whole or not at all: a fresh ``O_EXCL|O_NOFOLLOW`` file beside it, then ``rename``."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    check_folder(folder, str(path.name), field)
    data = text.encode("utf-8") if isinstance(text, str) else text
    dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            st = os.stat(path.name, dir_fd=dfd, follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode):
                raise InputError("exists and is not a regular file (a symlink, a folder…); not overwritten",
                                 file=str(path), field=field)
        except FileNotFoundError:
            pass
        tmp = f".{path.name}.{secrets.token_hex(8)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path.name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
            raise
    finally:
        os.close(dfd)
