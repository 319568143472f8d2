"""Display bundles to text and images: one bundle per case, HTML to readable text, image sniffing."""

from __future__ import annotations

import base64
import struct
import zlib
from typing import Any

import pytest

from warmkernel.execution.images import Image, decode_image
from warmkernel.execution.mime import Rendering, html_text, render_bundle


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + b"\x00\x00\xff" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def jpeg(width: int, height: int) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof0 = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + sof0 + b"\xff\xd9"


def gif(frames: int) -> bytes:
    screen = b"GIF89a" + struct.pack("<HHBBB", 3, 2, 0, 0, 0)
    control = b"\x21\xf9\x04\x00\x0a\x00\x00\x00"  # graphic control extension: delay 10
    frame = b"\x2c" + struct.pack("<HHHHB", 0, 0, 3, 2, 0) + b"\x02\x02\x4c\x01\x00"
    return screen + (control + frame) * frames + b"\x3b"


def webp(chunk: bytes, body: bytes) -> bytes:
    payload = b"WEBP" + chunk + struct.pack("<I", len(body)) + body
    return b"RIFF" + struct.pack("<I", len(payload)) + payload


VP8 = webp(b"VP8 ", b"\x00\x00\x00\x9d\x01\x2a" + struct.pack("<HH", 30, 20) + b"\x00" * 4)
VP8L = webp(b"VP8L", b"\x2f" + struct.pack("<I", (30 - 1) | (20 - 1) << 14) + b"\x00")
VP8X = webp(b"VP8X", b"\x00" * 4 + (30 - 1).to_bytes(3, "little") + (20 - 1).to_bytes(3, "little"))


@pytest.mark.parametrize(
    ("mime", "data", "width", "height"),
    [
        pytest.param("image/png", png(3, 2), 3, 2, id="png"),
        pytest.param("image/jpeg", jpeg(30, 20), 30, 20, id="jpeg"),
        pytest.param("image/gif", gif(1), 3, 2, id="gif, one frame"),
        pytest.param("image/webp", VP8, 30, 20, id="webp lossy"),
        pytest.param("image/webp", VP8L, 30, 20, id="webp lossless"),
        pytest.param("image/webp", VP8X, 30, 20, id="webp extended"),
    ],
)
def test_images_are_decoded_with_their_pixel_size(mime: str, data: bytes, width: int, height: int) -> None:
    assert decode_image(mime, b64(data)) == Image(mime, data, width, height)


def test_base64_with_line_breaks_decodes() -> None:
    text = b64(png(1, 1))
    assert decode_image("image/png", text[:20] + "\n" + text[20:]) == Image("image/png", png(1, 1), 1, 1)


@pytest.mark.parametrize(
    ("mime", "value", "reason"),
    [
        pytest.param("image/gif", b64(gif(2)), "an animated GIF (2+ frames)", id="animated gif"),
        pytest.param("image/png", b64(jpeg(1, 1)), "its bytes are not image/png", id="wrong format"),
        pytest.param("image/png", "not*base64!", "not valid base64", id="bad base64"),
        pytest.param("image/png", 42, "not base64 text", id="not text"),
        pytest.param("image/bmp", b64(b"BM"), "not an image format that can be shown", id="bmp"),
    ],
)
def test_what_cannot_be_shown_says_why(mime: str, value: object, reason: str) -> None:
    refusal = decode_image(mime, value)
    assert isinstance(refusal, str) and refusal.startswith(reason)


IMAGE = Image("image/png", png(1, 1), 1, 1)


@pytest.mark.parametrize(
    ("bundle", "expected"),
    [
        pytest.param({"text/plain": "42"}, Rendering("42"), id="plain"),
        pytest.param({"text/plain": ["a\n", "b"]}, Rendering("a\nb"), id="plain as a list of lines"),
        pytest.param(
            {"text/plain": "<Figure size 640x480 with 1 Axes>", "image/png": b64(png(1, 1))},
            Rendering("<Figure size 640x480 with 1 Axes>", IMAGE),
            id="image keeps its repr",
        ),
        pytest.param({"image/png": b64(png(1, 1))}, Rendering("", IMAGE), id="image alone"),
        pytest.param(
            {"image/jpeg": b64(jpeg(1, 1)), "image/png": b64(png(1, 1))},
            Rendering("", IMAGE),
            id="png preferred",
        ),
        pytest.param(
            {"text/plain": "   a\n0  1", "text/html": "<table><tr><td>1</td></tr></table>"},
            Rendering("   a\n0  1"),
            id="a real text/plain beats html",
        ),
        pytest.param(
            {"text/plain": "<IPython.core.display.HTML object>", "text/html": "<p>Hi <b>there</b></p>"},
            Rendering("Hi there"),
            id="html when text/plain is a default repr",
        ),
        pytest.param(
            {"text/plain": "<foo.Bar object at 0x7f00aa>", "text/markdown": "# Title"},
            Rendering("# Title"),
            id="markdown",
        ),
        pytest.param({"text/latex": "$x^2$"}, Rendering("$x^2$"), id="latex"),
        pytest.param(
            {"text/plain": "<IPython.core.display.JSON object>", "application/json": {"a": [1]}},
            Rendering('{\n  "a": [\n    1\n  ]\n}'),
            id="json pretty-printed",
        ),
        pytest.param(
            {"text/plain": "<IPython.core.display.SVG object>", "image/svg+xml": "<svg/>"},
            Rendering("[display: image/svg+xml 6 bytes]"),
            id="svg is a note",
        ),
        pytest.param(
            {"image/gif": b64(gif(2)), "application/vnd.custom+json": {"k": 1}},
            Rendering(
                f"[display: image/gif {len(b64(gif(2)))} bytes: an animated GIF (2+ frames); "
                "only single-frame images are shown; application/vnd.custom+json 8 bytes]"
            ),
            id="what cannot be shown is named with its size",
        ),
        pytest.param(
            {
                "text/plain": "<IPython.core.display.HTML object>",
                "text/html": "<progress value=1></progress>",
            },
            Rendering("[display: text/html 29 bytes]"),
            id="html without text is a note",
        ),
        pytest.param(
            {"text/plain": "<object object at 0x10>"}, Rendering("<object object at 0x10>"), id="repr alone"
        ),
        pytest.param({}, Rendering("[empty display]"), id="empty bundle"),
    ],
)
def test_bundles_render_to_text_and_image(bundle: dict[str, Any], expected: Rendering) -> None:
    assert render_bundle(bundle) == expected


@pytest.mark.parametrize(
    ("html", "text"),
    [
        pytest.param("<b>bold</b> and <i>italic</i>", "bold and italic", id="inline tags"),
        pytest.param("<p>one</p><p>two<br>three</p>", "one\ntwo\nthree", id="blocks are lines"),
        pytest.param("a &amp; b &lt;c&gt; &#x27;d&#39;", "a & b <c> 'd'", id="entities"),
        pytest.param("<style>p {x: y}</style><script>alert(1)</script>shown", "shown", id="no code"),
        pytest.param(
            "<table><thead><tr><th></th><th>a</th></tr></thead>"
            "<tbody><tr><th>0</th><td>1</td></tr>\n<tr><th>1</th><td>2<br>3</td></tr></tbody></table>",
            "  | a\n--|----\n0 | 1\n1 | 2 3",
            id="table rows",
        ),
        pytest.param("<table><tr><td>x<td>y</table>after", "x | y\nafter", id="unclosed cells"),
        pytest.param("<ul><li>one</li><li>two</ul>", "- one\n- two", id="list items"),
        pytest.param("<pre>  a\n   b</pre>", "  a\n   b", id="pre keeps its layout"),
        pytest.param("  lots   of\n\n  space  ", "lots of space", id="whitespace collapses"),
    ],
)
def test_html_becomes_readable_text(html: str, text: str) -> None:
    assert html_text(html) == text
