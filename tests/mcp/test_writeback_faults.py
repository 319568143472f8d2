"""Write-back under faults, through MCP: a full disk leaves the notebook as it was and says why,
a symlink swapped in during a cell is not written through, and a path no file can have is a
coded error naming its parameter, never `internal_error`.

The full disk is a small tmpfs (root only): filled to the last page, then to all but the room for
the copy of the old content, then emptied again.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import nbformat
import pytest
from mcp import Client
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from tests.mcp.calls import call, run, text_of
from tests.mcp.conftest import memory_server

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

NB = "nb.ipynb"
DISK_BYTES = 2 * 1024 * 1024
PAGE = 4096
FILLER = "filler"


def write_notebook(path: Path, source: str) -> bytes:
    """A notebook of a long markdown cell and one code cell `a`; its bytes."""
    notes = new_markdown_cell("# Notes\n\n" + "A paragraph the person wrote. " * 500, id="md")
    path.write_text(nbformat.writes(new_notebook(cells=[notes, new_code_cell(source, id="a")])), "utf-8")
    return path.read_bytes()


async def run_all(client: Client) -> tuple[str, dict[str, Any]]:
    """run_notebook_cells of every cell: the reply's text and structured content."""
    with anyio.fail_after(90):
        result = await client.call_tool(
            "run_notebook_cells", {"path": NB, "cells": "all", "timeout_seconds": 60}
        )
    assert not result.is_error and result.structured_content is not None, text_of(result)
    return text_of(result), result.structured_content


# -- a full disk ------------------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of DISK_BYTES, mounted for this test only (unmounted however it ends)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def fill(disk: Path, leave: int) -> None:
    """Fill the disk so that exactly `leave` bytes, rounded up to whole pages, stay free."""
    (disk / FILLER).unlink(missing_ok=True)
    left = -(-leave // PAGE) * PAGE
    (disk / FILLER).write_bytes(b"\0" * (os.statvfs(disk).f_bavail * PAGE - left))
    assert os.statvfs(disk).f_bavail * PAGE == left


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
async def test_a_notebook_on_a_full_disk_keeps_its_bytes_and_inode_and_the_replies_say_why(
    small_disk: Path,
) -> None:
    workspace = small_disk / "ws"
    workspace.mkdir()
    path = workspace / NB
    before = write_notebook(path, "print('x' * 300_000)")
    inode = path.stat().st_ino
    async with memory_server(workspace, result_mode="structured") as client:
        fill(small_disk, leave=0)  # not even room for the copy of the old content: nothing is written
        text, ran = await run_all(client)
        assert ran["cells"][0]["outputs_saved"] == "write_failed"
        no_copy = (
            "cannot keep a copy of nb.ipynb beside it before writing it: No space left on device; "
            "nothing was written"
        )
        assert f"outputs of cell a not saved to nb.ipynb: {no_copy}" in text
        assert (path.read_bytes(), path.stat().st_ino) == (before, inode)

        fill(small_disk, leave=len(before))  # room for the copy, not for the outputs
        mtime = path.stat().st_mtime_ns
        text, ran = await run_all(client)
        assert ran["cells"][0]["outputs_saved"] == "write_failed"
        left = "cannot write nb.ipynb: No space left on device; it was left as it was"
        assert f"outputs of cell a not saved to nb.ipynb: {left}" in text
        assert (path.read_bytes(), path.stat().st_ino, path.stat().st_mtime_ns) == (before, inode, mtime)
        assert sorted(os.listdir(workspace)) == [NB]  # the copy went with the failed write
        status = await call(client, "notebook_status", path=NB)
        assert f"outputs of cell a's last run are not in the file: writing it failed: {left}" in status

        (small_disk / FILLER).unlink()
        _, ran = await run_all(client)
        assert ran["cells"][0]["outputs_saved"] == "saved"
        assert "are not in the file" not in await call(client, "notebook_status", path=NB)
    saved = nbformat.read(path, as_version=4)
    assert saved.cells[0].source.startswith("# Notes") and len(saved.cells[1].outputs[0]["text"]) == 300_001
    assert (path.stat().st_ino, sorted(os.listdir(workspace))) == (inode, [NB])


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
async def test_an_export_onto_a_full_disk_keeps_the_file_it_would_replace(small_disk: Path) -> None:
    workspace = small_disk / "ws"
    workspace.mkdir()
    (workspace / "session.py").write_text("# kept\n")
    async with memory_server(workspace) as client:
        number, _ = await run(client, "print('y' * 100_000)")
        fill(small_disk, leave=0)
        result = await client.call_tool(
            "export_python_executions", {"executions": number, "path": "session.md"}
        )
        assert result.is_error and text_of(result).startswith("write_failed: cannot write ")
        assert "No space left on device" in text_of(result)
        result = await client.call_tool(
            "export_python_executions", {"executions": number, "path": "session.py"}
        )
        assert result.is_error and "No space left on device" in text_of(result)
    assert (workspace / "session.py").read_text() == "# kept\n"
    assert sorted(os.listdir(workspace)) == ["session.py"]  # no temporary file left


# -- a symlink swapped in during a cell -------------------------------------------------------------


async def test_a_symlink_swapped_in_for_the_notebook_during_a_cell_is_not_written_through(
    tmp_path: Path,
) -> None:
    workspace, elsewhere = tmp_path / "ws", tmp_path / "elsewhere"
    workspace.mkdir()
    elsewhere.mkdir()
    outside = elsewhere / NB
    swap = (
        f"import os\nos.rename({NB!r}, 'moved.ipynb')\nos.symlink({str(outside)!r}, {NB!r})\nprint('swapped')"
    )
    write_notebook(workspace / NB, swap)
    outside_before = write_notebook(outside, swap)  # the same cell: only the path tells them apart
    async with memory_server(workspace, result_mode="structured") as client:
        with anyio.fail_after(90):
            result = await client.call_tool("run_notebook_cells", {"path": NB, "timeout_seconds": 60})
        assert result.is_error and text_of(result).startswith("path_outside_workspace: notebook 'nb.ipynb'")
        assert outside.read_bytes() == outside_before
        os.replace(workspace / "moved.ipynb", workspace / NB)  # the person puts the notebook back
        assert nbformat.read(workspace / NB, as_version=4).cells[1].outputs == []
        status = await call(client, "notebook_status", path=NB)
        assert (
            "outputs of cell a's last run are not in the file: writing it failed: nb.ipynb now leads "
            f"outside the workspace {workspace}"
        ) in status


# -- paths no file can have -----------------------------------------------------------------------

BAD_PATHS = {
    "NUL byte": "a\0b.ipynb",
    "part of 300 bytes": "n" * 296 + ".ipynb",
    "4 KB path": "d/" * 2100 + "x.ipynb",
}
SURROGATE = "\ud800.ipynb"
"""JSON carries no lone surrogate (the SDK refuses to send one): only the in-memory transport can."""


def path_calls(bad: str, number: int) -> list[tuple[str, str, dict[str, Any]]]:
    """(tool, the parameter given `bad`, the call's arguments) for every tool that takes a path."""
    return [
        ("notebook_status", "path", {"path": bad}),
        ("run_notebook_cells", "path", {"path": bad}),
        ("watch_notebook_file", "path", {"path": bad, "file": "data.txt", "cell": 0}),
        ("export_python_executions", "path", {"path": bad, "executions": number}),
        ("executions_to_notebook", "path", {"path": bad, "executions": number}),
    ]


async def assert_names_the_parameter(
    client: Client, tool: str, param: str, arguments: dict[str, Any]
) -> None:
    with anyio.fail_after(30):
        result = await client.call_tool(tool, arguments)
    text = text_of(result)
    assert result.is_error, text
    code, _, message = text.partition(": ")
    assert code == "invalid_arguments", f"{tool}({param}=...) -> {text[:300]}"
    assert message.startswith((f"{param} '", f"{param} holds a lone surrogate")), message[:300]
    assert len(text) < 600  # a 4 KB path is clipped where it is quoted


@pytest.mark.parametrize("bad", list(BAD_PATHS.values()), ids=list(BAD_PATHS))
async def test_a_path_no_file_can_have_is_invalid_arguments_naming_the_parameter(
    client: Client, bad: str
) -> None:
    number, _ = await run(client, "'an execution to export'")
    for tool, param, arguments in path_calls(bad, number):
        await assert_names_the_parameter(client, tool, param, arguments)
    assert "Out[" in (await run(client, "6 * 7"))[1]


async def test_a_watched_file_or_a_lone_surrogate_no_file_can_have_is_invalid_arguments(
    tmp_path: Path,
) -> None:
    write_notebook(tmp_path / NB, "a = 1")
    (tmp_path / "data.txt").write_text("data")
    async with memory_server(tmp_path) as client:
        number, _ = await run(client, "'an execution to export'")
        for tool, param, arguments in path_calls(SURROGATE, number):
            await assert_names_the_parameter(client, tool, param, arguments)
        for bad in [*BAD_PATHS.values(), SURROGATE]:
            arguments = {"path": NB, "file": bad, "cell": "a"}
            await assert_names_the_parameter(client, "watch_notebook_file", "file", arguments)
        watched = await call(client, "watch_notebook_file", path=NB, file="data.txt", cell="a")
        assert "data.txt" in watched
