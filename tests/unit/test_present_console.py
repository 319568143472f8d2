"""The console page's facts without a kernel: pages of the execution list, and output windows with
where each line came from, its images and what an inline reply folds away."""

from __future__ import annotations

import base64

from warmkernel.execution.record import ExecutionRecord
from warmkernel.replies.page import LINE_MAX_CHARS, WINDOW_MAX_LINES, execution_page, output_window
from warmkernel.types import ExecutionNumber, ExecutionState, Generation

PIXEL = base64.b64encode(
    base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    )
).decode()


def record(number: int, source: str = "work()") -> ExecutionRecord:
    return ExecutionRecord(ExecutionNumber(number), source, Generation(1), client="cli")


def test_a_page_of_ten_thousand_executions_is_the_slice_asked_for_newest_first() -> None:
    records = [record(n, f"cell_{n}()") for n in range(1, 10_001)]
    first = execution_page(records, 0, 3)
    assert first["total"] == 10_000
    assert [row["execution"] for row in first["executions"]] == [10_000, 9_999, 9_998]
    assert first["executions"][0] | {"elapsed_s": 0, "started_at": ""} == {
        "execution": 10_000,
        "state": "running",
        "elapsed_s": 0,
        "started_at": "",
        "client": "cli",
        "first_line": "cell_10000()",
        "lines": 0,
    }
    last = execution_page(records, 9_998, 100)
    assert [row["execution"] for row in last["executions"]] == [2, 1]
    assert execution_page(records, 20_000, 10)["executions"] == []


def test_a_window_names_each_lines_stream_and_clips_long_lines() -> None:
    rec = record(4)
    rec.output.append("stdout", "out 1\n")
    rec.output.append("stderr", "warn\n")
    rec.output.append("traceback", "Traceback\nValueError: bad\n")
    rec.output.append("stdout", "x" * (LINE_MAX_CHARS + 5) + "\n")
    rec.output.append("stdout", "\rstep 1\rstep 2")  # a progress bar: one open line, redrawn
    window = output_window(rec, 0, 100)
    assert window["total"] == 6
    assert [(line["stream"], line["text"][:10]) for line in window["lines"]] == [
        ("stdout", "out 1"),
        ("stderr", "warn"),
        ("traceback", "Traceback"),
        ("traceback", "ValueError"),
        ("stdout", "x" * 10),
        ("stdout", "step 2"),
    ]
    assert window["lines"][4]["text"].endswith("...[5 chars omitted]")
    assert [line["text"] for line in output_window(rec, 2, 4)["lines"]] == ["Traceback", "ValueError: bad"]


def test_a_window_is_at_most_a_few_screens() -> None:
    rec = record(5)
    rec.output.append("stdout", "".join(f"{n}\n" for n in range(WINDOW_MAX_LINES * 2)))
    window = output_window(rec, 10, WINDOW_MAX_LINES * 2)
    assert len(window["lines"]) == WINDOW_MAX_LINES
    assert window["lines"][0]["text"] == "10"


def test_an_images_caption_line_names_the_image_and_its_repr_is_folded() -> None:
    rec = record(6)
    rec.output.append("stdout", "before\n")
    rec.displays.show(rec.output, {"text/plain": "<Figure>", "image/png": PIXEL}, now=0.0)
    rec.finish(ExecutionState.COMPLETED)
    lines = output_window(rec, 0, 10)["lines"]
    assert lines == [
        {"text": "before", "stream": "stdout"},
        {"text": "<Figure>", "stream": "result", "folded": True},
        {"text": "[image 1: image/png 1x1, 70 bytes]", "stream": "result", "image": 1},
    ]
