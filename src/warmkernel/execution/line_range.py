"""The `line_range` grammar: parsing `START:STOP` and resolving it against a stream's length.

Lines are 1-based and STOP is inclusive, so `"3:3"` is line 3 alone. Either end may be empty
(`":10"`, `"-10:"`, `":"`), and a negative number counts from the end (`-1` is the last line).
A range is clamped to the stream; one whose start lies after its stop selects nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from warmkernel.errors import WarmkernelError

# ASCII digits only: `\d` would accept other scripts' digits, which int() then reads.
_SPEC = re.compile(r"(-?0*[1-9][0-9]*)?:(-?0*[1-9][0-9]*)?")
_ZERO = re.compile(r"-?0+")
_MAX_DIGITS = 18
_BEYOND = 10**_MAX_DIGITS
"""A line number past every stream: a longer end means the same once clamped."""
_SHOWN = 40
"""Characters of a refused spec quoted back in the message."""
_FORMS = 'use 1-based lines like "20:40", ":10", "-10:" or "3:3" (-1 is the last line)'


@dataclass(frozen=True)
class LineRange:
    """A parsed `line_range`: 1-based inclusive ends, negative from the end, None for open."""

    start: int | None
    stop: int | None

    def resolve(self, total: int) -> tuple[int, int]:
        """The 0-based half-open slice `(lo, hi)` of a stream of `total` lines, `lo <= hi`."""
        lo = 0 if self.start is None else _clamp(_index(self.start, total), total)
        hi = total if self.stop is None else _clamp(_index(self.stop, total) + 1, total)
        return lo, max(lo, hi)


def parse_line_range(spec: str | None) -> LineRange:
    """Parse `START:STOP`; None means every line. Raises `invalid_line_range` otherwise."""
    if spec is None:
        return LineRange(None, None)
    match = _SPEC.fullmatch(spec)
    if match is None:
        raise WarmkernelError("invalid_line_range", _explain(spec))
    start, stop = match.groups()
    return LineRange(_number(start), _number(stop))


def _number(end: str | None) -> int | None:
    """An end as an int; one past any stream's length (int() refuses 4,300 digits) is clamped."""
    if end is None:
        return None
    digits = end.lstrip("-").lstrip("0")
    sign = -1 if end.startswith("-") else 1
    return sign * (_BEYOND if len(digits) > _MAX_DIGITS else int(digits))


def _index(line: int, total: int) -> int:
    """The 0-based index of 1-based `line` (negative: from the end), possibly out of range."""
    return line - 1 if line > 0 else total + line


def _clamp(index: int, total: int) -> int:
    return min(max(index, 0), total)


def _explain(spec: str) -> str:
    ends = spec.split(":")
    shown = spec if len(spec) <= _SHOWN else f"{spec[:_SHOWN]}..."
    if len(ends) == 2 and any(_ZERO.fullmatch(end) for end in ends):
        return f'line_range "{shown}" uses line 0, but lines are 1-based; {_FORMS}'
    if spec == "":
        return f"line_range is empty; {_FORMS}, or leave it out for every line"
    return f'line_range "{shown}" is not START:STOP; {_FORMS}'
