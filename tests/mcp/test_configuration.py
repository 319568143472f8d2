"""The configured notebook through MCP: `notebook_status()` without a path, from the project's
file, through the relay a host launches."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from tests.mcp.calls import call, call_error
from tests.mcp.conftest import Host

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]


async def test_notebook_tools_without_a_path_use_the_configured_notebook(tmp_path: Path, host: Host) -> None:
    (tmp_path / "analysis.ipynb").write_text(
        nbformat.writes(new_notebook(cells=[new_code_cell("a = 1", id="one")]))
    )
    (tmp_path / "pyproject.toml").write_text('[tool.warmkernel]\nnotebook = "analysis.ipynb"\n')
    async with host(tmp_path) as client:
        assert "analysis.ipynb · 1 code cell" in await call(client, "notebook_status")
        assert "fresh" in await call(client, "run_notebook_cells")
        status = await call(client, "python_status", kernel="nb-analysis")
        assert f"configuration: {tmp_path / 'pyproject.toml'}" in status


async def test_notebook_tools_without_a_path_or_a_configured_notebook_say_how_to_set_one(
    tmp_path: Path, host: Host
) -> None:
    async with host(tmp_path) as client:
        code, message = await call_error(client, "notebook_status")
        assert code == "invalid_arguments"
        assert 'which notebook? notebook_status(path="NAME.ipynb") names one, or set notebook' in message
