"""Running cells through MCP: persistence, numbering, replies, waits, busy, interrupt."""

from __future__ import annotations

import re
from functools import partial

import anyio
import pytest
from mcp import Client

from tests.gates import Gate
from tests.mcp.calls import body, call, call_error, run
from tests.mcp.conftest import FreshClient

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


async def test_state_persists_from_cell_to_cell(client: Client) -> None:
    await run(client, "import math\ndef double(v):\n    return 2 * v\nbase = 20")
    number, text = await run(client, "double(base) + math.floor(2.5)")
    assert body(text) == [f"Out[{number}]: 42"]


async def test_reply_header_names_warmkernel_number_and_duration(client: Client) -> None:
    _, text = await run(client, "pass")
    assert re.fullmatch(r"In \[\d+\] · \d+ ms:", text)


async def test_silent_cell_shows_only_the_header(client: Client) -> None:
    _, text = await run(client, "quiet = 1")
    assert body(text) == []


async def test_display_has_no_out_label_but_result_does(client: Client) -> None:
    number, text = await run(client, "from IPython.display import display\ndisplay('shown')\n'value'")
    assert body(text) == ["'shown'", f"Out[{number}]: 'value'"]


async def test_python_error_is_an_execution_state_with_traceback(client: Client) -> None:
    number, text = await run(client, "raise ValueError('bad value')")
    assert "ValueError: bad value" in text
    status = await call(client, "python_execution_status", execution=number)
    assert f"execution {number}: error" in status
    assert "error: ValueError: bad value" in status


async def test_traceback_cell_label_matches_warmkernel_number(client: Client) -> None:
    number, text = await run(client, "1/0")
    assert f"Cell In[{number}], line 1" in text


async def test_the_cell_after_one_the_kernel_never_answered_keeps_its_number_in_tracebacks(
    fresh_client: FreshClient,
) -> None:
    deep = "v = " + "+".join(["1"] * 200_000)  # on 3.11, compiling it fails inside ipykernel: no reply
    async with fresh_client() as client:
        await run(client, f"# warmkernel: --wait 60\n{deep}")
        number, text = await run(client, "1/0")
        assert f"Cell In[{number}], line 1" in text


async def test_progress_bar_collapses_to_its_last_frame(client: Client) -> None:
    code = (
        "import sys\n"
        "for i in range(101):\n"
        "    sys.stdout.write(f'\\r{i:3d}%|' + '#' * (i // 10))\n"
        "print()\n"
        "print('end')"
    )
    _, text = await run(client, code)
    assert body(text) == ["100%|##########", "end"]


async def test_colour_escapes_and_erase_line_are_normalized(client: Client) -> None:
    _, text = await run(client, r"print('\x1b[31mred\x1b[0m'); print('junk\r\x1b[2Kclean')")
    assert body(text) == ["red", "clean"]


async def test_input_waits_for_the_answer_sent_with_send_python_input(client: Client) -> None:
    with anyio.fail_after(20):
        number, text = await run(client, "name = input('name? ')\nprint('hello', name)")
        assert text.splitlines()[0].startswith(f"In [{number}] · awaiting input after")
        assert 'the prompt "name? "' in text
        assert f'send_python_input(text="...", execution={number})' in text
        status = await call(client, "python_execution_status", execution=number)
        assert f"execution {number}: awaiting_input" in status
        answered = await call(client, "send_python_input", text="Ada")
    assert answered.startswith(f"In [{number}] · ")
    assert body(answered) == ["name? Ada", "hello Ada"]


async def test_wait_directive_returns_early_and_wait_python_collects_the_end(
    client: Client, gate: Gate
) -> None:
    number, text = await run(
        client, f"# warmkernel: --wait 0.2\nprint('begun', flush=True)\n{gate.wait}\nprint('done')"
    )
    assert f"In [{number}] · running for" in text
    assert "Still running" in text and f"wait_python(execution={number})" in text
    gate.open()
    text = await call(client, "wait_python", execution=number, timeout_seconds=30)
    assert body(text) == ["begun", "done"]


async def test_running_reply_shows_latest_lines(client: Client, gate: Gate) -> None:
    code = (
        f"# warmkernel: --wait 1\nfor i in range(8): print(f'step {{i}}', flush=True)\nprint()\n{gate.wait}"
    )
    number, text = await run(client, code)
    assert "last 5 lines:" in text
    assert [line for line in text.splitlines() if line.startswith("step")] == [
        f"step {i}" for i in range(3, 8)
    ]
    gate.open()
    await call(client, "wait_python", execution=number)


async def test_wait_without_number_selects_the_running_execution(client: Client, gate: Gate) -> None:
    number, _ = await run(client, f"# warmkernel: --wait 0.1\n{gate.wait}\nprint('ok')")
    running = await call(client, "wait_python", timeout_seconds=0.1)
    assert running.startswith(f"In [{number}] · running for")
    gate.open()
    text = await call(client, "wait_python")
    assert text.startswith(f"In [{number}]") and body(text) == ["ok"]


async def test_cell_sent_while_busy_is_rejected_with_running_number(client: Client, gate: Gate) -> None:
    number, _ = await run(client, f"# warmkernel: --wait 0.1\n{gate.wait}")
    code, message = await call_error(client, "run_python", freeform="print('never')")
    assert code == "busy"
    assert message.startswith(f"execution {number} (sent by ")  # this client's name: it may not be alone
    assert ") is still running; this cell was not run" in message
    assert f"wait_python(execution={number})" in message
    gate.open()
    await call(client, "wait_python", execution=number)
    next_number, _ = await run(client, "1")
    assert next_number == number + 1


async def test_full_output_directive_survives_running_to_wait(client: Client, gate: Gate) -> None:
    number, text = await run(
        client, f"# warmkernel: --wait 0.1 --full-output\n{gate.wait}\nfor i in range(1000): print(i)"
    )
    assert f"In [{number}] · running for" in text
    gate.open()
    text = await call(client, "wait_python", execution=number)
    assert body(text) == [str(i) for i in range(1000)]


async def test_long_output_shows_head_tail_and_the_call_that_reads_the_rest(client: Client) -> None:
    number, text = await run(client, "for i in range(1, 1001): print(f'line {i}')")
    lines = body(text)
    assert lines[:150] == [f"line {i}" for i in range(1, 151)]
    assert lines[-150:] == [f"line {i}" for i in range(851, 1001)]
    note = lines[150]
    assert "lines 151-850 of 1000 omitted" in note
    assert f'read_python_output(execution={number}, line_range="151:850")' in note
    read = await call(client, "read_python_output", execution=number, line_range="151:850")
    assert read.splitlines()[1:] == [f"line {i}" for i in range(151, 851)]


async def test_wide_output_is_cut_by_the_character_budget(client: Client) -> None:
    number, text = await run(client, "for i in range(40): print(str(i) * 1000)")
    assert len(text) < 17_000
    assert f"execution={number}" in text and "omitted" in text


async def test_invalid_directive_allocates_no_number(fresh_client: FreshClient) -> None:
    async with fresh_client() as client:
        code, message = await call_error(client, "run_python", freeform="# warmkernel: --wiat 5\n1")
        assert code == "invalid_directive"
        assert "--wiat" in message
        assert (await run(client, "1"))[0] == 1


async def test_numbering_continues_across_busy_invalid_and_reset(
    fresh_client: FreshClient, gate: Gate
) -> None:
    async with fresh_client() as client:
        assert (await run(client, "a = 1"))[0] == 1
        assert (await run(client, f"# warmkernel: --wait 0.1\n{gate.wait}"))[0] == 2
        assert (await call_error(client, "run_python", freeform="1"))[0] == "busy"
        assert (await call_error(client, "run_python", freeform="# warmkernel: --wait 0\n1"))[
            0
        ] == "invalid_directive"
        reset = await call(client, "reset_python")
        assert "execution 2 was killed" in reset and "generation 2" in reset
        number, text = await run(client, "a")
        assert number == 3 and "NameError" in text
        assert "killed" in await call(client, "wait_python", execution=2)
        listing = await call(client, "list_python_executions")
        assert [int(line.split()[0]) for line in listing.splitlines()] == [3, 2, 1]


async def test_interrupt_right_after_submission_lands_on_that_cell(client: Client, gate: Gate) -> None:
    number, _ = await run(client, f"# warmkernel: --wait 0.01\n{gate.wait}")
    assert await call(client, "interrupt_python") == (
        f"interrupt_sent: SIGINT for execution {number}; "
        f"call wait_python(execution={number}) to see how it ended"
    )
    text = await call(client, "wait_python", execution=number, timeout_seconds=30)
    assert text.startswith(f"In [{number}]") and " interrupted" in text.splitlines()[0]
    assert "KeyboardInterrupt" in text


async def test_interrupt_when_idle_says_idle(client: Client) -> None:
    await run(client, "1")
    assert (await call(client, "interrupt_python")).startswith("idle:")


async def test_client_cancelling_a_wait_ends_the_call_not_the_cell(client: Client, gate: Gate) -> None:
    number, _ = await run(client, f"# warmkernel: --wait 0.1\n{gate.wait}\nprint('survived')")
    with anyio.move_on_after(0.3):  # the cell waits on its gate: only the client's cancel ends this wait
        await client.call_tool("wait_python", {"execution": number, "timeout_seconds": 30})
    gate.open()
    text = await call(client, "wait_python", execution=number)
    assert body(text) == ["survived"]


async def test_many_concurrent_waits_do_not_block_status(client: Client, gate: Gate) -> None:
    number, _ = await run(client, f"# warmkernel: --wait 0.1\n{gate.wait}")
    async with anyio.create_task_group() as tg:
        for _ in range(50):
            tg.start_soon(partial(call, client, "wait_python", execution=number))
        with anyio.fail_after(10):
            status = await call(client, "python_status")
        assert f"busy: execution {number} running" in status
        gate.open()
    assert "completed" in await call(client, "python_execution_status", execution=number)


async def test_without_a_number_the_latest_execution_is_selected_when_idle(client: Client) -> None:
    await run(client, "print('older')")
    number, _ = await run(client, "print('latest')")
    assert (await call(client, "python_execution_status")).startswith(f"execution {number}: completed")
    assert (await call(client, "read_python_output")).splitlines()[1:] == ["latest"]
