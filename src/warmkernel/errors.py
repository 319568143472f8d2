"""The errors a caller can see, each with a stable code.

    WarmkernelError(code, message)      every failure a tool or CLI verb reports
      codes for the caller's mistakes:  invalid_arguments, invalid_directive, invalid_stream,
                                        invalid_line_range, invalid_max_chars, invalid_context,
                                        invalid_query, invalid_timeout, invalid_limit,
                                        execution_not_found, invalid_name, variable_not_found,
                                        notebook_not_found, invalid_notebook, invalid_kernel,
                                        kernel_not_found, invalid_executions, path_outside_workspace
      codes for the kernel's state:     busy, not_awaiting_input, kernel_start_failed,
                                        kernel_not_responding, inspection_failed, too_many_kernels
      codes for the session's notebook: notebook_already_bound
      codes for writing files:          write_failed, journal_unavailable
      codes for start-up:               workspace_config_failed, python_not_usable, invalid_config
      codes for Jupyter servers:        jupyter_server_unreachable, jupyter_server_refused,
                                        jupyter_server_failed, serve_unavailable
      codes for finding a daemon:       daemon_not_found, ambiguous_daemon, kernel_options_differ,
                                        daemon_error
      our own bug (logged with a trace): internal_error

A Python exception raised by a cell is never one of these: it is an execution in state `error`.
"""

from __future__ import annotations

from typing import Literal, get_args

CallerMistake = Literal[
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
    "invalid_kernel",
    "kernel_not_found",
    "invalid_executions",
    "path_outside_workspace",
    "workspace_config_failed",
    "invalid_config",
    "daemon_not_found",
    "ambiguous_daemon",
    "kernel_options_differ",
]
"""Codes that mean the request or the configuration must change (the CLI exits with 2)."""

Failure = Literal[
    "notebook_already_bound",
    "busy",
    "not_awaiting_input",
    "kernel_start_failed",
    "kernel_not_responding",
    "inspection_failed",
    "too_many_kernels",
    "write_failed",
    "journal_unavailable",
    "python_not_usable",
    "jupyter_server_unreachable",
    "jupyter_server_refused",
    "jupyter_server_failed",
    "serve_unavailable",
    "daemon_error",
    "internal_error",
]
"""Codes for the state of the kernel, the session or the things they depend on (the CLI exits with 1)."""

ErrorCode = CallerMistake | Failure

CALLER_MISTAKES: frozenset[ErrorCode] = frozenset(get_args(CallerMistake))


class WarmkernelError(Exception):
    """A failure reported to the caller as `<code>: <message>`."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code: ErrorCode = code
        self.message = message
