"""The hand scanner: string literals and physical lines of cells the tokenizer would refuse."""

from __future__ import annotations

import pytest

from warmkernel.execution.source_scan import (
    Line,
    StringLiteral,
    lines_starting_in_string,
    split_lines,
    string_literals,
)


def spans(source: str) -> list[str]:
    return [source[literal.start : literal.end] for literal in string_literals(source)]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param("x = 'a' + \"b\"", ["'a'", '"b"'], id="single quotes"),
        pytest.param("x = '''a\n'b'\n''' + \"\"\"c\"\"\"", ["'''a\n'b'\n'''", '"""c"""'], id="triple quotes"),
        pytest.param("x = '' + \"\"", ["''", '""'], id="empty strings"),
        pytest.param("'''''' ''", ["''''''", "''"], id="empty triple then empty"),
        pytest.param(r"x = 'a\'b' + 'c'", [r"'a\'b'", "'c'"], id="escaped quote"),
        pytest.param(r"x = 'a\\' + 'c'", [r"'a\\'", "'c'"], id="escaped backslash"),
        pytest.param(
            r"x = r'a\'b' + 'c'", [r"r'a\'b'", "'c'"], id="raw string backslash still escapes quote"
        ),
        pytest.param(r"x = r'a\\' + 'c'", [r"r'a\\'", "'c'"], id="raw string double backslash ends"),
        pytest.param('x = """a\\"""b"""', ['"""a\\"""b"""'], id="escaped quote in triple"),
        pytest.param("x = 'a\\\nb'", ["'a\\\nb'"], id="backslash newline continues single-quoted"),
        pytest.param("x = 'a\\\r\nb'", ["'a\\\r\nb'"], id="backslash CRLF continues single-quoted"),
        pytest.param("x = 'abc\ny = 'd'", ["'abc", "'d'"], id="unterminated single ends at newline"),
        pytest.param("x = 'abc\r\ny = 'd'", ["'abc", "'d'"], id="unterminated single ends at CRLF"),
        pytest.param("x = '''abc\ny = 'd'", ["'''abc\ny = 'd'"], id="unterminated triple runs to end"),
        pytest.param("x = 'abc\\", ["'abc\\"], id="backslash at end of source"),
        pytest.param("# it's a comment\nx = 'a'", ["'a'"], id="quote in comment opens nothing"),
        pytest.param("x = '#' # 'no'\r'y'", ["'#'", "'y'"], id="hash in string, comment to CR"),
        pytest.param('!echo "it\'s"', ['"it\'s"'], id="shell escape"),
        pytest.param('print"x"', ['"x"'], id="name before quote is not a prefix"),
    ],
)
def test_string_literal_spans(source: str, expected: list[str]) -> None:
    assert spans(source) == expected


@pytest.mark.parametrize(
    ("source", "prefix", "quote"),
    [
        *(
            pytest.param(f"x = {prefix}'a'", prefix, "'", id=f"prefix {prefix}")
            for prefix in [
                "r",
                "u",
                "b",
                "f",
                "br",
                "rb",
                "fr",
                "rf",
                "R",
                "U",
                "B",
                "F",
                "Br",
                "rB",
                "FR",
                "Rf",
            ]
        ),
        pytest.param('x = rb"""a"""', "rb", '"""', id="prefix with triple quote"),
        pytest.param("x = ur'a'", "", "'", id="ur is not a prefix"),
        pytest.param("x = xr'a'", "", "'", id="word ending in r is not a prefix"),
        pytest.param("x = 1r'a'", "", "'", id="number before quote is not a prefix"),
    ],
)
def test_prefixes_are_part_of_the_literal(source: str, prefix: str, quote: str) -> None:
    (literal,) = string_literals(source)
    assert (literal.prefix, literal.quote, literal.terminated, literal.end) == (
        prefix,
        quote,
        True,
        len(source),
    )
    assert source[literal.start : literal.body_start] == prefix + quote


def test_literal_fields() -> None:
    source = "x = Rb'a'\ny = '''b"
    assert list(string_literals(source)) == [
        StringLiteral(start=4, end=9, prefix="Rb", quote="'", terminated=True),
        StringLiteral(start=14, end=18, prefix="", quote="'''", terminated=False),
    ]


def test_scanning_from_an_offset_treats_it_as_code() -> None:
    source = "'a' 'b' 'c'"
    assert [literal.start for literal in string_literals(source, 4)] == [4, 8]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param("", [], id="empty"),
        pytest.param("a", [Line(1, 0, "a", "")], id="no break"),
        pytest.param("a\n", [Line(1, 0, "a", "\n")], id="final break adds no line"),
        pytest.param(
            "a\r\nb\rc\n\nd",
            [
                Line(1, 0, "a", "\r\n"),
                Line(2, 3, "b", "\r"),
                Line(3, 5, "c", "\n"),
                Line(4, 7, "", "\n"),
                Line(5, 8, "d", ""),
            ],
            id="mixed breaks",
        ),
        pytest.param("a\x0cb\u2028c", [Line(1, 0, "a\x0cb\u2028c", "")], id="only Python's breaks split"),
    ],
)
def test_split_lines(source: str, expected: list[Line]) -> None:
    assert split_lines(source) == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param("a\nb\n", set(), id="no strings"),
        pytest.param('x = """\nb\n"""\nc\n', {2, 3}, id="triple-quoted body and closing line"),
        pytest.param('x = """a"""\nb\n', set(), id="one-line triple"),
        pytest.param("x = 'a\\\nb'\nc\n", {2}, id="backslash-continued single quote"),
        pytest.param("x = 'a\nb\n", set(), id="unterminated single quote"),
        pytest.param("x = '''a\nb\nc", {2, 3}, id="unterminated triple to the end"),
        pytest.param("# '''\nb\n", set(), id="quotes in a comment"),
        pytest.param('x = """\r\nb\r\n"""\r\n', {2, 3}, id="CRLF"),
    ],
)
def test_lines_starting_in_string(source: str, expected: set[int]) -> None:
    assert lines_starting_in_string(source) == expected


@pytest.mark.xfail(reason="f-string replacement fields reusing the outer quote (3.12+) are not tracked")
def test_fstring_field_reusing_outer_quote_is_one_literal() -> None:
    assert spans('f"{d["k"]}" + "x"') == ['f"{d["k"]}"', '"x"']
