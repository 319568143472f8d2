"""The Apply Patch literal: what is recognised, what is left alone, and what the value becomes."""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from warmkernel.execution.directive import Directives, parse_directives
from warmkernel.execution.patch_literal import is_patch_program, transform_patch_literals
from warmkernel.execution.source_scan import split_lines

PATCH = "*** Begin Patch\n*** Delete File: old.py\n*** End Patch\n"
"""The smallest valid program; a literal holding it has the value `"\\n" + PATCH`."""


def run(source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(source, "<cell>", "exec"), namespace)
    return namespace


def converted_value(source: str, name: str = "p") -> str:
    """The value of `name` after the transform, which must have converted exactly one literal."""
    result = transform_patch_literals(source)
    assert result.converted == 1
    assert len(split_lines(result.source)) == len(split_lines(source))
    return run(result.source)[name]


# --- the program validator -------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(["*** Add File: a.py", "+x = 1", "+"], id="add with lines"),
        pytest.param(["*** Add File: empty.txt"], id="add without lines"),
        pytest.param(["*** Delete File: a.py"], id="delete"),
        pytest.param(["*** Update File: a.py", "@@", " ctx", "-old", "+new"], id="update with one hunk"),
        pytest.param(["*** Update File: a.py", "@@ def f():", "+x"], id="hunk header with text"),
        pytest.param(["*** Update File: a.py", "@@", "+x", "@@", "-y"], id="two hunks"),
        pytest.param(["*** Update File: a.py", "@@", " ", "-", "+"], id="bare marker lines"),
        pytest.param(["*** Update File: a.py", "*** Move to: b.py", "@@", "+x"], id="update with move"),
        pytest.param(["*** Update File: a.py", "@@", "+x", "*** End of File"], id="end of file"),
        pytest.param(
            ["*** Update File: a.py", "@@", "+x", "*** End of File", "@@", "-y"], id="end of file per hunk"
        ),
        pytest.param(
            [
                "*** Add File: a",
                "+1",
                "*** Delete File: b",
                "*** Update File: c",
                "@@",
                "+2",
                "*** Delete File: d",
            ],
            id="several operations",
        ),
        pytest.param(
            ["*** Add File: a", "+*** End Patch", "+# warmkernel: --wait 5"], id="markers as content"
        ),
    ],
)
def test_valid_programs_are_accepted(body: list[str]) -> None:
    assert is_patch_program(["*** Begin Patch", *body, "*** End Patch"])


@pytest.mark.parametrize(
    "body",
    [
        pytest.param([], id="no operation"),
        pytest.param([""], id="only an empty line"),
        pytest.param(["*** Add File: a", "+x", ""], id="empty line after add"),
        pytest.param(["*** Update File: a", "@@", "+x", "", "-y"], id="empty line in hunk"),
        pytest.param(["*** Add File: a", "x"], id="add line without plus"),
        pytest.param(["*** Add File: "], id="add without path"),
        pytest.param(["*** Add File:a"], id="add without space"),
        pytest.param(["*** Delete File:  "], id="delete with blank path"),
        pytest.param(["*** Delete File: a", "+x"], id="content after delete"),
        pytest.param(["*** Update File: a"], id="update without hunk"),
        pytest.param(["*** Update File: a", "*** Move to: b"], id="move without hunk"),
        pytest.param(["*** Update File: a", "*** Move to: ", "@@", "+x"], id="move without path"),
        pytest.param(["*** Update File: a", "@@", "+x", "*** Move to: b"], id="move after hunk"),
        pytest.param(["*** Update File: a", "+x"], id="hunk without header"),
        pytest.param(["*** Update File: a", "@@"], id="hunk header without lines"),
        pytest.param(["*** Update File: a", "@@", "@@", "+x"], id="empty hunk before another"),
        pytest.param(
            ["*** Update File: a", "@@", "+x", "*** End of File", "*** End of File"], id="end of file twice"
        ),
        pytest.param(["*** Update File: a", "*** End of File"], id="end of file without hunk"),
        pytest.param(["*** Add File: a", "*** End of File"], id="end of file after add"),
        pytest.param(["*** Rename File: a"], id="unknown operation"),
        pytest.param(["*** Delete File: a", "# warmkernel: --wait 5"], id="directive line"),
        pytest.param(["*** Delete File: a", "*** Begin Patch"], id="nested begin"),
        pytest.param([" *** Delete File: a"], id="indented operation"),
    ],
)
def test_invalid_programs_are_refused(body: list[str]) -> None:
    assert not is_patch_program(["*** Begin Patch", *body, "*** End Patch"])


@pytest.mark.parametrize(
    "lines",
    [
        pytest.param(["*** Delete File: a", "*** End Patch"], id="no begin"),
        pytest.param(["*** Begin Patch", "*** Delete File: a"], id="no end"),
        pytest.param(
            ["*** Begin Patch ", "*** Delete File: a", "*** End Patch"], id="begin with trailing space"
        ),
        pytest.param(
            ["*** Begin Patch", "*** Delete File: a", "*** End Patch "], id="end with trailing space"
        ),
    ],
)
def test_programs_need_exact_begin_and_end(lines: list[str]) -> None:
    assert not is_patch_program(lines)


# --- recognition in a cell -------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        *(
            pytest.param(f'p = {prefix}"""\n{PATCH}"""\n', id=f"prefix {prefix or 'none'}")
            for prefix in ["", "r", "f", "rf", "fr", "R", "F", "Rf", "fR", "RF"]
        ),
        pytest.param(f'p = r"""\n{PATCH}  \t"""\n', id="indented closing quotes"),
        pytest.param(f'p = r"""\n{PATCH}"""', id="closing quotes end the cell"),
        pytest.param(f'p = r"""\n{PATCH}"""  # the patch\n', id="comment after closing quotes"),
        pytest.param(f'p=r"""\n{PATCH}"""\n', id="opener after operator"),
        pytest.param(f'p = (\nr"""\n{PATCH}""")\n', id="opener at column 0"),
        pytest.param(f'p = "{{x}}" if False else r"""\n{PATCH}"""\n', id="after another literal on the line"),
        pytest.param(f'p = r"""\n{PATCH}"""\nq = """a"""\n', id="ordinary literal after"),
        pytest.param(
            f'q = """\n*** Begin Patch\n"""\np = r"""\n{PATCH}"""\n', id="after a refused candidate"
        ),
    ],
)
def test_accepted_literal_is_converted(source: str) -> None:
    assert converted_value(source) == "\n" + PATCH


@pytest.mark.parametrize(
    "source",
    [
        *(
            pytest.param(f'p = {prefix}"""\n{PATCH}"""\n', id=f"prefix {prefix}")
            for prefix in ["b", "B", "u", "U", "rb", "br", "Rb"]
        ),
        pytest.param(f"p = r'''\n{PATCH}'''\n", id="single-quote triple"),
        pytest.param(f'p = xr"""\n{PATCH}"""\n', id="identifier before prefix"),
        pytest.param(f'p = x"""\n{PATCH}"""\n', id="identifier before quotes"),
        pytest.param(f'p = 1"""\n{PATCH}"""\n', id="digit before quotes"),
        pytest.param(f'p = r""" \n{PATCH}"""\n', id="space after opener"),
        pytest.param(f'p = r"""x\n{PATCH}"""\n', id="text after opener"),
        pytest.param(f'p = r"""\n\n{PATCH}"""\n', id="empty line before begin"),
        pytest.param(f'p = r"""\n  {PATCH}"""\n', id="indented begin"),
        pytest.param('p = r"""\n*** Begin Patch\n*** Delete File: a\n"""\n', id="no end"),
        pytest.param('p = r"""\n*** Begin Patch\n*** Delete File: a\n*** End Patch', id="end at end of cell"),
        pytest.param(f'p = r"""\n{PATCH}x = """\n', id="code before closing quotes"),
        pytest.param(f'p = r"""\n{PATCH}\n"""\n', id="empty line before closing quotes"),
        pytest.param(f'p = r"""\n{PATCH}\'\'\'\n"""\n', id="closing line with single quotes"),
        pytest.param(
            'p = r"""\n*** Begin Patch\n*** Update File: a.py\n*** End Patch\n"""\n', id="update without hunk"
        ),
        pytest.param(
            'p = r"""\n*** Begin Patch\n# warmkernel: --wait 5\n*** Delete File: a\n*** End Patch\n"""\n',
            id="directive inside",
        ),
        pytest.param(f'# p = r"""\n{PATCH}"""\n', id="opener in a comment"),
        pytest.param(f"s = '''\np = r\"\"\"\n{PATCH}\"\"\"\n'''\n", id="opener inside another string"),
        pytest.param(f'%%bash\ncat > a.py <<EOF\np = r"""\n{PATCH}"""\nEOF\n', id="cell magic heredoc"),
        pytest.param(f'%%time\np = r"""\n{PATCH}"""\n', id="python cell magic"),
    ],
)
def test_refused_literal_is_left_exactly_as_written(source: str) -> None:
    result = transform_patch_literals(source)
    assert result.converted == 0
    assert result.source is source


# --- conversion ------------------------------------------------------------------------------

AWKWARD = (
    "*** Begin Patch\n"
    "*** Update File: src/app.py\n"
    "@@ def render(name):\n"
    '-    return f"{name}\\n"\n'
    '+    doc = """quoted"""\n'
    "+    return f'{name!r}\\t{{literal}}' + '\\\\'\n"
    "*** End Patch\n"
)


@pytest.mark.parametrize("prefix", ["", "r", "f", "rf"])
def test_embedded_quotes_backslashes_and_braces_are_kept_verbatim(prefix: str) -> None:
    source = f'name = "unused"\np = {prefix}"""\n{AWKWARD}"""\n'
    assert converted_value(source) == "\n" + AWKWARD


def test_value_runs_from_the_opener_break_to_the_break_after_end() -> None:
    source = f'p = r"""\n{PATCH}    """.strip()\n'
    assert converted_value(source) == PATCH.strip()


def test_two_literals_are_both_converted() -> None:
    source = f'a = r"""\n{AWKWARD}"""\nb = """\n{PATCH}"""\n'
    result = transform_patch_literals(source)
    assert result.converted == 2
    namespace = run(result.source)
    assert (namespace["a"], namespace["b"]) == ("\n" + AWKWARD, "\n" + PATCH)


def test_literal_as_a_call_argument() -> None:
    source = f'calls = [\n    str(r"""\n{AWKWARD}"""),\n    len(r"""\n{PATCH}"""),\n]\n'
    result = transform_patch_literals(source)
    assert result.converted == 2
    assert run(result.source)["calls"] == ["\n" + AWKWARD, len(PATCH) + 1]


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        pytest.param(".strip()", PATCH.strip(), id="method call"),
        pytest.param(" + tail", "\n" + PATCH + "!", id="concatenation"),
        pytest.param(' "tail"', "\n" + PATCH + "tail", id="adjacent literal"),
        pytest.param("[1:4]", "***", id="subscript"),
        pytest.param("\\\n.upper()", "\n" + PATCH.upper(), id="explicit continuation"),
    ],
)
def test_code_after_the_closing_quotes_applies_to_the_value(after: str, expected: str) -> None:
    source = f'tail = "!"\np = r"""\n{PATCH}"""{after}\n'
    assert converted_value(source) == expected


def test_adjacent_literal_before_the_opener_concatenates() -> None:
    assert converted_value(f'p = "head" r"""\n{PATCH}"""\n') == "head\n" + PATCH


def test_docstring_stays_a_docstring() -> None:
    source = f'def f():\n    r"""\n{PATCH}    """\n    return 1\n'
    assert converted_value(source, "f").__doc__ == "\n" + PATCH


def test_later_raise_reports_the_line_the_author_wrote() -> None:
    source = f'p = r"""\n{AWKWARD}""".strip()\n\nx = 1\nraise ValueError("here")\n'
    raise_line = source.splitlines().index('raise ValueError("here")') + 1
    result = transform_patch_literals(source)
    with pytest.raises(ValueError, match="here") as caught:
        exec(compile(result.source, "<cell-3>", "exec"), {})
    frame = traceback.extract_tb(caught.value.__traceback__)[-1]
    assert (frame.filename, frame.lineno, raise_line) == ("<cell-3>", 12, 12)


def test_statement_inside_a_block_keeps_its_indentation() -> None:
    source = f'if True:\n    p = r"""\n{PATCH}"""\n    q = 2\nr = 3\n'
    result = transform_patch_literals(source)
    assert run(result.source)["p"] == "\n" + PATCH
    assert result.source.splitlines()[-2:] == ["    q = 2", "r = 3"]


def test_exact_rendering() -> None:
    source = (
        'x = 0\np = f"""\n*** Begin Patch\n*** Add File: {a}.txt\n+it\'s\n*** End Patch\n""".strip()\ny = 1\n'
    )
    assert transform_patch_literals(source).source == (
        "x = 0\n"
        "p = '\\n' \\\n"
        "'*** Begin Patch\\n' \\\n"
        "'*** Add File: {a}.txt\\n' \\\n"
        '"+it\'s\\n" \\\n'
        "'*** End Patch\\n' \\\n"
        "   .strip()\n"
        "y = 1\n"
    )


@pytest.mark.parametrize("newline", ["\r\n", "\r"])
def test_other_line_breaks_are_kept_in_the_value(newline: str) -> None:
    source = f'p = r"""\n{AWKWARD}"""\nq = 1\n'.replace("\n", newline)
    result = transform_patch_literals(source)
    assert result.converted == 1
    assert newline in result.source
    assert run(result.source)["p"] == ("\n" + AWKWARD).replace("\n", newline)
    assert len(split_lines(result.source)) == len(split_lines(source))


# --- properties ------------------------------------------------------------------------------

NO_OPERATION_FRAGMENTS = [
    '"""', "'''", '"', "'", "r", "f", "b", "rb", "Rf", "x", "=", " ", "\t", "\n", "\r\n", "\r", "\\",
    "#", "(", ")", ".strip()", "%%", "{x}", "*** Begin Patch", "*** End Patch", "*** End of File", "@@",
    "+a", "-a", " a", "*** Move to: b", "# warmkernel: --wait 5",
]  # fmt: skip


@given(st.lists(st.sampled_from(NO_OPERATION_FRAGMENTS), max_size=40).map("".join))
def test_cell_without_a_file_operation_is_never_changed(source: str) -> None:
    result = transform_patch_literals(source)
    assert result.converted == 0
    assert result.source is source


@dataclass(frozen=True)
class Generated:
    source: str
    expected: str
    raise_line: int


line_text = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n"), max_size=12)
path = line_text.filter(lambda text: text.strip() != "")
hunk = st.tuples(
    line_text.map("@@".__add__),
    st.lists(st.tuples(st.sampled_from([" ", "+", "-"]), line_text).map("".join), min_size=1, max_size=4),
    st.lists(st.just("*** End of File"), max_size=1),
).map(lambda parts: [parts[0], *parts[1], *parts[2]])
operation = st.one_of(
    st.tuples(path.map("*** Add File: ".__add__), st.lists(line_text.map("+".__add__), max_size=4)).map(
        lambda parts: [parts[0], *parts[1]]
    ),
    path.map(lambda text: ["*** Delete File: " + text]),
    st.tuples(
        path.map("*** Update File: ".__add__),
        st.lists(path.map("*** Move to: ".__add__), max_size=1),
        st.lists(hunk, min_size=1, max_size=3),
    ).map(lambda parts: [parts[0], *parts[1], *(line for lines in parts[2] for line in lines)]),
)


@st.composite
def patch_cells(draw: st.DrawFn) -> Generated:
    """A cell whose literal holds a random valid program, with random breaks and trailing code."""
    body = [line for lines in draw(st.lists(operation, min_size=1, max_size=4)) for line in lines]
    program = ["*** Begin Patch", *body, "*** End Patch"]
    breaks = draw(
        st.lists(st.sampled_from(["\n", "\r\n", "\r"]), min_size=len(program) + 1, max_size=len(program) + 1)
    )
    prefix = draw(st.sampled_from(["", "r", "f", "rf", "fr", "R", "Fr"]))
    indent = draw(st.sampled_from(["", "  ", "\t"]))
    after, transform = draw(
        st.sampled_from(
            [
                ("", lambda v: v),
                (".strip()", str.strip),
                (" + 'z'", lambda v: v + "z"),
                ("  # c", lambda v: v),
            ]
        )
    )
    value = breaks[0] + "".join(line + newline for line, newline in zip(program, breaks[1:], strict=True))
    source = f'p = {prefix}"""{value}{indent}"""{after}\nx = 1\nraise KeyError("k")\n'
    return Generated(source, transform(value), raise_line=len(program) + 4)


@given(patch_cells())
def test_generated_programs_keep_their_exact_text_and_line_numbers(cell: Generated) -> None:
    result = transform_patch_literals(cell.source)
    assert result.converted == 1
    assert len(split_lines(result.source)) == len(split_lines(cell.source))
    namespace: dict[str, Any] = {}
    with pytest.raises(KeyError) as caught:
        exec(compile(result.source, "<cell>", "exec"), namespace)
    assert namespace["p"] == cell.expected
    assert traceback.extract_tb(caught.value.__traceback__)[-1].lineno == cell.raise_line


noise = st.lists(st.sampled_from(NO_OPERATION_FRAGMENTS), max_size=12).map("".join)


@given(st.lists(noise | patch_cells().map(lambda cell: cell.source), max_size=5).map("".join))
def test_transform_keeps_line_count_and_is_idempotent(source: str) -> None:
    result = transform_patch_literals(source)
    assert len(split_lines(result.source)) == len(split_lines(source))
    if result.converted == 0:
        assert result.source is source
    assert transform_patch_literals(result.source).converted == 0


def test_directive_after_a_patch_with_embedded_quotes_is_read_from_the_transformed_cell() -> None:
    # Read as Python, the embedded quotes leave the directive inside a string.
    source = (
        'p = r"""\n*** Begin Patch\n*** Add File: a.py\n+x = """\n*** End Patch\n"""\n# warmkernel: --wait 5'
    )
    assert parse_directives(source) == Directives()
    assert parse_directives(transform_patch_literals(source).source) == Directives(wait_seconds=5.0)
