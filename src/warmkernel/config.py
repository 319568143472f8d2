"""Settings: every tunable of a server, with its default, in one place."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Literal

ResultMode = Literal["content", "structured"]


@dataclass(frozen=True)
class Settings:
    python: str = sys.executable
    """The interpreter that runs the kernel (it needs ipykernel)."""
    result_mode: ResultMode = "content"
    """`structured` adds structuredContent and output schemas; the text is the same."""
    default_wait_s: float = 10.0
    """How long run_python waits for a cell before replying that it still runs."""
    inline_max_lines: int = 300
    inline_max_chars: int = 16_000
    """The inline budget of a finished cell's reply; past it, head and tail are shown."""
    read_max_chars: int = 200_000
    """The most characters one read_python_output reply carries."""
    search_timeout_s: float = 5.0
    """Time budget of one search; a regex that runs longer is abandoned."""
    running_tail_lines: int = 5
    """How many of the latest output lines a reply for a running cell shows."""
