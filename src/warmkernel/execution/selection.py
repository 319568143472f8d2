"""Which executions a call names: the grammar `3,5-9` (numbers and inclusive ranges, by commas).

`parse_selection` checks the words only; which numbers exist is the session's to say.
"""

from __future__ import annotations

import json
import re

from warmkernel.errors import WarmkernelError

Selection = tuple[tuple[int, int], ...]
"""Inclusive ranges `(first, last)` in the order written; a single number N is `(N, N)`."""

_ITEM = re.compile(r"\s*([1-9][0-9]*)\s*(?:-\s*([1-9][0-9]*)\s*)?")
_VALID = 'execution numbers and inclusive ranges joined by commas, e.g. "3", "3,5-9" or "1-4,7"'


def parse_selection(text: str) -> Selection:
    """`"3,5-9"` as `((3, 3), (5, 9))`; anything else is `invalid_executions`."""
    ranges: list[tuple[int, int]] = []
    for item in text.split(","):
        match = _ITEM.fullmatch(item)
        if match is None:
            raise _invalid(text, f"{json.dumps(item.strip())} is neither a number >= 1 nor a range A-B")
        first = int(match.group(1))
        last = int(match.group(2) or first)
        if last < first:
            raise _invalid(text, f"the range {first}-{last} runs backwards (write {last}-{first})")
        ranges.append((first, last))
    return tuple(ranges)


def selection_text(selection: Selection) -> str:
    """The selection as a call writes it: `((3, 3), (5, 9))` as `"3,5-9"`."""
    return ",".join(str(first) if first == last else f"{first}-{last}" for first, last in selection)


def _invalid(text: str, why: str) -> WarmkernelError:
    message = f"executions={json.dumps(text)} is not valid: {why}; give {_VALID}"
    return WarmkernelError("invalid_executions", message)
