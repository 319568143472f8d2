"""Fuzzed tool calls: whatever a client sends, the reply is a result or a coded refusal of the
caller's mistake, never `internal_error`, and the server goes on answering."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from tests.mcp.calls import text_of
from tests.mcp.conftest import memory_server
from warmkernel.tools.catalog import TOOLS

pytestmark = pytest.mark.anyio

# Tools whose valid calls end or replace the kernel are fuzzed with invalid arguments only.
_ENDS_KERNEL = {"reset_python", "stop_python_kernel", "interrupt_python"}
_NAMES = sorted(tool.name for tool in TOOLS)
_PARAMS = {tool.name: sorted(tool.input_schema()["properties"]) for tool in TOOLS}

_EDGES = st.sampled_from(
    [
        "",
        "\x00",
        "a\x00b",
        "\ud800",
        "x" * 300,
        "/".join(["d" * 255] * 3),
        "../../etc/passwd",
        "-1:",
        "1e308",
        10**40,
        -(10**40),
        1e308,
        -1,
        0,
        0.5,
        True,
        [],
        {},
        [1, 2],
        {"a": [1, {"b": None}]},
    ]
).map(copy.deepcopy)  # a fresh list or dict each time: a call may keep what it was given
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=40)
)
_VALUES = _EDGES | st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@st.composite
def _calls(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    name = draw(st.sampled_from(_NAMES))
    params = _PARAMS[name]
    keys = draw(st.lists(st.sampled_from([*params, "unknown_field"]), unique=True, max_size=len(params) + 1))
    arguments = {key: draw(_VALUES) for key in keys}
    if name in _ENDS_KERNEL:
        arguments["unknown_field"] = 1  # always refused before it acts
    return name, arguments


@pytest.fixture(scope="module")
async def fuzz_client(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Client]:
    workspace: Path = tmp_path_factory.mktemp("fuzz-ws")
    async with memory_server(workspace, default_wait_s=5.0) as client:
        yield client


async def _call_once(client: Client, name: str, arguments: dict[str, Any]) -> None:
    with anyio.fail_after(60):
        result = await client.call_tool(name, arguments)
    text = text_of(result)
    assert not text.startswith("internal_error"), f"{name}({arguments!r}) -> {text[:500]}"
    if result.is_error:
        code = text.partition(":")[0]
        assert code.isidentifier(), text[:200]


@settings(
    max_examples=10_000,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(_calls())
async def test_fuzzed_calls_never_fail_inside(fuzz_client: Client, drawn: tuple[str, dict[str, Any]]) -> None:
    await _call_once(fuzz_client, *drawn)
