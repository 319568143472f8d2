"""OutputLog owns all output text of one execution: its four streams and their combined view.

Each appendable stream (`stdout`, `stderr`, `result`, `traceback`) normalizes its raw text
through its own `TerminalNormalizer` and keeps the completed lines in a `LineStore`, in memory
while the execution's text is small and in spill files of their own (in a directory the caller
keeps private) once the log would hold more than `Spill.threshold_bytes`. `combined` holds no
text of its own: it is a list of runs `(stream, first_line, count)` in the order lines
completed.

A stream's unterminated line is readable while the execution runs: it is the stream's last
line, and the open lines of all streams are the last lines of `combined`, in the order their
streams were last written. `close()` completes them in that order. Reads never raise on odd
text.

A write to disk that fails (a full disk) ends what the log keeps: the text it has stays
readable (in memory, or in its files as far as they were written), every later line is counted
in `not_kept_bytes` and not kept, and `Spill.on_full` is told once. Nothing is raised.

`drop()` throws a finished log's text away to free its disk space (the owner decides when);
its counts stay, and every later read raises `OutputDropped`.

`persist()` makes a finished log outlive its process: every stream's text goes to a file of the
spill directory (text already there stays where it is) and a small `LogManifest` (counts, marks,
the runs of combined) describes them. `OutputLog.reopen` reads such files again, read-only,
fetching text only as reads ask for it. A running log can `write_through()`: its text moves to
disk, and every later line goes there as it completes, so that if its process is killed,
`recover` finds the lines in the files (named by `Spill.prefix`) and describes them for `reopen`.

Call every method from one thread (the event loop's). The one exception is the iterator that
`blocks` and `iter_lines` return, which may be consumed in a worker thread while appends go
on: it snapshots the extent and the open lines when called (the normalizer is not
thread-safe), then reads only completed lines, whose text is written before their count and
never changes.
"""

from __future__ import annotations

import glob
import re
from array import array
from bisect import bisect_right
from collections.abc import Iterator
from pathlib import Path
from typing import TypedDict

from warmkernel.execution.line_store import LineStore, StreamManifest, TextBlock, encode
from warmkernel.execution.spill import OutputDropped, Spill

# The normalizer's own definitions: text without a control character renders as itself, and
# only a character that opens an escape sequence can make it hold text back between chunks.
from warmkernel.execution.terminal import CONTROL, INTRODUCERS, TerminalNormalizer
from warmkernel.types import APPENDABLE_STREAMS, ReadableStream, StreamName

_INTRODUCER = re.compile(f"[{re.escape(''.join(sorted(INTRODUCERS)))}]")
_ASCII_CONTROLS = bytes(code for code in range(128) if CONTROL.match(chr(code)))


def _plain_lines(text: str, head: int, end: int) -> tuple[bytes, int, int] | None:
    """`(blob, lo, hi)` with `blob[lo:hi]` the UTF-8 of `text[head:end]`, unless it holds a control.

    ASCII text, the usual flood, is encoded whole and checked as bytes (two C passes, no copy
    of the slice); a control found there may lie outside the slice, so the slice is then
    checked on its own.
    """
    if text.isascii():
        blob = text.encode("ascii")
        if len(blob.translate(None, _ASCII_CONTROLS)) == len(blob) or not CONTROL.search(text, head, end):
            return blob, head, end
        return None
    if CONTROL.search(text, head, end):
        return None
    blob = encode(text[head:end])
    return blob, 0, len(blob)


class LogManifest(TypedDict):
    """A persisted log: each appendable stream, and the runs of combined as parallel lists."""

    streams: dict[str, StreamManifest]
    run_streams: list[int]
    run_firsts: list[int]
    run_ends: list[int]


class _Stream:
    """One appendable stream: its normalizer and its completed lines."""

    __slots__ = ("normalizer", "plain", "store")

    def __init__(self) -> None:
        self.normalizer = TerminalNormalizer()
        self.store = LineStore()
        self.plain = True
        """No escape sequence ever began here, so the normalizer holds none back between chunks."""


class OutputLog:
    """All output text of one execution: append while it runs, read and search any time."""

    def __init__(self, spill: Spill | None = None) -> None:
        self._spill = spill
        self._streams: dict[StreamName, _Stream] = {name: _Stream() for name in APPENDABLE_STREAMS}
        # Runs of combined, as parallel arrays; `_run_ends` holds cumulative line counts and
        # is written last, so its length is the number of complete runs.
        self._run_stream = array("B")
        self._run_first = array("Q")
        self._run_ends = array("Q")
        self._written: list[StreamName] = []
        """Streams in the order they were last written: the order of open lines in combined."""
        self._in_memory = 0
        """Bytes held in memory by the stores, until they move to disk."""
        self._on_disk = False
        self._closed = False
        self._dropped = False
        self.unwritable: OSError | None = None
        """The write to disk that failed (a full disk): since then, no line is kept."""
        self.not_kept_bytes = 0
        """Bytes of completed lines not kept since `unwritable`."""

    def append(self, stream: StreamName, text: str) -> None:
        """Append raw terminal text to `stream`; raises RuntimeError once the log is closed."""
        if self._closed:
            raise RuntimeError(f"cannot append to {stream}: the execution's output is closed")
        part = self._streams[stream]
        head, end = text.find("\n") + 1, text.rfind("\n") + 1
        # The whole lines between the first and the last newline render as themselves when
        # they hold no control character and no escape sequence held back swallows them.
        middle = _plain_lines(text, head, end) if part.plain and head > 0 else None
        if part.plain:
            # Without controls the middle holds no introducer: only the ends need a look.
            spans = ((0, head), (end, len(text))) if middle else ((0, len(text)),)
            part.plain = not any(_INTRODUCER.search(text, lo, hi) for lo, hi in spans)
        if part.plain and middle:
            # The normalizer ends the open line; the whole lines after it are stored unsplit.
            self._complete(stream, part.normalizer.feed(text[:head]))
            self._store(stream, *middle, end - head)
            lines = part.normalizer.feed(text[end:])
        else:
            lines = part.normalizer.feed(text)
        self._complete(stream, lines)
        if stream in self._written:
            self._written.remove(stream)
        self._written.append(stream)

    def close(self) -> None:
        """End of execution: every open line becomes a completed line, in combined order."""
        if self._closed:
            raise RuntimeError("the execution's output is already closed")
        for stream in self._written:
            line = self._streams[stream].normalizer.flush()
            if line is not None:
                self._complete(stream, [line])
        self._closed = True
        for part in self._streams.values():
            part.store.close()

    def persist(self) -> LogManifest:
        """Put a closed log's text in files of its spill directory and describe it for `reopen`.

        Text still in memory is written (and counted by `Spill.on_write`) and read from there
        on; spilled text stays in its file, so reads in flight go on undisturbed. A write that
        fails (a full disk) raises OSError; the log stays as it was, readable.
        """
        if not self._closed:
            raise RuntimeError("cannot persist the output of an execution that is still running")
        if self._dropped:
            raise RuntimeError("cannot persist output that was dropped")
        if self._spill is None:
            raise RuntimeError("cannot persist a log that has no spill directory")
        self._move_to_disk()
        for part in self._streams.values():
            part.store.close()
        return LogManifest(
            streams={name: part.store.manifest() for name, part in self._streams.items()},
            run_streams=self._run_stream.tolist(),
            run_firsts=self._run_first.tolist(),
            run_ends=self._run_ends.tolist(),
        )

    def write_through(self) -> None:
        """Move the text to disk now, and every later line as it completes (a running log with
        a spill directory; else nothing to do)."""
        if self._spill is not None and not self._on_disk and not self._closed and self.unwritable is None:
            try:
                self._move_to_disk()
            except OSError as exc:
                self._give_up(exc)

    @staticmethod
    def recover(directory: Path, prefix: str) -> LogManifest | None:
        """Describe, for `reopen`, the lines a log that wrote through to `directory` had completed
        when its process ended; None if it left no file there. Combined holds each stream's lines
        in turn: how they interleaved was in that process's memory."""
        streams: dict[str, StreamManifest] = {}
        run_streams: list[int] = []
        run_ends: list[int] = []
        for code, name in enumerate(APPENDABLE_STREAMS):
            found = sorted(directory.glob(f"{glob.escape(prefix)}{name}-*"))
            store = LineStore.recovered(found[0]) if found else LineStore()
            streams[name] = store.manifest()
            if store.count():
                run_streams.append(code)
                run_ends.append((run_ends[-1] if run_ends else 0) + store.count())
        if not any(part["file"] for part in streams.values()):
            return None
        return LogManifest(
            streams=streams, run_streams=run_streams, run_firsts=[0] * len(run_streams), run_ends=run_ends
        )

    @classmethod
    def reopen(cls, directory: Path, manifest: LogManifest) -> OutputLog:
        """A closed log from `persist`'s files in `directory`: read-only, its text read on demand.

        A file that is gone reads as dropped output.
        """
        log = cls()
        for name, part in log._streams.items():
            part.store = LineStore.restored(directory, manifest["streams"][name])
        log._run_stream = array("B", manifest["run_streams"])
        log._run_first = array("Q", manifest["run_firsts"])
        log._run_ends = array("Q", manifest["run_ends"])
        log._on_disk = log._closed = True
        return log

    @property
    def disk_bytes(self) -> int:
        """Bytes of this log in spill files."""
        return sum(part.store.size() for part in self._streams.values() if part.store.on_disk)

    @property
    def dropped(self) -> bool:
        return self._dropped

    def drop(self) -> int:
        """Throw a closed log's text away to free its disk space; returns the bytes freed.

        Counts and the small index stay (a search in a worker thread may be reading them);
        every later read raises `OutputDropped`.
        """
        if not self._closed:
            raise RuntimeError("cannot drop the output of an execution that is still running")
        self._dropped = True
        return sum(part.store.drop() for part in self._streams.values())

    def line_count(self, stream: ReadableStream) -> int:
        """Completed lines plus one for each non-empty open line."""
        if stream == "combined":
            return self._combined_count() + len(self._open_lines())
        part = self._streams[stream]
        return part.store.count() + (1 if part.normalizer.open_line else 0)

    def runs(self) -> list[tuple[StreamName, int, int]]:
        """Combined as runs of one stream: `(stream, first line, end)`, open lines last."""
        ends = self._run_ends.tolist()
        found: list[tuple[StreamName, int, int]] = [
            (APPENDABLE_STREAMS[code], start, end)
            for code, start, end in zip(self._run_stream.tolist(), [0, *ends], ends, strict=False)
        ]
        at = self._combined_count()
        for name in self._written:
            if self._streams[name].normalizer.open_line:
                found.append((name, at, at + 1))
                at += 1
        return found

    def completed_count(self) -> int:
        """Completed lines of combined: the 0-based index the next completed line will get."""
        return self._combined_count()

    def char_count(self, stream: ReadableStream) -> int:
        """Characters of all lines, newlines not counted."""
        parts = self._streams.values() if stream == "combined" else (self._streams[stream],)
        return sum(part.store.chars() + len(part.normalizer.open_line) for part in parts)

    def lines(self, stream: ReadableStream, start: int, stop: int) -> list[str]:
        """Lines `start` to `stop`, 0-based half-open, clamped to the stream like a list slice."""
        return list(self.iter_lines(stream, start, stop))

    def last_lines(self, stream: ReadableStream, n: int) -> list[str]:
        """The last `n` lines (fewer if the stream is shorter)."""
        count = self.line_count(stream)
        return self.lines(stream, max(count - n, 0), count)

    def iter_lines(self, stream: ReadableStream, start: int = 0, stop: int | None = None) -> Iterator[str]:
        """Lines from `start` to `stop` (the end as of this call if None), read a block at a time."""
        blocks = self.blocks(stream, start, stop)
        return (line for block in blocks for line in block.text.split("\n"))

    def origins(self, start: int, stop: int) -> list[tuple[StreamName, int]]:
        """Which stream each combined line from `start` to `stop` (0-based, half-open, clamped) came
        from, as runs `(stream, count)`; a page colours tracebacks and stderr by it."""
        completed, open_streams = self._combined_count(), self._open_streams()
        stop = min(stop, completed + len(open_streams))
        runs: list[tuple[StreamName, int]] = []
        index = start
        run = bisect_right(self._run_ends, index)
        while index < min(stop, completed):
            take = min(self._run_ends[run], stop) - index
            runs.append((APPENDABLE_STREAMS[self._run_stream[run]], take))
            index += take
            run += 1
        runs.extend((name, 1) for name in open_streams[max(start - completed, 0) : max(stop - completed, 0)])
        return runs

    def blocks(self, stream: ReadableStream, start: int = 0, stop: int | None = None) -> Iterator[TextBlock]:
        """Lines from `start` to `stop` in blocks; the extent is taken now, the text read lazily."""
        if start < 0 or (stop is not None and stop < 0):
            raise ValueError(f"blocks({start}, {stop}) takes non-negative indices")
        if self._dropped:
            raise OutputDropped
        if stream == "combined":
            completed, open_lines = self._combined_count(), self._open_lines()
        else:
            part = self._streams[stream]
            completed, open_line = part.store.count(), part.normalizer.open_line
            open_lines = [open_line] if open_line else []
        total = completed + len(open_lines)
        hi = total if stop is None else min(stop, total)
        return self._generate(stream, min(start, hi), hi, completed, open_lines)

    def _complete(self, stream: StreamName, lines: list[str]) -> None:
        if lines:
            text = "\n".join(lines) + "\n"
            blob = encode(text)
            self._store(stream, blob, 0, len(blob), len(text))

    def _store(self, stream: StreamName, blob: bytes, lo: int, hi: int, length: int) -> None:
        """Store the whole lines `blob[lo:hi]` (`length` characters) and extend combined; once a
        write to disk failed, count them instead."""
        if self.unwritable is not None:
            self.not_kept_bytes += hi - lo
            return
        lines = blob.count(b"\n", lo, hi)
        store = self._streams[stream].store
        first = store.count()
        spill = self._spill
        try:
            if spill is not None and not self._on_disk and self._in_memory + hi - lo > spill.threshold_bytes:
                self._move_to_disk()
            if self._on_disk and not store.on_disk:
                self._to_disk(stream)
            store.append(blob, lo, hi, lines, length - lines)
        except OSError as exc:
            self.not_kept_bytes += hi - lo
            self._give_up(exc)
            return
        if store.on_disk:
            self._spilled(hi - lo)
        else:
            self._in_memory += hi - lo
        code = APPENDABLE_STREAMS.index(stream)
        runs = len(self._run_ends)
        if runs and self._run_stream[runs - 1] == code:
            self._run_ends[runs - 1] += lines
        else:
            self._run_stream.append(code)
            self._run_first.append(first)
            self._run_ends.append((self._run_ends[runs - 1] if runs else 0) + lines)

    def _move_to_disk(self) -> None:
        """At the threshold: every stream with text in memory moves to disk, and later text goes there."""
        self._on_disk = True
        self._in_memory = 0
        for name, part in self._streams.items():
            if part.store.size() and not part.store.on_disk:
                self._to_disk(name)

    def _give_up(self, error: OSError) -> None:
        """A write to disk failed: keep what is kept, count the rest, tell the spill's owner."""
        self.unwritable = error
        assert self._spill is not None
        self._spill.on_full(error)

    def _to_disk(self, stream: StreamName) -> None:
        spill = self._spill
        assert spill is not None
        self._spilled(self._streams[stream].store.to_disk(spill.directory, f"{spill.prefix}{stream}-"))

    def _spilled(self, written: int) -> None:
        assert self._spill is not None
        self._spill.on_write(written)

    def _combined_count(self) -> int:
        """Completed lines of combined: every completed line of every stream."""
        return sum(part.store.count() for part in self._streams.values())

    def _open_lines(self) -> list[str]:
        """Non-empty open lines of all streams, in the order their streams were last written."""
        opened = (self._streams[name].normalizer.open_line for name in self._written)
        return [line for line in opened if line]

    def _open_streams(self) -> list[StreamName]:
        """The streams of `_open_lines`, in the same order."""
        return [name for name in self._written if self._streams[name].normalizer.open_line]

    def _generate(
        self, stream: ReadableStream, lo: int, hi: int, completed: int, open_lines: list[str]
    ) -> Iterator[TextBlock]:
        yield from self._completed_blocks(stream, lo, min(hi, completed))
        shown = open_lines[max(lo - completed, 0) : max(hi - completed, 0)]
        if shown:
            yield TextBlock(max(lo, completed), "\n".join(shown), len(shown))

    def _completed_blocks(self, stream: ReadableStream, lo: int, hi: int) -> Iterator[TextBlock]:
        """Completed lines `lo` to `hi` of `stream`; combined reads each run from its stream."""
        if stream != "combined":
            yield from self._streams[stream].store.blocks(lo, hi)
            return
        run = bisect_right(self._run_ends, lo)
        index = lo
        while index < hi:
            run_start = self._run_ends[run - 1] if run else 0
            take = min(self._run_ends[run], hi) - index
            store = self._streams[APPENDABLE_STREAMS[self._run_stream[run]]].store
            first = self._run_first[run] + index - run_start
            for block in store.blocks(first, first + take):
                yield TextBlock(index + block.first - first, block.text, block.count)
            index += take
            run += 1
