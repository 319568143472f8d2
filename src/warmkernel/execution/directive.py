"""The `# warmkernel:` directive grammar: which lines are directives and what they ask for.

A directive is a physical line that starts at column 0 with `# warmkernel:` outside any
string literal, followed by exactly one space and options separated by single spaces:

    # warmkernel: --wait 30 --silence 60 --full-output

Several directive lines in one cell combine; each option may appear once per cell. In a
cell magic (source starting with `%%`) the body is not Python, so every line is considered.
In Python, directives are comments, and the source runs as it is; a cell magic's body runs
without them (`kernel_source`), since there they would be its text (`%%writefile` would write
them).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Literal

from warmkernel.errors import WarmkernelError
from warmkernel.execution.source_scan import lines_starting_in_string, split_lines

PREFIX = "# warmkernel:"


@dataclass(frozen=True)
class Directives:
    """What a cell's directives ask for; the defaults mean no directive."""

    wait_seconds: float | None = None
    full_output: bool = False
    silence_seconds: float | None = None
    """run_python also returns once the cell has printed nothing for this long."""


@dataclass(frozen=True)
class _Option:
    name: str
    field: str
    """The `Directives` field the option sets."""
    kind: Literal["flag", "seconds"]


_OPTIONS: dict[str, _Option] = {
    option.name: option
    for option in (
        _Option("--wait", "wait_seconds", "seconds"),
        _Option("--silence", "silence_seconds", "seconds"),
        _Option("--full-output", "full_output", "flag"),
    )
}

_METAVAR = {"flag": "", "seconds": " SECONDS"}
_VALID_OPTIONS = ", ".join(option.name + _METAVAR[option.kind] for option in _OPTIONS.values())
_VALID_FORM = f'"{PREFIX} {" ".join(option.name + _METAVAR[option.kind] for option in _OPTIONS.values())}"'
_SECONDS = re.compile(r"0|[1-9][0-9]*|[0-9]+\.[0-9]+")
_SECONDS_FORM = "SECONDS is digits with an optional decimal part, e.g. 30 or 2.5"


def parse_directives(source: str) -> Directives:
    """Read every directive line of a cell; raise `invalid_directive` on the first bad one."""
    values: dict[str, Any] = {}
    seen_on: dict[str, int] = {}
    skip = frozenset() if source.startswith("%%") else lines_starting_in_string(source)
    for line in split_lines(source):
        if line.text.startswith(PREFIX) and line.number not in skip:
            for option, value in _parse_line(line.text[len(PREFIX) :], line.number):
                if option.name in seen_on:
                    raise _error(
                        line.number,
                        f"{option.name} repeated (first given on line {seen_on[option.name]}); "
                        "each option may appear once per cell",
                    )
                seen_on[option.name] = line.number
                values[option.field] = value
    return Directives(**values)


def kernel_source(source: str) -> str:
    """What the kernel runs of a cell: the cell itself, or a cell magic without its directive lines."""
    if not source.startswith("%%"):
        return source
    kept = (line for line in split_lines(source) if not line.text.startswith(PREFIX))
    return "".join(line.text + line.newline for line in kept)


def _parse_line(rest: str, number: int) -> list[tuple[_Option, float | bool]]:
    """The options of one directive line, `rest` being what follows the prefix."""
    if rest.strip(" ") == "":
        raise _error(number, f'no option after "{PREFIX}"; valid form: {_VALID_FORM}')
    spacing = _spacing_problem(rest)
    if spacing is not None:
        raise _error(
            number,
            f"bad spacing ({spacing}) in {json.dumps(PREFIX + rest, ensure_ascii=False)}: write one space "
            f"after the colon and single spaces between options; valid form: {_VALID_FORM}",
        )
    words = rest[1:].split(" ")
    parsed: list[tuple[_Option, float | bool]] = []
    index = 0
    while index < len(words):
        word = words[index]
        option = _OPTIONS.get(word)
        if option is None:
            raise _error(number, f'unknown option "{word}"; valid options: {_VALID_OPTIONS}')
        if option.kind == "flag":
            parsed.append((option, True))
            index += 1
            continue
        if index + 1 == len(words) or words[index + 1].startswith("--"):
            raise _error(number, f"{option.name} needs a value: {option.name} SECONDS; {_SECONDS_FORM}")
        parsed.append((option, _seconds(option, words[index + 1], number)))
        index += 2
    return parsed


def _spacing_problem(rest: str) -> str | None:
    if not rest.startswith(" "):
        return "no space after the colon"
    if any(char.isspace() and char != " " for char in rest):
        return "a tab" if "\t" in rest else "whitespace other than a space"
    if rest.startswith("  "):
        return "two spaces after the colon"
    if rest.endswith(" "):
        return "a trailing space"
    if "  " in rest:
        return "two spaces between options"
    return None


def _seconds(option: _Option, text: str, number: int) -> float:
    if _SECONDS.fullmatch(text) is None:
        raise _error(number, f'invalid value "{text}" for {option.name}; {_SECONDS_FORM}')
    seconds = float(text)
    if not math.isfinite(seconds):
        raise _error(number, f'value "{text}" for {option.name} is too large; {_SECONDS_FORM}')
    if seconds <= 0:
        raise _error(
            number, f'value "{text}" for {option.name} must be greater than 0, e.g. {option.name} 30'
        )
    return seconds


def _error(number: int, problem: str) -> WarmkernelError:
    return WarmkernelError("invalid_directive", f"line {number}: {problem}")
