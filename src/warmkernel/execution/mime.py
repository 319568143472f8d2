"""Display bundles (MIME type -> data) to the text a model reads and the image it can see.

One bundle gives one `Rendering`: its text for the `result` stream, and at most one image.

- An image (PNG, JPEG, WEBP, single-frame GIF; the first of those the bundle holds) comes with
  the bundle's text/plain, kept as the record of what was shown (`<Figure size 640x480 with
  1 Axes>`); replies show the image in its place.
- Otherwise text/plain wins unless it is only a default object repr (`<IPython.core.display.HTML
  object>`); then text/markdown or text/latex as written, application/json pretty-printed,
  text/html as readable text (`html_text`: tables laid out, links with their URL).
- A chart (Vega, Vega-Lite, SVG, Plotly) drawn as a picture by the server (`charts`) is an
  image like the others; one that could not be drawn gets a note that says why (after a
  text/plain that is more than a default repr).
- Anything else (widgets, vendor JSON, an animated GIF, a Bokeh bundle) is a one-line note
  naming each MIME type with its size.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from warmkernel.execution.html_text import html_text
from warmkernel.execution.images import IMAGE_TYPES, Image, decode_image

_DEFAULT_REPR = re.compile(r"<[\w.]+ object(?: at 0x[0-9a-fA-F]+)?>")
"""What `object.__repr__` prints: says nothing a model can use."""


@dataclass(frozen=True)
class Chart:
    """A bundle's chart and its `picture`, or why it has none."""

    source: str
    """The bundle entry the chart came from: its own MIME type, or text/html that embeds it."""
    picture: Image | str


@dataclass(frozen=True)
class Rendering:
    text: str
    """Text for the `result` stream; "" when the bundle has none worth keeping."""
    image: Image | None = None


def render_bundle(data: Mapping[str, Any], chart: Chart | None = None) -> Rendering:
    """The text and image of one display_data or execute_result bundle.

    `chart` is what became of the bundle's chart (`charts.chart_type`): its picture, or why
    there is none, which the chart's note then says.
    """
    plain = _text(data.get("text/plain"))
    refusals: dict[str, str] = {}
    for mime in IMAGE_TYPES:
        if mime in data:
            image = decode_image(mime, data[mime])
            if isinstance(image, Image):
                return Rendering(plain or "", image)
            refusals[mime] = image
    if chart is not None:
        if isinstance(chart.picture, Image):
            return Rendering(plain or "", chart.picture)
        refusals[chart.source] = chart.picture
    if plain is not None and not _DEFAULT_REPR.fullmatch(plain.strip()):
        if chart is not None:  # the repr (`alt.Chart(...)`) says little; the note says what to do
            note = _note(chart.source, data[chart.source], refusals[chart.source])
            return Rendering(f"{plain}\n[display: {note}]")
        return Rendering(plain)
    for mime in ("text/markdown", "text/latex"):
        text = _text(data.get(mime))
        if text is not None:
            return Rendering(text)
    if "application/json" in data:
        return Rendering(json.dumps(data["application/json"], indent=2, ensure_ascii=False, default=str))
    html = _text(data.get("text/html"))
    readable = html_text(html) if html is not None and chart is None else ""
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
