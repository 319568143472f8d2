"""The `# warmkernel:` directive grammar, one snippet per case."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from warmkernel.errors import WarmkernelError
from warmkernel.execution.directive import Directives, kernel_source, parse_directives


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param("x = 1\n", Directives(), id="no directive"),
        pytest.param("", Directives(), id="empty cell"),
        pytest.param("# warmkernel: --wait 30\n", Directives(wait_seconds=30.0), id="wait integer"),
        pytest.param("# warmkernel: --wait 2.5", Directives(wait_seconds=2.5), id="wait decimal, no newline"),
        pytest.param("# warmkernel: --wait 0.001\n", Directives(wait_seconds=0.001), id="wait small decimal"),
        pytest.param(
            "# warmkernel: --wait 00.5\n", Directives(wait_seconds=0.5), id="wait leading zeros decimal"
        ),
        pytest.param("# warmkernel: --full-output\n", Directives(full_output=True), id="full output"),
        pytest.param("# warmkernel: --silence 30\n", Directives(silence_seconds=30.0), id="silence"),
        pytest.param(
            "# warmkernel: --wait 600 --silence 2.5\n",
            Directives(wait_seconds=600.0, silence_seconds=2.5),
            id="wait and silence",
        ),
        pytest.param(
            "# warmkernel: --wait 5 --full-output\n",
            Directives(wait_seconds=5.0, full_output=True),
            id="both on one line",
        ),
        pytest.param(
            "# warmkernel: --full-output --wait 5\n",
            Directives(wait_seconds=5.0, full_output=True),
            id="both on one line, flag first",
        ),
        pytest.param(
            "# warmkernel: --wait 5\nx = 1\n# warmkernel: --full-output\n",
            Directives(wait_seconds=5.0, full_output=True),
            id="two lines combine",
        ),
        pytest.param(
            "x = 1  # warmkernel: --wait 5\n", Directives(), id="trailing comment is not a directive"
        ),
        pytest.param("#warmkernel: --wait 5\n", Directives(), id="no space after hash is not a directive"),
        pytest.param("  # warmkernel: --wait 5\n", Directives(), id="indented is not a directive"),
        pytest.param("# warmkernels: --wait 5\n", Directives(), id="other word is not a directive"),
        pytest.param("# Warmkernel: --wait 5\n", Directives(), id="capitalised is not a directive"),
        pytest.param(
            's = """\n# warmkernel: --wait 5\n"""\n', Directives(), id="inside triple-quoted string"
        ),
        pytest.param(
            "s = '''\n# warmkernel: --wiat\n'''\n", Directives(), id="bad directive inside string is ignored"
        ),
        pytest.param(
            's = "a\\\n# warmkernel: --wait 5"\n', Directives(), id="inside backslash-continued string"
        ),
        pytest.param(
            's = "unterminated\n# warmkernel: --wait 5\n',
            Directives(wait_seconds=5.0),
            id="after unterminated single-quoted string",
        ),
        pytest.param(
            '%time s = """\n# warmkernel: --wait 5\n"""\n',
            Directives(),
            id="line magic keeps string tracking",
        ),
        pytest.param(
            "%%bash\ncat <<EOF\n'''\n# warmkernel: --wait 5\nEOF\n",
            Directives(wait_seconds=5.0),
            id="cell magic scanned whole",
        ),
        pytest.param(
            "# warmkernel: --wait 5\r\n# warmkernel: --full-output\r\nx = 1\r\n",
            Directives(wait_seconds=5.0, full_output=True),
            id="CRLF",
        ),
        pytest.param("# warmkernel: --wait 5\r# warmkernel: --full-output\r", Directives(5.0, True), id="CR"),
        pytest.param('s = """\r\n# warmkernel: --wait 5\r\n"""\r\n', Directives(), id="CRLF inside string"),
    ],
)
def test_directives_are_read(source: str, expected: Directives) -> None:
    assert parse_directives(source) == expected


VALID = 'valid form: "# warmkernel: --wait SECONDS --silence SECONDS --full-output"'
VALID_OPTIONS = "valid options: --wait SECONDS, --silence SECONDS, --full-output"
SECONDS_FORM = "SECONDS is digits with an optional decimal part, e.g. 30 or 2.5"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        pytest.param("# warmkernel:", f'line 1: no option after "# warmkernel:"; {VALID}', id="no option"),
        pytest.param(
            "x = 1\n# warmkernel: \n",
            f'line 2: no option after "# warmkernel:"; {VALID}',
            id="no option, space",
        ),
        pytest.param(
            "# warmkernel:--wait 5",
            'line 1: bad spacing (no space after the colon) in "# warmkernel:--wait 5"',
            id="no space after colon",
        ),
        pytest.param(
            "# warmkernel:  --wait 5",
            'line 1: bad spacing (two spaces after the colon) in "# warmkernel:  --wait 5"',
            id="two spaces after colon",
        ),
        pytest.param(
            "# warmkernel: --wait  5",
            'line 1: bad spacing (two spaces between options) in "# warmkernel: --wait  5"',
            id="two spaces between",
        ),
        pytest.param(
            "# warmkernel: --wait\t5",
            'line 1: bad spacing (a tab) in "# warmkernel: --wait\\t5"',
            id="tab",
        ),
        pytest.param(
            "# warmkernel:\t--wait 5",
            'line 1: bad spacing (no space after the colon) in "# warmkernel:\\t--wait 5"',
            id="tab after colon",
        ),
        pytest.param(
            "# warmkernel: --wait 5 \n",
            'line 1: bad spacing (a trailing space) in "# warmkernel: --wait 5 "',
            id="trailing space",
        ),
        pytest.param(
            "# warmkernel: --wait\u00a05",
            'line 1: bad spacing (whitespace other than a space) in "# warmkernel: --wait\u00a05"',
            id="no-break space",
        ),
        pytest.param(
            "# warmkernel: --wait",
            f"line 1: --wait needs a value: --wait SECONDS; {SECONDS_FORM}",
            id="missing value at end",
        ),
        pytest.param(
            "# warmkernel: --wait --full-output",
            "line 1: --wait needs a value: --wait SECONDS",
            id="missing value before option",
        ),
        pytest.param("# warmkernel: --wait 1e3", 'line 1: invalid value "1e3" for --wait', id="exponent"),
        pytest.param(
            "# warmkernel: --wait .5", 'line 1: invalid value ".5" for --wait', id="no integer part"
        ),
        pytest.param(
            "# warmkernel: --wait 5.", 'line 1: invalid value "5." for --wait', id="no decimal part"
        ),
        pytest.param("# warmkernel: --wait 01", 'line 1: invalid value "01" for --wait', id="leading zero"),
        pytest.param("# warmkernel: --wait inf", 'line 1: invalid value "inf" for --wait', id="inf"),
        pytest.param("# warmkernel: --wait nan", 'line 1: invalid value "nan" for --wait', id="nan"),
        pytest.param("# warmkernel: --wait -5", 'line 1: invalid value "-5" for --wait', id="negative"),
        pytest.param("# warmkernel: --wait 5s", 'line 1: invalid value "5s" for --wait', id="unit suffix"),
        pytest.param(
            "# warmkernel: --wait \uff15", 'line 1: invalid value "\uff15" for --wait', id="non-ASCII digit"
        ),
        pytest.param(
            "# warmkernel: --wait " + "9" * 400,
            "is too large; SECONDS is digits",
            id="overflows to infinity",
        ),
        pytest.param(
            "# warmkernel: --wait 0",
            'line 1: value "0" for --wait must be greater than 0, e.g. --wait 30',
            id="zero",
        ),
        pytest.param(
            "# warmkernel: --wait 0.0",
            'line 1: value "0.0" for --wait must be greater than 0',
            id="zero decimal",
        ),
        pytest.param(
            "x = 1\n# warmkernel: --wiat 5",
            f'line 2: unknown option "--wiat"; {VALID_OPTIONS}',
            id="unknown option",
        ),
        pytest.param(
            "# warmkernel: wait 5",
            f'line 1: unknown option "wait"; {VALID_OPTIONS}',
            id="option without dashes",
        ),
        pytest.param(
            "# warmkernel: --full-output 5",
            f'line 1: unknown option "5"; {VALID_OPTIONS}',
            id="value after flag",
        ),
        pytest.param(
            "# warmkernel: --wait 5 --wait 6",
            "line 1: --wait repeated (first given on line 1); each option may appear once per cell",
            id="repeated on one line",
        ),
        pytest.param(
            "# warmkernel: --full-output\nx = 1\n# warmkernel: --full-output",
            "line 3: --full-output repeated (first given on line 1)",
            id="repeated across lines",
        ),
        pytest.param(
            "# warmkernel: --silence 5\n# warmkernel: --silence 9",
            "line 2: --silence repeated (first given on line 1)",
            id="silence repeated",
        ),
        pytest.param(
            "# warmkernel: --silence 0", 'line 1: value "0" for --silence must be greater', id="silence 0"
        ),
        pytest.param(
            "# warmkernel: --silence --full-output", "line 1: --silence needs a value", id="silence no value"
        ),
        pytest.param(
            "%%bash\n# warmkernel: --wiat 5\n",
            'line 2: unknown option "--wiat"',
            id="error in cell magic",
        ),
        pytest.param(
            "x = 1\r\n# warmkernel: --wait 0\r\n",
            'line 2: value "0" for --wait must be greater than 0',
            id="CRLF line number",
        ),
    ],
)
def test_invalid_directives_are_refused_with_line_and_valid_form(source: str, message: str) -> None:
    with pytest.raises(WarmkernelError) as caught:
        parse_directives(source)
    assert caught.value.code == "invalid_directive"
    assert message in caught.value.message


seconds_text = st.one_of(
    st.integers(min_value=1, max_value=10**9).map(str),
    st.tuples(st.integers(0, 10**6), st.text("0123456789", min_size=1, max_size=6))
    .filter(lambda parts: parts[0] > 0 or parts[1].strip("0") != "")
    .map(lambda parts: f"{parts[0]}.{parts[1]}"),
)


@st.composite
def directive_cells(draw: st.DrawFn) -> tuple[str, Directives]:
    """A cell holding any valid combination of options, in any order, split over any lines."""
    wait = draw(st.none() | seconds_text)
    silence = draw(st.none() | seconds_text)
    full_output = draw(st.booleans())
    words = (
        ([["--wait", wait]] if wait is not None else [])
        + ([["--silence", silence]] if silence is not None else [])
        + ([["--full-output"]] if full_output else [])
    )
    words = draw(st.permutations(words))
    lines: list[list[str]] = []
    for option in words:
        if not lines or draw(st.booleans()):
            lines.append([])
        lines[-1].extend(option)
    filler = st.sampled_from(
        [
            "x = 1",
            "# comment",
            "",
            "  # warmkernel: --bogus",
            "s = '# warmkernel: --x'",
            's = """\n# warmkernel:\n"""',
        ]
    )
    cell_lines: list[str] = []
    for line in lines:
        cell_lines.extend(draw(st.lists(filler, max_size=2)))
        cell_lines.append("# warmkernel: " + " ".join(line))
    newline = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    expected = Directives(
        wait_seconds=None if wait is None else float(wait),
        full_output=full_output,
        silence_seconds=None if silence is None else float(silence),
    )
    return newline.join(cell_lines), expected


@given(directive_cells())
def test_any_valid_combination_of_options_round_trips(cell: tuple[str, Directives]) -> None:
    source, expected = cell
    assert parse_directives(source) == expected


@pytest.mark.parametrize(
    ("source", "runs"),
    [
        ("x = 1\n# warmkernel: --wait 5", "x = 1\n# warmkernel: --wait 5"),  # Python: a comment, kept
        ("%%writefile out.txt\nhello\n# warmkernel: --wait 5", "%%writefile out.txt\nhello\n"),
        ("%%bash\r\n# warmkernel: --wait 5\r\necho hi\r\n", "%%bash\r\necho hi\r\n"),
    ],
    ids=["python", "cell magic", "cell magic, CRLF"],
)
def test_a_cell_magic_runs_without_its_directive_lines(source: str, runs: str) -> None:
    assert kernel_source(source) == runs
