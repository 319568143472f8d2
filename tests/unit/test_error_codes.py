"""Every error code is part of the contract: each one is asserted by some test of the suite."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

from warmkernel.errors import ErrorCode

TESTS = Path(__file__).parents[1]


def _codes() -> list[str]:
    return [code for alias in get_args(ErrorCode) for code in get_args(alias)]


def test_every_error_code_is_asserted_by_a_test() -> None:
    sources = "\n".join(
        path.read_text(encoding="utf-8") for path in TESTS.rglob("*.py") if path != Path(__file__)
    )
    unasserted = [code for code in _codes() if not re.search(rf"\b{code}\b", sources)]
    assert unasserted == []


def test_error_codes_are_unique_snake_case_words() -> None:
    codes = _codes()
    assert len(codes) == len(set(codes))
    assert all(re.fullmatch(r"[a-z]+(_[a-z]+)*", code) for code in codes)
