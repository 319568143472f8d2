"""The hello, a client's first line on the daemon's socket, checked field by field: a malformed
one is refused as `invalid_arguments` naming the field and what it may hold, never a failure of
the daemon. Unknown fields are ignored, so clients and daemons of other versions still
understand each other (`local_socket` has the protocol)."""

from __future__ import annotations

import json
import math
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from warmkernel.errors import WarmkernelError
from warmkernel.settings.model import REPLY_SETTINGS, Settings

Check = Callable[[Any], bool]
"""Whether a value is of a field's kind."""


@dataclass(frozen=True)
class Kind:
    """What a field may hold: the check, and its words for the refusal."""

    check: Check
    words: str

    def or_null(self) -> Kind:
        return Kind(lambda value: value is None or self.check(value), f"{self.words}, or null")


def _is_text(value: Any) -> bool:
    """A string that JSON can carry back: no lone surrogate (`"\\ud800"` parses, then fails to encode)."""
    if not isinstance(value, str):
        return False
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def _is_whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_positive(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return 0 < float(value) < math.inf
    except OverflowError:  # an integer past any float
        return False


def _is_list_of_text(value: Any) -> bool:
    return isinstance(value, list) and all(map(_is_text, value))


TEXT = Kind(_is_text, "a string")
WHOLE = Kind(_is_whole, "a whole number, 0 or more")
PORT = Kind(lambda value: isinstance(value, int) and not isinstance(value, bool), "a whole number")
NAMES = Kind(_is_list_of_text, "a list of strings")

SERVE_FIELDS = {"host": TEXT, "port": PORT, "path": TEXT, "token": TEXT, "allowed_hosts": NAMES}
VIEW_FIELDS = {"host": TEXT, "port": PORT, "allowed_hosts": NAMES}


def _kind_of(hint: Any) -> Kind:
    """A reply option's kind, from its `Settings` annotation (so the two cannot drift)."""
    arguments = typing.get_args(hint)
    if typing.get_origin(hint) is Literal:
        words = "one of " + ", ".join(map(repr, arguments))
        return Kind(lambda value: _is_text(value) and value in arguments, words)
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in arguments:
        (inner,) = (each for each in arguments if each is not type(None))
        return _kind_of(inner).or_null()
    kinds = {int: WHOLE, float: Kind(_is_positive, "a finite number more than 0"), str: TEXT}
    return kinds[hint]


_HINTS = typing.get_type_hints(Settings)
REPLY_OPTION_KINDS: Mapping[str, Kind] = {name: _kind_of(_HINTS[name]) for name in sorted(REPLY_SETTINGS)}


@dataclass(frozen=True)
class Hello:
    """What a client says first."""

    client: str
    options: dict[str, Any] = field(default_factory=dict)
    serve: dict[str, Any] = field(default_factory=dict)
    view: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    """What the client has to be told about itself in its replies, e.g. that its version differs."""

    @classmethod
    def parse(cls, line: bytes) -> Hello:
        try:
            data = json.loads(line)
        except (ValueError, RecursionError) as exc:  # RecursionError: `[[[[...` nested past the stack
            raise WarmkernelError("invalid_arguments", "the hello is not JSON (one line, an object)") from exc
        if not isinstance(data, dict) or "client" not in data:
            raise WarmkernelError("invalid_arguments", 'the hello is a JSON object with a "client" name')
        hello: dict[str, Any] = data
        options = _table(hello, "options", REPLY_OPTION_KINDS, closed=True)
        return cls(
            _field(hello, "client", TEXT),
            options,
            _table(hello, "serve", SERVE_FIELDS),
            _table(hello, "view", VIEW_FIELDS),
            _field(hello, "note", TEXT.or_null()) or "",
        )


def _field(table: Mapping[str, Any], name: str, kind: Kind, where: str = "") -> Any:
    value = table.get(name)
    if not kind.check(value):
        raise WarmkernelError(
            "invalid_arguments", f'the hello\'s "{where}{name}" must be {kind.words}, not {_shown(value)}'
        )
    return value


def _table(
    hello: Mapping[str, Any], name: str, kinds: Mapping[str, Kind], *, closed: bool = False
) -> dict[str, Any]:
    """An object field whose members have these kinds (absent or null: empty); `closed`: no other
    member is allowed (reply options: a client that asks for one this daemon lacks must be told)."""
    table = hello.get(name)
    if table is None:
        return {}
    if not isinstance(table, dict):
        raise WarmkernelError(
            "invalid_arguments", f'the hello\'s "{name}" must be a JSON object, not {_shown(table)}'
        )
    unknown = sorted(set(table) - set(kinds)) if closed else []
    if unknown:
        raise WarmkernelError(
            "invalid_arguments",
            f'{", ".join(map(_shown, unknown))} in the hello\'s "{name}" are not reply options; a client '
            "may choose " + ", ".join(kinds),
        )
    return {key: _field(table, key, kind, f"{name}.") for key, kind in kinds.items() if key in table}


def _shown(value: Any) -> str:
    """A value as the refusal quotes it: its JSON, cut short."""
    try:
        text = json.dumps(value)
    except RecursionError:
        return f"a {type(value).__name__} nested too deep"
    return text if len(text) <= 60 else text[:57] + "..."
