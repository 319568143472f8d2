"""DisplayLog and ImageStore without a kernel: placement, updates, clears, images in memory and on disk."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from warmkernel.execution.displays import UPDATE_RECORD_INTERVAL_S, DisplayLog
from warmkernel.execution.images import Image, ImageStore
from warmkernel.execution.output_log import OutputLog
from warmkernel.execution.spill import OutputDropped, Spill

PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
FIGURE = {"text/plain": "<Figure size 640x480 with 1 Axes>", "image/png": base64.b64encode(PIXEL).decode()}


def combined(output: OutputLog) -> list[str]:
    return output.lines("combined", 0, output.line_count("combined"))


def shown(log: DisplayLog, output: OutputLog) -> list[str]:
    """What an inline reply keeps: after the last clear, without hidden lines, captions marked."""
    hidden, captions, moved = log.hidden_lines(), log.captions(), log.moved()
    lines = combined(output)
    kept: list[int] = []
    for index in range(log.cleared_before, len(lines)):
        if index in moved:  # shown in place: the latest state stands here
            kept.extend(moved[index])
        elif index not in hidden:
            kept.append(index)
    return [f"{lines[i]} <picture {captions[i].ordinal}>" if i in captions else lines[i] for i in kept]


def test_image_caption_follows_its_repr_and_stands_for_it_inline() -> None:
    output, log = OutputLog(), DisplayLog()
    output.append("stdout", "before\n")
    log.show(output, FIGURE, now=0)
    log.show(output, FIGURE, now=0, label="Out[3]: ")
    assert combined(output) == [
        "before",
        "<Figure size 640x480 with 1 Axes>",
        "[image 1: image/png 1x1, 70 bytes]",
        "Out[3]: <Figure size 640x480 with 1 Axes>",
        "[image 2: image/png 1x1, 70 bytes]",
    ]
    assert shown(log, output) == [
        "before",
        "[image 1: image/png 1x1, 70 bytes] <picture 1>",
        "[image 2: image/png 1x1, 70 bytes] <picture 2>",
    ]
    assert log.images.read(2) == PIXEL


def test_image_placement_counts_completed_lines_not_an_open_one() -> None:
    output, log = OutputLog(), DisplayLog()
    output.append("stderr", "50%|#####")  # an open progress line
    log.show(output, FIGURE, now=0)
    output.close()
    assert combined(output)[-1] == "50%|#####"
    assert shown(log, output) == ["[image 1: image/png 1x1, 70 bytes] <picture 1>", "50%|#####"]


def test_updates_within_the_interval_are_held_and_the_final_state_is_written_at_the_end() -> None:
    output, log = OutputLog(), DisplayLog()
    log.show(output, {"text/plain": "0%"}, now=0, display_id="bar")
    for step in range(1, 100):
        log.show(output, {"text/plain": f"{step}%"}, now=step / 100, display_id="bar", update=True)
    output.append("stdout", "done\n")
    log.settle(output)
    assert combined(output) == ["0%", "done", "99%"]
    assert shown(log, output) == ["done", "99%"]


def test_an_update_due_after_the_interval_is_written_when_it_arrives() -> None:
    output, log = OutputLog(), DisplayLog()
    log.show(output, {"text/plain": "a"}, now=0, display_id="d")
    log.show(output, {"text/plain": "b"}, now=1, display_id="d", update=True)
    log.show(output, {"text/plain": "c"}, now=UPDATE_RECORD_INTERVAL_S, display_id="d", update=True)
    assert combined(output) == ["a", "c"]
    log.settle(output)
    assert combined(output) == ["a", "c"]
    assert shown(log, output) == ["c"]


def test_a_display_shown_in_place_shows_its_latest_state_where_it_first_was() -> None:
    output, log = OutputLog(), DisplayLog()
    calls: list[str] = []

    def view(text: str) -> dict[str, str]:
        calls.append(text)
        return {"text/plain": text}

    log.show(output, lambda: view("bar 0%\nrow 2"), now=0, display_id="widget:1", in_place=True)
    output.append("stdout", "between\n")
    for step in range(1, 50):
        log.show(
            output, lambda step=step: view(f"bar {step}%"), now=step / 10, display_id="widget:1", update=True
        )
    output.append("stdout", "after\n")
    log.settle(output)
    assert calls == ["bar 0%\nrow 2", "bar 49%"]  # a held state is rendered only when written
    assert combined(output) == ["bar 0%", "row 2", "between", "after", "bar 49%"]
    assert shown(log, output) == ["bar 49%", "between", "after"]


def test_an_update_of_a_display_from_an_earlier_execution_is_shown_as_new() -> None:
    output, log = OutputLog(), DisplayLog()
    log.show(output, {"text/plain": "later"}, now=0, display_id="elsewhere", update=True)
    assert shown(log, output) == ["later"]


def test_a_replaced_image_state_is_hidden_with_its_caption() -> None:
    output, log = OutputLog(), DisplayLog()
    log.show(output, FIGURE, now=0, display_id="plot")
    log.show(output, FIGURE, now=10, display_id="plot", update=True)
    assert shown(log, output) == ["[image 2: image/png 1x1, 70 bytes] <picture 2>"]
    assert len(log.images) == 2


def test_clear_hides_what_came_before_and_a_waiting_clear_needs_output() -> None:
    output, log = OutputLog(), DisplayLog()
    output.append("stdout", "one\n")
    log.clear(output, wait=False)
    output.append("stdout", "two\n")
    log.clear(output, wait=True)
    assert log.cleared_before == 1
    log.output_arrived(output)
    output.append("stdout", "three\n")
    assert log.cleared_before == 2
    log.clear(output, wait=True)
    log.settle(output)
    assert shown(log, output) == ["three"]


def test_images_move_to_spill_files_past_the_threshold_and_drop_with_the_output(tmp_path: Path) -> None:
    written: list[int] = []
    store = ImageStore(Spill(tmp_path, 100, written.append))
    small, big = Image("image/png", PIXEL, 1, 1), Image("image/png", os.urandom(500), None, None)
    store.add(small)
    store.add(big)
    store.add(small)
    assert written == [500, 70]
    assert len(list(tmp_path.iterdir())) == 2
    assert all(oct(path.stat().st_mode & 0o777) == "0o600" for path in tmp_path.iterdir())
    assert [store.read(n) for n in (1, 2, 3)] == [PIXEL, big.data, PIXEL]
    assert [image.caption for image in store.images] == [
        "[image 1: image/png 1x1, 70 bytes]",
        "[image 2: image/png, 500 bytes]",
        "[image 3: image/png 1x1, 70 bytes]",
    ]
    assert store.drop() == 570
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(OutputDropped):
        store.read(1)
