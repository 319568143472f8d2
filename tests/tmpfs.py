"""A small tmpfs for tests of a full disk (root only): mounted over a directory, always unmounted."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")

_CHUNK = b"\0" * 65536


@contextlib.contextmanager
def small_tmpfs(path: Path, size: str) -> Iterator[Path]:
    """`path` (created) on a tmpfs of `size` (`2m`) while the block runs."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        if subprocess.run(["umount", str(path)], check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], check=True)  # a process still holds a file


def grow(path: Path, size: str) -> None:
    """Give the tmpfs at `path` more room (its files stay)."""
    subprocess.run(["mount", "-o", f"remount,size={size}", str(path)], check=True)


def fill(path: Path) -> Path:
    """Take every byte left on the file system of directory `path`: the file that holds them."""
    filler = path / "filler"
    with contextlib.suppress(OSError), open(filler, "wb", buffering=0) as file:
        while True:
            file.write(_CHUNK)
    return filler
