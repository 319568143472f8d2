"""The layout holds: every module of src/warmkernel stays small, and its file name is its own.

A module owns one noun, so it stays under `MODULE_LINES`; a program that runs inside the
kernel (standard library only, sent whole as text) under `INSIDE_LINES`. No file name is used
twice, and a module named like a layer package lives in that package (`session/session.py`),
so a name says where to look. `OVER_THE_LIMIT` lists the known exceptions as strict xfails: each starts
to fail the day its split lands, and then its row goes.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PACKAGE = ROOT / "src" / "warmkernel"
MODULE_LINES = 650
INSIDE = Path("kernel", "inside")
INSIDE_LINES = 900

OVER_THE_LIMIT: dict[Path, str] = {}
"""Modules over their limit today, with the work that brings each under it."""

MODULES = sorted(path.relative_to(PACKAGE) for path in PACKAGE.rglob("*.py"))
NAMED = [module for module in MODULES if module.name != "__init__.py"]


def _layers() -> list[str]:
    """The layer packages, as pyproject.toml's layers contract names them."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = (c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")
    return [layer.removeprefix("warmkernel.") for layer in contract["layers"]]


LAYERS = _layers()


def _sized(module: Path) -> pytest.ParameterSet:
    reason = OVER_THE_LIMIT.get(module)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(module, marks=marks, id=module.as_posix())


def _limit(module: Path) -> int:
    return INSIDE_LINES if module.is_relative_to(INSIDE) else MODULE_LINES


@pytest.mark.parametrize("module", [_sized(module) for module in MODULES])
def test_module_stays_under_its_line_limit(module: Path) -> None:
    lines = len((PACKAGE / module).read_text().splitlines())
    assert lines <= _limit(module), f"{module} has {lines} lines; split it to at most {_limit(module)}"


@pytest.mark.parametrize("module", NAMED, ids=Path.as_posix)
def test_no_other_module_shares_its_file_name(module: Path) -> None:
    twins = [other.as_posix() for other in NAMED if other.name == module.name and other != module]
    assert not twins, f"{module} shares its file name with {twins}"


@pytest.mark.parametrize("module", NAMED, ids=Path.as_posix)
def test_a_module_named_like_a_layer_lives_in_that_layer(module: Path) -> None:
    if module.stem in LAYERS:
        assert module.parts[0] == module.stem, f"{module} is named like the layer package {module.stem}/"


def test_every_known_exception_names_a_module() -> None:
    assert set(OVER_THE_LIMIT) <= set(MODULES), "a split landed: drop its row from OVER_THE_LIMIT"


def test_each_layer_of_the_contract_is_a_package() -> None:
    assert LAYERS, "pyproject.toml has no layers contract to read the layer packages from"
    assert [layer for layer in LAYERS if not (PACKAGE / layer / "__init__.py").is_file()] == []
