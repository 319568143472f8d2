"""The kinds of a setting's value: what a word means (a flag's, a file's or a variable's alike),
refused in words that say what is valid, and how a value is written back as such a word."""

from __future__ import annotations

import math
import os
from argparse import ArgumentTypeError
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from warmkernel.sizes import FORMS, format_size, parse_size
from warmkernel.types import MAX_PORT


def number_word(value: object) -> str:
    """A value as a person writes it: `10`, not `10.0`."""
    return f"{value:g}" if isinstance(value, float) else str(value)


@dataclass(frozen=True)
class Kind:
    """Text: the word is the value."""

    metavar: str | None = None
    """The word `--help` shows for the value (argparse's metavar); a setting may name its own."""
    valid: str = "a string"
    """What is valid, for a file's value of the wrong type."""
    choices: tuple[str, ...] | None = None

    def parse(self, word: str) -> Any:
        """The value `word` means; ArgumentTypeError (argparse's, exit status 2) says what is valid."""
        return word

    def word(self, value: Any) -> str:
        """`value` as a word `parse` takes back."""
        return number_word(value)

    def gloss(self, value: Any) -> str | None:
        """`value` in a unit people read more easily (`12 h`), when there is one."""
        return None


@dataclass(frozen=True)
class Choice(Kind):
    """One of `choices`; `upper`: taken in either case (`debug` is `DEBUG`)."""

    upper: bool = False

    def parse(self, word: str) -> str:
        return word.upper() if self.upper else word


@dataclass(frozen=True)
class Flag(Kind):
    """A switch: its flag takes no word, a file says true or false, a variable 1 or 0."""

    valid: str = "true or false"


@dataclass(frozen=True)
class Whole(Kind):
    """A whole number, `least` or more."""

    least: int = 0
    metavar: str | None = "N"
    valid: str = "a whole number"

    def parse(self, word: str) -> int:
        value = _integer(word)
        if value < self.least:
            raise ArgumentTypeError(f"must be {self.least} or more, not {value}")
        return value


@dataclass(frozen=True)
class Size(Kind):
    """A number of bytes, `8G` style (`sizes.FORMS`), `least` or more."""

    least: int = 0
    metavar: str | None = "SIZE"
    valid: str = f"a size: {FORMS}"

    def parse(self, word: str) -> int:
        try:
            value = parse_size(word)
        except ValueError as exc:
            raise ArgumentTypeError(str(exc)) from None
        if value < self.least:
            raise ArgumentTypeError(f"must be {self.least} or more, not {value}")
        return value

    def word(self, value: Any) -> str:
        """`8G` when that is exact, else the bytes (3000, not 2.9K)."""
        short = format_size(value)
        return short if parse_size(short) == value else str(value)


@dataclass(frozen=True)
class Seconds(Kind):
    """A finite number of seconds, more than 0; `zero`: 0 or more (0 then means never)."""

    zero: bool = False
    metavar: str | None = "SECONDS"
    valid: str = "a number of seconds"

    def parse(self, word: str) -> float:
        try:
            value = float(word)
        except ValueError:
            raise ArgumentTypeError(f"expected a number of seconds, not {word!r}") from None
        if self.zero and not (math.isfinite(value) and value >= 0):
            raise ArgumentTypeError(f"must be a finite number of seconds, 0 or more, not {word}")
        if not self.zero and not (math.isfinite(value) and value > 0):
            raise ArgumentTypeError(f"must be a finite number of seconds more than 0, not {word}")
        return value

    def gloss(self, value: Any) -> str | None:
        return f"{value / 3600:g} h" if value >= 3600 else None


@dataclass(frozen=True)
class Port(Kind):
    """A TCP port; 0 picks a free one."""

    metavar: str | None = "PORT"
    valid: str = "a port"

    def parse(self, word: str) -> int:
        port = _integer(word)
        if not 0 <= port <= MAX_PORT:
            raise ArgumentTypeError(f"{port} is not a port: give 1 to {MAX_PORT}, or 0 for a free one")
        return port


@dataclass(frozen=True)
class FilePath(Kind):
    """A file's path, made absolute where it is given: the daemon that reads it runs in the workspace."""

    metavar: str | None = "PATH"
    valid: str = "a path"

    def parse(self, word: str) -> str:
        return os.path.abspath(word)


@dataclass(frozen=True)
class Directory(Kind):
    """A directory's path; an empty one would be the current directory, which no one means."""

    metavar: str | None = "DIR"
    valid: str = "a path"

    def parse(self, word: str) -> Path:
        if not word.strip():
            raise ArgumentTypeError("expected a directory's path, not an empty one")
        return Path(word)

    def word(self, value: Any) -> str:
        return str(Path(value).absolute())


@dataclass(frozen=True)
class Assignment(Kind):
    """`NAME=VALUE` (the value may be empty or hold `=`)."""

    metavar: str | None = "NAME=VALUE"
    valid: str = "a NAME=VALUE string"

    def parse(self, word: str) -> str:
        name, equals, _ = word.partition("=")
        if not equals or not name.strip() or name != name.strip():
            raise ArgumentTypeError(f"expected NAME=VALUE, not {word!r}")
        return word


def _integer(word: str) -> int:
    try:
        return int(word)
    except ValueError:
        raise ArgumentTypeError(f"expected a whole number, not {word!r}") from None


TEXT = Kind()
FLAG = Flag()
COUNT = Whole(least=0)
POSITIVE = Whole(least=1)
SIZE = Size(least=0)
POSITIVE_SIZE = Size(least=1)
SECONDS = Seconds()
DURATION = Seconds(zero=True)
PORT = Port()
FILE = FilePath()
DIRECTORY = Directory()
ASSIGNMENT = Assignment()
