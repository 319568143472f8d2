"""The cell hooks inside the kernel (`inside/common.py`): which execution last bound each user name.

The hooks walk only the user's names, finding the names bound since the last walk at the end of
the namespace; here they are run against a namespace changed as cells and IPython change it and
compared with a walk over every name.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import warmkernel.kernel.inside as inside

NAMES = ("x", "y", "z", "_private", "_i")


@dataclass
class Events:
    callbacks: dict[str, Any] = field(default_factory=dict)

    def register(self, event: str, callback: Any) -> None:
        self.callbacks[event] = callback


@dataclass
class Shell:
    user_ns: dict[str, Any] = field(default_factory=dict)
    events: Events = field(default_factory=Events)
    execution_count: int = 1


def installed() -> tuple[ModuleType, Shell]:
    """A fresh copy of the module (its state is module-level), installed in a fake shell."""
    source = Path(inside.__file__).parent / "common.py"
    spec = importlib.util.spec_from_file_location("cell_hooks_under_test", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    shell = Shell()
    module.install(shell)
    return module, shell


def run_cell(shell: Shell, number: int, change: Any) -> None:
    """An execution as IPython runs it: hooks around it, its `_iN` added to the namespace."""
    shell.events.callbacks["pre_run_cell"](None)
    shell.user_ns[f"_i{number}"] = "source"
    change(shell.user_ns)
    shell.events.callbacks["post_run_cell"](SimpleNamespace(execution_count=number))


def test_a_name_bound_among_thousands_of_ipythons_names_is_found() -> None:
    hooks, shell = installed()
    for number in range(1, 3001):
        run_cell(shell, number, lambda ns: None)
    run_cell(shell, 3001, lambda ns: ns.update(df=object()))
    assert hooks.rebound == {"df": 3001}


def test_rebinding_unbinding_and_binding_again_are_seen() -> None:
    hooks, shell = installed()
    run_cell(shell, 1, lambda ns: ns.update(x=object(), y=object()))
    run_cell(shell, 2, lambda ns: ns.update(x=object()))
    assert hooks.rebound == {"x": 2, "y": 1}
    run_cell(shell, 3, lambda ns: ns.pop("x"))
    assert hooks.rebound == {"y": 1}
    run_cell(shell, 4, lambda ns: ns.update(x=object()))
    assert hooks.rebound == {"x": 4, "y": 1}


def test_a_name_bound_while_the_last_one_moves_to_the_end_is_found() -> None:
    # The namespace's last key unbound and bound again, while as many other keys go as come:
    # its length and its last key are as before, and a name was bound in between.
    hooks, shell = installed()
    run_cell(shell, 1, lambda ns: ns.update(_a=1, _b=2, x=object()))

    def change(ns: dict[str, Any]) -> None:
        ns["y"] = object()
        del ns["_a"], ns["_b"]
        ns["x"] = ns.pop("x")

    run_cell(shell, 2, change)
    assert hooks.rebound == {"x": 1, "y": 2}


def test_a_cleared_namespace_is_walked_again() -> None:
    hooks, shell = installed()
    run_cell(shell, 1, lambda ns: ns.update(x=object()))
    run_cell(shell, 2, lambda ns: (ns.clear(), ns.update(y=object())))
    assert hooks.rebound == {"y": 2}


# One step of a cell: bind a name to a new object, bind it to the object it has, or unbind it.
steps = st.lists(st.tuples(st.sampled_from(("new", "same", "del")), st.sampled_from(NAMES)), max_size=6)


@settings(max_examples=500, deadline=None)
@given(st.lists(steps, min_size=1, max_size=12))
def test_the_hooks_agree_with_a_walk_over_every_name(cells: list[list[tuple[str, str]]]) -> None:
    hooks, shell = installed()
    expected: dict[str, int] = {}
    for number, cell in enumerate(cells, start=1):
        before = {name: id(value) for name, value in shell.user_ns.items() if not name.startswith("_")}

        def change(ns: dict[str, Any], cell: list[tuple[str, str]] = cell) -> None:
            for action, name in cell:
                if action == "new":
                    ns[name] = object()
                elif action == "same" and name in ns:
                    ns[name] = ns.pop(name)  # unbound and bound again: a new key at the end
                elif action == "del":
                    ns.pop(name, None)

        run_cell(shell, number, change)
        after = {name: id(value) for name, value in shell.user_ns.items() if not name.startswith("_")}
        expected = {name: expected[name] for name in expected if name in after}
        expected |= {name: number for name, ident in after.items() if before.get(name) != ident}
        assert hooks.rebound == expected
