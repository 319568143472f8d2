"""One MCP client's connection to the workspace's kernels: its reply options, and what it has been told."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from warmkernel.replies.reply import Reply
from warmkernel.session.kernels import Kernels
from warmkernel.session.session import Session
from warmkernel.settings.model import Settings


@dataclass(eq=False)
class Connection:
    """One client's connection to the workspace's kernels: its reply settings and what it has yet
    to be told.

    Reply options (`--wait`, the inline budget, result mode, image limits) belong to the client,
    so two hosts with different budgets can share one kernel; kernel options are the daemon's.
    """

    kernels: Kernels
    settings: Settings
    """The kernels' settings with this client's reply options."""
    note: str | None = None
    """What the client has to be told about itself (e.g. that its version differs from the
    daemon's): in its first reply, and in every status."""
    greeting: str | None = None
    """The note, until the first reply has said it."""
    tell_joined: bool = True
    """Say, once per kernel, what was there when this client first used it (if it had run cells,
    and the project environment it runs in)."""
    notices_marks: dict[str, int] = field(default_factory=dict)
    """Per kernel, where this connection reads its one-time notices from."""
    told: set[str] = field(default_factory=set)
    """The kernels this client has used (and so was told about, if it had to be)."""

    def with_notices(self, session: Session, reply: Reply) -> Reply:
        """The reply, after the notices this connection has not seen yet (each is said once); a
        document (an export's text) stays as it is, and its notices wait for the next reply."""
        if reply.is_document:
            return reply
        first = session.name not in self.notices_marks
        mark = self.notices_marks.get(session.name, session.notice_mark())
        notices, self.notices_marks[session.name] = session.notices_since(mark)
        environment = session.environment_note
        if first and self.tell_joined and environment is not None and environment not in notices:
            notices = [environment, *notices]  # said to an earlier client: this one is told too
        if self.greeting is not None:
            notices, self.greeting = [self.greeting, *notices], None
        if not notices:
            return reply
        notice = "\n".join(notices)
        return replace(reply, text=f"{notice}\n{reply.text}", data=reply.data | {"notice": notice})
