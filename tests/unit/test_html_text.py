"""HTML to text without a kernel: tables on a grid (spans, header rules), links, line breaks,
and the HTML that pandas, its Styler and Bokeh really write."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from warmkernel.execution.html_text import html_text
from warmkernel.execution.mime import Chart, render_bundle

if TYPE_CHECKING:
    import pandas as pd


@pytest.mark.parametrize(
    ("html", "text"),
    [
        pytest.param(
            "<table><tr><th colspan=2>wide</th><th>c</th></tr>"
            "<tr><td>a</td><td>b</td><td>c</td></tr></table>",
            "wide |   | c\n-----|---|--\na    | b | c",
            id="colspan keeps the columns after it in place",
        ),
        pytest.param(
            "<table><tr><td rowspan=2>x</td><td>1</td></tr><tr><td>2</td></tr>"
            "<tr><td>y</td><td>3</td></tr></table>",
            "x | 1\n  | 2\ny | 3",
            id="rowspan holds its column in the rows below",
        ),
        pytest.param(
            "<table><tr><td>a</td><td>b</td></tr><tr><td>longer</td><td>c</td></tr></table>",
            "a      | b\nlonger | c",
            id="columns are padded to their widest cell",
        ),
        pytest.param(
            '<p>See <a href="https://example.org/docs">the docs</a>, <a href="https://x.io">https://x.io</a>'
            ' and <a href="#top">top</a>.</p>',
            "See the docs (https://example.org/docs), https://x.io and top.",
            id="links keep their url once",
        ),
        pytest.param("one<br>two<br/>three", "one\ntwo\nthree", id="br breaks lines"),
        pytest.param("<pre>a  b\n  c\n\nd</pre>", "a  b\n  c\n\nd", id="pre keeps its lines"),
        pytest.param(
            "<table><tr><td>outer</td><td><table><tr><td>i1</td><td>i2</td></tr></table></td></tr></table>",
            "outer | i1 | i2",
            id="a table in a cell is flattened into it",
        ),
        pytest.param("<table><tr><td>a<td>b<tr><td>c<td>d</table>", "a | b\nc | d", id="tags left open"),
        pytest.param("<table colspan=x><tr><td colspan=1e9>a</td></tr></table>", "a", id="bad spans are 1"),
    ],
)
def test_html_to_text(html: str, text: str) -> None:
    assert html_text(html) == text


def multiindex_frame() -> pd.DataFrame:
    """A frame with two header rows and a two-level index (the tests that need it skip without pandas)."""
    pandas = pytest.importorskip("pandas")
    columns = pandas.MultiIndex.from_tuples([("A", "x"), ("A", "y"), ("B", "x")])
    index = pandas.MultiIndex.from_tuples([("a", 1), ("a", 2), ("b", 1)], names=["k", "n"])
    return pandas.DataFrame([[1, 2, 3], [40, 50, 60], [7, 8, 9]], index=index, columns=columns)


def test_a_multiindex_frame_lines_up_under_its_headers() -> None:
    lines = html_text(multiindex_frame().to_html()).splitlines()
    assert lines == [
        "  |   | A  |    | B",
        "  |   | x  | y  | x",
        "k | n |    |    |",
        "--|---|----|----|---",
        "a | 1 | 1  | 2  | 3",
        "  | 2 | 40 | 50 | 60",
        "b | 1 | 7  | 8  | 9",
    ]


def test_a_styled_frame_reads_like_the_frame() -> None:
    styler = multiindex_frame().style.highlight_max()
    styled = styler.format("{:.1f}").to_html()  # pyright: ignore[reportAttributeAccessIssue]
    lines = html_text(styled).splitlines()
    assert "color" not in html_text(styled)  # the <style> block is not text
    assert lines[0].split("|")[2].strip() == "A"
    assert [cell.strip() for cell in lines[-2].split("|")] == ["", "2", "40.0", "50.0", "60.0"]
    assert any(set(line) <= set("-|") for line in lines)


def test_a_bokeh_bundle_is_a_note_not_its_script() -> None:
    pytest.importorskip("bokeh")
    from bokeh.embed import json_item
    from bokeh.plotting import figure
    from bokeh.resources import CDN

    plot = figure(title="sales")
    plot.line([1, 2, 3], [4, 6, 5])
    # What bokeh.io.show sends a notebook: a div for the script to fill, and the exec bundle.
    bundle = {
        "text/html": f'<div id="p1" data-root-id="{plot.id}" style="display: contents;"></div>'
        f"<script>{CDN.js_raw[0][:200]}</script>",
        "application/javascript": "Bokeh.embed.embed_items_notebook(...)",
        "application/vnd.bokehjs_exec.v0+json": {"id": plot.id},
    }
    assert json_item(plot)["root_id"] == plot.id
    text = render_bundle(bundle).text
    assert text.startswith("[display: text/html ")
    assert "application/vnd.bokehjs_exec.v0+json" in text
    assert "Bokeh.embed" not in text


def test_a_chart_that_was_not_drawn_says_why_after_its_repr() -> None:
    bundle = {"text/plain": "alt.Chart(...)", "text/html": "<div>" + "x" * 10 + "</div>"}
    reason = "install warmkernel[plots] on the server to draw charts"
    assert render_bundle(bundle, Chart("text/html", reason)).text == (
        f"alt.Chart(...)\n[display: text/html 21 bytes: {reason}]"
    )
    svg = {"text/plain": "<IPython.core.display.SVG object>", "image/svg+xml": "<svg/>"}
    assert render_bundle(svg, Chart("image/svg+xml", "rendering failed: ValueError: bad")).text == (
        "[display: image/svg+xml 6 bytes: rendering failed: ValueError: bad]"
    )
