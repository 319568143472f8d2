"""A setting's declaration: its default, scope, kind and help, and the names flags, files and
variables give it. Everything else said of a setting (`--help`, `warmkernel config`, the hello's
reply options, the README's table) is read from here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from warmkernel.settings.value_kinds import Flag, Kind

ENV_PREFIX = "WARMKERNEL_"

Scope = Literal["kernel", "reply", "daemon"]
"""Whose it is: the daemon's kernels (a live daemon with another value refuses the client), one
client's replies (its hello carries them), or the daemon process itself (its lifetime, its log)."""


@dataclass(frozen=True, kw_only=True)
class Setting:
    """One setting, declared once."""

    dest: str
    """The `Settings` field it is (kernel and reply scope), or the parsed argument (daemon scope)."""
    default: Any
    scope: Scope
    kind: Kind
    help: str
    flag: str = ""
    """Its flag; "": no flag, file or variable sets it (the server fills it in)."""
    metavar: str | None = None
    """The value's word in `--help` when not the kind's (`PATH` for a text that is one)."""
    many: bool = False
    """A repeatable flag (`--kernel-env A=1 --kernel-env B=2`); a file gives a list, a variable commas."""
    absent: str | None = None
    """What no value means, shown as its default; `{variable}` is the setting's variable."""
    verb: str | None = None
    """The one serving verb that takes it (`serve` for its endpoint); None: each one and the daemon."""
    secret: bool = False
    """Kept out of project files (they are committed), of the process list and of `config`'s output."""

    @property
    def name(self) -> str:
        """The flag without its dashes (and a switch's `no-`), as files and variables name it."""
        if not self.flag:
            return self.dest
        words = self.flag.removeprefix("--")
        return (words.removeprefix("no-") if self.switch and self.default else words).replace("-", "_")

    @property
    def variable(self) -> str:
        return ENV_PREFIX + self.name.upper()

    @property
    def switch(self) -> bool:
        """A flag without a value, which turns the setting away from its default."""
        return isinstance(self.kind, Flag)

    @property
    def choices(self) -> tuple[str, ...] | None:
        return self.kind.choices

    @property
    def shown_absent(self) -> str | None:
        return None if self.absent is None else self.absent.format(variable=self.variable)

    def parse(self, word: str) -> Any:
        """What a word means for this setting (ArgumentTypeError saying what is valid otherwise)."""
        return self.kind.parse(word)
