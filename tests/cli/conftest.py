"""The CLI as a subprocess, with a private runtime directory so sessions never leak between runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import daemon_env, private_root, stop_daemons
from warmkernel.daemon.discovery import RUNTIME_DIR_ENV


@dataclass(frozen=True)
class Cli:
    """Runs `warmkernel ...` in a workspace, its daemons' directories under `root`."""

    workspace: Path
    root: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    """Variables set beside this test's environment (e.g. a PATH with more tools)."""

    @property
    def runtime(self) -> Path:
        return Path(daemon_env(self.root)[RUNTIME_DIR_ENV])

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, **self.extra_env, **daemon_env(self.root)}

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


@pytest.fixture
def cli(tmp_path: Path, private_daemons: Path) -> Iterator[Cli]:
    """A fresh workspace, with this test's daemon directories; its daemons are stopped afterwards."""
    (tmp_path / "ws").mkdir()
    fresh = Cli(tmp_path / "ws", private_daemons)
    yield fresh
    fresh("stop", "--all")


@pytest.fixture(scope="module")
def daemon_cli(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cli]:
    """A workspace with a running daemon shared by a module's tests."""
    workspace = tmp_path_factory.mktemp("cli")
    shared = Cli(workspace, private_root())
    assert shared("start").returncode == 0
    yield shared
    stop_daemons(shared.root)
    shutil.rmtree(shared.root, ignore_errors=True)
