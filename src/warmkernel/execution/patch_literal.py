"""The Apply Patch literal: finding patch programs held in triple-quoted literals and
rewriting each so its value is exactly the text the agent wrote.

Agents keep Apply Patch programs in Python variables (`patch = r\"\"\"`, a line break,
`*** Begin Patch`, ...). Left to Python, the escapes would be cooked, `{x}` read in an
f-string, and the literal would end at the first embedded `\"\"\"`. A recognised literal
becomes one-line literals, one per original physical line, joined by backslash
continuations: every later line keeps its number, so tracebacks point at the line the agent
wrote. Continuations rather than parentheses keep the pieces a single string atom, so an
adjacent literal (`"head" r\"\"\"`) still concatenates. Anything that is not a complete,
valid program is left exactly as written.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass

from warmkernel.execution.source_scan import (
    Line,
    StringLiteral,
    is_identifier_char,
    split_lines,
    string_literals,
)

BEGIN = "*** Begin Patch"
END = "*** End Patch"
_OPENER_PREFIXES = frozenset({"", "r", "f", "rf", "fr"})
_CLOSING_LINE = re.compile(r'[ \t]*"""')
_ADD = "*** Add File: "
_DELETE = "*** Delete File: "
_UPDATE = "*** Update File: "
_MOVE_TO = "*** Move to: "
_END_OF_FILE = "*** End of File"


@dataclass(frozen=True)
class PatchTransform:
    """A cell after conversion; `source` is the input itself when nothing was converted."""

    source: str
    converted: int


@dataclass(frozen=True)
class _Candidate:
    opener: Line
    """The line whose break follows the opening quotes."""
    program: Sequence[Line]
    """The lines from `*** Begin Patch` to `*** End Patch`."""
    closing: Line
    closing_indent: int


def transform_patch_literals(source: str) -> PatchTransform:
    """Convert every Apply Patch literal of a cell; cell magics are never touched."""
    if source.startswith("%%"):
        return PatchTransform(source, 0)
    lines = split_lines(source)
    starts = [line.start for line in lines]
    parts: list[str] = []
    copied = 0
    converted = 0
    while (found := _next_candidate(source, copied, lines, starts)) is not None:
        literal, candidate = found
        parts.append(source[copied : literal.start])
        parts.append(_render(candidate))
        copied = candidate.closing.start + candidate.closing_indent + 3
        converted += 1
    if converted == 0:
        return PatchTransform(source, 0)
    parts.append(source[copied:])
    return PatchTransform("".join(parts), converted)


def is_patch_program(lines: Sequence[str]) -> bool:
    """Whether `lines` (without line breaks) form a valid program, Begin and End included."""
    if len(lines) < 3 or lines[0] != BEGIN or lines[-1] != END:
        return False
    body = lines[1:-1]
    index = 0
    while index < len(body):
        line = body[index]
        operation = next((op for op in (_ADD, _DELETE, _UPDATE) if line.startswith(op)), None)
        if operation is None or not line[len(operation) :].strip():
            return False
        index += 1
        if operation == _ADD:
            while index < len(body) and body[index].startswith("+"):
                index += 1
        elif operation == _UPDATE:
            index = _skip_update(body, index)
            if index < 0:
                return False
    return True


def _skip_update(body: Sequence[str], index: int) -> int:
    """Index past an Update File's optional move and its hunks, or -1 if they are not valid."""
    if index < len(body) and body[index].startswith(_MOVE_TO):
        if not body[index][len(_MOVE_TO) :].strip():
            return -1
        index += 1
    hunks = 0
    while index < len(body) and body[index].startswith("@@"):
        index += 1
        first = index
        while index < len(body) and body[index][:1] in (" ", "+", "-"):
            index += 1
        if index == first:
            return -1
        hunks += 1
        if index < len(body) and body[index] == _END_OF_FILE:
            index += 1
    return index if hunks else -1


def _next_candidate(
    source: str, start: int, lines: list[Line], starts: list[int]
) -> tuple[StringLiteral, _Candidate] | None:
    for literal in string_literals(source, start):
        candidate = _candidate(source, literal, lines, starts)
        if candidate is not None:
            return literal, candidate
    return None


def _candidate(
    source: str, literal: StringLiteral, lines: list[Line], starts: list[int]
) -> _Candidate | None:
    """The patch program opened by `literal`, judged line by line, not by Python's string end."""
    if literal.quote != '"""' or literal.prefix.lower() not in _OPENER_PREFIXES:
        return None
    if literal.start > 0 and is_identifier_char(source[literal.start - 1]):
        return None
    opener_index = bisect.bisect_right(starts, literal.start) - 1
    opener = lines[opener_index]
    if opener.end != literal.body_start or not opener.newline:
        return None
    begin = opener_index + 1
    if begin >= len(lines) or lines[begin].text != BEGIN:
        return None
    end = next((index for index in range(begin + 1, len(lines)) if lines[index].text == END), None)
    if end is None or end + 1 >= len(lines):
        return None
    closing = lines[end + 1]
    closing_quotes = _CLOSING_LINE.match(closing.text)
    program = lines[begin : end + 1]
    if closing_quotes is None or not is_patch_program([line.text for line in program]):
        return None
    return _Candidate(opener, program, closing, closing_quotes.end() - 3)


def _render(candidate: _Candidate) -> str:
    """Pieces replacing the literal from its prefix through the closing quotes, line for line.

    The closing quotes become three spaces: code after them keeps its line and column, and the
    closing line never vanishes (a lone `\\r` break would otherwise merge with the next `\\n`).
    """
    lines = [candidate.opener, *candidate.program]
    values = [candidate.opener.newline, *(line.text + line.newline for line in candidate.program)]
    pieces = [f"{value!r} \\{line.newline}" for value, line in zip(values, lines, strict=True)]
    # A continuation must not end the source or lead into a line with nothing to continue.
    after = candidate.closing.text[candidate.closing_indent + 3 :].lstrip(" \t")
    if after == "" or after.startswith("#"):
        pieces[-1] = repr(values[-1]) + lines[-1].newline
    return "".join(pieces) + candidate.closing.text[: candidate.closing_indent] + "   "
