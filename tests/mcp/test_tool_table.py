"""The tool table is part of the contract: names, parameters, annotations and result modes."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from mcp import Client

from tests.mcp.calls import call, run, text_of
from tests.mcp.conftest import FreshClient

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

EXPECTED = {
    "run_python": ["freeform", "kernel"],
    "python_status": ["kernel"],
    "python_execution_status": ["execution", "kernel"],
    "read_python_output": ["execution", "stream", "line_range", "max_chars", "kernel"],
    "search_python_output": [
        "query",
        "execution",
        "stream",
        "query_mode",
        "context_before",
        "context_after",
        "ignore_case",
        "max_chars",
        "max_matches",
        "kernel",
    ],
    "wait_python": ["execution", "timeout_seconds", "silence_seconds", "kernel"],
    "send_python_input": ["text", "execution", "kernel"],
    "interrupt_python": ["kernel"],
    "reset_python": ["kernel"],
    "list_python_executions": ["limit", "kernel"],
    "list_python_variables": ["include_imports", "include_modules", "kernel"],
    "inspect_python_variable": ["name", "kernel"],
    "notebook_status": ["path", "kernel"],
    "run_notebook_cells": ["path", "cells", "stop_on_error", "timeout_seconds", "kernel"],
    "watch_notebook_file": ["path", "file", "cell", "kernel"],
    "list_python_kernels": [],
    "stop_python_kernel": ["name"],
    "export_python_executions": ["executions", "path", "format", "kernel"],
    "executions_to_notebook": ["executions", "path", "after_cell", "kernel"],
}


async def test_tool_names_and_parameters_are_pinned(client: Client) -> None:
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert {name: list(tool.input_schema["properties"]) for name, tool in tools.items()} == EXPECTED
    assert tools["run_python"].input_schema["required"] == ["freeform"]
    assert tools["search_python_output"].input_schema["required"] == ["query"]
    assert tools["wait_python"].input_schema["properties"]["timeout_seconds"]["default"] == 30
    assert (
        tools["python_status"].annotations is not None and tools["python_status"].annotations.read_only_hint
    )
    assert (
        tools["reset_python"].annotations is not None and tools["reset_python"].annotations.destructive_hint
    )
    assert all(tool.output_schema is None for tool in tools.values())


async def test_content_mode_has_no_structured_content(client: Client) -> None:
    result = await client.call_tool("python_status", {})
    assert result.structured_content is None


async def test_structured_mode_adds_the_same_facts_with_identical_text(
    fresh_client: FreshClient, client: Client
) -> None:
    async with fresh_client(result_mode="structured") as structured:
        tools = (await structured.list_tools()).tools
        assert all(tool.output_schema is not None for tool in tools)
        await run(structured, "print('a'); 1/0")
        result = await structured.call_tool("python_execution_status", {"execution": 1})
        data = result.structured_content
        assert data is not None
        assert (data["execution"], data["state"], data["error"]) == (
            1,
            "error",
            {"name": "ZeroDivisionError", "value": "division by zero"},
        )
        read = await structured.call_tool("read_python_output", {"execution": 1, "line_range": "1:1"})
        assert read.structured_content is not None and read.structured_content["text"] == "a"
    number, _ = await run(client, "print('a'); 1/0")
    plain = await call(client, "read_python_output", execution=number, line_range="1:1")
    assert text_of(read) == plain.replace(f"execution {number} ", "execution 1 ")


async def test_unknown_tool_is_a_coded_error(client: Client) -> None:
    result = await client.call_tool("run_ruby", {})
    assert result.is_error and text_of(result).startswith("invalid_arguments: there is no tool 'run_ruby'")


@pytest.mark.parametrize(
    ("tool", "arguments", "code"),
    [
        pytest.param("wait_python", {"timeout_seconds": -1}, "invalid_timeout", id="negative-timeout"),
        pytest.param("wait_python", {"timeout_seconds": "soon"}, "invalid_timeout", id="text-timeout"),
        pytest.param("list_python_executions", {"limit": 0}, "invalid_limit", id="zero-limit"),
        pytest.param("run_python", {}, "invalid_arguments", id="missing-freeform"),
        pytest.param("run_python", {"freeform": 1}, "invalid_arguments", id="freeform-not-text"),
        pytest.param(
            "search_python_output", {"query": "x", "ignore_case": "yes"}, "invalid_arguments", id="flag"
        ),
    ],
)
async def test_bad_arguments_have_stable_codes(
    client: Client, tool: str, arguments: dict[str, object], code: str
) -> None:
    await run(client, "pass")
    result = await client.call_tool(tool, arguments)
    assert result.is_error and text_of(result).split(":")[0] == code


async def test_structured_mode_gives_an_errors_code_and_message_as_data(fresh_client: FreshClient) -> None:
    async with fresh_client(result_mode="structured") as structured:
        result = await structured.call_tool("list_python_executions", {"limit": 0})
    assert result.is_error
    code, message = text_of(result).split(": ", 1)
    assert result.structured_content == {"error": {"code": "invalid_limit", "message": message}}
    assert code == "invalid_limit"


async def test_each_structured_result_has_only_the_fields_its_tool_declares(
    fresh_client: FreshClient, tmp_path: Path
) -> None:
    notebook = tmp_path / "n.ipynb"
    notebook.write_text(nbformat.writes(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("a = 1")])))
    (tmp_path / "data.txt").write_text("x")
    calls: list[tuple[str, dict[str, object]]] = [
        ("run_python", {"freeform": "x = 1\nprint('hi')"}),
        ("run_python", {"freeform": "# warmkernel: --wait 0.1\nimport time; time.sleep(1)"}),
        ("wait_python", {"timeout_seconds": 30}),
        ("python_status", {}),
        ("python_execution_status", {}),
        ("read_python_output", {}),
        ("read_python_output", {"stream": "images"}),
        ("search_python_output", {"query": "hi", "execution": 1}),
        ("list_python_executions", {}),
        ("list_python_variables", {}),
        ("inspect_python_variable", {"name": "x"}),
        ("notebook_status", {"path": "n.ipynb"}),
        ("run_notebook_cells", {"path": "n.ipynb"}),
        ("watch_notebook_file", {"path": "n.ipynb", "file": "data.txt", "cell": 0}),
        ("interrupt_python", {}),
        ("reset_python", {}),
    ]
    async with fresh_client(result_mode="structured") as client:
        schemas = {tool.name: tool.output_schema for tool in (await client.list_tools()).tools}
        for name, arguments in calls:
            result = await client.call_tool(name, arguments)
            assert not result.is_error, text_of(result)
            declared = set((schemas[name] or {})["properties"])
            fields = set(result.structured_content or {})
            if name == "inspect_python_variable":  # a summary adds the facts of its kind
                assert {"name", "type", "kind", "summary_status"} <= fields
            else:
                assert fields <= declared, name
