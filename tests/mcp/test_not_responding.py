"""A kernel that stops answering never holds a call past its wait, and never swallows a cell."""

from __future__ import annotations

import os
import re
import signal

import anyio
import psutil
import pytest

from tests.mcp.calls import call, call_error, run
from tests.mcp.conftest import FreshClient

pytestmark = pytest.mark.anyio

# A cell that makes the kernel drop every execute reply from now on, its own included: a
# request it takes is never answered (as a kernel wedged in its reply path would behave).
DROP_REPLIES = """\
_kernel = get_ipython().kernel
_send = _kernel.session.send
def _dropping(stream, msg_or_type, *args, **kwargs):
    kind = msg_or_type if isinstance(msg_or_type, str) else msg_or_type.get("header", {}).get("msg_type")
    if kind == "execute_reply":
        return None
    return _send(stream, msg_or_type, *args, **kwargs)
_kernel.session.send = _dropping
"""


async def test_a_kernel_that_drops_its_replies_is_not_responding_within_the_wait(
    fresh_client: FreshClient,
) -> None:
    async with fresh_client() as client:
        with anyio.fail_after(60):
            await run(client, DROP_REPLIES)  # ends by its idle status alone, unanswered
            code, message = await call_error(client, "run_python", freeform="# warmkernel: --wait 2\n1 + 1")
            assert code == "kernel_not_responding"
            assert "interrupt_python()" in message and "reset_python()" in message
            assert "not responding" in await call(client, "python_status")
            # nothing was numbered for the refused cell, and the kernel comes back after a reset
            await call(client, "interrupt_python")
            await call(client, "reset_python")
            number, text = await run(client, "40 + 2")
            assert number == 2 and "Out[2]: 42" in text


async def test_a_stopped_kernel_process_is_refused_at_once_and_continues(fresh_client: FreshClient) -> None:
    async with fresh_client() as client:
        with anyio.fail_after(60):
            await run(client, "1")
            pid = int(re.search(r"pid (\d+)", await call(client, "python_status"))[1])  # type: ignore[index]
            os.kill(pid, signal.SIGSTOP)
            try:
                # a signal takes effect a moment after kill() returns; there is no event to wait on
                for _ in range(1000):
                    if psutil.Process(pid).status() == psutil.STATUS_STOPPED:
                        break
                    await anyio.sleep(0.01)
                code, message = await call_error(client, "run_python", freeform="2")
                assert code == "kernel_not_responding" and "SIGSTOP" in message
                assert "not responding" in await call(client, "python_status")
            finally:
                os.kill(pid, signal.SIGCONT)
            number, text = await run(client, "3")
            assert number == 2 and "Out[2]: 3" in text
