"""Gates: a cell blocks on one until the test has acted, so a test never races a cell's sleep.

A gate is a FIFO in the test's directory (kernels run on this machine, so the path reaches them).
The cell opens it to read without blocking and waits until it is readable, which it becomes when
the test opens the gate: the test holds the FIFO open (`O_RDWR` never blocks, and never fails
with ENXIO for want of a reader) with one byte in it that nobody reads, so every reader passes,
whether it came before or after. At teardown the FIFO gives way to a plain file (always
readable), so a cell that reaches the gate after a failed test passes too and no shared kernel
stays blocked.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_WAIT = """\
import os, select
fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
try:
    while not select.select([fd], [], [], 0.1)[0]:
        pass
finally:
    os.close(fd)
"""
"""The wait, run by `exec` in a namespace of its own so that it leaves no name in the kernel's.
A select that times out every 0.1 s lets Python run a SIGINT handler whose signal came just before
the call blocked (a blocking call would hold it until the gate opens)."""


class Gate:
    """A latch a cell waits on (`gate.wait`, a statement) and the test opens (`gate.open()`)."""

    def __init__(self, path: Path) -> None:
        os.mkfifo(path)
        self.path = path
        self._held: int | None = None

    @property
    def wait(self) -> str:
        """A statement that blocks the cell (or any Python process) until the gate is open."""
        return f"exec({_WAIT!r}, {{'path': {str(self.path)!r}}})"

    def open(self) -> None:
        """Let every reader through, now and later; opening an open gate does nothing."""
        if self._held is None:
            self._held = os.open(self.path, os.O_RDWR | os.O_NONBLOCK)
            os.write(self._held, b"o")

    def open_for_good(self) -> None:
        """Leave the gate open once the test is over: a plain file (always readable) replaces the
        FIFO before the test lets go of its end."""
        self.open()
        plain = self.path.with_name(self.path.name + ".open")
        plain.touch()
        plain.replace(self.path)
        assert self._held is not None
        os.close(self._held)


@contextmanager
def opened_at_exit(path: Path) -> Iterator[Gate]:
    """A closed gate at `path`, opened for good on the way out, even when the test failed."""
    gate = Gate(path)
    try:
        yield gate
    finally:
        gate.open_for_good()
