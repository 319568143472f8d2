"""Notices: one-time messages about a kernel, each said once to every connection that uses it.

Their text is written in `replies`; here they are only kept and handed out.
"""

from __future__ import annotations


class Notices:
    """The kernel's notices in order, and how far any connection has read them."""

    def __init__(self) -> None:
        self._said: list[str] = []
        self._shown = 0
        """Notices before this index reached some connection; later ones wait for the next reply."""
        self.environment: str | None = None
        """Which project environment the kernels run in, once known: a notice, and said again to
        each MCP client that comes later."""

    def tell(self, notice: str) -> None:
        """A message for the next reply of every connection that uses this kernel."""
        self._said.append(notice)

    def tell_environment(self, notice: str) -> None:
        """Say once which project environment the kernels run in."""
        if self.environment is None:
            self.environment = notice
            self.tell(notice)

    def mark(self) -> int:
        """Where a new connection starts reading: it sees the notices no connection has seen yet."""
        return self._shown

    def since(self, mark: int) -> tuple[list[str], int]:
        """The notices after `mark`, and the mark to read from next time."""
        self._shown = len(self._said)
        return self._said[mark:], len(self._said)
