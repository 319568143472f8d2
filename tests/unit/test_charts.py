"""Charts without a kernel: finding a chart in a bundle (Altair's HTML too), the renderers of the
plots extra at a readable size, and the reasons a chart stays a note."""

from __future__ import annotations

import struct

import altair as alt
import pandas as pd
import pytest

from warmkernel.execution.charts import PLOTLY, SVG, Found, find_chart, render_chart, renderers, unavailable
from warmkernel.execution.images import Image

pytestmark = pytest.mark.anyio

SMALL_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="100" height="50"><rect width="100" height="50"/></svg>'
)
WIDE_SVG = SMALL_SVG.replace('width="100"', 'width="1000"', 1)


def altair_bundle() -> dict[str, object]:
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
    found = find_chart(altair_bundle())
    assert found is not None
    image = await render_chart(found.mime, found.value, timeout_s=120)
    assert isinstance(image, Image) and image.mime == "image/png"
    assert image.data.startswith(b"\x89PNG") and image.width and image.height
    assert 790 <= max(image.width, image.height) <= 800


async def test_an_svg_is_drawn_800_wide_when_small_and_at_its_size_when_not() -> None:
    small = await render_chart(SVG, SMALL_SVG, timeout_s=60)
    wide = await render_chart(SVG, WIDE_SVG, timeout_s=60)
    assert isinstance(small, Image) and (small.width, small.height) == (800, 400)
    assert isinstance(wide, Image) and (wide.width, wide.height) == (1000, 50)
    assert struct.unpack(">II", wide.data[16:24]) == (1000, 50)


async def test_failures_and_slowness_are_reasons() -> None:
    broken = await render_chart(SVG, "<svg", timeout_s=60)
    assert isinstance(broken, str) and broken.startswith("rendering failed: ValueError: "), broken
    assert await render_chart(SVG, WIDE_SVG, timeout_s=0) == "rendering took longer than 0 s"


def test_plotly_needs_a_browser(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BROWSER_PATH", "/nonexistent/chromium")
    reason = "Plotly needs a Chrome or Chromium for kaleido, and none was found"
    assert unavailable(PLOTLY) == reason
    assert renderers() == {"Vega/Vega-Lite": None, "SVG": None, "Plotly": reason}
