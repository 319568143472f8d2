"""Charts as pictures through MCP: Altair (Vega-Lite), SVG and Plotly drawn on the server side,
and the note, with its reason, when a chart cannot be drawn (no browser, too slow)."""

from __future__ import annotations

import struct

import mcp_types as types
import pytest
from mcp import Client

from tests.mcp.calls import body, call, text_of
from tests.mcp.conftest import FreshClient
from tests.mcp.test_rich_output import images, run_content, shape

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]

ALTAIR_CHART = (
    "alt.Chart(pd.DataFrame({'a': list('xyz'), 'b': [3, 1, 2]})).mark_bar().encode(x='a:N', y='b:Q')"
)
WAIT = "# warmkernel: --wait 120\n"  # importing altair or plotly on a loaded machine takes a while
ALTAIR = f"{WAIT}import altair as alt, pandas as pd\n{ALTAIR_CHART}"
SVG = (
    "from IPython.display import SVG, display\nprint('before')\n"
    'display(SVG(\'<svg xmlns="http://www.w3.org/2000/svg" width="100" height="50">'
    '<rect width="100" height="50" fill="red"/></svg>\'))\nprint(\'after\')'
)
PLOTLY = f"{WAIT}import plotly.express as px\npx.bar(x=['a', 'b', 'c'], y=[3, 1, 2])"


def png_size(data: bytes) -> tuple[int, int]:
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


async def test_an_altair_chart_arrives_as_a_readable_png(fresh_client: FreshClient) -> None:
    async with fresh_client(chart_timeout_s=120) as client:  # vl-convert's first chart starts its engine
        content = await run_content(client, ALTAIR)
    [picture] = images(content)
    width, height = png_size(picture)
    assert 790 <= max(width, height) <= 800  # scaled to 800 px, give or take rounding
    blocks = shape(content)
    assert body(blocks[0]) == [f"[image 1: image/png {width}x{height}, {len(picture):,} bytes]"]


async def test_an_svg_arrives_as_a_png_800_wide_in_its_place(memory_client: Client) -> None:
    content = await run_content(memory_client, SVG)
    [picture] = images(content)
    assert png_size(picture) == (800, 400)
    blocks = shape(content)
    assert body(blocks[0]) == ["before", f"[image 1: image/png 800x400, {len(picture):,} bytes]"]
    assert blocks[1:] == ["<image/png>", "after"]


async def test_a_plotly_figure_arrives_as_a_png_when_a_browser_is_there(fresh_client: FreshClient) -> None:
    async with fresh_client(chart_timeout_s=120) as client:  # a loaded machine starts Chromium slowly
        status = await call(client, "python_status")
        assert "charts as pictures: Vega/Vega-Lite, SVG, Plotly" in status, status
        content = await run_content(client, PLOTLY)
    assert images(content), text_of_content(content)
    [picture] = images(content)
    assert png_size(picture) == (800, 500)


async def test_without_a_browser_a_plotly_figure_is_a_note_that_says_so(
    memory_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BROWSER_PATH", "/nonexistent/chromium")  # choreographer's own override
    status = await call(memory_client, "python_status")
    assert "not Plotly: Plotly needs a Chrome or Chromium for kaleido, and none was found" in status
    content = await run_content(memory_client, PLOTLY)
    assert not images(content)
    note = body(text_of_content(content))[0]
    assert note.startswith("[display: application/vnd.plotly.v1+json "), note
    assert "bytes: Plotly needs a Chrome or Chromium for kaleido, and none was found" in note


async def test_a_chart_not_drawn_in_time_is_the_note_with_the_reason(fresh_client: FreshClient) -> None:
    async with fresh_client(chart_timeout_s=0.001) as client:
        content = await run_content(
            client,
            f"{ALTAIR}\nfrom IPython.display import display\n"
            f"display({ALTAIR_CHART})\ndisplay({ALTAIR_CHART})\nprint('after')",
        )
    assert not images(content)
    lines = body(text_of_content(content))
    assert lines[0] == "alt.Chart(...)"
    assert lines[1].startswith("[display: text/html ")
    assert lines[1].endswith(" bytes: rendering took longer than 0.001 s]")
    assert lines[2] == "alt.Chart(...)"  # a later chart of the cell is not tried
    assert lines[3].endswith(" bytes: not drawn: an earlier chart of this cell took longer than 0.001 s]")
    assert lines[4:] == ["after"]  # what came after the charts waited for them


def text_of_content(content: list[types.ContentBlock]) -> str:
    return text_of(types.CallToolResult(content=content))


async def test_a_bokeh_plot_is_named_not_dumped(memory_client: Client) -> None:
    content = await run_content(
        memory_client,
        f"{WAIT}from bokeh.io import output_notebook, show\nfrom bokeh.plotting import figure\n"
        "output_notebook(hide_banner=True)\np = figure(title='sales')\np.line([1, 2, 3], [4, 6, 5])\nshow(p)",
    )
    lines = body(text_of_content(content))
    assert all(line.startswith("[display: ") for line in lines), lines
    assert any("application/vnd.bokehjs_exec.v0+json" in line for line in lines), lines
    assert "Bokeh.embed" not in "\n".join(lines)
