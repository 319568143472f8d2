"""Tracebacks that fit a reply: frames of the user's cells and workspace files whole, each run of
consecutive library frames (installed packages, the standard library) one line per frame under
a count, the exception line last. The `traceback` stream keeps every frame; `--full-output`
shows them all inline.

IPython's frame layout is read (`Cell In[3], line 2`, `File /path/mod.py:12, in func(args)`,
then numbered source lines, then a blank line); text of any other shape passes through as it is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_FRAME = re.compile(r"(?:Cell In ?\[\d+\]|Input In ?\[\d+\]|File )")
"""The first line of a frame in IPython's tracebacks."""
_FILE_FRAME = re.compile(r"File (?P<path>.+?):(?P<line>\d+), in (?P<function>[^(]+)")
_LIBRARY = (
    re.compile(r"(?:site|dist)-packages/.*"),
    re.compile(r"python\d+\.\d+/.*"),
    re.compile(r"<frozen [^>]+>"),
    re.compile(r"^[^/~<].*\.p(?:yx|xi|xd)$"),
)
"""Where an installed package or the standard library (`.../lib/python3.11/json/...`) lives, or a
compiled package's Cython source (`pandas/_libs/index.pyx`, a relative path whose source IPython
cannot show): the path from the match on is how a collapsed frame names its file."""


def _library_frame(line: str) -> str | None:
    """`site-packages/pandas/core/apply.py:350 in Apply.agg` for a library frame's first line."""
    frame = _FILE_FRAME.match(line)
    if frame is None:
        return None
    for pattern in _LIBRARY:
        short = pattern.search(frame["path"])
        if short is not None:
            return f"{short[0]}:{frame['line']} in {frame['function'].strip()}"
    return None


def condense(lines: Sequence[str], whole: str) -> list[str]:
    """`lines` of a traceback with each run of library frames collapsed; `whole` says where every
    frame can be read (e.g. the call that reads the traceback stream)."""
    out: list[str] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            noun = "frame" if len(run) == 1 else "frames"
            out.append(f"[{len(run)} library {noun}, one line each; {whole}]")
            out.extend(run)
            out.append("")
            run.clear()

    i = 0
    while i < len(lines):
        library = _library_frame(lines[i])
        if library is None:
            flush()
            out.append(lines[i])
            i += 1
            continue
        run.append(f"  {library}")
        i += 1
        while i < len(lines) and lines[i].strip() and not _FRAME.match(lines[i]):
            i += 1  # the frame's source lines
        if i < len(lines) and not lines[i].strip():
            i += 1  # the blank line that ends it
    flush()
    return out
