"""Rich output through MCP: images as image content, other MIME types as text, updates and clears."""

from __future__ import annotations

import base64
import re

import anyio
import mcp_types as types
import pytest
from mcp import Client

from tests.mcp.calls import body, call, run, text_of
from tests.mcp.conftest import FreshClient

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

ONE_PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

# Defines png(width, height, noise=False) in the kernel: a valid RGB PNG; noise makes it incompressible.
PNG_MAKER = """\
import random, struct, zlib
from IPython.display import Image, display
def png(width, height, noise=False):
    rng = random.Random(width)
    row = lambda: rng.randbytes(3 * width) if noise else b'\\xff\\x00\\x00' * width
    raw = b''.join(b'\\x00' + row() for _ in range(height))
    def chunk(kind, data):
        return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data))
    header = struct.pack('>IIBBBBB', width, height, 8, 2, 0, 0, 0)
    return (b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', header) + chunk(b'IDAT', zlib.compress(raw))
            + chunk(b'IEND', b''))
"""


async def run_content(client: Client, code: str) -> list[types.ContentBlock]:
    """Run a cell that must succeed; return its content blocks."""
    with anyio.fail_after(90):
        result = await client.call_tool("run_python", {"freeform": code})
    assert not result.is_error, text_of(result)
    return result.content


def shape(content: list[types.ContentBlock]) -> list[str]:
    """Each block as its text, or `<image/png>` for an image."""
    return [
        block.text if isinstance(block, types.TextContent) else f"<{block.mime_type}>"
        for block in content
        if isinstance(block, types.TextContent | types.ImageContent)
    ]


def images(content: list[types.ContentBlock]) -> list[bytes]:
    return [base64.b64decode(block.data) for block in content if isinstance(block, types.ImageContent)]


async def test_png_display_is_image_content_in_order_with_the_text_around_it(client: Client) -> None:
    content = await run_content(
        client,
        f"from IPython.display import Image, display\nimport base64\n"
        f"print('before')\ndisplay(Image(base64.b64decode('{ONE_PIXEL}')))\nprint('after')",
    )
    blocks = shape(content)
    assert body(blocks[0]) == ["before", "[image 1: image/png 1x1, 70 bytes]"]
    assert blocks[1:] == ["<image/png>", "after"]
    assert images(content) == [base64.b64decode(ONE_PIXEL)]


async def test_image_repr_stays_in_the_result_stream_but_not_in_the_reply(client: Client) -> None:
    content = await run_content(
        client, f"from IPython.display import Image\nimport base64\nImage(base64.b64decode('{ONE_PIXEL}'))"
    )
    text = text_of(types.CallToolResult(content=content))
    assert "IPython.core.display.Image object" not in text
    number = int(text.split("]")[0].removeprefix("In ["))
    result = await call(client, "read_python_output", execution=number, stream="result")
    assert result.splitlines()[1:] == [
        f"Out[{number}]: <IPython.core.display.Image object>",
        "[image 1: image/png 1x1, 70 bytes]",
    ]


async def test_matplotlib_figure_shown_with_the_inline_backend_is_delivered(client: Client) -> None:
    content = await run_content(
        client,
        "# warmkernel: --wait 60\nimport matplotlib.pyplot as plt\n"
        "plt.plot([1, 3, 2])\nplt.show()\nprint('plotted')",
    )
    blocks = shape(content)
    assert blocks[1:] == ["<image/png>", "plotted"]
    assert body(blocks[0])[-1].startswith("[image 1: image/png ")
    assert "<Figure size" not in blocks[0]
    assert images(content)[0].startswith(b"\x89PNG\r\n\x1a\n")


async def test_matplotlib_inline_magic_overrides_another_backend_from_the_environment(
    fresh_client: FreshClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MPLBACKEND", "agg")  # the kernel inherits the server's environment
    async with fresh_client() as client:
        plot = "# warmkernel: --wait 60\nimport matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()"
        assert images(await run_content(client, plot)) == []
        assert len(images(await run_content(client, "%matplotlib inline\n" + plot))) == 1


async def test_images_are_read_by_ordinal_range(client: Client) -> None:
    plain, _ = await run(client, "print('no image')")
    empty = await call(client, "read_python_output", execution=plain, stream="images")
    assert empty == f"execution {plain} has no images"
    number, _ = await run(client, PNG_MAKER + "for width in (1, 2, 3): display(Image(png(width, 1)))")
    result = await client.call_tool(
        "read_python_output", {"execution": number, "stream": "images", "line_range": "2:3"}
    )
    blocks = [re.sub(r"\d+ bytes", "K bytes", block) for block in shape(result.content)]
    assert blocks == [
        f"execution {number} · images 2-3 of 3 (completed)\n[image 2: image/png 2x1, K bytes]",
        "<image/png>",
        "[image 3: image/png 3x1, K bytes]",
        "<image/png>",
    ]


async def test_images_past_the_limits_are_named_with_the_call_that_reads_them(
    fresh_client: FreshClient,
) -> None:
    async with fresh_client(max_images_per_reply=2, max_image_bytes=1000) as client:
        content = await run_content(
            client,
            PNG_MAKER + "for image in (png(1, 1), png(40, 40, noise=True), png(2, 1), png(3, 1)):\n"
            "    display(Image(image))",
        )
        blocks = shape(content)
        assert blocks[1] == "<image/png>" and blocks[3] == "<image/png>"
        assert len(images(content)) == 2
        big, last = blocks[2].splitlines()[0], blocks[4]
        assert big.startswith("[image 2: image/png 40x40, ")
        assert big.endswith(
            "] not shown (larger than the 1,000-byte limit for an image in a reply); "
            'read it with read_python_output(execution=1, stream="images", line_range="2:2")'
        )
        assert re.sub(r"\d+ bytes", "K bytes", last) == (
            "[image 4: image/png 3x1, K bytes] not shown (a reply shows at most 2 images); "
            'read it with read_python_output(execution=1, stream="images", line_range="4:4")'
        )
        read = await client.call_tool(
            "read_python_output", {"execution": 1, "stream": "images", "line_range": "2:2"}
        )
        assert len(images(read.content)) == 1 and len(images(read.content)[0]) > 1000
        every = await client.call_tool("read_python_output", {"execution": 1, "stream": "images"})
        assert len(images(every.content)) == 2
        assert shape(every.content)[-1] == (
            "[a reply shows at most 2 images; continue with "
            'read_python_output(execution=1, stream="images", line_range="3:4")]'
        )


async def test_html_only_display_becomes_readable_text(client: Client) -> None:
    _, text = await run(
        client,
        "from IPython.display import HTML, display\n"
        "display(HTML('<h3>Report</h3><style>td {color: red}</style><table>"
        "<tr><th>name</th><th>n</th></tr><tr><td>a &amp; b</td><td>1</td></tr></table>'))",
    )
    assert body(text) == ["Report", "name  | n", "------|--", "a & b | 1"]


async def test_help_that_jupyter_shows_in_its_pager_is_output(client: Client) -> None:
    _, text = await run(client, "def tally(n):\n    'How many, counted.'\n\ntally?")
    shown = body(text)
    assert "Signature: tally(n)" in shown and "Docstring: How many, counted." in shown
    _, magic = await run(client, "%pinfo tally")
    assert "Signature: tally(n)" in body(magic)


async def test_markdown_latex_json_are_text_and_svg_is_a_picture(client: Client) -> None:
    _, text = await run(
        client,
        "from IPython.display import JSON, SVG, Latex, Markdown, display\n"
        "display(Markdown('# Title'), Latex('$x^2$'), JSON({'a': [1, 2]}))\n"
        "display(SVG('<svg xmlns=\"http://www.w3.org/2000/svg\"/>'))",
    )
    assert [re.sub(r"[\d,]+ bytes", "K bytes", line) for line in body(text)] == [
        "# Title",
        "$x^2$",
        "{",
        '  "a": [',
        "    1,",
        "    2",
        "  ]",
        "}",
        "[image 1: image/png 800x800, K bytes]",  # an SVG without a size is drawn 100x100, then scaled
    ]


async def test_updated_display_shows_its_final_state_and_the_record_is_not_flooded(client: Client) -> None:
    number, text = await run(
        client,
        "from IPython.display import display\nhandle = display('step 0', display_id=True)\n"
        "for i in range(1, 200): handle.update(f'step {i}')\nprint('done')",
    )
    assert body(text) == ["done", "'step 199'"]
    combined = await call(client, "read_python_output", execution=number)
    assert combined.splitlines()[1:] == ["'step 0'", "done", "'step 199'"]


async def test_ipython_progress_bar_shows_its_last_frame(client: Client) -> None:
    _, text = await run(client, "from IPython.display import ProgressBar\nfor _ in ProgressBar(3): pass")
    assert body(text) == ["[" + "=" * 60 + "] 3/3"]


async def test_clear_output_leaves_what_came_after_the_last_clear(client: Client) -> None:
    number, text = await run(
        client,
        "from IPython.display import clear_output\n"
        "for i in range(3):\n    clear_output(wait=True)\n    print(f'frame {i}')",
    )
    assert body(text) == [
        "[lines 1-2 were cleared by clear_output; read with "
        f'read_python_output(execution={number}, line_range="1:2")]',
        "frame 2",
    ]
    combined = await call(client, "read_python_output", execution=number)
    assert combined.splitlines()[1:] == ["frame 0", "frame 1", "frame 2"]


async def test_clear_output_waiting_for_output_that_never_comes_clears_nothing(client: Client) -> None:
    _, text = await run(
        client, "from IPython.display import clear_output\nprint('kept')\nclear_output(wait=True)"
    )
    assert body(text) == ["kept"]
