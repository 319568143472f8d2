"""`Reply`, what every presenter returns, and the small units of text they all share."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Picture:
    """An image a reply carries as MCP image content."""

    mime: str
    data: bytes


@dataclass(frozen=True)
class Reply:
    """The text a model reads and the same facts as a dict, for structured clients."""

    text: str
    data: dict[str, Any] = field(default_factory=dict)
    more: tuple[str | Picture, ...] = ()
    """Content after `text`, in order: pictures, and the text between and after them."""
    is_document: bool = False
    """`text` is a whole document (an export): one-time notices wait for the next reply."""


def duration(seconds: float) -> str:
    """`850 ms` below a second, `1.2 s` above."""
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def clip(text: str, max_chars: int) -> str:
    """`text...[K chars omitted]` when longer than `max_chars`."""
    if len(text) <= max_chars:
        return text
    return f"{text[:max_chars]}...[{len(text) - max_chars} chars omitted]"


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`1 line`, `3 lines`, `0 lines`: a count with its noun in the right number."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def size(n_bytes: int | None) -> str:
    """`512 B`, `1.5 KiB`, `76.3 MiB`; `?` when unknown."""
    if n_bytes is None:
        return "?"
    if n_bytes < 1024:
        return f"{n_bytes} B"
    value = float(n_bytes)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024 or unit == "GiB":
            break
    return f"{value:.1f} {unit}"


def columns(rows: Sequence[tuple[str, ...]]) -> list[str]:
    """Rows as aligned text columns, two spaces apart, so a table reads without a grid."""
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
