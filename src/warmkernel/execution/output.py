"""OutputLog owns all output text of one execution: its four streams and their combined view.

Each appendable stream (`stdout`, `stderr`, `result`, `traceback`) normalizes its raw text
through its own `TerminalNormalizer` and keeps the completed lines in a compact `_LineStore`.
`combined` holds no text of its own: it is a list of runs `(stream, first_line, count)` in
the order lines completed, so line k of combined is a binary search away.

A stream's unterminated line is readable while the execution runs: it is the stream's last
line, and the open lines of all streams are the last lines of `combined`, in the order their
streams were last written. `close()` completes them in that order.

Text is stored as UTF-8 encoded with `errors="replace"`: a lone surrogate (which a kernel can
send through JSON escapes) becomes `?`, one character for one, so counts are unchanged and
every line read back encodes cleanly wherever it goes next. Reads never raise on odd text.

Call every method from one thread (the event loop's). The one exception is the iterator
`iter_lines` returns, which may be consumed in a worker thread while appends go on: it
snapshots the extent and the open lines when called (the normalizer is not thread-safe),
then reads only completed lines, which are never changed and are exposed by their counts
only after their text is written.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Iterator
from itertools import accumulate, repeat
from operator import add

from warmkernel.execution.terminal import TerminalNormalizer
from warmkernel.types import APPENDABLE_STREAMS, ReadableStream, StreamName

_ENCODING = "utf-8"
_ERRORS = "replace"
_READ_BATCH = 4096
"""Lines decoded per store read while iterating: one decode and split per batch."""


class _LineStore:
    """Completed lines of one stream: UTF-8 bytes, each line followed by `\\n`, and end offsets."""

    __slots__ = ("_chars", "_data", "_ends")

    def __init__(self) -> None:
        self._data = bytearray()
        self._ends = array("Q")
        """`_ends[i]` is the offset just past line i's newline."""
        self._chars = 0

    def append_lines(self, lines: list[str]) -> None:
        """Store `lines` (none containing `\\n`) with one join, encode and extend per call."""
        text = "\n".join(lines) + "\n"
        blob = text.encode(_ENCODING, _ERRORS)
        # Byte lengths equal str lengths when the text is ASCII; else split the bytes
        # (UTF-8 never encodes anything but "\n" as byte 0x0A).
        lengths = map(len, lines) if len(blob) == len(text) else map(len, blob[:-1].split(b"\n"))
        ends = accumulate(map(add, lengths, repeat(1)), initial=len(self._data))
        next(ends)  # the initial value is the previous end, already stored
        self._data += blob
        self._ends.extend(ends)
        self._chars += len(text) - len(lines)

    def count(self) -> int:
        return len(self._ends)

    def chars(self) -> int:
        """Characters of all lines, newlines not counted."""
        return self._chars

    def get(self, start: int, stop: int) -> list[str]:
        """Lines `start` to `stop` (0-based, half-open, `0 <= start <= stop <= count()`)."""
        if start >= stop:
            return []
        first = self._ends[start - 1] if start else 0
        last = self._ends[stop - 1] - 1  # drop the final newline so split yields no extra ""
        return self._data[first:last].decode(_ENCODING, _ERRORS).split("\n")


class _Stream:
    """One appendable stream: its normalizer and its completed lines."""

    __slots__ = ("normalizer", "store")

    def __init__(self) -> None:
        self.normalizer = TerminalNormalizer()
        self.store = _LineStore()


class OutputLog:
    """All output text of one execution: append while it runs, read and search any time."""

    def __init__(self) -> None:
        self._streams: dict[StreamName, _Stream] = {name: _Stream() for name in APPENDABLE_STREAMS}
        # Runs of combined, as parallel arrays; `_run_ends` holds cumulative line counts and
        # is written last, so its length is the number of complete runs.
        self._run_stream = array("B")
        self._run_first = array("Q")
        self._run_ends = array("Q")
        self._written: list[StreamName] = []
        """Streams in the order they were last written: the order of open lines in combined."""
        self._closed = False

    def append(self, stream: StreamName, text: str) -> None:
        """Append raw terminal text to `stream`; raises RuntimeError once the log is closed."""
        if self._closed:
            raise RuntimeError(f"cannot append to {stream}: the execution's output is closed")
        lines = self._streams[stream].normalizer.feed(text)
        if lines:
            self._complete(stream, lines)
        if stream in self._written:
            self._written.remove(stream)
        self._written.append(stream)

    def close(self) -> None:
        """End of execution: every open line becomes a completed line, in combined order."""
        if self._closed:
            raise RuntimeError("the execution's output is already closed")
        self._closed = True
        for stream in self._written:
            line = self._streams[stream].normalizer.flush()
            if line is not None:
                self._complete(stream, [line])

    def line_count(self, stream: ReadableStream) -> int:
        """Completed lines plus one for each non-empty open line."""
        if stream == "combined":
            return self._combined_count() + len(self._open_lines())
        part = self._streams[stream]
        return part.store.count() + (1 if part.normalizer.open_line else 0)

    def char_count(self, stream: ReadableStream) -> int:
        """Characters of all lines, newlines not counted."""
        parts = self._streams.values() if stream == "combined" else (self._streams[stream],)
        return sum(part.store.chars() + len(part.normalizer.open_line) for part in parts)

    def lines(self, stream: ReadableStream, start: int, stop: int) -> list[str]:
        """Lines `start` to `stop`, 0-based half-open, clamped to the stream like a list slice."""
        if start < 0 or stop < 0:
            raise ValueError(f"lines({start}, {stop}) takes non-negative indices")
        return [text for _, text in self._iter(stream, start, stop)]

    def last_lines(self, stream: ReadableStream, n: int) -> list[str]:
        """The last `n` lines (fewer if the stream is shorter)."""
        count = self.line_count(stream)
        return self.lines(stream, max(count - n, 0), count)

    def iter_lines(self, stream: ReadableStream, start: int = 0) -> Iterator[tuple[int, str]]:
        """`(0-based index, text)` from `start` to the end as of this call, read in batches."""
        return self._iter(stream, start, None)

    def _complete(self, stream: StreamName, lines: list[str]) -> None:
        store = self._streams[stream].store
        first = store.count()
        store.append_lines(lines)
        code = APPENDABLE_STREAMS.index(stream)
        runs = len(self._run_ends)
        if runs and self._run_stream[runs - 1] == code:
            self._run_ends[runs - 1] += len(lines)
        else:
            self._run_stream.append(code)
            self._run_first.append(first)
            self._run_ends.append((self._run_ends[runs - 1] if runs else 0) + len(lines))

    def _combined_count(self) -> int:
        return self._run_ends[-1] if self._run_ends else 0

    def _open_lines(self) -> list[str]:
        """Non-empty open lines of all streams, in the order their streams were last written."""
        opened = (self._streams[name].normalizer.open_line for name in self._written)
        return [line for line in opened if line]

    def _iter(self, stream: ReadableStream, start: int, stop: int | None) -> Iterator[tuple[int, str]]:
        """Snapshot the stream's extent now; the generator then reads only what it saw."""
        if stream == "combined":
            completed, open_lines = self._combined_count(), self._open_lines()
        else:
            part = self._streams[stream]
            completed, open_line = part.store.count(), part.normalizer.open_line
            open_lines = [open_line] if open_line else []
        total = completed + len(open_lines)
        hi = total if stop is None else min(stop, total)
        return self._generate(stream, min(start, hi), hi, completed, open_lines)

    def _generate(
        self, stream: ReadableStream, lo: int, hi: int, completed: int, open_lines: list[str]
    ) -> Iterator[tuple[int, str]]:
        index = lo
        for text in self._read_completed(stream, lo, min(hi, completed)):
            yield index, text
            index += 1
        for text in open_lines[max(index - completed, 0) : max(hi - completed, 0)]:
            yield index, text
            index += 1

    def _read_completed(self, stream: ReadableStream, lo: int, hi: int) -> Iterator[str]:
        """Completed lines `lo` to `hi` of `stream`, decoded a batch at a time."""
        if stream != "combined":
            store = self._streams[stream].store
            for begin in range(lo, hi, _READ_BATCH):
                yield from store.get(begin, min(begin + _READ_BATCH, hi))
            return
        run = bisect_right(self._run_ends, lo)
        index = lo
        while index < hi:
            run_start = self._run_ends[run - 1] if run else 0
            take = min(self._run_ends[run], hi) - index
            store = self._streams[APPENDABLE_STREAMS[self._run_stream[run]]].store
            first = self._run_first[run] + index - run_start
            for begin in range(first, first + take, _READ_BATCH):
                yield from store.get(begin, min(begin + _READ_BATCH, first + take))
            index += take
            run += 1
