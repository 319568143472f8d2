"""OutputLog: per-stream lines, the combined view, open lines, close, reads by range, spill
files, the sparse line index, and dropping."""

from __future__ import annotations

import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from warmkernel.execution import line_store
from warmkernel.execution.line_range import parse_line_range
from warmkernel.execution.output_log import OutputLog
from warmkernel.execution.spill import FileBody, OutputDropped, Spill
from warmkernel.execution.terminal import TerminalNormalizer
from warmkernel.types import APPENDABLE_STREAMS, READABLE_STREAMS, ReadableStream, StreamName


def log_of(*appends: tuple[StreamName, str]) -> OutputLog:
    log = OutputLog()
    for stream, text in appends:
        log.append(stream, text)
    return log


def everything(log: OutputLog, stream: ReadableStream) -> list[str]:
    return log.lines(stream, 0, log.line_count(stream))


@dataclass
class Reference:
    """Plain text without control characters, modelled the simplest way: split on "\\n"."""

    completed: dict[StreamName, list[str]] = field(
        default_factory=lambda: {s: [] for s in APPENDABLE_STREAMS}
    )
    open: dict[StreamName, str] = field(default_factory=lambda: dict.fromkeys(APPENDABLE_STREAMS, ""))
    combined: list[str] = field(default_factory=list)
    combined_streams: list[StreamName] = field(default_factory=list)
    written: list[StreamName] = field(default_factory=list)

    def append(self, stream: StreamName, text: str) -> None:
        *done, self.open[stream] = (self.open[stream] + text).split("\n")
        self.completed[stream] += done
        self.combined += done
        self.combined_streams.extend(stream for _ in done)
        if stream in self.written:
            self.written.remove(stream)
        self.written.append(stream)

    def close(self) -> None:
        for stream in self.written:
            if self.open[stream]:
                self.completed[stream].append(self.open[stream])
                self.combined.append(self.open[stream])
                self.open[stream] = ""

    def origins(self) -> list[StreamName]:
        """The stream of each line of combined."""
        return self.combined_streams + [s for s in self.written if self.open[s]]

    def lines(self, stream: ReadableStream) -> list[str]:
        if stream == "combined":
            return self.combined + [self.open[s] for s in self.written if self.open[s]]
        return self.completed[stream] + ([self.open[stream]] if self.open[stream] else [])


# Plain text: no control characters but "\n"; multi-byte and astral characters included.
plain_text = st.text(alphabet=st.sampled_from("ab é€😀\n"), max_size=40)
appends = st.lists(st.tuples(st.sampled_from(APPENDABLE_STREAMS), plain_text), max_size=30)
range_ends = st.one_of(st.none(), st.integers(-40, -1), st.integers(1, 40))


class SpillRecorder:
    """A spill directory of its own and every write reported to it."""

    def __init__(self, directory: Path, threshold_bytes: int) -> None:
        self.directory = directory
        self.writes: list[int] = []
        self.spill = Spill(directory, threshold_bytes, self.writes.append)

    def file_sizes(self) -> int:
        return sum(path.stat().st_size for path in self.directory.iterdir())


@contextmanager
def small_index(mark_bytes: int, block_bytes: int) -> Iterator[None]:
    """Index marks and read blocks this small, so a few lines cross many of them."""
    with (
        patch.object(line_store, "_MARK_BYTES", mark_bytes),
        patch.object(line_store, "_BLOCK_BYTES", block_bytes),
    ):
        yield


@settings(max_examples=400)
@given(
    appends=appends,
    close=st.booleans(),
    stream=st.sampled_from(READABLE_STREAMS),
    start=range_ends,
    stop=range_ends,
    spill_after=st.one_of(st.none(), st.integers(0, 150)),
    mark_bytes=st.sampled_from([1, 5, 64, 8192]),
    block_bytes=st.sampled_from([1, 7, 65536]),
)
def test_any_appends_then_any_line_range_equal_slicing_the_reference(
    appends: list[tuple[StreamName, str]],
    close: bool,
    stream: ReadableStream,
    start: int | None,
    stop: int | None,
    spill_after: int | None,
    mark_bytes: int,
    block_bytes: int,
) -> None:
    """In memory or spilled at any point, with index marks and read blocks of any size."""
    with tempfile.TemporaryDirectory() as directory, small_index(mark_bytes, block_bytes):
        recorder = SpillRecorder(Path(directory), spill_after or 0)
        log, reference = OutputLog(None if spill_after is None else recorder.spill), Reference()
        for name, text in appends:
            log.append(name, text)
            reference.append(name, text)
        if close:
            log.close()
            reference.close()
        expected = reference.lines(stream)
        spec = f"{'' if start is None else start}:{'' if stop is None else stop}"
        lo, hi = parse_line_range(spec).resolve(log.line_count(stream))

        assert log.line_count(stream) == len(expected)
        assert log.lines(stream, lo, hi) == expected[lo:hi]
        assert log.char_count(stream) == sum(map(len, expected))
        assert list(log.iter_lines(stream, lo)) == expected[lo:]
        blocks = list(log.blocks(stream, lo, hi))
        assert [line for block in blocks for line in block.text.split("\n")] == expected[lo:hi]
        assert [block.first for block in blocks] == [
            lo + sum(b.count for b in blocks[:i]) for i in range(len(blocks))
        ]
        assert log.disk_bytes == sum(recorder.writes) == recorder.file_sizes()
        if not close:
            log.close()  # release the spill files' descriptors


@pytest.mark.parametrize("mark_bytes", range(1, 14))
@pytest.mark.parametrize("appended", ["whole", "line by line"])
def test_every_line_reads_alone_whatever_the_mark_spacing(mark_bytes: int, appended: str) -> None:
    expected = ["x" * (i * 7 % 11) + "é" * (i % 3) for i in range(80)]  # 0 to 12 characters
    with small_index(mark_bytes, 65536):
        log = OutputLog()
        for chunk in ["\n".join(expected) + "\n"] if appended == "whole" else [f"{x}\n" for x in expected]:
            log.append("stdout", chunk)
        assert [log.lines("stdout", k, k + 1) for k in range(80)] == [[line] for line in expected]
        assert [log.lines("stdout", k, 80) for k in range(80)] == [expected[k:] for k in range(80)]


# Fragments that drive the normalizer through every state a chunk boundary can cut: escape
# sequences begun, ended or aborted (an OSC swallows newlines until BEL or ST), redraws, and
# whole plain lines that can take the fast path.
TERMINAL_FRAGMENTS = [
    "\n", "line\n", "a", "é", "\t", "\r", "\b", "\x00", "\x1b", "\x1b[", "31m", "\x1b[2K", "\x1b]",
    "title", "\x07", "\x9d", "\x1b\\", "a\nb\nc\n",
]  # fmt: skip


@given(chunks=st.lists(st.lists(st.sampled_from(TERMINAL_FRAGMENTS), max_size=10).map("".join), max_size=10))
def test_lines_are_what_one_terminal_normalizer_renders_from_the_same_chunks(chunks: list[str]) -> None:
    log, normalizer, rendered = OutputLog(), TerminalNormalizer(), []
    for chunk in chunks:
        log.append("stdout", chunk)
        rendered += normalizer.feed(chunk)
        open_line = normalizer.open_line
        assert everything(log, "stdout") == rendered + ([open_line] if open_line else [])
    log.close()
    flushed = normalizer.flush()
    assert everything(log, "stdout") == rendered + ([flushed] if flushed else [])


@given(text=plain_text, cuts=st.lists(st.integers(0, 40), max_size=8))
def test_chunking_does_not_change_the_lines(text: str, cuts: list[int]) -> None:
    bounds = [0, *sorted(min(cut, len(text)) for cut in cuts), len(text)]
    whole, chunked = log_of(("stdout", text)), OutputLog()
    for lo, hi in pairwise(bounds):
        chunked.append("stdout", text[lo:hi])
    assert everything(chunked, "stdout") == everything(whole, "stdout")
    assert everything(chunked, "combined") == everything(whole, "combined")


@pytest.mark.parametrize(
    ("appends", "expected"),
    [
        pytest.param(
            [("stdout", "o1\n"), ("stderr", "e1\n"), ("stdout", "o2\no3\n")],
            ["o1", "e1", "o2", "o3"],
            id="completed lines in the order they complete",
        ),
        pytest.param(
            [("stdout", "part"), ("stderr", "e1\n"), ("stdout", " done\n")],
            ["e1", "part done"],
            id="a line is placed when it completes, not when it starts",
        ),
        pytest.param(
            [("stdout", "o1\nopen-out"), ("stderr", "open-err")],
            ["o1", "open-out", "open-err"],
            id="open lines come last",
        ),
        pytest.param(
            [("stdout", "open-out"), ("stderr", "open-err"), ("stdout", "+more")],
            ["open-err", "open-out+more"],
            id="open lines in the order their streams were last written",
        ),
        pytest.param(
            [("result", "r"), ("stdout", "o\n"), ("traceback", "t1\nt2")],
            ["o", "t1", "r", "t2"],
            id="open lines follow every completed line",
        ),
        pytest.param(
            [("stdout", "o\n"), ("stderr", ""), ("stdout", "")],
            ["o"],
            id="empty open lines are not lines",
        ),
    ],
)
def test_combined_order_with_interleaved_streams_and_open_lines(
    appends: list[tuple[StreamName, str]], expected: list[str]
) -> None:
    assert everything(log_of(*appends), "combined") == expected


@given(appends, st.integers(0, 40), st.integers(0, 40))
def test_origins_name_the_stream_of_every_combined_line_in_any_range(
    appended: list[tuple[StreamName, str]], start: int, stop: int
) -> None:
    log, reference = OutputLog(), Reference()
    for stream, text in appended:
        log.append(stream, text)
        reference.append(stream, text)
    expanded = [stream for stream, count in log.origins(start, stop) for _ in range(count)]
    assert expanded == reference.origins()[start:stop]


def test_close_turns_open_lines_into_completed_lines_in_combined_order() -> None:
    log = log_of(("stdout", "o1\nopen-out"), ("stderr", "open-err"), ("stdout", "+more"))
    log.close()
    assert everything(log, "combined") == ["o1", "open-err", "open-out+more"]
    assert everything(log, "stdout") == ["o1", "open-out+more"]
    assert everything(log, "stderr") == ["open-err"]


def test_close_then_append_is_refused() -> None:
    log = log_of(("stdout", "x"))
    log.close()
    with pytest.raises(RuntimeError, match="closed"):
        log.append("stdout", "y")
    with pytest.raises(RuntimeError, match="already closed"):
        log.close()


def test_close_without_open_lines_adds_nothing() -> None:
    log = log_of(("stdout", "a\n"), ("stderr", "b\n"))
    log.close()
    assert everything(log, "combined") == ["a", "b"]


def test_each_stream_is_normalized_on_its_own() -> None:
    log = log_of(
        ("stdout", "progress 10%"),
        ("stderr", "\x1b[31mred\x1b[0m\n"),
        ("stdout", "\rprogress 100%\n"),
        ("stderr", "keep\r"),
    )
    assert everything(log, "stdout") == ["progress 100%"]
    assert everything(log, "stderr") == ["red", "keep"]
    assert everything(log, "combined") == ["red", "progress 100%", "keep"]


def test_open_line_shows_as_it_renders_now() -> None:
    log = log_of(("stdout", "10%"))
    assert log.last_lines("stdout", 1) == ["10%"]
    log.append("stdout", "\r55%")
    assert log.last_lines("combined", 1) == ["55%"]
    assert log.line_count("stdout") == 1


def test_lone_surrogate_is_stored_as_a_replacement_character_and_reads_do_not_raise() -> None:
    log = log_of(("stdout", "a\ud800b\nok\n"), ("stderr", "\udcff"))
    log.close()
    assert everything(log, "combined") == ["a\ufffdb", "ok", "\ufffd"]
    assert log.char_count("combined") == 6
    for line in everything(log, "combined"):
        line.encode("utf-8")


def test_splits_on_newline_only() -> None:
    odd = "a\u2028b\x85c\u000bd"  # separators that str.splitlines would split on
    log = log_of(("result", f"{odd}\nnext\n"))
    assert everything(log, "result") == ["a\u2028bcd", "next"]


@pytest.mark.parametrize(
    ("start", "stop", "expected"),
    [
        pytest.param(0, 2, ["a", "b"], id="head"),
        pytest.param(1, 1, [], id="empty slice"),
        pytest.param(2, 1, [], id="reversed slice"),
        pytest.param(2, 99, ["c", "open"], id="stop past the end clamps"),
        pytest.param(99, 120, [], id="start past the end"),
        pytest.param(3, 4, ["open"], id="only the open line"),
    ],
)
def test_lines_clamps_like_a_list_slice(start: int, stop: int, expected: list[str]) -> None:
    log = log_of(("stdout", "a\nb\nc\nopen"))
    assert log.lines("stdout", start, stop) == expected
    assert log.lines("combined", start, stop) == expected


def test_lines_refuses_negative_indices() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        OutputLog().lines("stdout", -1, 2)


def test_last_lines_of_a_short_stream_is_the_whole_stream() -> None:
    log = log_of(("stdout", "a\nb\n"))
    assert log.last_lines("stdout", 5) == ["a", "b"]
    assert log.last_lines("stdout", 1) == ["b"]
    assert log.last_lines("stdout", 0) == []


def test_empty_log_reads_as_empty() -> None:
    log = OutputLog()
    for stream in READABLE_STREAMS:
        assert log.line_count(stream) == 0
        assert log.char_count(stream) == 0
        assert log.lines(stream, 0, 10) == []
        assert list(log.iter_lines(stream)) == []


def test_many_lines_across_many_runs_read_back_in_batches() -> None:
    """Crosses read batches and run boundaries, and reads from the middle of a run."""
    log, expected = OutputLog(), []
    for block in range(12):
        stream: StreamName = APPENDABLE_STREAMS[block % 3]
        lines = [f"{stream}-{block}-{i}-é" for i in range(1500 + block)]
        log.append(stream, "\n".join(lines) + "\n")
        expected += lines
    assert log.line_count("combined") == len(expected)
    assert list(log.iter_lines("combined", 4000)) == expected[4000:]
    assert log.lines("combined", 1499, 1502) == expected[1499:1502]
    assert (
        log.lines("stdout", 1400, 1600) == [line for line in expected if line.startswith("stdout")][1400:1600]
    )


def test_iter_lines_sees_the_log_as_it_was_when_called() -> None:
    log = log_of(("stdout", "a\nb\nopen"))
    lines = log.iter_lines("combined")
    log.append("stdout", " more\nc\n")
    log.append("stderr", "d\n")
    assert list(lines) == ["a", "b", "open"]


def test_below_the_threshold_nothing_is_written_to_disk(tmp_path: Path) -> None:
    recorder = SpillRecorder(tmp_path, threshold_bytes=1000)
    log = OutputLog(recorder.spill)
    log.append("stdout", "x" * 994 + "\n")
    log.close()
    assert (log.disk_bytes, recorder.writes, list(tmp_path.iterdir())) == (0, [], [])


def test_past_the_threshold_every_stream_moves_to_private_files_and_reads_the_same(tmp_path: Path) -> None:
    recorder = SpillRecorder(tmp_path, threshold_bytes=1000)
    log = OutputLog(recorder.spill)
    log.append("stderr", "warning\n")
    log.append("stdout", "".join(f"row {i}\n" for i in range(300)))
    log.append("result", "Out[1]: 42\n")  # first written after the move: straight to disk
    log.close()
    files = sorted(path.name.split("-")[0] for path in tmp_path.iterdir())
    assert files == ["result", "stderr", "stdout"]
    assert all(stat.S_IMODE(path.stat().st_mode) == 0o600 for path in tmp_path.iterdir())
    assert log.disk_bytes == sum(recorder.writes) == recorder.file_sizes() > 1000
    assert everything(log, "combined") == ["warning", *(f"row {i}" for i in range(300)), "Out[1]: 42"]


def test_blocks_taken_before_the_move_to_disk_read_what_they_saw(tmp_path: Path) -> None:
    log = OutputLog(SpillRecorder(tmp_path, threshold_bytes=100).spill)
    log.append("stdout", "a\nb\nopen")
    blocks = log.blocks("combined")
    log.append("stdout", "".join(f"row {i}\n" for i in range(100)))
    assert log.disk_bytes > 0
    assert [block.text for block in blocks] == ["a\nb", "open"]
    log.close()


def test_a_line_range_read_costs_what_it_returns_not_what_the_stream_holds(tmp_path: Path) -> None:
    log = OutputLog(SpillRecorder(tmp_path, threshold_bytes=0).spill)
    for start in range(0, 300_000, 50_000):
        log.append("stdout", "".join(f"line {i}\n" for i in range(start, start + 50_000)))
    log.close()
    read: list[int] = []
    original = FileBody.read

    def counted(body: FileBody, start: int, stop: int) -> bytes | bytearray:
        data = original(body, start, stop)
        read.append(len(data))
        return data

    with patch.object(FileBody, "read", counted):
        assert log.lines("stdout", 150_000, 150_020) == [f"line {i}" for i in range(150_000, 150_020)]
        assert log.last_lines("combined", 10) == [f"line {i}" for i in range(299_990, 300_000)]
    # Two marks' worth to find each range's ends, plus the lines returned.
    assert sum(read) <= 4 * line_store._MARK_BYTES + 2 * 20 * len("line 300000\n")
    assert log.disk_bytes > 100 * sum(read)


def test_a_line_longer_than_a_read_block_and_the_lines_around_it_read_whole(tmp_path: Path) -> None:
    long = "é" * 200_000 + "😀"  # no newline until the end: arrives in many chunks
    with small_index(64, 1024):
        log = OutputLog(SpillRecorder(tmp_path, threshold_bytes=0).spill)
        log.append("stdout", "before\n")
        for at in range(0, len(long), 7_000):
            log.append("stdout", long[at : at + 7_000])
        log.append("stdout", "\nafter\n\x00tail without newline")
        assert log.last_lines("stdout", 1) == ["tail without newline"]
        log.close()
        assert everything(log, "stdout") == ["before", long, "after", "tail without newline"]
        assert log.lines("stdout", 2, 3) == ["after"]
        assert [block.count for block in log.blocks("stdout")] == [1, 1, 2]


def test_drop_frees_the_files_keeps_the_counts_and_later_reads_raise(tmp_path: Path) -> None:
    recorder = SpillRecorder(tmp_path, threshold_bytes=0)
    log = OutputLog(recorder.spill)
    log.append("stdout", "one\ntwo\n")
    log.close()
    blocks = log.blocks("stdout")  # a search in a worker thread may hold this meanwhile
    assert log.drop() == sum(recorder.writes) > 0
    assert (log.dropped, log.disk_bytes, list(tmp_path.iterdir())) == (True, 0, [])
    assert (log.line_count("combined"), log.char_count("stdout")) == (2, 6)
    with pytest.raises(OutputDropped):
        log.lines("stdout", 0, 1)
    with pytest.raises(OutputDropped):
        list(blocks)


def test_drop_of_a_log_still_being_written_is_refused(tmp_path: Path) -> None:
    log = OutputLog(SpillRecorder(tmp_path, threshold_bytes=0).spill)
    log.append("stdout", "x\n")
    with pytest.raises(RuntimeError, match="still running"):
        log.drop()
    log.close()
