"""IdleClock: idle from the end of the last hold; waits for idleness are events, not polls."""

from __future__ import annotations

import anyio
import pytest

from warmkernel.idle import IdleClock

pytestmark = pytest.mark.anyio


def test_a_held_clock_is_not_idle_and_a_released_one_is() -> None:
    clock = IdleClock()
    with clock.held():
        assert clock.idle_s() is None
    idle_s = clock.idle_s()
    assert idle_s is not None and idle_s >= 0


def test_a_child_holds_its_parent() -> None:
    daemon = IdleClock()
    kernel = IdleClock(daemon)
    with kernel.held():
        assert daemon.idle_s() is None
    assert daemon.idle_s() is not None


def test_releasing_more_often_than_holding_is_refused() -> None:
    with pytest.raises(RuntimeError, match="released more often than it was held"):
        IdleClock().release()


async def test_a_wait_for_idleness_returns_only_after_the_last_hold_ends() -> None:
    clock = IdleClock()
    clock.hold()
    returned = anyio.Event()

    async def wait() -> None:
        await clock.idle_for(0)
        returned.set()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            await anyio.wait_all_tasks_blocked()
            assert not returned.is_set()
            clock.release()
            await returned.wait()


async def test_next_use_returns_at_the_next_hold() -> None:
    clock = IdleClock()
    used = anyio.Event()

    async def wait() -> None:
        await clock.next_use()
        used.set()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            await anyio.wait_all_tasks_blocked()
            assert not used.is_set()
            with clock.held():
                await used.wait()
