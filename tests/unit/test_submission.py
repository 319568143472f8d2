"""A cell is parsed once, at the face: patch literals, then directives."""

from __future__ import annotations

import pytest

from warmkernel.errors import WarmkernelError
from warmkernel.execution.directive import Directives
from warmkernel.execution.submission import parse_cell


def test_a_plain_cell_runs_as_sent_with_no_directives() -> None:
    submission = parse_cell("x = 1\nx")
    assert (submission.source, submission.runs) == ("x = 1\nx", "x = 1\nx")
    assert (submission.directives, submission.patch_literals) == (Directives(), 0)


def test_a_directive_after_a_patch_literal_is_read_and_the_record_keeps_the_source() -> None:
    source = (
        'patch = """\n*** Begin Patch\n*** Add File: a.txt\n+it\'s "odd\n*** End Patch\n"""\n'
        "# warmkernel: --wait 5\n"
    )
    submission = parse_cell(source)
    assert submission.directives == Directives(wait_seconds=5.0)
    assert submission.patch_literals == 1
    assert submission.source == source and submission.runs != source


def test_a_cell_magic_runs_without_its_directive_lines() -> None:
    submission = parse_cell("%%writefile out.txt\n# warmkernel: --full-output\nhello\n")
    assert submission.directives == Directives(full_output=True)
    assert "warmkernel" not in submission.runs and "hello" in submission.runs


def test_a_bad_directive_is_refused_with_its_line() -> None:
    with pytest.raises(WarmkernelError) as caught:
        parse_cell("x = 1\n# warmkernel: --wait\n")
    assert caught.value.code == "invalid_directive" and caught.value.message.startswith("line 2:")
