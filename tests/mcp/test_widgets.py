"""Widgets through MCP against a real kernel with ipywidgets: tqdm.auto bars, nested boxes, unknown
models, progress notifications with numbers, and widget updates as output for --silence."""

from __future__ import annotations

import re

import anyio
import pytest
from mcp import Client

from tests.gates import Gate
from tests.mcp.calls import body, call, run, text_of
from tests.mcp.conftest import FreshClient

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]

BAR = re.compile(r"train:? +(\d+)%\|([█▏▎▍▌▋▊▉ ]{10})\| (\d+)/200")


TQDM_CELL = (
    "from tqdm.auto import tqdm\nimport time\n"
    "for _ in tqdm(range(200), desc='train'):\n    time.sleep(0.001)\n"
)


def bars(text: str) -> list[int]:
    """The percentages of the tqdm bars in a text, in order."""
    return [int(match.group(1)) for match in BAR.finditer(text)]


async def test_a_tqdm_auto_bar_reads_its_final_state_and_the_streams_keep_first_and_last(
    memory_client: Client,
) -> None:
    number, text = await run(memory_client, TQDM_CELL)
    assert bars(text) == [100], text
    assert "200/200" in text and "HBox(" not in text
    result = await call(memory_client, "read_python_output", execution=number, stream="result")
    states = bars(result)
    assert states[0] == 0 and states[-1] == 100, result
    assert len(states) <= 3, result  # first, at most one per 5 s, final


async def test_a_reply_taken_mid_run_shows_the_bar_so_far_and_progress_has_numbers(
    fresh_client: FreshClient, gate: Gate
) -> None:
    notes: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        notes.append((progress, total, message))

    async def opens_on_numbers(progress: float, total: float | None, message: str | None) -> None:
        await on_progress(progress, total, message)
        if total is not None:
            gate.open()

    halfway = (  # the bar drawn at 100/200 until the gate opens
        "# warmkernel: --wait 2\nfrom tqdm.auto import tqdm\n"
        f"bar = tqdm(total=200, desc='train')\nbar.update(100)\nbar.refresh()\n{gate.wait}\n"
        "bar.update(100)\nbar.close()"
    )
    async with fresh_client(progress_interval_s=0.3) as client:
        await run(client, "import tqdm.auto, ipywidgets")  # imports do not count against the bar
        with anyio.fail_after(120):
            first = await client.call_tool("run_python", {"freeform": halfway}, progress_callback=on_progress)
        text = text_of(first)
        seen = bars(text)
        assert "Still running" in text, text
        with anyio.fail_after(120):
            result = await client.call_tool(
                "wait_python", {"timeout_seconds": 60}, progress_callback=opens_on_numbers
            )
        text = text_of(result)
        seen += bars(text)
        assert bars(text) == [100], text
        assert any(0 < percent < 100 for percent in seen), seen
    with_numbers = [(done, total, message) for done, total, message in notes if total is not None]
    assert with_numbers, notes
    assert all(total == 200 and 0 <= done <= 200 for done, total, _ in with_numbers)
    assert any(message and "train:" in message and "/200" in message for _, _, message in with_numbers)


async def test_widget_updates_are_output_for_silence(memory_client: Client) -> None:
    cell = (
        "# warmkernel: --silence 1 --wait 60\n"
        "import ipywidgets as w, time\nfrom IPython.display import display\n"
        "bar = w.IntProgress(max=10, description='steps')\ndisplay(bar)\n"
        "for i in range(10):\n    time.sleep(0.3)\n    bar.value = i + 1\n"
    )
    _, text = await run(memory_client, cell)
    assert "Still running" not in text, text
    assert body(text) == ["steps 100%|██████████| 10/10"]


async def test_nested_boxes_and_an_unknown_model_render_in_order(memory_client: Client) -> None:
    cell = (
        "import ipywidgets as w\nfrom traitlets import Unicode\nfrom IPython.display import display\n"
        "class Scatter(w.DOMWidget):\n"
        "    _model_name = Unicode('ScatterModel').tag(sync=True)\n"
        "    _model_module = Unicode('scatter-widget').tag(sync=True)\n"
        "    points = Unicode('').tag(sync=True)\n"
        "row = w.HBox([w.Label('epoch 3'), w.IntProgress(value=3, max=4)])\n"
        "scatter = Scatter()\n"
        "display(w.VBox([w.HTML('<b>Training</b> <a href=\"https://example.org\">log</a>'), row, scatter]))\n"
        "for i in range(3):\n    scatter.points = str(i)\n"
        "print('after')"
    )
    _, text = await run(memory_client, cell)
    assert body(text) == [
        "Training log (https://example.org)",
        "epoch 3  75%|███████▌  | 3/4",
        "[widget ScatterModel]",
        "after",
    ]


async def test_a_widget_made_in_one_cell_shows_in_the_next(memory_client: Client) -> None:
    await run(memory_client, "import ipywidgets as w\nlabel = w.Label('made earlier')")
    _, text = await run(memory_client, "label.value = 'shown now'\nlabel")
    assert body(text) == ["shown now"]
