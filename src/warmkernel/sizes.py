"""Sizes in bytes as people write them: `8G`, `512M`, `1.5GB`, `2000000` (binary units)."""

from __future__ import annotations

import re

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?)(?:I?B)?", re.IGNORECASE)
FORMS = "a number of bytes, or one with K, M, G or T (binary units): 2000000, 512M, 8G, 1.5G"


def parse_size(text: str) -> int:
    """The bytes `text` names; ValueError saying the valid forms otherwise."""
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a size; give {FORMS}")
    number, unit = match.groups()
    return int(float(number) * _UNITS[unit.upper()])


def format_size(size: float) -> str:
    """`size` bytes in the largest unit that keeps it at 1 or more, one decimal at most: `9.1G`."""
    for unit in ("T", "G", "M", "K"):
        if size >= _UNITS[unit]:
            return f"{size / _UNITS[unit]:.1f}".removesuffix(".0") + unit
    return f"{int(size)}B"
