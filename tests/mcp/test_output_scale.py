"""Output at scale through MCP: spill files, the output limit, odd bytes, and floods.

The cases with millions of lines or tens of megabytes are marked `slow`; `-m "not slow"` leaves
them out, and CI runs them.
"""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.mcp.calls import body, call, run
from tests.mcp.conftest import FreshClient

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


def rows(label: str, count: int) -> str:
    return f"for i in range({count}): print(f'{label} {{i}}')"


async def read(client: Client, number: int, line_range: str | None = None, **extra: object) -> list[str]:
    """The lines of a read reply, without its header."""
    text = await call(client, "read_python_output", execution=number, line_range=line_range, **extra)
    return text.splitlines()[1:]


async def test_oldest_finished_output_is_dropped_past_the_limit_and_every_read_says_so(
    fresh_client: FreshClient,
) -> None:
    async with fresh_client(spill_threshold_bytes=1_000, max_output_bytes=30_000) as client:
        first, _ = await run(client, rows("first", 2000))  # about 22 kB, spilled
        second, _ = await run(client, rows("second", 2000))  # 22 kB more: over the limit
        note = f"output of execution {first} was dropped to stay under the output limit"
        assert await call(client, "read_python_output", execution=first, line_range="1:5") == note
        assert await call(client, "search_python_output", query="first", execution=first) == note
        assert body(await call(client, "wait_python", execution=first)) == [note]
        status = await call(client, "python_execution_status", execution=first)
        assert note in status.splitlines()
        assert "lines: combined 2000, stdout 2000," in status  # the counts stay
        assert await read(client, second, "-1:") == ["second 1999"]


async def test_the_running_execution_keeps_all_its_output_past_the_limit(fresh_client: FreshClient) -> None:
    async with fresh_client(spill_threshold_bytes=1_000, max_output_bytes=5_000) as client:
        number, _ = await run(client, rows("row", 5000))  # about 44 kB, all its own
        assert await read(client, number, "2500:2501") == ["row 2499", "row 2500"]
        assert await read(client, number, "-1:") == ["row 4999"]
        later, _ = await run(client, rows("later", 1000))
        assert await read(client, later, "1:1") == ["later 0"]
        assert "dropped" in await call(client, "read_python_output", execution=number)


async def test_output_kept_in_memory_does_not_count_toward_the_limit(fresh_client: FreshClient) -> None:
    async with fresh_client(spill_threshold_bytes=100_000, max_output_bytes=1) as client:
        small, _ = await run(client, rows("small", 100))
        spilled, _ = await run(client, rows("big", 20_000))
        assert await read(client, small, "-1:") == ["small 99"]
        assert await read(client, spilled, "-1:") == ["big 19999"]


async def test_nul_bytes_and_invalid_utf8_read_back_safely(client: Client) -> None:
    # Lone surrogates leave the kernel as the raw bytes 0xFF 0xFE: invalid UTF-8 on the wire.
    number, _ = await run(client, "print('a\\x00b \\udcff\\udcfe c')")
    assert await read(client, number) == ["ab \ufffd\ufffd c"]


async def test_a_stream_that_ends_without_a_newline_keeps_its_last_line(client: Client) -> None:
    number, text = await run(client, "import sys\nprint('first')\n_ = sys.stdout.write('no final newline')")
    assert body(text) == ["first", "no final newline"]
    assert await read(client, number, "-1:") == ["no final newline"]


async def test_a_megabyte_line_is_clipped_by_max_chars_and_the_inline_budget(
    fresh_client: FreshClient,
) -> None:
    async with fresh_client(inline_max_chars=1000) as client:
        number, text = await run(client, "import sys\n_ = sys.stdout.write('a' + 'x' * 1_000_000 + 'z')")
        assert len(text) < 1100
        assert await read(client, number, max_chars=4) == ["axxx...[999998 chars omitted]"]
        whole = await read(client, number)  # a reply carries 200,000 characters of it
        assert whole[0] == "a" + "x" * 199_999 + "...[800002 chars omitted]"
        assert whole[1].startswith("[line 1 has 1,000,002 characters, more than a reply carries")
        found = await call(client, "search_python_output", query="xz$", execution=number, max_chars=2)
        assert found.splitlines()[1:] == ["M 1 | ax...[1000000 chars omitted]"]


async def test_status_answers_while_a_flood_is_ingested(fresh_client: FreshClient, tmp_path: Path) -> None:
    stop = tmp_path / "stop-flooding"
    flood = (
        "# warmkernel: --wait 0.5\n"
        "import os\n"
        "i = 0\n"
        f"while not os.path.exists({str(stop)!r}):\n"
        "    print(i)\n"
        "    i += 1\n"
    )
    async with fresh_client() as client:
        number, _ = await run(client, flood)
        with anyio.fail_after(60):
            for _ in range(5):
                assert f"busy: execution {number} running" in await call(client, "python_status")
                status = await call(client, "python_execution_status", execution=number)
                assert f"execution {number}: running" in status
            await anyio.Path(stop).touch()
            await call(client, "wait_python", execution=number, timeout_seconds=50)
        status = await call(client, "python_execution_status", execution=number)
        match = re.search(r"stdout (\d+),", status)
        assert match, status
        count = int(match.group(1))
        assert await read(client, number, "1:2") == ["0", "1"]
        assert await read(client, number, "-1:") == [str(count - 1)]  # nothing lost or reordered


async def test_spill_files_are_private_and_removed_when_the_server_exits(fresh_client: FreshClient) -> None:
    # The kernel's JUPYTER_RUNTIME_DIR is <runtime root>/home/jupyter-runtime.
    look = (
        "import os, pathlib, stat\n"
        "root = pathlib.Path(os.environ['JUPYTER_RUNTIME_DIR']).parents[1]\n"
        "print(root)\n"
        "for path in [root / 'output-main', *sorted((root / 'output-main').iterdir())]:\n"
        "    print(path.name.rsplit('-', 1)[0], oct(stat.S_IMODE(path.stat().st_mode)))"
    )
    async with fresh_client(spill_threshold_bytes=0) as client:
        await run(client, "import sys\nprint('out')\nprint('err', file=sys.stderr)")
        _, text = await run(client, look)
        root, *modes = body(text)
        assert modes == ["output 0o700", "1-stderr 0o600", "1-stdout 0o600"]  # in output-main, main's
        assert await anyio.Path(root).is_dir()
    assert not await anyio.Path(root).exists()


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_ten_million_lines_are_all_kept_in_order(fresh_client: FreshClient) -> None:
    async with fresh_client() as client:
        number, _ = await run(client, "# warmkernel: --wait 800\nfor i in range(10_000_000): print(i)")
        status = await call(client, "python_execution_status", execution=number)
        assert f"execution {number}: completed" in status
        assert "lines: combined 10000000, stdout 10000000, stderr 0," in status
        assert await read(client, number, "1:2") == ["0", "1"]
        assert await read(client, number, "5000000:5000002") == ["4999999", "5000000", "5000001"]
        assert await read(client, number, "-2:") == ["9999998", "9999999"]
        found = await call(client, "search_python_output", query="^7654321$", execution=number)
        assert found.splitlines()[1:] == ["M 7654322 | 7654321"]


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_a_fifty_megabyte_line_without_a_newline_is_kept_whole(fresh_client: FreshClient) -> None:
    code = "import sys\nprint('first')\nprint('middle')\n_ = sys.stdout.write('a' + 'x' * 50_000_000 + 'z')"
    async with fresh_client() as client:
        number, text = await run(client, f"# warmkernel: --wait 200\n{code}")
        assert len(text) < 20_000  # the inline budget clips it
        status = await call(client, "python_execution_status", execution=number)
        assert "lines: combined 3, stdout 3," in status
        assert await read(client, number, "1:2") == ["first", "middle"]
        assert await read(client, number, "-1:", max_chars=3) == ["axx...[49999999 chars omitted]"]
        found = await call(client, "search_python_output", query="xxz", execution=number, max_chars=1)
        assert found.splitlines()[1:] == ["M 3 | a...[50000001 chars omitted]"]
