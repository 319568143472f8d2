"""Apply Patch literals reach the kernel verbatim, with the author's line numbers."""

from __future__ import annotations

import pytest
from mcp import Client

from tests.mcp.calls import body, call, run

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

PATCH = '''*** Begin Patch
*** Update File: src/app.py
@@ def greet(name):
-    return "hi"
+    doc = """Say {name}\\n to C:\\\\temp"""
+    return f"hi {name}"
*** End Patch
'''


def cell(*lines: str) -> str:
    return "\n".join(lines)


async def value_of(client: Client, expression: str) -> object:
    """The kernel's value of `expression`, round-tripped through repr."""
    _, text = await run(client, f"print(repr({expression}))")
    return eval(body(text)[0])


async def converted(client: Client, number: int) -> int:
    status = await call(client, "python_execution_status", execution=number)
    line = next((line for line in status.splitlines() if line.startswith("patch literals converted:")), "")
    return int(line.split(":")[1]) if line else 0


async def test_patch_with_quotes_backslashes_and_braces_arrives_verbatim(client: Client) -> None:
    number, text = await run(client, f'patch = """\n{PATCH}"""')
    assert body(text) == []
    assert await value_of(client, "patch") == "\n" + PATCH
    assert await converted(client, number) == 1


async def test_prefixes_have_no_effect(client: Client) -> None:
    await run(client, f'name = "x"\npatch = rf"""\n{PATCH}"""')
    assert await value_of(client, "patch") == "\n" + PATCH


async def test_two_literals_in_one_cell_are_both_converted(client: Client) -> None:
    number, _ = await run(client, f'first = """\n{PATCH}"""\nsecond = """\n{PATCH}"""')
    assert await value_of(client, "(first, second)") == ("\n" + PATCH, "\n" + PATCH)
    assert await converted(client, number) == 2


async def test_literal_as_call_argument_with_code_after_the_quotes(client: Client) -> None:
    source = cell(
        "def apply(text, mode):",
        "    return (len(text.splitlines()), mode)",
        f'result = apply("""\n{PATCH}""", "dry")',
    )
    await run(client, source)
    assert await value_of(client, "result") == (len(("\n" + PATCH).splitlines()), "dry")
    await run(client, f'stripped = """\n{PATCH}""".strip()')
    assert await value_of(client, "stripped") == PATCH.strip()


async def test_a_later_raise_reports_the_authors_line_number(client: Client) -> None:
    source = f'patch = """\n{PATCH}"""\nraise RuntimeError("line after the patch")'
    line = source.count("\n") + 1
    number, text = await run(client, source)
    assert f"Cell In[{number}], line {line}" in text
    assert "RuntimeError: line after the patch" in text


@pytest.mark.parametrize(
    "literal",
    [
        pytest.param(
            'x = """\n  *** Begin Patch\n*** Delete File: a.py\n*** End Patch\n"""', id="indented-begin"
        ),
        pytest.param(
            'x = """\n*** Begin Patch\n*** Update File: a.py\n*** End Patch\n"""', id="update-without-hunk"
        ),
        pytest.param(
            'x = """\n*** Begin Patch\n\n*** Delete File: a.py\n*** End Patch\n"""', id="empty-line"
        ),
    ],
)
async def test_invalid_programs_are_left_as_ordinary_python(client: Client, literal: str) -> None:
    number, _ = await run(client, literal)
    assert await converted(client, number) == 0
    assert await value_of(client, "x") == literal.split('"""')[1]


async def test_bash_heredoc_cell_is_untouched(client: Client) -> None:
    source = f'%%bash\ncat <<\'EOF\'\n"""\n{PATCH}"""\nEOF'
    number, text = await run(client, source)
    assert await converted(client, number) == 0
    assert body(text)[1:3] == ["*** Begin Patch", "*** Update File: src/app.py"]
