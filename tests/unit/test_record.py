"""ExecutionRecord's lifecycle around input(), and what ends a wait, without a kernel."""

from __future__ import annotations

import anyio
import pytest

from warmkernel.execution.record import ExecutionRecord, InputPrompt, WaitEnd
from warmkernel.types import ExecutionNumber, ExecutionState, Generation

pytestmark = pytest.mark.anyio

PROMPT = InputPrompt("name? ", password=False)


def record() -> ExecutionRecord:
    return ExecutionRecord(ExecutionNumber(7), "input()", Generation(1))


def test_awaiting_input_is_live_and_returns_to_running_when_answered() -> None:
    rec = record()
    rec.ask_input(PROMPT)
    assert (rec.state, rec.prompt, rec.state.finished) == (ExecutionState.AWAITING_INPUT, PROMPT, False)
    assert rec.input_answered() == PROMPT
    assert (rec.state, rec.prompt) == (ExecutionState.RUNNING, None)


def test_refused_moves_say_why() -> None:
    rec = record()
    with pytest.raises(RuntimeError, match="execution 7 is not awaiting input: it is running"):
        rec.input_answered()
    rec.ask_input(PROMPT)
    with pytest.raises(RuntimeError, match="execution 7 cannot ask for input: it is awaiting_input"):
        rec.ask_input(PROMPT)


def test_a_record_waiting_for_input_can_still_end() -> None:
    rec = record()
    rec.ask_input(PROMPT)
    rec.finish(ExecutionState.INTERRUPTED)
    assert (rec.state, rec.prompt) == (ExecutionState.INTERRUPTED, None)


async def test_waits_end_at_once_for_input_or_an_end_and_at_the_deadline_otherwise() -> None:
    rec = record()
    with anyio.fail_after(5):
        assert (await rec.wait(0)).reason == "timeout"
        rec.ask_input(PROMPT)
        assert (await rec.wait(600)).reason == "input"
        rec.input_answered()
        assert (await rec.wait(0, silence_s=600)).reason == "timeout"
        rec.finish(ExecutionState.COMPLETED)
        ended = await rec.wait(600, silence_s=600)
    assert ended == WaitEnd("finished", ended.waited_s)


async def test_a_wait_in_progress_wakes_when_input_is_asked() -> None:
    rec = record()
    ends: list[WaitEnd] = []
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:

            async def waiter() -> None:
                ends.append(await rec.wait(600))

            tg.start_soon(waiter)
            await anyio.wait_all_tasks_blocked()
            rec.ask_input(PROMPT)
    assert [end.reason for end in ends] == ["input"]


async def test_a_wait_ticks_every_interval_while_the_cell_runs_and_not_after() -> None:
    rec = record()
    ticks: list[ExecutionState] = []

    async def tick() -> None:
        ticks.append(rec.state)
        if len(ticks) == 3:
            rec.finish(ExecutionState.COMPLETED)

    with anyio.fail_after(5):
        ended = await rec.wait(600, every=(0.01, tick))
        assert ended.reason == "finished"
        assert ticks == [ExecutionState.RUNNING] * 3
        assert (await rec.wait(600, every=(0.01, tick))).reason == "finished"  # ended: no tick
    assert len(ticks) == 3


async def test_a_wait_that_times_out_has_ticked_meanwhile() -> None:
    rec = record()
    ticks: list[float] = []

    async def tick() -> None:
        ticks.append(rec.elapsed())

    with anyio.fail_after(5):
        ended = await rec.wait(0.05, every=(0.01, tick))
    assert ended.reason == "timeout"
    assert ticks and ticks == sorted(ticks)
