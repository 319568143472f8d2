"""File stamps taken inside the kernel, for a kernel that runs on another machine than warmkernel.

Notebook staleness compares the files a cell read with the files now. For a kernel on a Jupyter
server those files are on the server's machine, so they are stamped there: size, mtime_ns and a
sha256 of the content, the same stamp the server computes for a local kernel. Standard library
only; run in a namespace of its own and answered as JSON, it leaves nothing in the kernel.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat

_CHUNK = 1024 * 1024


def stamp(paths: list[str], known: dict[str, list], hash_limit: int) -> str:
    """JSON: each path -> [size, mtime_ns, sha256], or null when it is missing or not a regular file.

    A stamp in `known` is reused while size and mtime_ns are unchanged; past `hash_limit` bytes
    the size and mtime stand for the content."""
    return json.dumps({path: _stamp(path, known.get(path), hash_limit) for path in paths})


def _stamp(path: str, known: list | None, hash_limit: int) -> list | None:
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    size, mtime_ns = info.st_size, info.st_mtime_ns
    if known is not None and known[:2] == [size, mtime_ns]:
        return known
    if size > hash_limit:
        return [size, mtime_ns, f"size-mtime:{size}:{mtime_ns}"]
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)
    except OSError:
        return None
    return [size, mtime_ns, digest.hexdigest()]
