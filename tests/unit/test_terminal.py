"""The terminal normalizer: named rendering cases, chunk-split invariance, a naive reference model."""

from __future__ import annotations

import re
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from warmkernel.execution.terminal import MAX_SEQUENCE_BODY, TerminalNormalizer

# Controls that must never reach a rendered line: all of C0 but `\t`, DEL and all of C1.
FORBIDDEN = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def render(chunks: list[str]) -> tuple[list[str], str, str | None]:
    """Feed the chunks in order: the completed lines, the open line before flush, the flush."""
    normalizer = TerminalNormalizer()
    lines: list[str] = []
    for chunk in chunks:
        lines.extend(normalizer.feed(chunk))
    open_line = normalizer.open_line
    return lines, open_line, normalizer.flush()


def split_at(text: str, cuts: list[int]) -> list[str]:
    bounds = [0, *sorted(cuts), len(text)]
    return [text[a:b] for a, b in pairwise(bounds)]


ST = "\x1b\\"
CAP = MAX_SEQUENCE_BODY

CASES = [
    # Plain text and line ends.
    pytest.param("one\ntwo\n", ["one", "two"], None, id="plain lines"),
    pytest.param("one\ntwo", ["one"], "two", id="open line flushed"),
    pytest.param("", [], None, id="nothing fed flushes None"),
    pytest.param("\n\n", ["", ""], None, id="empty lines kept"),
    pytest.param("a\tb\n", ["a\tb"], None, id="tab kept as one column"),
    pytest.param("a\tb\rX", [], "X\tb", id="tab overwritten like any column"),
    # Carriage return.
    pytest.param("hello\rHe", [], "Hello", id="cr then shorter overwrites prefix"),
    pytest.param("ab\rwxyz\n", ["wxyz"], None, id="cr then longer extends line"),
    pytest.param("\r 10%\r 50%\r100%\n", ["100%"], None, id="tqdm frames collapse to last"),
    pytest.param("abc\r\n", ["abc"], None, id="cr lf ends line unchanged"),
    pytest.param("abc\r", [], "abc", id="trailing cr keeps open line"),
    pytest.param("\r\r", [], None, id="only cr flushes None"),
    pytest.param("ab\ncd\rX\n", ["ab", "Xd"], None, id="cr acts on current line only"),
    # Backspace.
    pytest.param("abc\b\bX\n", ["aXc"], None, id="backspace then overwrite"),
    pytest.param("\b\bab\n", ["ab"], None, id="backspace at column zero stays"),
    pytest.param("a\b\b\bZ\n", ["Z"], None, id="backspace never below zero"),
    pytest.param("|\b/\b-\b\\\bdone\n", ["done"], None, id="spinner"),
    # Erase in line.
    pytest.param("abcdef\b\b\b\x1b[K\n", ["abc"], None, id="erase to end default"),
    pytest.param("abcdef\b\b\b\x1b[0K\n", ["abc"], None, id="erase to end 0K"),
    pytest.param("abcdef\b\b\b\x1b[1K\n", ["    ef"], None, id="erase to cursor 1K inclusive"),
    pytest.param("abc\x1b[1K\n", ["   "], None, id="erase to cursor past end blanks line"),
    pytest.param("abcdef\b\b\x1b[2K\n", [""], None, id="erase whole line 2K"),
    pytest.param("abc\x1b[2Kx\n", ["   x"], None, id="write after 2K pads to cursor"),
    pytest.param("abc\x1b[2K\rx\n", ["x"], None, id="2K then cr rewrites line"),
    pytest.param("old text\r\x1b[Knew\n", ["new"], None, id="cr erase rewrite"),
    pytest.param("abc\x1b[3Kd\n", ["abcd"], None, id="unknown erase parameter removed"),
    pytest.param("abc\x9b2Kx\n", ["   x"], None, id="8-bit CSI erase"),
    # CSI removed.
    pytest.param("\x1b[31mred\x1b[0m \x1b[1;32mgreen\x1b[m\n", ["red green"], None, id="colours removed"),
    pytest.param("a\x1b[2Ab\x1b[10Gc\x1b[?25ld\n", ["abcd"], None, id="cursor moves removed"),
    pytest.param("a\x1b[38;2;1;2;3mb\n", ["ab"], None, id="truecolour removed"),
    pytest.param("\x9b31mred\x9b0m\n", ["red"], None, id="8-bit CSI removed"),
    pytest.param("a\x1b[12\nb\n", ["a", "b"], None, id="CSI aborted by newline"),
    # OSC, DCS, SOS, PM, APC.
    pytest.param("\x1b]0;title\x07text\n", ["text"], None, id="OSC title with BEL"),
    pytest.param("\x1b]0;title" + ST + "text\n", ["text"], None, id="OSC title with ST"),
    pytest.param(
        "\x1b]8;;http://x\x07link\x1b]8;;\x07\n", ["link"], None, id="OSC 8 hyperlink with BEL keeps text"
    ),
    pytest.param(
        "\x1b]8;;http://x" + ST + "link\x1b]8;;" + ST + "\n", ["link"], None, id="OSC 8 hyperlink with ST"
    ),
    pytest.param("\x9d0;title\x9ctext\n", ["text"], None, id="8-bit OSC and ST"),
    pytest.param("a\x1b]0;line\nbreak\x07b\n", ["ab"], None, id="newline inside OSC is payload"),
    pytest.param("a\x1b]0;t\x1b[31mb\n", ["ab"], None, id="ESC aborts OSC and starts a new sequence"),
    pytest.param("a\x1bPq#0;2;0;0;0\x07x" + ST + "b\n", ["ab"], None, id="DCS with BEL inside payload"),
    pytest.param("a\x90payload\x9cb\n", ["ab"], None, id="8-bit DCS"),
    pytest.param(
        "a\x1bXsos" + ST + "b\x1b^pm" + ST + "c\x1b_apc" + ST + "d\n", ["abcd"], None, id="SOS PM APC"
    ),
    pytest.param("a\x98sos\x9cb\x9epm\x9cc\x9fapc\x9cd\n", ["abcd"], None, id="8-bit SOS PM APC"),
    # Other escape sequences.
    pytest.param("a\x1b7b\x1b8c\x1b=d\x1b(Be\x1b)0f\n", ["abcdef"], None, id="short ESC sequences removed"),
    pytest.param("a\x1b\x1b[31mb\n", ["ab"], None, id="ESC ESC restarts sequence"),
    pytest.param("a\x1b\nb\n", ["a", "b"], None, id="ESC aborted by newline"),
    pytest.param("ab\x1b", [], "ab", id="lone ESC at end dropped"),
    pytest.param("ab\x1b[3", [], "ab", id="incomplete CSI at end dropped"),
    pytest.param("ab\x1b]0;unterminated", [], "ab", id="incomplete OSC at end dropped"),
    pytest.param("\x1b[31m", [], None, id="only escapes flushes None"),
    # Other controls.
    pytest.param("a\x00b\x07c\x0bd\x0ce\x7ff\n", ["abcdef"], None, id="other C0 and DEL removed"),
    pytest.param("a\x80b\x85c\x9cd\x8de\n", ["abcde"], None, id="other C1 and lone ST removed"),
    pytest.param("caf\u00e9 \u2603\n", ["caf\u00e9 \u2603"], None, id="non-ASCII text kept"),
    # The cap on a sequence's body.
    pytest.param(
        "a\x1b]" + "x" * CAP + "\x07b\n", ["ab"], None, id="OSC body at the cap is still a sequence"
    ),
    pytest.param(
        "a\x1b]" + "x" * (CAP + 3) + "\x07b\n", ["axxxb"], None, id="OSC body over the cap is garbage"
    ),
    pytest.param("a\x1b[" + "1" * (CAP + 2) + "mb\n", ["a11mb"], None, id="CSI body over the cap is garbage"),
    pytest.param("a\x1b]" + "x" * CAP + ST + "b\n", ["ab"], None, id="ST straddling the cap ends the OSC"),
    pytest.param("a\x1b]" + "x" * CAP + "\x1b7b\n", ["ab"], None, id="ESC straddling the cap aborts the OSC"),
]


@pytest.mark.parametrize(("text", "lines", "flushed"), CASES)
def test_renders_case_fed_whole(text: str, lines: list[str], flushed: str | None) -> None:
    got_lines, _, got_flushed = render([text])
    assert got_lines == lines
    assert got_flushed == flushed


@pytest.mark.parametrize(("text", "lines", "flushed"), CASES)
def test_renders_case_fed_one_character_at_a_time(text: str, lines: list[str], flushed: str | None) -> None:
    got_lines, _, got_flushed = render(list(text))
    assert got_lines == lines
    assert got_flushed == flushed


def test_open_line_follows_redraws_and_feed_returns_only_completed_lines() -> None:
    normalizer = TerminalNormalizer()
    assert normalizer.open_line == ""
    assert normalizer.feed("done\n 50%") == ["done"]
    assert normalizer.open_line == " 50%"
    assert normalizer.feed("\r") == []
    assert normalizer.open_line == " 50%"
    assert normalizer.feed(" 7") == []
    assert normalizer.open_line == " 70%"
    assert normalizer.feed("5%\x1b[") == []
    assert normalizer.open_line == " 75%"
    assert normalizer.feed("K\n") == [" 75%"]
    assert normalizer.open_line == ""


def test_flush_resets_line_and_drops_pending_sequence() -> None:
    normalizer = TerminalNormalizer()
    assert normalizer.feed("tail\x1b[3") == []
    assert normalizer.flush() == "tail"
    assert normalizer.feed("1mnext\n") == ["1mnext"]
    assert normalizer.flush() is None


def test_cr_and_lf_split_across_chunks_end_the_line_once() -> None:
    normalizer = TerminalNormalizer()
    assert normalizer.feed("abc\r") == []
    assert normalizer.feed("\nX") == ["abc"]
    assert normalizer.flush() == "X"


def test_unterminated_osc_does_not_swallow_the_rest_of_the_stream() -> None:
    normalizer = TerminalNormalizer()
    lines: list[str] = []
    for _ in range(10):  # one megabyte of payload, never terminated
        lines.extend(normalizer.feed("\x1b]1337;File=" + "A" * 100_000 + "\n"))
    lines.extend(normalizer.feed("visible\n"))
    assert lines[-1] == "visible"
    assert len(lines) == 11


def test_long_line_fed_in_chunks_is_one_line() -> None:
    normalizer = TerminalNormalizer()
    for _ in range(100):
        assert normalizer.feed("x" * 1000) == []
    assert normalizer.feed("\n") == ["x" * 100_000]


# Text rich in controls and escape fragments, so that splits land inside sequences.
ALPHABET = "ab\n\r\b\t\x1b[]0123;K2mP\\\x07\x9b\x9c\x9d\x90\x85\x00\x7fX^_ (7"
FRAGMENTS = [
    "a", "bc", "\n", "\r", "\r\n", "\b", "\t", "\x1b", "\x1b[", "\x1b[2K", "\x1b[1K", "\x1b[K",
    "\x1b[31m", "\x1b]", "\x1b]8;;http://x", ST, "\x07", "\x1bP", "\x1b_", "\x9b", "\x9d", "\x9c",
    "\x90", "\x1b(", "B", ";", "1", "\x7f", "\x00",
]  # fmt: skip
texts = st.one_of(
    st.text(alphabet=ALPHABET, max_size=60),
    st.lists(st.sampled_from(FRAGMENTS), max_size=30).map("".join),
)


@st.composite
def split_texts(draw: st.DrawFn) -> tuple[str, list[int]]:
    text = draw(texts)
    cuts = draw(st.lists(st.integers(0, len(text)), max_size=8))
    return text, cuts


@given(split_texts())
def test_result_does_not_depend_on_chunking(text_and_cuts: tuple[str, list[int]]) -> None:
    text, cuts = text_and_cuts
    assert render(split_at(text, cuts)) == render([text])


@given(texts, st.integers(0, 60))
def test_result_does_not_depend_on_a_single_split_point(text: str, cut: int) -> None:
    assert render([text[:cut], text[cut:]]) == render([text])


@given(split_texts())
def test_output_has_no_control_characters_but_tab(text_and_cuts: tuple[str, list[int]]) -> None:
    text, cuts = text_and_cuts
    lines, open_line, flushed = render(split_at(text, cuts))
    for line in [*lines, open_line, flushed or ""]:
        assert FORBIDDEN.search(line) is None, repr(line)


# A naive cell-by-cell terminal line, to check the piecewise line model and the bulk
# stripping of colours and CRLF against.
REMOVED = ["\x1b[31m", "\x1b[0m", "\x9b1;2H", "\x1b]0;title\x07", "\x1b]8;;http://x" + ST, "\x1b7", "\x07"]
TOKENS = ["a", "bc", "xyz", "\t", "\r", "\b", "\n", "\x1b[K", "\x1b[0K", "\x1b[1K", "\x1b[2K", *REMOVED]


def reference(tokens: list[str]) -> tuple[list[str], str]:
    lines: list[str] = []
    cells: list[str] = []
    cursor = 0
    for token in tokens:
        if token == "\n":
            lines.append("".join(cells))
            cells, cursor = [], 0
        elif token == "\r":
            cursor = 0
        elif token == "\b":
            cursor = max(0, cursor - 1)
        elif token in ("\x1b[K", "\x1b[0K"):
            del cells[cursor:]
        elif token == "\x1b[1K":
            for column in range(min(cursor + 1, len(cells))):
                cells[column] = " "
        elif token == "\x1b[2K":
            cells = []
        elif token not in REMOVED:
            for char in token:
                if cursor >= len(cells):
                    cells.extend(" " * (cursor - len(cells)))
                    cells.append(char)
                else:
                    cells[cursor] = char
                cursor += 1
    return lines, "".join(cells)


@given(st.lists(st.sampled_from(TOKENS), max_size=40))
def test_matches_a_naive_cell_by_cell_terminal(tokens: list[str]) -> None:
    lines, open_line, flushed = render(tokens)
    expected_lines, expected_open = reference(tokens)
    assert lines == expected_lines
    assert open_line == expected_open
    assert flushed == (expected_open or None)
