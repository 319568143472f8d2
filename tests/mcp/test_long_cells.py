"""Long-running cells through MCP: returning on silence, progress notifications, and input()."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
import pytest
from mcp import Client

from tests.gates import Gate
from tests.mcp.calls import body, call, call_error, run, text_of
from tests.mcp.conftest import FreshClient

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]


@asynccontextmanager
async def cell(client: Client, code: str) -> AsyncIterator[tuple[int, str]]:
    """Run a cell that may keep running or wait for input; on the way out, even when the test
    failed, interrupt it and wait for its end, so the shared kernel is idle for the next test."""
    with anyio.fail_after(30):
        number, text = await run(client, code)
    try:
        yield number, text
    finally:
        with anyio.fail_after(30):
            await call(client, "interrupt_python")
            await call(client, "wait_python", execution=number, timeout_seconds=30)


# -- silence ----------------------------------------------------------------------------------


async def test_silence_directive_returns_once_the_cell_goes_quiet(client: Client, gate: Gate) -> None:
    code = f"# warmkernel: --wait 600 --silence 0.5\nprint('working', flush=True)\n{gate.wait}"
    async with cell(client, code) as (number, text):
        lines = text.splitlines()
        assert lines[0].startswith(f"In [{number}] · running for ")
        assert lines[0].endswith(" (silent for 500 ms); last 1 line:")
        assert lines[1:] == [
            "working",
            f"Still running. Next: wait_python(execution={number}) to keep waiting, "
            f"read_python_output(execution={number}) to read the output, or interrupt_python() to stop it.",
        ]


async def test_output_and_carriage_return_redraws_restart_the_silence(client: Client, gate: Gate) -> None:
    code = (
        "# warmkernel: --wait 600 --silence 2\nimport sys, time\n"
        "for i in range(40):\n    sys.stdout.write(f'\\rtick {i}'); sys.stdout.flush(); time.sleep(0.05)\n"
        f"{gate.wait}"
    )
    async with cell(client, code) as (_, text):
        assert text.splitlines()[1] == "tick 39"


async def test_wait_python_silence_counts_from_the_later_of_call_start_and_last_output(
    client: Client, gate: Gate
) -> None:
    code = f"# warmkernel: --wait 0.1\nprint('early', flush=True)\n{gate.wait}"
    async with cell(client, code) as (number, _):
        with anyio.fail_after(30):
            text = await call(
                client, "wait_python", execution=number, timeout_seconds=600, silence_seconds=0.5
            )
        assert text.splitlines()[0].endswith("(silent for 500 ms); last 1 line:")


@pytest.mark.parametrize("silence", [0, -1, "soon", True])
async def test_silence_seconds_must_be_a_positive_number(client: Client, silence: object) -> None:
    code, message = await call_error(client, "wait_python", silence_seconds=silence)
    assert code == "invalid_timeout"
    assert "must be a finite number of seconds > 0 or null" in message


async def test_running_reply_clips_each_line_to_200_characters(client: Client, gate: Gate) -> None:
    async with cell(client, f"# warmkernel: --wait 1\nprint('x' * 500)\n{gate.wait}") as (_, text):
        assert text.splitlines()[1] == "x" * 200 + "...[300 chars omitted]"


# -- progress -----------------------------------------------------------------------------------


Note = tuple[float, float | None, str | None]
"""A progress notification: progress, total, message."""


class Progress:
    """A progress callback that keeps what it was told, and opens the cell's gate once `enough`
    says it was told enough (by default, once it heard anything)."""

    def __init__(self, gate: Gate, enough: Callable[[list[Note]], bool] = bool) -> None:
        self.seen: list[Note] = []
        self._gate = gate
        self._enough = enough

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append((progress, total, message))
        if self._enough(self.seen):
            self._gate.open()


async def test_client_that_asked_for_progress_hears_from_a_long_wait_every_5_s(
    client: Client, gate: Gate
) -> None:
    progress = Progress(gate)
    code = f"# warmkernel: --wait 60\nprint('loading data', flush=True)\n{gate.wait}"
    with anyio.fail_after(60):
        result = await client.call_tool("run_python", {"freeform": code}, progress_callback=progress)
    assert not result.is_error
    assert progress.seen, "no progress notification in more than 5 s"
    elapsed, total, message = progress.seen[0]
    assert elapsed >= 5 and total is None
    assert message is not None and message.endswith(" s: loading data")


async def test_progress_increases_and_names_the_latest_line(fresh_client: FreshClient, gate: Gate) -> None:
    async with fresh_client(progress_interval_s=0.1) as client:
        progress = Progress(gate, lambda seen: len(seen) >= 3 and (seen[-1][2] or "").endswith(": step 9"))
        code = f"for i in range(10):\n    print(f'step {{i}}', flush=True)\n{gate.wait}"
        number, _ = await run(client, "# warmkernel: --wait 0.01\n" + code)
        with anyio.fail_after(30):
            result = await client.call_tool(
                "wait_python", {"execution": number, "timeout_seconds": 30}, progress_callback=progress
            )
        assert body(text_of(result))[-1] == "step 9"
        values = [value for value, _, _ in progress.seen]
        assert len(values) >= 3 and values == sorted(set(values))
        messages = [message or "" for _, _, message in progress.seen]
        assert all(message.startswith(f"In [{number}] running for ") for message in messages)
        assert re.search(r": step \d$", messages[-1]), messages[-1]


async def test_a_coloured_progress_bar_is_named_as_a_terminal_shows_it(
    fresh_client: FreshClient, gate: Gate
) -> None:
    async with fresh_client(progress_interval_s=0.1) as client:
        progress = Progress(gate)
        bar = "\\r\\x1b[31mtrain\\x1b[0m: {i}/8 ["
        code = f"import sys\nfor i in range(8):\n    sys.stderr.write(f'{bar}')\n{gate.wait}"
        number, text = await run(client, "# warmkernel: --wait 0.35\n" + code)
        assert "Progress now: train: " in text and "\x1b" not in text, text
        with anyio.fail_after(30):
            await client.call_tool(
                "wait_python", {"execution": number, "timeout_seconds": 30}, progress_callback=progress
            )
        messages = [message or "" for _, _, message in progress.seen]
        assert messages and all("\x1b" not in message for message in messages), messages


# -- input --------------------------------------------------------------------------------------


async def test_cell_asking_for_input_replies_at_once_with_its_prompt(client: Client) -> None:
    # The cell's --wait is far beyond the cell()'s time limit: the prompt ended the wait.
    async with cell(client, "# warmkernel: --wait 600\nprint('hello')\nx = input('x? ')\nx") as (
        number,
        text,
    ):
        with anyio.fail_after(30):
            waited = await call(client, "wait_python", timeout_seconds=600)
        for reply in (text, waited):
            header, *rest = reply.splitlines()
            assert header.startswith(f"In [{number}] · awaiting input after ")
            assert header.endswith("; last 1 line:")
            assert rest == [
                "hello",
                'Waiting for input at the prompt "x? ". Next: '
                f'send_python_input(text="...", execution={number}) to answer, '
                "or interrupt_python() to stop it.",
            ]
        with anyio.fail_after(30):
            answered = await call(client, "send_python_input", text="42", execution=number)
        assert body(answered) == ["hello", "x? 42", f"Out[{number}]: '42'"]


async def test_getpass_answer_is_never_written_to_the_output(client: Client) -> None:
    code = "import getpass\nsecret = getpass.getpass('Password: ')\nlen(secret)"
    async with cell(client, code) as (number, text):
        assert 'the password prompt "Password: " (the answer is not written to the output)' in text
        with anyio.fail_after(30):
            answered = await call(client, "send_python_input", text="s3cret-value")
        assert body(answered) == ["Password: ", f"Out[{number}]: 12"]
        found = await call(client, "search_python_output", query="s3cret", execution=number)
        assert "0 matching lines" in found


async def test_several_prompts_in_one_cell_are_answered_in_turn(client: Client) -> None:
    async with cell(client, "a = input('a? ')\nb = input('b? ')\nprint(a + b)") as (number, _):
        with anyio.fail_after(30):
            second = await call(client, "send_python_input", text="1")
            assert 'the prompt "b? "' in second
            done = await call(client, "send_python_input", text="2")
        assert body(done) == ["a? 1", "b? 2", "12"]
        status = await call(client, "python_execution_status", execution=number)
        assert f"execution {number}: completed" in status


async def test_interrupt_ends_a_pending_prompt(client: Client) -> None:
    async with cell(client, "answer = input('continue? ')") as (number, _):
        interrupted = await call(client, "interrupt_python")
        assert interrupted.startswith(f"interrupt_sent: SIGINT for execution {number}")
        with anyio.fail_after(30):
            text = await call(client, "wait_python", execution=number, timeout_seconds=30)
        assert text.splitlines()[0].endswith(" interrupted")
        assert body(text)[0] == "continue? "
        assert "KeyboardInterrupt" in text


async def test_cell_sent_while_another_awaits_input_is_busy_and_names_the_answer(client: Client) -> None:
    async with cell(client, "value = input()") as (number, _):
        code, message = await call_error(client, "run_python", freeform="1")
        assert code == "busy"
        assert message.startswith(f"execution {number} (sent by ")
        assert message.endswith(
            ") is waiting for input; this cell was not run. Answer it with "
            f'send_python_input(text="...", execution={number}), or interrupt_python() to stop it.'
        )
        status = await call(client, "python_status")
        assert f"busy: execution {number} awaiting input after " in status


async def test_send_python_input_to_a_cell_not_waiting_is_refused(client: Client, gate: Gate) -> None:
    idle, _ = await run(client, "1")
    code, message = await call_error(client, "send_python_input", text="x")
    assert (code, message) == (
        "not_awaiting_input",
        f"no execution is waiting for input (the latest, {idle}, is completed); "
        'send_python_input(text="...") answers a cell whose reply shows a prompt',
    )
    async with cell(client, f"# warmkernel: --wait 0.1\n{gate.wait}") as (number, _):
        code, message = await call_error(client, "send_python_input", text="x", execution=number)
        assert (code, message) == (
            "not_awaiting_input",
            f"execution {number} is running, not waiting for input; "
            f"wait_python(execution={number}) replies as soon as it asks",
        )
