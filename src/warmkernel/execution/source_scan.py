"""Where a cell's string literals and physical lines are, found without `tokenize` or `ast`.

IPython cells may hold magics, shell escapes, syntax errors and unterminated strings, on
which the standard tokenizer gives up; this hand scanner never fails. It knows comments,
every string prefix (r, b, u, f, rb, br, fr, rf in any case), single and triple quotes and
backslash escapes, and ends a single-quoted string at an unescaped line break as Python
does. Line breaks are the three Python knows: `\\n`, `\\r\\n` and `\\r`.

Known gap: an f-string whose replacement field reuses the enclosing quote (allowed from
Python 3.12, e.g. `f"{d["k"]}"`) is scanned as two strings.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass

STRING_PREFIXES = frozenset({"r", "u", "b", "f", "br", "rb", "fr", "rf"})
"""Lower-cased prefixes that make a word before a quote part of the string literal."""

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
# Outside strings, only comments, quotes and words (a possible prefix) matter.
_CODE_EVENT = re.compile(r"""#|['"]|\w+""")
_COMMENT_END = re.compile(r"[\r\n]")
# Inside a string a backslash always takes the next character (a whole \r\n), raw or not:
# for termination Python treats r"\"" and r"\\" the same way as their cooked forms.
_STRING_EVENT = {
    '"': re.compile(r'\\(?:\r\n|[\s\S])|"|[\r\n]'),
    "'": re.compile(r"\\(?:\r\n|[\s\S])|'|[\r\n]"),
    '"""': re.compile(r'\\(?:\r\n|[\s\S])|"""'),
    "'''": re.compile(r"\\(?:\r\n|[\s\S])|'''"),
}


@dataclass(frozen=True)
class Line:
    """One physical line of a source."""

    number: int
    """1-based line number, as tracebacks count."""
    start: int
    """Offset of the line's first character."""
    text: str
    """The line without its line break."""
    newline: str
    """`"\\n"`, `"\\r\\n"`, `"\\r"`, or `""` for a last line without one."""

    @property
    def end(self) -> int:
        """Offset of the line break (or of the end of the source)."""
        return self.start + len(self.text)


@dataclass(frozen=True)
class StringLiteral:
    """One string literal as written: prefix, quotes and body."""

    start: int
    """Offset of the first prefix character, or of the opening quote when there is none."""
    end: int
    """Offset just past the closing quote; for an unterminated literal, where it stops."""
    prefix: str
    """The prefix as written, e.g. `""` or `"Rb"`."""
    quote: str
    """`'`, `"`, `'''` or `\"\"\"`."""
    terminated: bool

    @property
    def body_start(self) -> int:
        """Offset just past the opening quote."""
        return self.start + len(self.prefix) + len(self.quote)


def split_lines(source: str) -> list[Line]:
    """The physical lines of `source`; like `str.splitlines`, no empty line after a final break."""
    lines: list[Line] = []
    start = 0
    for match in _LINE_BREAK.finditer(source):
        lines.append(Line(len(lines) + 1, start, source[start : match.start()], match.group()))
        start = match.end()
    if start < len(source):
        lines.append(Line(len(lines) + 1, start, source[start:], ""))
    return lines


def string_literals(source: str, start: int = 0) -> Iterator[StringLiteral]:
    """Yield the string literals of `source` in order, scanning from `start` as code.

    Comments are skipped, so a quote inside one opens nothing.
    """
    pos = start
    while (event := _CODE_EVENT.search(source, pos)) is not None:
        token = event.group()
        if token == "#":
            comment_end = _COMMENT_END.search(source, event.end())
            pos = len(source) if comment_end is None else comment_end.start()
        elif token in ("'", '"'):
            literal = _read_literal(source, event.start(), event.start())
            yield literal
            pos = literal.end
        elif token.lower() in STRING_PREFIXES and source.startswith(("'", '"'), event.end()):
            literal = _read_literal(source, event.start(), event.end())
            yield literal
            pos = literal.end
        else:
            pos = event.end()


def lines_starting_in_string(source: str) -> frozenset[int]:
    """Numbers of the physical lines whose first character lies inside a string literal."""
    starts = [line.start for line in split_lines(source)]
    inside: set[int] = set()
    for literal in string_literals(source):
        first = bisect.bisect_right(starts, literal.start)
        last = bisect.bisect_left(starts, literal.end)
        inside.update(range(first + 1, last + 1))
    return frozenset(inside)


def is_identifier_char(char: str) -> bool:
    """Whether `char` may continue a Python identifier (so a quote after it has no prefix)."""
    return ("a" + char).isidentifier()


def _read_literal(source: str, start: int, quote_at: int) -> StringLiteral:
    quote = source[quote_at] * 3 if source.startswith(source[quote_at] * 3, quote_at) else source[quote_at]
    pattern = _STRING_EVENT[quote]
    pos = quote_at + len(quote)
    while (event := pattern.search(source, pos)) is not None:
        token = event.group()
        if token == quote:
            return StringLiteral(start, event.end(), source[start:quote_at], quote, terminated=True)
        if token in ("\r", "\n"):
            return StringLiteral(start, event.start(), source[start:quote_at], quote, terminated=False)
        pos = event.end()
    return StringLiteral(start, len(source), source[start:quote_at], quote, terminated=False)
