"""Exit statuses of the command line: one table, read by every verb."""

from __future__ import annotations

from warmkernel.daemon.client import ToolOutcome
from warmkernel.errors import CALLER_MISTAKES

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_RUNNING, EXIT_STOPPED = 0, 1, 2, 3, 4
EXIT_BROKEN_PIPE = 141
"""The reader of stdout left (`| head`): 128 + SIGPIPE, as a shell reports a process that signal ended."""


STATE_EXIT = {
    "completed": EXIT_OK,
    "error": EXIT_ERROR,
    "running": EXIT_RUNNING,
    "awaiting_input": EXIT_RUNNING,
}


STATE_VERBS = frozenset({"run", "input", "wait", "show", "nb run"})
"""Verbs whose exit status follows the execution's state."""


EXIT_STATUSES = (
    "exit status: 0 completed, 1 error, 2 usage, 3 still running, busy or waiting for input, "
    "4 interrupted/killed/died"
)


def exit_status(verb: str, outcome: ToolOutcome) -> int:
    if outcome.error_code is not None:
        if outcome.error_code == "busy":
            return EXIT_RUNNING
        return EXIT_USAGE if outcome.error_code in CALLER_MISTAKES else EXIT_ERROR
    if verb not in STATE_VERBS:
        return EXIT_OK
    return STATE_EXIT.get(outcome.data.get("state", ""), EXIT_STOPPED)
