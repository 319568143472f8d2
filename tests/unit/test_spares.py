"""The environment fingerprint that decides whether a spare kernel is stale, and the spare count flag."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from warmkernel.cli import main
from warmkernel.kernel.spares import fingerprint

_LONG_AGO_NS = 1_600_000_000 * 10**9


@dataclass(frozen=True)
class Case:
    name: str
    change: Callable[[Path, Path], object]
    """Given the site directory and an unrelated directory, change something."""
    stale: bool


def _edit_pth(site: Path, other: Path) -> None:
    (site / "existing.pth").write_text("/somewhere/else\n")


CASES = [
    Case("a .pth file appears", lambda site, other: (site / "marker.pth").write_text("import os\n"), True),
    Case("a package is installed", lambda site, other: (site / "newpkg").mkdir(), True),
    Case("a package is removed", lambda site, other: shutil.rmtree(site / "oldpkg"), True),
    Case("a .pth file is edited in place", _edit_pth, True),
    Case("a .pth file is removed", lambda site, other: (site / "existing.pth").unlink(), True),
    Case(
        "a file inside a package changes",
        lambda site, other: (site / "oldpkg" / "mod.py").write_text("x = 2\n"),
        False,
    ),
    Case(
        "a .pth file appears in an unrelated directory",
        lambda site, other: (other / "x.pth").write_text(""),
        False,
    ),
    Case("nothing changes", lambda site, other: None, False),
]


def _age(*paths: Path) -> None:
    """Date the paths far back, so that a change now gives a new mtime on any clock resolution."""
    for path in paths:
        os.utime(path, ns=(_LONG_AGO_NS, _LONG_AGO_NS))


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_fingerprint_changes_exactly_when_a_new_interpreter_would_import_differently(
    tmp_path: Path, case: Case
) -> None:
    site, other = tmp_path / "site-packages", tmp_path / "elsewhere"
    (site / "oldpkg").mkdir(parents=True)
    other.mkdir()
    (site / "oldpkg" / "mod.py").write_text("x = 1\n")
    (site / "existing.pth").write_text("/somewhere\n")
    _age(site / "oldpkg" / "mod.py", site / "oldpkg", site / "existing.pth", site, other)
    before = fingerprint([site])
    case.change(site, other)
    assert (fingerprint([site]) != before) is case.stale


def test_a_missing_site_directory_counts_and_its_creation_is_a_change(tmp_path: Path) -> None:
    user_site = tmp_path / "user-site"
    before = fingerprint([user_site])
    assert before[0].mtime_ns == -1
    user_site.mkdir()
    assert fingerprint([user_site]) != before


def test_fingerprint_records_each_directory_and_its_pth_files_by_name(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    (second / "z.pth").write_text("")
    (second / "m.pth").write_text("")
    (second / "not-a-pth.txt").write_text("")
    recorded = fingerprint([first, second])
    assert [directory.path for directory in recorded] == [str(first), str(second)]
    assert recorded[0].pth_files == ()
    assert [name for name, _ in recorded[1].pth_files] == ["m.pth", "z.pth"]


@pytest.mark.parametrize("given", ["-1", "two"])
def test_spare_kernels_flag_refuses_anything_but_a_count(
    capsys: pytest.CaptureFixture[str], given: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["mcp", "--spare-kernels", given])
    assert exited.value.code == 2
    assert "argument --spare-kernels:" in capsys.readouterr().err
