"""What the programs inside the kernel share: the one JSON answer format and the one pair of cell hooks.

Owns, inside the kernel: the hooks around every execution, registered once however many programs
ask, and what they see. Before and after each execution the user's names (not starting with `_`)
are walked once, by identity; after it, each name bound to a new object gets that execution's
number in `rebound` (unbound names are dropped), and every follower (the notebook program) is
told with the same two walks, so no program walks the namespace again. IPython adds `_iN` (and
`_N`) to the namespace at every execution, so it grows with the session while the user's names do
not: a walk never passes over all of it, only over what was bound since the last (`_note_added`).
A cell run from inside another (`%%capture`) is part of the outer one. The server
loads this file as text before any other program (`warmkernel.kernel.inside`), as its own module
outside the user's namespace; it imports only the standard library and runs on Python 3.10+.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

Ids = Mapping[str, int]
"""User name -> the identity of its value."""
CellStarted = Callable[[], None]
CellEnded = Callable[[int | None, Ids, Ids], None]
"""Told the execution's number (None when IPython gave it none) and the walks before and after it."""

rebound: dict[str, int] = {}
"""User name -> the execution that last bound it to a new object."""
_shell: Any = None
_user_names: dict[str, None] = {}
"""The user's names in the namespace (an ordered set), as of the last walk."""
WALKED = "_warmkernel_walked"
"""The key each walk moves to the end of the namespace: the keys after it were bound since."""
_before: dict[str, int] = {}
_depth = [0]
"""Cells running now: a cell run from inside another (`%%capture` runs its body as one) is part
of the outer one, whose hooks alone count."""
_followers: list[tuple[CellStarted, CellEnded]] = []
_identity = object.__hash__
"""An object's identity, as `id` would give it, without a `builtins.id` audit event per name (which
the notebook program's audit hook would see)."""


class JsonText:
    """An answer whose plain-text form is the JSON itself, so the server reads it unquoted."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def answer(fields: Mapping[str, Any]) -> JsonText:
    """Every program's answer to the server: strict JSON (a NaN is a bug upstream, not a value)."""
    return JsonText(json.dumps(fields, allow_nan=False))


def install(shell: Any) -> None:
    """Hook into every execution; a second call (another program's install) changes nothing."""
    global _shell
    if _shell is not None:
        return
    _shell = shell
    shell.events.register("pre_run_cell", _pre_run_cell)
    shell.events.register("post_run_cell", _post_run_cell)


def follow(started: CellStarted, ended: CellEnded) -> None:
    """Call `started` before every execution and `ended` after it, with the walks of this module."""
    _followers.append((started, ended))


def _user_ids() -> dict[str, int]:
    namespace = _shell.user_ns
    _note_added(namespace)
    for name in [name for name in _user_names if name not in namespace]:
        del _user_names[name]  # bound again later, it is a new key after the mark
    return {name: _identity(namespace[name]) for name in _user_names}


def _note_added(namespace: dict[Any, Any]) -> None:
    """Add the user's names bound since the last walk to `_user_names`, and mark the namespace's
    end for the next walk.

    Keys keep their insertion order, and a name unbound and bound again is a new key at the end:
    what follows the mark was bound since it was set. Without a mark (the first walk, or after
    `%reset`), every key is looked at once.
    """
    added: list[Any] = []
    if WALKED in namespace:
        for key in reversed(namespace):
            if key is WALKED:
                break
            added.append(key)
        del namespace[WALKED]
    else:
        added = list(namespace)
    for name in added:
        if isinstance(name, str) and not name.startswith("_"):
            _user_names[name] = None
    namespace[WALKED] = None


def _pre_run_cell(info: object = None) -> None:
    _depth[0] += 1
    if _depth[0] > 1:
        return
    _before.clear()
    _before.update(_user_ids())
    for started, _ in _followers:
        started()


def _post_run_cell(result: object = None) -> None:
    if _depth[0] > 1:
        _depth[0] -= 1
        return
    _depth[0] = 0  # also after a blank cell, which IPython ends without starting it
    # warmkernel keeps IPython's execution_count equal to its own execution number.
    number = getattr(result, "execution_count", None)
    if number is None and getattr(getattr(result, "info", None), "store_history", False):
        _shell.execution_count += 1  # IPython skips counting a blank cell; warmkernel numbers it
    after = _user_ids()
    if isinstance(number, int):
        for name, ident in after.items():
            if _before.get(name) != ident:
                rebound[name] = number
    for name in rebound.keys() - after.keys():
        del rebound[name]
    for _, ended in _followers:
        ended(number if isinstance(number, int) else None, _before, after)
