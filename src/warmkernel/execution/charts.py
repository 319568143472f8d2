"""Charts as pictures: Vega, Vega-Lite, SVG and Plotly bundles rendered to PNG on the server side.

The renderers come with the optional extra `warmkernel[plots]`, installed beside the server
(nothing runs in the kernel): `vl-convert-python` for Vega and Vega-Lite (Altair),
`resvg-py` for SVG, and `kaleido` for Plotly, which also needs a Chrome or Chromium on the
machine. A chart comes out about `READABLE_WIDTH_PX` wide. What cannot be rendered gets the
reason instead, for the note that stands in for the chart: the extra to install, the missing
browser, the renderer's error, or the time limit.

The Chromium that draws Plotly figures stays open between them (`Charts`): opening one takes
1.5 to 7 s, a figure in an open one about 0.15 s.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import cache
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread

from warmkernel.execution.images import IMAGE_TYPES, Image, decode_png
from warmkernel.idle import IdleClock

PLOTS_EXTRA = "warmkernel[plots]"
RENDER_TIMEOUT_S = 10.0
"""A render that takes longer is abandoned: the note stands in for the chart."""
BROWSER_IDLE_S = 120.0
"""The Chromium of Plotly figures is closed after this long without one (it holds 100 MB or more)."""
READABLE_WIDTH_PX = 800
"""A chart whose width and height are both under `_SMALL_PX` is drawn again this wide (or high)."""
_SMALL_PX = 600

SVG = "image/svg+xml"
PLOTLY = "application/vnd.plotly.v1+json"
_VEGA = re.compile(r"application/vnd\.vega(?:lite)?\.v\d+\+json")
_SCHEMA = re.compile(r"/(vega(?:-lite)?)/v(\d+)")
_COMMA = re.compile(r"\s*,\s*")
_MODULES = {"vega": "vl_convert", "svg": "resvg_py", "plotly": "kaleido"}


@dataclass(frozen=True)
class Found:
    """A chart in a bundle: its type, its spec, and the bundle entry that holds it."""

    mime: str
    value: Any
    source: str


def find_chart(data: Mapping[str, Any]) -> Found | None:
    """The chart a bundle would be drawn from, if it has no ready image.

    Altair's default renderer sends only text/html: a vega-embed page that ends with
    `})(SPEC, {"mode": "vega-lite"});`; the spec is read from there.
    """
    if any(mime in data for mime in IMAGE_TYPES):
        return None
    mime = next((mime for mime in data if _family(mime) is not None), None)
    if mime is not None:
        return Found(mime, data[mime], mime)
    html = data.get("text/html")
    return _embedded(html) if isinstance(html, str) and "vegaEmbed" in html else None


def _embedded(html: str) -> Found | None:
    at = html.rfind("})(")
    if at < 0:
        return None
    decoder = json.JSONDecoder()
    try:
        spec, end = decoder.raw_decode(html, at + 3)
        comma = _COMMA.match(html, end)
        options = decoder.raw_decode(html, comma.end())[0] if comma else {}
    except ValueError:
        return None
    if not isinstance(spec, dict) or not isinstance(options, dict):
        return None
    schema = _SCHEMA.search(str(spec.get("$schema", "")))
    mode = options.get("mode") or (schema.group(1) if schema else "vega-lite")
    version = schema.group(2) if schema else "5"
    kind = "vegalite" if mode == "vega-lite" else "vega"
    return Found(f"application/vnd.{kind}.v{version}+json", spec, "text/html")


def _family(mime: str) -> str | None:
    if _VEGA.fullmatch(mime):
        return "vega"
    return {SVG: "svg", PLOTLY: "plotly"}.get(mime)


def unavailable(mime: str) -> str | None:
    """Why a chart of this type cannot be drawn here (no renderer, no browser), or None."""
    family = _family(mime)
    if family is None:
        return "not a chart type"
    if not _installed(_MODULES[family]):
        return f"install {PLOTS_EXTRA} on the server to draw charts"
    if family == "plotly" and chromium() is None:
        return "Plotly needs a Chrome or Chromium for kaleido, and none was found"
    return None


CHART_KINDS = {"Vega/Vega-Lite": "application/vnd.vegalite.v5+json", "SVG": SVG, "Plotly": PLOTLY}
"""Each kind of chart by name, with a MIME type of it."""


def renderers() -> dict[str, str | None]:
    """Each kind of chart, with why it cannot be drawn here (None: it can)."""
    return {kind: unavailable(mime) for kind, mime in CHART_KINDS.items()}


@cache
def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def chromium() -> str | None:
    """The Chrome or Chromium kaleido would use: `BROWSER_PATH` if set, else one on `PATH` or in
    a usual place (None without one, or without kaleido). Looked up each time: one may be
    installed while the server runs."""
    if not _installed("choreographer"):
        return None
    from choreographer.browsers.chromium import Chromium

    try:
        found = Chromium.find_browser(skip_local=False)
    except Exception:  # a search that fails finds nothing
        return None
    return found if found is not None and os.access(found, os.X_OK) else None


_SCRIPT_NOT_LOADED = "kaleido_scopes is not defined"
"""What kaleido says when it ran a figure in its tab before the tab's page had loaded its script:
a race of kaleido's own, seen on a slow machine, after which that browser draws nothing."""


class Charts:
    """Draws charts as PNGs, each within `timeout_s`, for every kernel of a server.

    The Chromium that draws Plotly figures is opened at the first one and kept for the next.
    Each figure is drawn in a task of its own (`Charts.open`'s), finished even when its caller
    stops waiting: kaleido cut off mid-figure leaves its browser unusable (kaleido itself gives up
    on a figure after 90 s, so none holds the later ones longer). The browser is closed after
    `idle_s` without a figure, and when the server ends.
    """

    def __init__(self, timeout_s: float = RENDER_TIMEOUT_S, idle_s: float = BROWSER_IDLE_S) -> None:
        self.timeout_s = timeout_s
        self._idle_s = idle_s
        self._tg: anyio.abc.TaskGroup | None = None
        self._browser: Any = None
        """kaleido's `Kaleido`, while open."""
        self._opening = anyio.Lock()
        self._clock = IdleClock()
        """Held while a figure is drawn (kaleido queues them for its one tab)."""

    @classmethod
    @asynccontextmanager
    async def open(
        cls, timeout_s: float = RENDER_TIMEOUT_S, idle_s: float = BROWSER_IDLE_S
    ) -> AsyncIterator[Charts]:
        """Charts that draw Plotly figures, their browser closed when idle and, at the latest, on exit."""
        charts = cls(timeout_s, idle_s)
        try:
            async with anyio.create_task_group() as tg:
                charts._tg = tg
                tg.start_soon(charts._close_when_idle)
                yield charts
                tg.cancel_scope.cancel()
        finally:
            await _close(charts._browser)

    def timed_out(self) -> str:
        return timed_out(self.timeout_s)

    async def render(self, mime: str, value: Any) -> Image | str:
        """The chart as a PNG, or why not (a render slower than `timeout_s` is abandoned)."""
        reason = unavailable(mime)
        if reason is not None:
            return reason
        try:
            with anyio.fail_after(self.timeout_s):
                if mime == PLOTLY:
                    png = await self._plotly(value)
                else:
                    draw = _vega(mime) if mime != SVG else _svg
                    png = await anyio.to_thread.run_sync(_readable, draw, value, abandon_on_cancel=True)
        except TimeoutError:
            return self.timed_out()
        except Exception as exc:
            return f"rendering failed: {_first_line(exc)}"
        image = decode_png(png)
        return image if image is not None else "the renderer returned no PNG"

    async def _plotly(self, value: Any) -> bytes:
        assert self._tg is not None, "Plotly figures are drawn by open Charts (`Charts.open`)"
        figure, opts = _plotly_figure(value)
        drawn: list[bytes | Exception] = []
        done = anyio.Event()
        self._tg.start_soon(self._draw, figure, opts, drawn, done)
        await done.wait()
        if isinstance(drawn[0], Exception):
            raise drawn[0]
        return drawn[0]

    async def _draw(
        self, figure: dict[str, Any], opts: dict[str, Any], drawn: list[bytes | Exception], done: anyio.Event
    ) -> None:
        try:
            with self._clock.held():
                try:
                    png = await self._calc_fig(figure, opts)
                except Exception as exc:
                    if _SCRIPT_NOT_LOADED not in str(exc):
                        raise
                    await self._discard_browser()  # a new one loads its page again
                    png = await self._calc_fig(figure, opts)
            drawn.append(png)
        except Exception as exc:
            drawn.append(exc)
        finally:
            done.set()

    async def _calc_fig(self, figure: dict[str, Any], opts: dict[str, Any]) -> bytes:
        """The figure drawn by kaleido's browser, opened first if none is."""
        async with self._opening:
            if self._browser is None:
                import kaleido

                browser = kaleido.Kaleido(n=1)
                try:
                    await browser.open()
                except BaseException:
                    await _close(browser)
                    raise
                self._browser = browser
            browser = self._browser
        return await browser.calc_fig(figure, opts=opts)

    async def _discard_browser(self, *, unless_busy: bool = False) -> bool:
        """Close the browser, so that the next figure opens a new one; with `unless_busy`, only
        when no figure was drawn for `idle_s` and none is being drawn (False: it was not closed)."""
        async with self._opening:  # a figure that starts meanwhile waits, and finds it closed
            idle_s = self._clock.idle_s()
            if unless_busy and (idle_s is None or idle_s < self._idle_s):
                return False
            browser, self._browser = self._browser, None
        await _close(browser)
        return True

    async def _close_when_idle(self) -> None:
        while True:
            await self._clock.idle_for(self._idle_s)
            if await self._discard_browser(unless_busy=True):
                await self._clock.next_use()  # nothing to close until a figure opens a browser


async def _close(browser: Any) -> None:
    """Close kaleido's browser (None: nothing open); a browser that will not close is left to exit
    with the server."""
    if browser is not None:
        with anyio.CancelScope(shield=True), anyio.move_on_after(10), contextlib.suppress(Exception):
            await browser.close()


def timed_out(timeout_s: float) -> str:
    """The reason a chart not drawn within `timeout_s` gives."""
    return f"rendering took longer than {timeout_s:g} s"


_Draw = Callable[[Any, float], bytes]
"""Draws a chart as PNG bytes at a zoom factor."""


def _readable(draw: _Draw, value: Any) -> bytes:
    """Drawn at its own size, or, when that comes out small, again at `READABLE_WIDTH_PX` (or
    that high, for a tall narrow chart)."""
    png = draw(value, 1.0)
    image = decode_png(png)
    if image is not None and image.width and image.height and max(image.width, image.height) < _SMALL_PX:
        png = draw(value, READABLE_WIDTH_PX / max(image.width, image.height))
    return png


def _vega(mime: str) -> _Draw:
    import vl_convert

    lite = mime.startswith("application/vnd.vegalite.")

    def draw(value: Any, zoom: float) -> bytes:
        spec = json.loads(value) if isinstance(value, str) else value
        if lite:  # the spec's `$schema` names its Vega-Lite version
            return vl_convert.vegalite_to_png(spec, scale=zoom)
        return vl_convert.vega_to_png(spec, scale=zoom)

    return draw


def _svg(value: Any, zoom: float) -> bytes:
    import resvg_py

    text = "".join(value) if isinstance(value, list) else str(value)
    return bytes(resvg_py.svg_to_bytes(svg_string=text, zoom=zoom, background="white"))


def _plotly_figure(value: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The figure of a Plotly bundle, and kaleido's options for it: its own size, else readable."""
    figure = json.loads(value) if isinstance(value, str) else dict(value)
    figure.pop("config", None)
    width = (figure.get("layout") or {}).get("width") or READABLE_WIDTH_PX
    height = (figure.get("layout") or {}).get("height") or READABLE_WIDTH_PX * 5 // 8
    return figure, {"format": "png", "width": width, "height": height}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
