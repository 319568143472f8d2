"""Display bundles (MIME type -> data) to the text a model reads and the image it can see.

One bundle gives one `Rendering`: its text for the `result` stream, and at most one image.

- An image (PNG, JPEG, WEBP, single-frame GIF; the first of those the bundle holds) comes with
  the bundle's text/plain, kept as the record of what was shown (`<Figure size 640x480 with
  1 Axes>`); replies show the image in its place.
- Otherwise text/plain wins unless it is only a default object repr (`<IPython.core.display.HTML
  object>`); then text/markdown or text/latex as written, application/json pretty-printed,
  text/html as readable text (tags stripped, table rows kept as rows, cells joined by ` | `).
- Anything else (SVG, widgets, vendor JSON, an animated GIF) is a one-line note naming each
  MIME type with its size.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any

from warmkernel.execution.images import IMAGE_TYPES, Image, decode_image

_DEFAULT_REPR = re.compile(r"<[\w.]+ object(?: at 0x[0-9a-fA-F]+)?>")
"""What `object.__repr__` prints: says nothing a model can use."""


@dataclass(frozen=True)
class Rendering:
    text: str
    """Text for the `result` stream; "" when the bundle has none worth keeping."""
    image: Image | None = None


def render_bundle(data: Mapping[str, Any]) -> Rendering:
    """The text and image of one display_data or execute_result bundle."""
    plain = _text(data.get("text/plain"))
    refusals: dict[str, str] = {}
    for mime in IMAGE_TYPES:
        if mime in data:
            image = decode_image(mime, data[mime])
            if isinstance(image, Image):
                return Rendering(plain or "", image)
            refusals[mime] = image
    if plain is not None and not _DEFAULT_REPR.fullmatch(plain.strip()):
        return Rendering(plain)
    for mime in ("text/markdown", "text/latex"):
        text = _text(data.get(mime))
        if text is not None:
            return Rendering(text)
    if "application/json" in data:
        return Rendering(json.dumps(data["application/json"], indent=2, ensure_ascii=False, default=str))
    html = _text(data.get("text/html"))
    readable = html_text(html) if html is not None else ""
    if readable:
        return Rendering(readable)
    others = [mime for mime in data if mime != "text/plain"]
    if not others:
        return Rendering(plain or "[empty display]")
    notes = [_note(mime, data[mime], refusals.get(mime)) for mime in others]
    return Rendering(f"[display: {'; '.join(notes)}]")


def _note(mime: str, value: Any, refusal: str | None) -> str:
    return f"{mime} {_size(value)}" + (f": {refusal}" if refusal else "")


def _text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # nbformat allows a list of lines
        return "".join(str(part) for part in value)
    return None


def _size(value: Any) -> str:
    size = len(value.encode()) if isinstance(value, str) else len(json.dumps(value, default=str))
    return f"{size:,} bytes"


# -- HTML to readable text -----------------------------------------------------------------------

_BLOCKS = frozenset(
    {
        *("address", "article", "aside", "blockquote", "br", "caption", "dd", "details", "div", "dl"),
        *("dt", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header"),
        *("hr", "li", "main", "nav", "ol", "p", "pre", "section", "summary", "ul"),
    }
)
_TABLE_PARTS = frozenset({"table", "thead", "tbody", "tfoot", "tr"})
_CELLS = frozenset({"td", "th"})
_INVISIBLE = frozenset({"script", "style", "head", "title", "template"})


class _Reader(HTMLParser):
    """Collects the visible text: a line per block, a line per table row with its cells joined."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: list[str] = []
        self._text: list[str] = []
        self._row: list[str] | None = None
        self._in_cell = False
        self._hidden = 0
        self._pre = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _INVISIBLE:
            self._hidden += 1
        elif tag in _CELLS:
            self._end_cell()
            if self._row is None:
                self.end_line()
                self._row = []
            self._text, self._in_cell = [], True
        elif tag in _TABLE_PARTS:
            self.end_line()
            if tag == "tr":
                self._row = []
        elif tag in _BLOCKS:
            if self._in_cell:
                self._text.append(" ")
                return
            self.end_line()
            if tag == "li":
                self._text.append("- ")
            elif tag == "pre":
                self._pre += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in _INVISIBLE:
            self._hidden = max(0, self._hidden - 1)
        elif tag in _CELLS:
            self._end_cell()
        elif tag in _TABLE_PARTS:
            self.end_line()
        elif tag in _BLOCKS:
            if self._in_cell:
                self._text.append(" ")
                return
            self.end_line()
            if tag == "pre":
                self._pre = max(0, self._pre - 1)

    def handle_data(self, data: str) -> None:
        if self._hidden:
            return
        if not self._pre:
            self._text.append(re.sub(r"\s+", " ", data))
            return
        first, *rest = data.split("\n")
        self._text.append(first)
        for line in rest:
            self.lines.append("".join(self._text).rstrip())
            self._text = [line]

    def _end_cell(self) -> None:
        if self._in_cell and self._row is not None:
            self._row.append(" ".join("".join(self._text).split()))
        self._text, self._in_cell = [], False

    def end_line(self) -> None:
        """Close the open row or line; text between table rows is dropped."""
        if self._row is not None:
            self._end_cell()
            if any(self._row):
                self.lines.append(" | ".join(self._row))
            self._row = None
        else:
            text = "".join(self._text)
            text = text.rstrip() if self._pre else text.strip()
            if text:
                self.lines.append(text)
        self._text = []


def html_text(html: str) -> str:
    """Readable text of an HTML fragment: no tags, scripts or styles; a table row per line."""
    reader = _Reader()
    reader.feed(html)
    reader.close()
    reader.end_line()
    return "\n".join(reader.lines)
