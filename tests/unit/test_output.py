"""OutputLog: per-stream lines, the combined view, open lines, close, and reads by range."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from warmkernel.execution.line_range import parse_line_range
from warmkernel.execution.output import OutputLog
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
    written: list[StreamName] = field(default_factory=list)

    def append(self, stream: StreamName, text: str) -> None:
        *done, self.open[stream] = (self.open[stream] + text).split("\n")
        self.completed[stream] += done
        self.combined += done
        if stream in self.written:
            self.written.remove(stream)
        self.written.append(stream)

    def close(self) -> None:
        for stream in self.written:
            if self.open[stream]:
                self.completed[stream].append(self.open[stream])
                self.combined.append(self.open[stream])
                self.open[stream] = ""

    def lines(self, stream: ReadableStream) -> list[str]:
        if stream == "combined":
            return self.combined + [self.open[s] for s in self.written if self.open[s]]
        return self.completed[stream] + ([self.open[stream]] if self.open[stream] else [])


# Plain text: no control characters but "\n"; multi-byte and astral characters included.
plain_text = st.text(alphabet=st.sampled_from("ab é€😀\n"), max_size=40)
appends = st.lists(st.tuples(st.sampled_from(APPENDABLE_STREAMS), plain_text), max_size=30)
range_ends = st.one_of(st.none(), st.integers(-40, -1), st.integers(1, 40))


@settings(max_examples=300)
@given(
    appends=appends,
    close=st.booleans(),
    stream=st.sampled_from(READABLE_STREAMS),
    start=range_ends,
    stop=range_ends,
)
def test_any_appends_then_any_line_range_equal_slicing_the_reference(
    appends: list[tuple[StreamName, str]],
    close: bool,
    stream: ReadableStream,
    start: int | None,
    stop: int | None,
) -> None:
    log, reference = OutputLog(), Reference()
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
    assert list(log.iter_lines(stream, lo)) == list(enumerate(expected))[lo:]


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


def test_lone_surrogate_is_stored_as_a_question_mark_and_reads_do_not_raise() -> None:
    log = log_of(("stdout", "a\ud800b\nok\n"), ("stderr", "\udcff"))
    log.close()
    assert everything(log, "combined") == ["a?b", "ok", "?"]
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
    assert list(log.iter_lines("combined", 4000)) == list(enumerate(expected))[4000:]
    assert log.lines("combined", 1499, 1502) == expected[1499:1502]
    assert (
        log.lines("stdout", 1400, 1600) == [line for line in expected if line.startswith("stdout")][1400:1600]
    )


def test_iter_lines_sees_the_log_as_it_was_when_called() -> None:
    log = log_of(("stdout", "a\nb\nopen"))
    lines = log.iter_lines("combined")
    log.append("stdout", " more\nc\n")
    log.append("stderr", "d\n")
    assert list(lines) == [(0, "a"), (1, "b"), (2, "open")]
