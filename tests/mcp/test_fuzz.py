"""Property-based fuzz of every tool's arguments, generated from the declarations in `tool_specs`.

One in-memory server with one kernel takes every call: values of the declared kind and values of
any other JSON type, unknown parameters, missing ones. No call may end in `internal_error` or
hang, and the kernel answers a trivial cell afterwards. Cells the fuzz sends are harmless by
construction (a string literal, a comment or a fixed snippet): the arguments are what is fuzzed.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import nbformat
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from nbformat.v4 import new_code_cell, new_notebook

from tests.mcp.calls import run, text_of
from tests.mcp.conftest import memory_server
from warmkernel.tools.catalog import TOOLS
from warmkernel.tools.kinds import (
    Cell,
    Cells,
    Choice,
    Executions,
    Flag,
    Integer,
    KernelName,
    Kind,
    Param,
    Seconds,
    Text,
    Tool,
    VariablePath,
)

pytestmark = pytest.mark.timeout(600)

CALLS = 2_000
"""Generated calls in all, shared evenly by the tools."""
CALL_TIMEOUT_S = 60.0
Served = tuple[anyio.from_thread.BlockingPortal, Client]
"""The portal to the fuzz server's event loop, and its client."""

_JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=50)
)
JUNK = (
    _JSON_SCALARS
    | st.lists(_JSON_SCALARS, max_size=3)
    | st.dictionaries(st.text(max_size=5), _JSON_SCALARS, max_size=2)
)
"""Any JSON value."""

_SNIPPETS = (
    "1 + 1",
    "x = 41",
    "print('hi')",
    "1 / 0",
    "'é' * 3",
    "import sys",
    "del x",
    "x",
    "__import__ = None",
)
_LONG_NUMBER = st.integers(min_value=4_000, max_value=6_000).map(lambda digits: "9" * digits)
_LINE_RANGES = st.from_regex(r"-?[0-9]{0,6}:-?[0-9]{0,6}", fullmatch=True) | st.tuples(
    st.sampled_from(["", "-"]), _LONG_NUMBER, st.sampled_from([":", ":5", ":-1"])
).map("".join)


def cell_source() -> st.SearchStrategy[str]:
    """A cell that is harmless whatever the fuzz draws: a literal, a comment, a fixed snippet."""
    text = st.text(max_size=200)
    return (
        st.sampled_from(_SNIPPETS)
        | text.map(repr)
        | text.map(lambda t: "# " + t.replace("\n", " ").replace("\r", " "))
    )


def valid(param: Param) -> st.SearchStrategy[Any]:
    """Values of the parameter's declared kind (which may still be refused by meaning)."""
    kind: Kind = param.kind
    match kind:
        case Text(optional=optional):
            specific = {
                "freeform": cell_source(),
                "path": st.sampled_from(["nb.ipynb", "missing.ipynb", "data.txt", "/etc/passwd", "..", ""]),
                "file": st.sampled_from(["data.txt", "nb.ipynb", "/etc/passwd", "../x", "missing"]),
                "line_range": _LINE_RANGES,
            }.get(param.name, st.text(max_size=100))
            return specific | st.none() if optional else specific
        case Integer(minimum=minimum, optional=optional):
            numbers = st.integers(min_value=minimum, max_value=minimum + 50) | st.integers(min_value=minimum)
            return numbers | st.none() if optional else numbers
        case Seconds(optional=optional):
            seconds = st.floats(min_value=0, max_value=3) | st.floats(min_value=0, allow_infinity=False)
            return seconds | st.none() if optional else seconds
        case Flag():
            return st.booleans()
        case Choice(choices=choices):
            return st.sampled_from(choices)
        case Cell():
            return st.integers(min_value=-2, max_value=5) | st.sampled_from(["a", "b", "zz"])
        case Cells():
            items = st.integers(min_value=-2, max_value=5) | st.sampled_from(["a", "b", "zz"])
            return st.sampled_from(["stale", "all", "none"]) | st.lists(items, max_size=4)
        case VariablePath():
            return st.from_regex(r"[a-z_][a-z0-9_]{0,8}(\.[a-z_][a-z0-9_]{0,8}){0,2}", fullmatch=True)
        case KernelName(optional=optional):
            # a few names, so the fuzz does not spend its time starting kernels
            names = st.sampled_from(["main", "fz", "nothere"])
            return names | st.none() if optional else names
        case Executions(optional=optional):
            selections = st.from_regex(
                r"[0-9]{1,3}(-[0-9]{1,3})?(,[0-9]{1,3}(-[0-9]{1,3})?){0,2}", fullmatch=True
            )
            return (
                selections | st.integers(min_value=-1, max_value=20) | st.none() if optional else selections
            )
    raise AssertionError(f"no strategy for {kind!r}")


def mostly(usual: st.SearchStrategy[Any], rare: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`usual` three times in four: a call whose other arguments are all junk tests little."""
    return st.integers(min_value=0, max_value=3).flatmap(lambda pick: rare if pick == 0 else usual)


def arguments(tool: Tool) -> st.SearchStrategy[dict[str, Any]]:
    """A call's arguments: each parameter valid, junk or absent, sometimes an unknown one too."""
    values = {param.name: mostly(valid(param), JUNK) for param in tool.params}
    unknown = st.dictionaries(st.sampled_from(["kernel_id", "bogus", ""]), JUNK, max_size=1)
    if not tool.params or tool.name == "reset_python":
        # Nothing to fuzz but the call's shape: always refused, so no reset slows the run down.
        unknown = st.dictionaries(st.sampled_from(["bogus", "x"]), JUNK, min_size=1, max_size=1)
    else:
        unknown = mostly(st.just({}), unknown)
    chosen = st.fixed_dictionaries({}, optional=values)
    return st.tuples(chosen, unknown).map(lambda pair: pair[0] | pair[1])


@pytest.fixture(scope="module")
def fuzz_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One server and kernel for the whole fuzz, in a workspace with a notebook and a data file."""
    workspace = tmp_path_factory.mktemp("fuzz-ws")
    notebook = new_notebook(cells=[new_code_cell("a = 1", id="a"), new_code_cell("b = a + 1", id="b")])
    (workspace / "nb.ipynb").write_text(nbformat.writes(notebook), encoding="utf-8")
    (workspace / "data.txt").write_text("data")
    server = memory_server(Path(workspace), result_mode="structured")
    with (
        anyio.from_thread.start_blocking_portal("asyncio") as portal,
        portal.wrap_async_context_manager(server) as client,
    ):
        portal.call(run, client, "x = 1\nprint('a line')")  # an execution to read, search, inspect
        yield portal, client


async def _call(client: Client, tool: str, args: dict[str, Any]) -> str:
    with anyio.fail_after(CALL_TIMEOUT_S):  # a hang fails the call
        result = await client.call_tool(tool, args)
    return text_of(result) if result.is_error else ""


async def _trivial_cell(client: Client) -> str:
    with anyio.fail_after(CALL_TIMEOUT_S):
        await client.call_tool("interrupt_python", {})
        return (await run(client, "# warmkernel: --wait 30\n6 * 7"))[1]


@pytest.mark.parametrize("tool", TOOLS, ids=[tool.name for tool in TOOLS])
def test_no_generated_call_is_an_internal_error_or_hangs_and_the_kernel_answers_after(
    tool: Tool, fuzz_client: Served
) -> None:
    portal, client = fuzz_client

    @settings(
        max_examples=math.ceil(CALLS / len(TOOLS)),
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(arguments(tool))
    def fuzz(args: dict[str, Any]) -> None:
        error = portal.call(_call, client, tool.name, args)
        assert not error.startswith("internal_error"), f"{tool.name}({args!r}) -> {error}"

    fuzz()
    assert "Out[" in portal.call(_trivial_cell, client)
