"""What a full disk makes warmkernel say: the one-time notice, the refusal of a cell whose start
cannot be journaled, and what a record says about the output it could not keep."""

from __future__ import annotations

import errno
from pathlib import Path

from warmkernel.errors import WarmkernelError
from warmkernel.replies.hints import call

_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})


def disk_trouble(error: OSError) -> str:
    """Why a write failed, in a few words: `the disk is full (No space left on device)`."""
    why = error.strerror or str(error)
    return f"the disk is full ({why})" if error.errno in _FULL else f"the disk refused a write ({why})"


def output_not_kept_reason(not_kept_bytes: int, error: OSError) -> str:
    """What a record says at its end when a write of its output failed."""
    return f"{not_kept_bytes:,} bytes of output not kept: {disk_trouble(error)}"


def output_not_journaled(error: OSError) -> str:
    """What a journaled record says when its output could not be written to the journal."""
    return f"its output was not journaled: {disk_trouble(error)}"


def disk_full_notice(directory: Path, error: OSError, *, journaled: bool) -> str:
    """The one-time note that the directory keeping the records and output has no room."""
    where = "the state directory" if journaled else "the directory that keeps output"
    refused = (
        "; a new cell is refused (journal_unavailable) while its start cannot be journaled"
        if journaled
        else ""
    )
    return (
        f"note: {where} {directory} has no room: {disk_trouble(error)}. Output that does not fit is "
        f"not kept{refused}. The kernel and the records in memory stay; free space there to go on."
    )


def journal_unavailable(kernel: str, directory: Path, error: OSError) -> WarmkernelError:
    """`journal_unavailable`: the cell's start could not be journaled, so it was neither numbered
    nor sent (a number the journal does not hold could be given out again after a restart)."""
    return WarmkernelError(
        "journal_unavailable",
        f"kernel {kernel} cannot journal a new cell in {directory}: {disk_trouble(error)}; the cell was "
        "not run and got no number. The kernel, its namespace and the records stay readable "
        f"({call('read_python_output')}); free space there and run the cell again.",
    )


def journal_cannot_open(directory: Path, error: OSError) -> WarmkernelError:
    """`journal_unavailable` at a daemon's start: without a journal no cell could be numbered."""
    return WarmkernelError(
        "journal_unavailable",
        f"cannot open the journal in {directory}: {disk_trouble(error)}. Free space there, or give "
        "the journals another directory (--state-dir, or WARMKERNEL_STATE_DIR).",
    )
