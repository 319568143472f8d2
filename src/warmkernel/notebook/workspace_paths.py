"""Paths callers give for files of the workspace: checked once as text, and walked again when a
file is written, so that a symlink swapped in after the check cannot lead the write out.

`checked_path` refuses, naming the parameter, what no file can be called: a NUL byte, text
that is not UTF-8 (a lone surrogate), a part longer than the file system's NAME_MAX, a path
longer than its PATH_MAX. `real_inside` resolves a path at write time and refuses one that now
leads out of the workspace; `directory_beneath` opens its directory one part at a time from the
workspace without following a symlink, so a part swapped after that resolution is an error
(`ELOOP`, `ENOTDIR`), never a way out.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from warmkernel.errors import WarmkernelError

_QUOTED_CHARS = 200
"""Longer paths are clipped where messages quote them."""
_NAME_MAX, _PATH_MAX = 255, 4096
"""The limits where the file system does not say its own (Linux's)."""


def quoted(given: str) -> str:
    """`given` as messages quote it: its repr, clipped when it is long."""
    if len(given) <= _QUOTED_CHARS:
        return repr(given)
    return f"{given[:_QUOTED_CHARS]!r}... ({len(given)} characters)"


def checked_path(workspace: Path, given: str, param: str) -> Path:
    """`given` (relative to the workspace, or absolute) as a normalised absolute path;
    `invalid_arguments` naming `param` when no file can have that name."""
    path = Path(os.path.normpath(workspace / given))
    why = _unusable(given, path, workspace)
    if why is not None:
        raise WarmkernelError(
            "invalid_arguments",
            f'{param} {quoted(given)} {why}; give a path relative to the workspace, such as "analysis.ipynb"',
        )
    return path


def _unusable(given: str, path: Path, workspace: Path) -> str | None:
    """Why no file can be called `given` (`path` once joined to the workspace), or None."""
    if "\0" in given:
        return f"has a NUL byte at position {given.index(chr(0))}, which no file name can hold"
    try:
        given.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"is not UTF-8 text (a lone surrogate at position {exc.start})"
    name_max, path_max = _limits(workspace)
    longest = max((part.encode("utf-8") for part in Path(given).parts), key=len, default=b"")
    if len(longest) > name_max:
        return f"has a part of {len(longest)} bytes; a file name has at most {name_max} bytes here"
    if len(str(path).encode("utf-8")) >= path_max:
        return f"is too long: with the workspace before it, a path has at most {path_max - 1} bytes here"
    return None


def _limits(workspace: Path) -> tuple[int, int]:
    """NAME_MAX and PATH_MAX (the terminating NUL included) of the workspace's file system."""
    try:
        return os.pathconf(workspace, "PC_NAME_MAX"), os.pathconf(workspace, "PC_PATH_MAX")
    except (OSError, ValueError):
        return _NAME_MAX, _PATH_MAX


def real_inside(root: Path, path: Path) -> Path:
    """The file `path` names now, every symlink followed; `path_outside_workspace` when that file
    is no longer inside `root` (a symlink swapped in since `path` was checked)."""
    real = Path(os.path.realpath(path))
    if not real.is_relative_to(os.path.realpath(root)):
        raise WarmkernelError(
            "path_outside_workspace",
            f"{path.name} now leads outside the workspace {root} (a symlink was put in its place?); "
            "nothing was written",
        )
    return real


@contextlib.contextmanager
def directory_beneath(root: Path, directory: Path) -> Iterator[int]:
    """A descriptor of `directory` (a real path inside the real `root`), opened from `root` one
    part at a time without following a symlink."""
    real_root = os.path.realpath(root)
    parts = directory.relative_to(real_root).parts
    fd = os.open(real_root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts:
            inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = inner
        yield fd
    finally:
        os.close(fd)
