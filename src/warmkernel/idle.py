"""IdleClock: how long something has had nothing to do, and a wait for it to have been idle that long.

One clock serves every idle stop: the daemon's (no client and no running cell), a named kernel's
(no call and no running cell) and the chart browser's (no figure being drawn). Work holds the
clock while it lasts; the clock is idle from the end of the last hold. A clock may feed a parent,
which is busy while any of its children is (a kernel's calls keep its daemon awake).
Waits are events with deadlines: nothing polls.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import anyio


class IdleClock:
    """Busy while any hold is taken; idle since the last hold ended (or since it was made)."""

    def __init__(self, parent: IdleClock | None = None) -> None:
        self._parent = parent
        self._holds = 0
        self._quiet_since = time.monotonic()
        self._changed = anyio.Event()

    @contextmanager
    def held(self) -> Iterator[None]:
        """Around work: meanwhile, and until its end, the clock is not idle."""
        self.hold()
        try:
            yield
        finally:
            self.release()

    def hold(self) -> None:
        """Work began (a client connected, a cell started); `release` ends it."""
        self._holds += 1
        if self._parent is not None:
            self._parent.hold()
        self._moved()

    def release(self) -> None:
        """Work ended: the clock is idle from now on if nothing else holds it."""
        if self._holds <= 0:
            raise RuntimeError("an idle clock was released more often than it was held")
        self._holds -= 1
        self._quiet_since = time.monotonic()
        if self._parent is not None:
            self._parent.release()
        self._moved()

    def idle_s(self) -> float | None:
        """How long nothing has held the clock; None while something does."""
        return None if self._holds else time.monotonic() - self._quiet_since

    async def idle_for(self, limit_s: float) -> None:
        """Return once nothing has held the clock for `limit_s`."""
        while True:
            idle_s = self.idle_s()
            if idle_s is not None and idle_s >= limit_s:
                return
            changed = self._changed
            if idle_s is None:
                await changed.wait()
            else:
                with anyio.move_on_after(limit_s - idle_s):
                    await changed.wait()

    async def next_use(self) -> None:
        """Return at the next hold."""
        await self._changed.wait()

    def _moved(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()
