"""The server's half of the kernel-side notebook helper: the code that loads it, the questions put
to it, and its answers, parsed once into typed values.

The helper itself (`kernel/inside/cell_facts.py`) runs inside the kernel; it is loaded, as text,
just before the first notebook cell runs in a kernel, so a session that never binds a notebook
pays nothing for it. `NotebookBinding` decides what to ask and keeps what it learns.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from warmkernel.errors import WarmkernelError
from warmkernel.kernel import inside
from warmkernel.types import ExecutionNumber

FileReads = dict[str, tuple[int, int]]
"""Path -> (size, mtime_ns) as a cell saw the file when it first opened it."""


@dataclass(frozen=True)
class CellDid:
    """What one notebook execution did, as the kernel saw it."""

    files: FileReads
    """The files it read."""
    wrote: frozenset[str]
    """The names it rebound or mutated (or assigned again to the same unchanging object)."""
    unbound: frozenset[str]
    """The names its source uses that were unbound when it ended (deleted, or never assigned)."""
    files_written: frozenset[str]
    """The files it opened for writing."""


@dataclass(frozen=True)
class NotebookFacts:
    """What the kernel knows after its last execution."""

    versions: dict[str, ExecutionNumber]
    """User name -> the execution that last rebound or mutated it (0: before tracking began)."""
    cells: dict[ExecutionNumber, CellDid]
    """What each notebook execution asked about did (each handed over once)."""


def begin_request(
    load: bool, number: ExecutionNumber, names: Iterable[str], reads: Iterable[str], assigns: Iterable[str]
) -> tuple[str, str]:
    """The silent code (which loads the helper when `load`) and expression to send just before a
    notebook cell that uses `names`, reads `reads` and always binds `assigns` runs as `number`."""
    code = inside.notebook_install_code() if load else ""
    arguments = f"{number}, {sorted(names)!r}, {sorted(reads)!r}, {sorted(assigns)!r}"
    return code, inside.question("cell_facts", f"begin({arguments})")


def read_begin(answer: str) -> dict[str, ExecutionNumber]:
    """The versions of the names the cell reads, as the kernel had them when it began."""
    return {name: ExecutionNumber(version) for name, version in _json(answer)["read_versions"].items()}


def facts_expression(numbers: Sequence[ExecutionNumber]) -> str:
    """The expression that fetches every version and the file reads of the executions `numbers`."""
    return inside.question("cell_facts", f"facts({list(numbers)!r})")


def read_facts(answer: str) -> NotebookFacts:
    facts = _json(answer)
    return NotebookFacts(
        versions={name: ExecutionNumber(version) for name, version in facts["versions"].items()},
        cells={ExecutionNumber(int(key)): _cell_did(did) for key, did in facts["cells"].items()},
    )


def _cell_did(did: dict[str, Any]) -> CellDid:
    return CellDid(
        files={path: (size, mtime) for path, (size, mtime) in did["files"].items()},
        wrote=frozenset(did["wrote"]),
        unbound=frozenset(did["unbound"]),
        files_written=frozenset(did["files_written"]),
    )


Stamp = tuple[int, int, str]
"""A file's size, mtime_ns and content hash."""


def stamps_expression(paths: Iterable[str], known: Mapping[str, Stamp], hash_limit: int) -> str:
    """The expression that stamps `paths` inside the kernel (for a kernel on another machine),
    reusing the `known` stamps of files whose size and mtime did not change."""
    given = {path: list(stamp) for path, stamp in known.items()}
    return inside.run_once("stamps", f"stamp({sorted(paths)!r}, {given!r}, {hash_limit})")


def read_stamps(answer: str) -> dict[str, Stamp | None]:
    """Each path's stamp as the kernel took it; None: missing there."""
    try:
        stamps = json.loads(ast.literal_eval(answer))
    except (ValueError, SyntaxError) as exc:
        raise WarmkernelError("internal_error", f"the kernel sent no file stamps: {answer[:200]!r}") from exc
    return {path: (stamp[0], stamp[1], stamp[2]) if stamp else None for path, stamp in stamps.items()}


def _json(answer: str) -> dict[str, Any]:
    try:
        return json.loads(answer)
    except ValueError as exc:
        raise WarmkernelError(
            "internal_error", f"the kernel-side notebook helper sent no JSON: {answer[:200]!r}"
        ) from exc
