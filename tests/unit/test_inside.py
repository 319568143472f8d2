"""The programs of `kernel/inside` run in the user's kernel, which may lack warmkernel and every
third-party package, and the relay's byte pump runs on a bare interpreter (`-S -I`): each may
import only the standard library."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from warmkernel.daemon import relay
from warmkernel.kernel import inside

FILES = sorted(Path(inside.__file__).parent.glob("*.py"))
BARE = [*FILES, relay.PUMP]


def foreign_imports(source: str) -> list[str]:
    """Every import in `source` that is relative or outside the standard library."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules = [f"{'.' * node.level}{node.module or ''}"]
        else:
            continue
        stdlib = sys.stdlib_module_names
        found.extend(name for name in modules if name.startswith(".") or name.split(".")[0] not in stdlib)
    return found


def test_the_check_catches_relative_warmkernel_and_third_party_imports() -> None:
    source = "import os, numpy\nfrom . import common\nfrom warmkernel.kernel import inside\nimport json.tool"
    assert foreign_imports(source) == ["numpy", ".", "warmkernel.kernel"]


def test_every_program_is_here() -> None:
    assert {path.stem for path in FILES} == {
        "__init__",
        "common",
        "summaries",
        "cell_facts",
        "parent_watch",
        "stamps",
    }


@pytest.mark.parametrize("path", BARE, ids=lambda path: path.name)
def test_programs_import_only_the_standard_library(path: Path) -> None:
    assert foreign_imports(path.read_text(encoding="utf-8")) == []
