"""The CLI as a subprocess, with a private runtime directory so sessions never leak between runs."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class Cli:
    """Runs `warmkernel ...` in a workspace with its own runtime directory."""

    workspace: Path
    runtime: Path

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "WARMKERNEL_RUNTIME_DIR": str(self.runtime)}

    def __call__(
        self, *args: str, stdin: str | None = None, timeout: float = 90
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "warmkernel", *args],
            cwd=self.workspace,
            env=self.env,
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )


def make_cli(root: Path) -> Cli:
    (root / "ws").mkdir()
    return Cli(root / "ws", root / "rt")


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    """A fresh workspace and runtime directory; any daemon started in it is stopped afterwards."""
    fresh = make_cli(tmp_path)
    yield fresh
    fresh("stop")


@pytest.fixture(scope="module")
def daemon_cli(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cli]:
    """A workspace with a running daemon shared by a module's tests."""
    shared = make_cli(tmp_path_factory.mktemp("cli"))
    assert shared("start").returncode == 0
    yield shared
    shared("stop")
