"""Display bundles (MIME type -> data) to the text a model reads."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def bundle_text(data: Mapping[str, Any]) -> str:
    """The bundle's text/plain, or a one-line note naming what it holds instead."""
    text = data.get("text/plain")
    if isinstance(text, str):
        return text
    if isinstance(text, list):  # nbformat allows a list of lines
        return "".join(str(part) for part in text)
    kinds = ", ".join(f"{mime} ({_size(value)})" for mime, value in data.items())
    return f"[display without text: {kinds or 'empty bundle'}]"


def _size(value: Any) -> str:
    size = len(value) if isinstance(value, str | bytes) else len(str(value))
    return f"{size:,} chars"
