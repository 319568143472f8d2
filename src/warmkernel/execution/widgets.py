"""WidgetModels keeps the latest state of a kernel's ipywidgets models and renders a view as text.

ipywidgets talks to a front end through comms (target `jupyter.widget`): `comm_open` carries a
model's whole state, `comm_msg` with method `update` the keys that changed, `comm_close` ends
it. A cell shows a widget by displaying `application/vnd.jupyter.widget-view+json` with the
root model's id; the view then changes only through comm messages. Keeping the state here lets
a reply show what a front end would: `train: 45%|████▌     | 450/1000 [00:12<00:15]`.

Rendering (standard `@jupyter-widgets/controls` models):
- IntProgress/FloatProgress: a ten-cell bar drawn in eighths as tqdm draws it; alone it reads
  `description  45%|████▌     | 45/100`, inside an HBox whose other children already give a
  percentage (tqdm's) only `|████▌     |`.
- HTML/HTMLMath as readable text, Label as its value; both after their description.
- HBox: its children on one line; Box, VBox, GridBox, Accordion, Tab, Stack: a line each.
- Output: the text of its captured outputs.
- Anything else with a `description` or `value`: `description value`; a checkbox-like boolean
  value as `[x]`/`[ ]`.
- A model with none of those: `[widget ModelName]`.
Layout, style and other models never shown on their own render as nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from warmkernel.execution.html_text import html_text

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
"""The MIME type of a displayed widget view: `{"model_id": ...}`."""
WIDGET_TARGET = "jupyter.widget"
"""The comm target of widget models (`jupyter.widget.control` and `.version` are not models)."""

_REFERENCE = "IPY_MODEL_"
_PROGRESS = frozenset({"IntProgressModel", "FloatProgressModel"})
_HTML = frozenset({"HTMLModel", "HTMLMathModel"})
_ROW = frozenset({"HBoxModel"})
_COLUMN = frozenset({"BoxModel", "VBoxModel", "GridBoxModel", "AccordionModel", "TabModel", "StackModel"})
_INVISIBLE = frozenset({"LayoutModel"})
_BAR_WIDTH = 10
_EIGHTHS = " ▏▎▍▌▋▊▉"


@dataclass(frozen=True)
class Fraction:
    """How far a progress bar got: `done` of `total` (in the bar's own units)."""

    done: float
    total: float


class WidgetModels:
    """The widget models a kernel opened, by comm id (which is the model id), with their latest state."""

    def __init__(self) -> None:
        self._models: dict[str, dict[str, Any]] = {}

    def open(self, comm_id: str, target: str, data: Mapping[str, Any]) -> bool:
        """A `comm_open`; True when it opened a widget model."""
        if target != WIDGET_TARGET:
            return False
        state = data.get("state")
        self._models[comm_id] = dict(state) if isinstance(state, Mapping) else {}
        return True

    def update(self, comm_id: str, data: Mapping[str, Any]) -> bool:
        """A `comm_msg`; True when it changed the state of a known model."""
        model = self._models.get(comm_id)
        state = data.get("state")
        if model is None or not isinstance(state, Mapping):
            return False
        if data.get("method") not in ("update", "echo_update"):
            return False
        model.update(state)
        return True

    def close(self, comm_id: str) -> None:
        """A `comm_close`: the model is gone; a view already written keeps its last text."""
        self._models.pop(comm_id, None)

    def __contains__(self, model_id: object) -> bool:
        return model_id in self._models

    def __len__(self) -> int:
        return len(self._models)

    def contains(self, root: str, model_id: str) -> bool:
        """Whether the view of `root` shows `model_id` (itself, or a descendant)."""
        return any(found == model_id for found in self._tree(root, set()))

    def fraction(self, root: str) -> Fraction | None:
        """The first progress bar in the view of `root` that has a range."""
        for model_id in self._tree(root, set()):
            state = self._models[model_id]
            if state.get("_model_name") in _PROGRESS:
                low, high = _number(state.get("min")), _number(state.get("max", 100))
                if high > low:
                    return Fraction(min(max(_number(state.get("value")), low), high) - low, high - low)
        return None

    def render(self, root: str) -> str:
        """The text of the view of `root`; "" for a model that is not (or no longer) known."""
        return "\n".join(self._lines(root, set()))

    def _tree(self, model_id: str, seen: set[str]) -> Iterator[str]:
        """`model_id` and every model below it, depth first; each once."""
        if model_id in seen or model_id not in self._models:
            return
        seen.add(model_id)
        yield model_id
        for child in self._children(self._models[model_id]):
            yield from self._tree(child, seen)

    @staticmethod
    def _children(state: Mapping[str, Any]) -> list[str]:
        children = state.get("children")
        if not isinstance(children, list):
            return []
        return [child.removeprefix(_REFERENCE) for child in children if isinstance(child, str)]

    def _lines(self, model_id: str, seen: set[str]) -> list[str]:
        state = self._models.get(model_id)
        if state is None or model_id in seen or _hidden(self._models, state):
            return []
        seen.add(model_id)
        name = str(state.get("_model_name", ""))
        if name in _ROW:
            return self._row(state, seen)
        if name in _COLUMN:
            return [line for child in self._children(state) for line in self._lines(child, seen)]
        if name in _PROGRESS:
            return [_labelled(state, _progress(state, with_numbers=True))]
        if name in _HTML:
            return _labelled_lines(state, html_text(str(state.get("value", ""))))
        if name == "OutputModel":
            return _output_lines(state.get("outputs"))
        if name in _INVISIBLE or not name.endswith("Model") or name.endswith("StyleModel"):
            return []
        if "description" in state or "value" in state:
            return _labelled_lines(state, _value(state.get("value")))
        return [f"[widget {name}]"]

    def _row(self, state: Mapping[str, Any], seen: set[str]) -> list[str]:
        """Children on one line; a bar beside a text with a percentage (tqdm's) is drawn bare."""
        parts: list[str | Mapping[str, Any]] = []  # a child's text, or the state of a bar
        for child in self._children(state):
            child_state = self._models.get(child)
            if child_state is None or child in seen or _hidden(self._models, child_state):
                continue
            if child_state.get("_model_name") in _PROGRESS:
                seen.add(child)
                parts.append(child_state)
            else:
                parts.append(" ".join(self._lines(child, seen)))
        bare = any("%" in part for part in parts if isinstance(part, str))
        line = ""
        for part in parts:
            is_bar = not isinstance(part, str)
            text = part if isinstance(part, str) else _labelled(part, _progress(part, with_numbers=not bare))
            if not text:
                continue
            if line and not (is_bar and bare):
                line += " "
            line += text
        return [line] if line else []


def _hidden(models: Mapping[str, Mapping[str, Any]], state: Mapping[str, Any]) -> bool:
    """A view whose layout says `display: none` or `visibility: hidden` is not shown."""
    layout = state.get("layout")
    if not isinstance(layout, str):
        return False
    style = models.get(layout.removeprefix(_REFERENCE), {})
    return style.get("display") == "none" or style.get("visibility") == "hidden"


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _progress(state: Mapping[str, Any], *, with_numbers: bool) -> str:
    low, high, value = _number(state.get("min")), _number(state.get("max", 100)), _number(state.get("value"))
    share = (min(max(value, low), high) - low) / (high - low) if high > low else 0.0
    bar = _bar(share)
    if not with_numbers:
        return f"|{bar}|"
    return f"{share * 100:3.0f}%|{bar}| {_short(value)}/{_short(high)}"


def _bar(share: float) -> str:
    """tqdm's bar: full cells, then the next cell in eighths, padded to the width."""
    eighths = int(share * _BAR_WIDTH * 8)
    full, part = divmod(eighths, 8)
    drawn = "█" * full + (_EIGHTHS[part] if full < _BAR_WIDTH else "")
    return drawn.ljust(_BAR_WIDTH)


def _short(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:g}"


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "[x]" if value else "[ ]"
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        return ", ".join(str(item) for item in value)
    return str(value)


def _labelled(state: Mapping[str, Any], text: str) -> str:
    description = str(state.get("description") or "").strip()
    return f"{description} {text}".strip() if description else text


def _labelled_lines(state: Mapping[str, Any], text: str) -> list[str]:
    first, *rest = text.split("\n") if text else [""]
    line = _labelled(state, first)
    return [line, *rest] if line or rest else []


def _output_lines(outputs: Any) -> list[str]:
    """The text of an Output widget's captured outputs (streams and the text/plain of displays)."""
    if not isinstance(outputs, list):
        return []
    text = ""
    for output in outputs:
        if not isinstance(output, Mapping):
            continue
        if output.get("output_type") == "stream":
            text += str(output.get("text", ""))
        else:
            data = output.get("data")
            plain = data.get("text/plain") if isinstance(data, Mapping) else None
            if isinstance(plain, str):
                text += plain if plain.endswith("\n") else plain + "\n"
    return text.rstrip("\n").split("\n") if text.strip() else []
