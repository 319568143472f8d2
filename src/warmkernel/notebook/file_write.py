"""Writing a user's file in the workspace so that no failure destroys it.

`rewrite_if_unchanged` rewrites a file in place, so it keeps its inode, owner, group, mode and
hard links, the way jupyter_server's `atomic_writing` keeps a notebook: the old content is first
copied beside it (`.~NAME.warmkernel`), and on any failure it is written back and the copy
removed. The new content's growth past the old length is written first, so a full disk refuses it
before any old byte changes. Only a process killed mid-write leaves the copy, for the person to
find. A directory that takes no new file gets no copy (Jupyter writes there in place too).
`replace_whole` writes a document warmkernel makes whole as a new file and renames it over the
old one.

Both resolve the path when they write, refuse one that now leads out of the workspace, and reach
the file from the workspace without following a symlink (`workspace_paths`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import stat
from pathlib import Path

from warmkernel.errors import WarmkernelError
from warmkernel.notebook.workspace_paths import directory_beneath, real_inside

_NO_NEW_FILE = frozenset({errno.EACCES, errno.EPERM, errno.ENAMETOOLONG})
"""Why a directory takes no copy beside a file we may still write in place."""
_CHUNK = 1024 * 1024


def backup_of(path: Path) -> Path:
    """Where the old content of `path` is kept while it is rewritten."""
    return path.with_name(f".~{path.name}.warmkernel")


def rewrite_if_unchanged(root: Path, path: Path, expected: str, new_text: str) -> bool:
    """Rewrite `path` in place if it still reads `expected`; False (nothing written) otherwise;
    `write_failed` saying why, with the file as it was, when the write fails.

    The comparison is made on the open file right before writing, under an advisory lock that
    other warmkernel writers take.
    """
    real = real_inside(root, path)
    old, data = expected.encode("utf-8"), new_text.encode("utf-8")
    with directory_beneath(root, real.parent) as folder:
        fd = os.open(real.name, os.O_RDWR | os.O_NOFOLLOW, dir_fd=folder)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if _read_all(fd) != old:
                return False  # an editor saved meanwhile; its save wins
            before = os.fstat(fd)
            kept = _keep_copy(folder, real.name, old)
            try:
                _write_over(fd, data, len(old))
            except BaseException as exc:
                failure = _restore(fd, old, before)
                if failure is None:
                    _drop_copy(folder, real.name, kept)
                if not isinstance(exc, OSError):
                    raise  # not a failed write (an interrupt, our bug): it goes on, after the restore
                raise _write_failed(real, exc, failure, kept) from exc
            _drop_copy(folder, real.name, kept)
        finally:
            os.close(fd)
    return True


def replace_whole(root: Path, path: Path, data: bytes) -> None:
    """Make `path` hold `data`: a new file in its directory, renamed over it (keeping its mode)."""
    real_folder = real_inside(root, path.parent)
    with directory_beneath(root, real_folder) as folder:
        try:
            found = os.stat(path.name, dir_fd=folder, follow_symlinks=False)
            mode = stat.S_IMODE(found.st_mode) if stat.S_ISREG(found.st_mode) else 0o644
        except FileNotFoundError:
            mode = 0o644
        temporary = f".{path.name}.{secrets.token_hex(4)}.tmp"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=folder)
        try:
            _fill(fd, data, mode)
            os.replace(temporary, path.name, src_dir_fd=folder, dst_dir_fd=folder)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary, dir_fd=folder)


def _fill(fd: int, data: bytes, mode: int) -> None:
    """Write a new file's content and mode to disk, and close it."""
    try:
        _write_all(fd, data, 0)
        os.fchmod(fd, mode)
        os.fsync(fd)
    finally:
        os.close(fd)


def _keep_copy(folder: int, name: str, old: bytes) -> bool:
    """Copy the old content beside the file (True), or find the directory takes none (False);
    `write_failed` when the copy cannot be made otherwise (a full disk): nothing is written then."""
    copy = backup_of(Path(name)).name
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(copy, dir_fd=folder)  # left by a killed write; the file itself reads whole now
        fd = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=folder)
    except OSError as exc:
        if exc.errno in _NO_NEW_FILE:
            return False
        raise _no_copy(name, exc) from exc
    try:
        _fill(fd, old, 0o600)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(copy, dir_fd=folder)
        raise _no_copy(name, exc) from exc
    return True


def _drop_copy(folder: int, name: str, kept: bool) -> None:
    if kept:
        os.unlink(backup_of(Path(name)).name, dir_fd=folder)


def _write_over(fd: int, data: bytes, old_size: int) -> None:
    _write_all(fd, data[old_size:], old_size)  # the growth first: a full disk refuses it here
    _write_all(fd, data[:old_size], 0)
    os.ftruncate(fd, len(data))
    os.fsync(fd)


def _restore(fd: int, old: bytes, before: os.stat_result) -> OSError | None:
    """Put the old content (and mtime) back after a failed write; the error if that failed too."""
    try:
        _write_all(fd, old, 0)
        os.ftruncate(fd, len(old))
        os.fsync(fd)
        os.utime(fd, ns=(before.st_atime_ns, before.st_mtime_ns))  # nothing changed: editors need not reload
    except OSError as exc:
        return exc
    return None


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    offset = 0
    while chunk := os.pread(fd, _CHUNK, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


def _cause(exc: BaseException) -> str:
    return (exc.strerror or str(exc)) if isinstance(exc, OSError) else type(exc).__name__


def _no_copy(name: str, exc: OSError) -> WarmkernelError:
    return WarmkernelError(
        "write_failed",
        f"cannot keep a copy of {name} beside it before writing it: {_cause(exc)}; nothing was written",
    )


def _write_failed(real: Path, exc: BaseException, failure: OSError | None, kept: bool) -> WarmkernelError:
    if failure is None:
        return WarmkernelError(
            "write_failed", f"cannot write {real.name}: {_cause(exc)}; it was left as it was"
        )
    where = f"its old content is kept in {backup_of(real).name} beside it" if kept else "it may be incomplete"
    return WarmkernelError(
        "write_failed",
        f"cannot write {real.name}: {_cause(exc)}; writing its old content back failed too "
        f"({_cause(failure)}): {where}",
    )
