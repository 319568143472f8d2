"""WidgetModels without a kernel: comm messages in, a widget view's text and fraction out.

States come from real ipywidgets objects (`get_state()` is what a kernel sends in comm_open);
the tqdm bar is built as `tqdm.notebook` builds it: HTML, FloatProgress, HTML in an HBox.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("ipywidgets")

import ipywidgets as w

from warmkernel.execution.progress import Progress, line_progress, widget_progress
from warmkernel.execution.widgets import WIDGET_TARGET, Fraction, WidgetModels


def opened(*widgets: w.Widget) -> WidgetModels:
    """The models a kernel would have opened for these widgets and everything they refer to."""
    models = WidgetModels()
    pending = list(widgets)
    while pending:
        widget = pending.pop()
        if widget.model_id in models:
            continue
        models.open(widget.model_id, WIDGET_TARGET, {"state": widget.get_state(), "buffer_paths": []})
        pending.extend(
            value for value in widget.__dict__.get("_trait_values", {}).values() if _is_widget(value)
        )
        pending.extend(child for child in getattr(widget, "children", ()) or ())
    return models


def _is_widget(value: Any) -> bool:
    return isinstance(value, w.Widget)


def update(models: WidgetModels, widget: w.Widget, **state: Any) -> bool:
    return models.update(widget.model_id, {"method": "update", "state": state, "buffer_paths": []})


def tqdm_bar(total: int) -> tuple[w.HBox, w.HTML, w.FloatProgress, w.HTML]:
    left, bar, right = w.HTML(), w.FloatProgress(min=0, max=total), w.HTML()
    return w.HBox([left, bar, right]), left, bar, right


def test_a_tqdm_bar_reads_as_tqdm_prints_it() -> None:
    box, left, bar, right = tqdm_bar(1000)
    models = opened(box)
    assert update(models, left, value="train:  45%")
    assert update(models, bar, value=450.0)
    assert update(models, right, value=" 450/1000 [00:12&lt;00:15, 37.50it/s]")
    assert models.render(box.model_id) == "train: 45%|████▌     | 450/1000 [00:12<00:15, 37.50it/s]"
    assert models.fraction(box.model_id) == Fraction(450, 1000)
    assert models.contains(box.model_id, bar.model_id)
    assert not models.contains(bar.model_id, box.model_id)


@pytest.mark.parametrize(
    ("value", "drawn"),
    [(0, "          "), (0.0125, "▏         "), (0.1, "█         "), (0.45, "████▌     "), (1, "██████████")],
)
def test_the_bar_is_drawn_in_eighths(value: float, drawn: str) -> None:
    bar = w.FloatProgress(value=value, min=0, max=1)
    assert opened(bar).render(bar.model_id) == f"{value * 100:3.0f}%|{drawn}| {value:g}/1"


def test_a_bar_alone_shows_its_numbers_after_its_description() -> None:
    bar = w.IntProgress(value=3, max=10, description="Loading:")
    assert opened(bar).render(bar.model_id) == "Loading:  30%|███       | 3/10"


def test_nested_boxes_keep_their_order_rows_and_columns() -> None:
    inner = w.HBox([w.Label("epoch 2"), w.IntProgress(value=5, max=10)])
    page = w.VBox(
        [w.HTML("<b>Training</b> run"), inner, w.VBox([w.Text(value="lr=0.1", description="params")])]
    )
    models = opened(page)
    assert models.render(page.model_id).splitlines() == [
        "Training run",
        "epoch 2  50%|█████     | 5/10",
        "params lr=0.1",
    ]
    assert models.fraction(page.model_id) == Fraction(5, 10)


def test_updates_change_only_what_they_name_and_close_forgets_the_model() -> None:
    label = w.Label("before")
    models = opened(label)
    assert update(models, label, value="after")
    assert models.render(label.model_id) == "after"
    assert not models.update(label.model_id, {"method": "request_state"})
    assert not models.update("unknown", {"method": "update", "state": {"value": 1}})
    models.close(label.model_id)
    assert label.model_id not in models
    assert models.render(label.model_id) == ""


def test_other_comm_targets_are_not_widgets() -> None:
    models = WidgetModels()
    assert not models.open("c1", "jupyter.widget.control", {})
    assert not models.open("c2", "comm-from-elsewhere", {"state": {"value": 1}})
    assert len(models) == 0


def test_values_descriptions_and_unknown_models() -> None:
    checkbox = w.Checkbox(value=True, description="shuffle")
    slider = w.IntSlider(value=7, description="k")
    button = w.Button(description="Go")
    models = opened(checkbox, slider, button)
    models.open("custom", WIDGET_TARGET, {"state": {"_model_name": "ScatterModel", "_model_module": "x"}})
    assert models.render(checkbox.model_id) == "shuffle [x]"
    assert models.render(slider.model_id) == "k 7"
    assert models.render(button.model_id) == "Go"
    assert models.render("custom") == "[widget ScatterModel]"


def test_a_hidden_view_renders_as_nothing() -> None:
    box, left, _bar, _right = tqdm_bar(10)
    models = opened(box)
    update(models, left, value="x: 10%")
    models.update(box.layout.model_id, {"method": "update", "state": {"visibility": "hidden"}})
    assert models.render(box.model_id) == ""


def test_an_output_widget_shows_its_captured_text() -> None:
    out = w.Output()
    models = opened(out)
    update(
        models,
        out,
        outputs=[
            {"output_type": "stream", "name": "stdout", "text": "step 1\nstep 2\n"},
            {"output_type": "display_data", "data": {"text/plain": "42"}, "metadata": {}},
        ],
    )
    assert models.render(out.model_id).splitlines() == ["step 1", "step 2", "42"]


def test_a_cycle_of_children_ends() -> None:
    models = WidgetModels()
    models.open("a", WIDGET_TARGET, {"state": {"_model_name": "VBoxModel", "children": ["IPY_MODEL_b"]}})
    models.open("b", WIDGET_TARGET, {"state": {"_model_name": "VBoxModel", "children": ["IPY_MODEL_a"]}})
    assert models.render("a") == ""
    assert models.fraction("a") is None


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("train:  45%|████▌     | 450/1000 [00:12<00:15, 37.5it/s]", (450, 1000)),
        ("  4%|▍         | 4.50k/100k [00:01<00:20, 4.5kit/s]", (4500, 100_000)),
        ("450/1000 [=========>....................] - ETA: 2s - loss: 0.31", (450, 1000)),
        ("45it [00:12, 3.7it/s]", None),
        ("0/0 [00:00, ?it/s]", None),
        ("just text 3/4", None),
    ],
)
def test_a_progress_line_gives_its_fraction(line: str, expected: tuple[float, float] | None) -> None:
    found = line_progress(line)
    assert found == (Progress(line.strip(), *map(float, expected)) if expected is not None else None)


def test_widget_progress_has_the_view_text_on_one_line() -> None:
    page = w.VBox([w.Label("stage 1"), w.IntProgress(value=1, max=4)])
    models = opened(page)
    assert widget_progress(models, page.model_id) == Progress("stage 1  25%|██▌       | 1/4", 1, 4)
    assert widget_progress(models, page.children[0].model_id) is None
