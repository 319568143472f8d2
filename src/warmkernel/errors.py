"""The errors a caller can see, each with a stable code.

    WarmkernelError(code, message)      every failure a tool or CLI verb reports
      codes for the caller's mistakes:  invalid_arguments, invalid_directive, invalid_stream,
                                        invalid_line_range, invalid_max_chars, invalid_context,
                                        invalid_query, invalid_timeout, invalid_limit,
                                        execution_not_found, invalid_name, variable_not_found,
                                        notebook_not_found, invalid_notebook
      codes for the kernel's state:     busy, not_awaiting_input, kernel_start_failed,
                                        inspection_failed
      codes for the session's notebook: notebook_already_bound
      codes for start-up:               workspace_config_failed, python_not_usable, invalid_config
      codes for IDE attach:             serve_unavailable, jupyter_server_failed
      codes for finding a session:      session_not_found, ambiguous_session, session_error
      our own bug (logged with a trace): internal_error

A Python exception raised by a cell is never one of these: it is an execution in state `error`.
"""

from __future__ import annotations

from typing import Literal

ErrorCode = Literal[
    "invalid_arguments",
    "invalid_directive",
    "invalid_stream",
    "invalid_line_range",
    "invalid_max_chars",
    "invalid_context",
    "invalid_query",
    "invalid_timeout",
    "invalid_limit",
    "execution_not_found",
    "invalid_name",
    "variable_not_found",
    "notebook_not_found",
    "invalid_notebook",
    "notebook_already_bound",
    "busy",
    "not_awaiting_input",
    "kernel_start_failed",
    "inspection_failed",
    "workspace_config_failed",
    "python_not_usable",
    "jupyter_server_unreachable",
    "jupyter_server_refused",
    "jupyter_server_failed",
    "serve_unavailable",
    "invalid_config",
    "session_error",
    "session_not_found",
    "ambiguous_session",
    "internal_error",
]

CALLER_MISTAKES: frozenset[ErrorCode] = frozenset(
    {
        "invalid_arguments",
        "invalid_directive",
        "invalid_stream",
        "invalid_line_range",
        "invalid_max_chars",
        "invalid_context",
        "invalid_query",
        "invalid_timeout",
        "invalid_limit",
        "execution_not_found",
        "invalid_name",
        "variable_not_found",
        "notebook_not_found",
        "invalid_notebook",
        "workspace_config_failed",
        "invalid_config",
        "session_not_found",
        "ambiguous_session",
    }
)
"""Codes that mean the request or the configuration must change (the CLI exits with 2)."""


class WarmkernelError(Exception):
    """A failure reported to the caller as `<code>: <message>`."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code: ErrorCode = code
        self.message = message
