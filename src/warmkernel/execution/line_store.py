"""LineStore owns the completed lines of one output stream: their text, where it is kept, and
the index that finds any line.

Text is UTF-8, each line ended by `\\n` (`encode` is how every line is stored: a lone
surrogate, which a kernel can send through JSON escapes, becomes U+FFFD, one character for
one). It is kept in memory until the owner moves it to a spill file (`to_disk`). A sparse
index (a mark at the first line start past every `_MARK_BYTES` bytes) finds any line after
reading at most `_MARK_BYTES`, so a read of a few lines costs what it returns, not what the
stream holds. `manifest` describes a store on disk for `restored`, and `recovered` reads the
file of a store whose process ended while it wrote.

Appends come from one thread; `blocks` may read in another, since completed text is written
before its count and never changes.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from warmkernel.execution.spill import FileBody, OutputDropped

ENCODING = "utf-8"
_SURROGATE = re.compile("[\ud800-\udfff]")
_REPLACEMENT = "\ufffd"

_MARK_BYTES = 8192
"""Most bytes scanned to find a line: a mark sits at the first line start past every this many."""
_BLOCK_BYTES = 65536
"""Bytes read and decoded at a time while iterating (more only for a longer line)."""


def encode(text: str) -> bytes:
    """UTF-8, with each lone surrogate as U+FFFD: one character for one."""
    try:
        return text.encode(ENCODING)
    except UnicodeEncodeError:
        return _SURROGATE.sub(_REPLACEMENT, text).encode(ENCODING)


class StreamManifest(TypedDict):
    """One persisted stream: its file in the spill directory (None when empty) and its index."""

    file: str | None
    lines: int
    bytes: int
    chars: int
    mark_lines: list[int]
    mark_offsets: list[int]


@dataclass(frozen=True, slots=True)
class TextBlock:
    """Consecutive lines of one stream, joined by `\\n` (no trailing newline)."""

    first: int
    """0-based index of the first line."""
    text: str
    count: int
    """How many lines `text` holds (at least one; "" is one empty line)."""


_Buffer = bytes | bytearray


class _MemoryBody:
    """A stream's text in memory."""

    __slots__ = ("data",)

    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, blob: _Buffer | memoryview) -> None:
        self.data += blob

    def read(self, start: int, stop: int) -> _Buffer:
        return self.data[start:stop]


class LineStore:
    """Completed lines of one stream: their UTF-8 text, each line ended by `\\n`, and marks.

    Mark i says line `_mark_lines[i]` starts at byte `_mark_offsets[i]`. Marks sit at line 0
    and at the first line start at or past `_MARK_BYTES` after the previous mark, so any line
    starts less than `_MARK_BYTES` after the last mark at or before it. The last mark may name
    the line that the next append will start.
    """

    __slots__ = ("_body", "_chars", "_extent", "_mark_lines", "_mark_offsets")

    def __init__(self) -> None:
        self._body: _MemoryBody | FileBody | None = _MemoryBody()
        self._mark_lines = array("Q", [0])
        self._mark_offsets = array("Q", [0])
        self._extent = (0, 0)
        """`(lines, bytes)` of completed text, published in one assignment after it is written."""
        self._chars = 0

    @classmethod
    def restored(cls, directory: Path, manifest: StreamManifest) -> LineStore:
        """The store a persisted stream described: its text stays in its file until read."""
        store = cls()
        if manifest["file"] is not None:
            store._body = FileBody.existing(directory / manifest["file"])
        store._mark_lines = array("Q", manifest["mark_lines"])
        store._mark_offsets = array("Q", manifest["mark_offsets"])
        store._extent = (manifest["lines"], manifest["bytes"])
        store._chars = manifest["chars"]
        return store

    @classmethod
    def recovered(cls, path: Path) -> LineStore:
        """The completed lines in the file of a store whose process ended while it wrote (a last
        line cut short by that end is not one)."""
        store = cls()
        store._body = FileBody.existing(path)
        count = size = chars = 0
        with open(path, "rb") as file:
            blob = b""
            while block := file.read(_BLOCK_BYTES):
                blob += block
                cut = blob.rfind(b"\n") + 1
                lines = blob.count(b"\n", 0, cut)
                store._mark(blob, 0, cut, count, size)
                chars += len(blob[:cut].decode(ENCODING, "replace")) - lines
                count, size, blob = count + lines, size + cut, blob[cut:]
        store._extent, store._chars = (count, size), chars
        return store

    def manifest(self) -> StreamManifest:
        """What `restored` needs; the text must be in a file or empty."""
        body = self._body
        assert isinstance(body, FileBody) or not self.size(), "persist moves text to disk first"
        return StreamManifest(
            file=body.path.name if isinstance(body, FileBody) else None,
            lines=self.count(),
            bytes=self.size(),
            chars=self._chars,
            mark_lines=self._mark_lines.tolist(),
            mark_offsets=self._mark_offsets.tolist(),
        )

    def count(self) -> int:
        return self._extent[0]

    def size(self) -> int:
        return self._extent[1]

    def chars(self) -> int:
        """Characters of all lines, newlines not counted."""
        return self._chars

    @property
    def on_disk(self) -> bool:
        return isinstance(self._body, FileBody)

    def append(self, blob: bytes, lo: int, hi: int, lines: int, chars: int) -> None:
        """Store `lines` whole lines: `blob[lo:hi]`, their UTF-8 text with every `\\n`. A write to
        disk that fails (a full disk) raises and stores none of them."""
        body = self._body
        assert body is not None, "append after drop"
        count, size = self._extent
        body.write(memoryview(blob)[lo:hi])
        self._mark(blob, lo, hi, count, size)
        self._chars += chars
        self._extent = (count + lines, size + hi - lo)

    def _mark(self, blob: bytes, lo: int, hi: int, count: int, size: int) -> None:
        """Add the marks for the line starts after the first line of `blob[lo:hi]`.

        Byte `lo` of the blob is byte `size` of the text. The last mark lies at or before
        `size`, so the next one is past it: inside the blob, or at its end, where the next
        line will start.
        """
        base = size - lo  # the text offset of blob position 0
        target = self._mark_offsets[-1] + _MARK_BYTES
        line, counted = count, lo
        while target <= base + hi:
            start = blob.find(b"\n", target - base - 1, hi) + 1  # the lines end with a newline
            line += blob.count(b"\n", counted, start)
            counted = start
            # Offsets first: a reader that finds the line of a mark must find its offset.
            self._mark_offsets.append(base + start)
            self._mark_lines.append(line)
            target = base + start + _MARK_BYTES

    def to_disk(self, directory: Path, prefix: str) -> int:
        """Move the text to a new spill file; returns the bytes written. A write that fails (a
        full disk) leaves no file, and the text in memory, and raises."""
        memory = self._body
        assert isinstance(memory, _MemoryBody), "only text in memory moves to disk"
        body = FileBody.holding(directory, prefix, memory.data)
        # Readers that took the memory body keep it; nothing changes it any more.
        self._body = body
        return len(memory.data)

    def close(self) -> None:
        if isinstance(self._body, FileBody):
            self._body.close()

    def drop(self) -> int:
        """Throw the text away (counts and marks stay); returns the disk bytes freed."""
        body, self._body = self._body, None
        if isinstance(body, FileBody):
            body.remove()
            return self.size()
        return 0

    def _read(self, start: int, stop: int) -> _Buffer:
        body = self._body
        if body is None:
            raise OutputDropped
        return body.read(start, stop)

    def offset(self, line: int) -> int:
        """Where line `line` starts (0 <= line <= count()); the end of the text for line count()."""
        count, size = self._extent
        if line >= count:
            return size
        mark = bisect_right(self._mark_lines, line) - 1
        skip = line - self._mark_lines[mark]
        at = self._mark_offsets[mark]
        if skip == 0:
            return at
        chunk = self._read(at, at + _MARK_BYTES)
        return at + len(chunk) - len(chunk.split(b"\n", skip)[-1])

    def blocks(self, lo: int, hi: int) -> Iterator[TextBlock]:
        """Lines `lo` to `hi` (0-based, half-open, within count()) in blocks of about `_BLOCK_BYTES`."""
        at, end = self.offset(lo), self.offset(hi)
        line = lo
        while at < end:
            chunk = self._read(at, min(at + _BLOCK_BYTES, end))
            cut = chunk.rfind(b"\n") + 1
            if cut == 0:  # one line longer than a block: read to its end
                chunk = self._read(at, self.offset(line + 1))
                cut = len(chunk)
            count = chunk.count(b"\n", 0, cut)
            yield TextBlock(line, chunk[: cut - 1].decode(ENCODING, "replace"), count)
            line += count
            at += cut
