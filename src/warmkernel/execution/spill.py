"""Spill files: where an execution's output goes once it is too big to keep in memory.

`Spill` says where (a private directory), when (past the output log's threshold) and whom to
tell about each write (the owner of the output limit) and about a write that failed (a full
disk: the log keeps what it has and counts what it cannot keep). A `FileBody` is one file there, mode
0600, holding one stream of an `OutputLog` or one image. It is written through one descriptor
and read through fresh ones, so a read in a worker thread never holds a descriptor that
`remove` could close and the system reuse; once removed, it reads as `OutputDropped`, as any
dropped output does.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


class OutputDropped(Exception):
    """The output's text was dropped to stay under the output limit; only its counts remain."""


@dataclass(frozen=True)
class Spill:
    """Where and when a log moves its text to disk, and whom it tells about each write."""

    directory: Path
    """A private (0700) directory; the log creates its files (0600) there."""
    threshold_bytes: int
    """The log moves to disk before its streams would hold more than this many bytes in memory."""
    on_write: Callable[[int], None]
    """Called with the byte count of every write to disk, after it is written."""
    prefix: str = ""
    """How the names of the log's files begin (`OutputLog.recover` finds a log's files by it)."""
    on_full: Callable[[OSError], None] = lambda _: None
    """Called with the error of a write to disk that failed (a full disk), after the log gave it up."""


class FileBody:
    """One spill file: written through one descriptor, read through fresh ones; a read after
    `remove` finds no file and raises `OutputDropped`."""

    __slots__ = ("_fd", "_size", "path")

    def __init__(self, directory: Path, prefix: str) -> None:
        fd, name = tempfile.mkstemp(prefix=prefix, dir=directory)  # mode 0600
        self._fd: int | None = fd
        self._size = 0
        self.path = Path(name)

    @classmethod
    def holding(cls, directory: Path, prefix: str, data: bytes | bytearray) -> FileBody:
        """A new file holding `data`, still open for appends; a write that fails (a full disk)
        leaves no file, and raises."""
        body = cls(directory, prefix)
        try:
            body.write(data)
        except OSError:
            body.remove()
            raise
        return body

    @classmethod
    def existing(cls, path: Path) -> FileBody:
        """A finished file written by an earlier body (perhaps of another process): read-only."""
        body = cls.__new__(cls)
        body._fd, body._size, body.path = None, 0, path
        return body

    def write(self, blob: bytes | bytearray | memoryview) -> None:
        """Append `blob`. A write that fails (a full disk) raises, and what it wrote is cut off
        again: the file holds exactly what the writes before it wrote."""
        assert self._fd is not None, "write after close"
        view = memoryview(blob)
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError:
            os.ftruncate(self._fd, self._size)  # shrinking needs no room
            os.lseek(self._fd, self._size, os.SEEK_SET)
            raise
        self._size += len(blob)

    def read(self, start: int, stop: int) -> bytes:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise OutputDropped from None
        try:
            return os.pread(fd, stop - start, start)
        finally:
            os.close(fd)

    def close(self) -> None:
        """No more writes: release the descriptor; the file stays readable."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def remove(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
