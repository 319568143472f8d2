"""Charts without a kernel: finding a chart in a bundle (Altair's HTML too), the renderers of the
plots extra at a readable size, the reasons a chart stays a note, and the one Chromium that Plotly
figures share while they come."""

from __future__ import annotations

import contextlib
import struct

import anyio
import psutil
import pytest

from warmkernel.execution.charts import PLOTLY, SVG, Charts, Found, find_chart, renderers, unavailable
from warmkernel.execution.images import Image

pytestmark = pytest.mark.anyio

SMALL_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="100" height="50"><rect width="100" height="50"/></svg>'
)
WIDE_SVG = SMALL_SVG.replace('width="100"', 'width="1000"', 1)


def altair_bundle() -> dict[str, object]:
    """What Altair sends a notebook for a bar chart (the tests that need it skip without altair)."""
    alt, pd = pytest.importorskip("altair"), pytest.importorskip("pandas")
    chart = alt.Chart(pd.DataFrame({"a": ["x", "y"], "b": [1, 2]})).mark_bar().encode(x="a:N", y="b:Q")
    bundle = chart._repr_mimebundle_()  # what the default renderer sends a notebook
    assert isinstance(bundle, dict)
    return dict(bundle)


def test_altair_default_html_carries_its_vega_lite_spec() -> None:
    found = find_chart(altair_bundle())
    assert found is not None
    assert found.source == "text/html"
    assert found.mime.startswith("application/vnd.vegalite.v") and found.mime.endswith("+json")
    assert found.value["mark"] == {"type": "bar"}


@pytest.mark.parametrize(
    ("bundle", "found"),
    [
        ({"image/svg+xml": SMALL_SVG}, Found(SVG, SMALL_SVG, SVG)),
        ({PLOTLY: {"data": []}, "text/html": "<div></div>"}, Found(PLOTLY, {"data": []}, PLOTLY)),
        (
            {"application/vnd.vega.v5+json": {}},
            Found("application/vnd.vega.v5+json", {}, "application/vnd.vega.v5+json"),
        ),
        ({"image/svg+xml": SMALL_SVG, "image/png": "iVBORw0KGgo="}, None),  # a ready image wins
        ({"text/html": "<script>vegaEmbed(el, spec)</script>"}, None),  # no spec to read
        ({"text/html": "<p>hello</p>"}, None),
    ],
)
def test_charts_are_found_by_type(bundle: dict[str, object], found: Found | None) -> None:
    assert find_chart(bundle) == found


async def test_a_vega_lite_chart_becomes_a_png_fitted_to_800_pixels() -> None:
    pytest.importorskip("vl_convert")
    found = find_chart(altair_bundle())
    assert found is not None
    image = await Charts(timeout_s=120).render(found.mime, found.value)
    assert isinstance(image, Image) and image.mime == "image/png"
    assert image.data.startswith(b"\x89PNG") and image.width and image.height
    assert 790 <= max(image.width, image.height) <= 800


async def test_an_svg_is_drawn_800_wide_when_small_and_at_its_size_when_not() -> None:
    pytest.importorskip("resvg_py")
    charts = Charts(timeout_s=60)
    small = await charts.render(SVG, SMALL_SVG)
    wide = await charts.render(SVG, WIDE_SVG)
    assert isinstance(small, Image) and (small.width, small.height) == (800, 400)
    assert isinstance(wide, Image) and (wide.width, wide.height) == (1000, 50)
    assert struct.unpack(">II", wide.data[16:24]) == (1000, 50)


async def test_failures_and_slowness_are_reasons() -> None:
    pytest.importorskip("resvg_py")
    broken = await Charts(timeout_s=60).render(SVG, "<svg")
    assert isinstance(broken, str) and broken.startswith("rendering failed: ValueError: "), broken
    assert await Charts(timeout_s=0).render(SVG, WIDE_SVG) == "rendering took longer than 0 s"


def test_plotly_needs_a_browser(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("vl_convert")
    pytest.importorskip("resvg_py")
    monkeypatch.setenv("BROWSER_PATH", "/nonexistent/chromium")
    reason = "Plotly needs a Chrome or Chromium for kaleido, and none was found"
    assert unavailable(PLOTLY) == reason
    assert renderers() == {"Vega/Vega-Lite": None, "SVG": None, "Plotly": reason}


needs_a_browser = pytest.mark.skipif(
    unavailable(PLOTLY) is not None, reason=f"Plotly figures are not drawn here: {unavailable(PLOTLY)}"
)
FIGURE = {"data": [{"type": "scatter", "x": [1, 2, 3], "y": [3, 1, 2]}], "layout": {}}


def browsers() -> set[psutil.Process]:
    """The Chromium browsers this test process started (kaleido's, through `Charts`): their main
    processes, as the helper processes of a browser come and go while it draws."""
    parents: dict[psutil.Process, int] = {}
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            if "chrom" in child.name().lower():
                parents[child] = child.ppid()
    pids = {process.pid for process in parents}
    return {process for process, parent in parents.items() if parent not in pids}


async def closed(processes: set[psutil.Process]) -> bool:
    """Whether they all end within 15 s (the event loop runs meanwhile: the closing is a task)."""
    with anyio.move_on_after(15):
        while any(_alive(process) for process in processes):  # noqa: ASYNC110 (other processes)
            await anyio.sleep(0.1)
        return True
    return False


def _alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@needs_a_browser
async def test_plotly_figures_share_one_chromium_until_the_charts_close() -> None:
    async with Charts.open(timeout_s=120) as charts:
        first = await charts.render(PLOTLY, FIGURE)
        opened = browsers()
        second = await charts.render(PLOTLY, FIGURE)
        assert isinstance(first, Image) and isinstance(second, Image)
        assert opened and browsers() == opened  # the same Chromium drew both
    assert await closed(opened)


@needs_a_browser
async def test_an_idle_chromium_is_closed_and_the_next_figure_opens_one() -> None:
    async with Charts.open(timeout_s=120, idle_s=0.5) as charts:
        assert isinstance(await charts.render(PLOTLY, FIGURE), Image)
        opened = browsers()
        assert opened and await closed(opened)
        assert isinstance(await charts.render(PLOTLY, FIGURE), Image)
        assert browsers()


@needs_a_browser
async def test_a_browser_whose_page_lost_kaleidos_script_is_replaced_and_the_figure_drawn() -> None:
    """As kaleido's own race leaves it on a slow machine: its tab runs figures in a page without
    its script (`kaleido_scopes is not defined`)."""
    async with Charts.open(timeout_s=120) as charts:
        assert isinstance(await charts.render(PLOTLY, FIGURE), Image)
        opened = browsers()
        kaleido_tab = charts._browser.tabs_ready.get_nowait()  # pyright: ignore[reportPrivateUsage]
        await kaleido_tab.tab.send_command("Runtime.evaluate", params={"expression": "delete kaleido_scopes"})
        charts._browser.tabs_ready.put_nowait(kaleido_tab)  # pyright: ignore[reportPrivateUsage]
        assert isinstance(await charts.render(PLOTLY, FIGURE), Image)
        assert await closed(opened)  # the broken one was closed
        assert browsers() and browsers() != opened


@needs_a_browser
async def test_a_figure_cut_short_leaves_the_next_one_drawn() -> None:
    many = {"data": [{"type": "scatter", "x": list(range(300_000)), "y": list(range(300_000))}]}
    async with Charts.open(timeout_s=120) as charts:
        assert isinstance(await charts.render(PLOTLY, FIGURE), Image)
        charts.timeout_s = 0.2
        assert await charts.render(PLOTLY, many) == "rendering took longer than 0.2 s"
        charts.timeout_s = 120
        assert isinstance(await charts.render(PLOTLY, FIGURE), Image)  # kaleido's tab is not left taken
