"""Where exported executions are written: a new file in the workspace, or new cells spliced into
an existing notebook.

`inside_workspace` refuses a path no file can have, or one that leads out of the workspace (also
through a symlinked directory). `write_document` replaces a file atomically (a temporary file in
the same directory, then a rename). `insert_cells` adds cells to an `.ipynb` by splicing their JSON
into the file's text right after the chosen cell (or after the last one): every other byte stays
as it was, and the new cells are written in the file's own style (indentation, key order,
escaping, line endings). The file is rewritten in place only if it still reads as it did when it
was read, and a failed write leaves it as it was. Both check the path again as they write
(`file_write`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from warmkernel.errors import WarmkernelError

# The document's own reading and style rules, so that added cells look like the cells around them.
from warmkernel.notebook.document import (
    FileStyle,
    code_cells,
    keys_sorted,
    load_file,
    nbformat_version,
)
from warmkernel.notebook.file_write import replace_whole, rewrite_if_unchanged
from warmkernel.notebook.workspace_paths import checked_path, quoted, real_inside
from warmkernel.types import EXPORT_FORMATS, ExportFormat

_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\r\n]*")

CellBuilder = Callable[[int, frozenset[str]], list[dict[str, Any]]]
"""Makes the new cells, as files store them, given the file's nbformat minor version and the ids
its cells already use."""


@dataclass(frozen=True)
class ExportedDocument:
    """Executions written as one document: to a file, or kept as `text` when no path was given."""

    numbers: tuple[int, ...]
    format: ExportFormat
    path: str | None
    """The file, as replies name it (relative to the workspace); None: the document is `text`."""
    text: str | None
    size: int
    """Bytes of the document (UTF-8)."""
    images: int


@dataclass(frozen=True)
class InsertedCells:
    ids: tuple[str, ...]
    """The new cells' ids, as notebook_status names them (derived in a notebook before nbformat 4.5)."""
    index: int
    """0-based position of the first new cell among all the notebook's cells."""
    after: str | None
    """The id of the cell they follow; None when it has none, or when the notebook had no cells."""
    renamed: dict[str, str]
    """Code cells without an id of their own whose derived id changed (a new cell with the same
    source now sits above them): old id -> new id."""


def inside_workspace(workspace: Path, given: str) -> Path:
    """`given` (relative to the workspace, or absolute) as an absolute path inside the workspace;
    `path_outside_workspace` otherwise (`invalid_arguments` for a path no file can have)."""
    path = checked_path(workspace, given, "path")
    real_parent = Path(os.path.realpath(path.parent))
    real_workspace = Path(os.path.realpath(workspace))
    if (
        path == workspace
        or not path.is_relative_to(workspace)
        or not real_parent.is_relative_to(real_workspace)
    ):
        raise WarmkernelError(
            "path_outside_workspace",
            f"{quoted(given)} is outside the workspace {workspace}; give a path inside it, relative to it "
            'such as "exports/session.ipynb"',
        )
    return path


def format_for(path: Path | None) -> ExportFormat:
    """The format a file's suffix names (`.htm` and `.markdown` too); ipynb for any other."""
    suffix = path.suffix.lower().lstrip(".") if path is not None else ""
    named = {"htm": "html", "markdown": "md"}.get(suffix, suffix)
    known: ExportFormat
    for known in EXPORT_FORMATS:
        if known == named:
            return known
    return "ipynb"


def write_document(root: Path, path: Path, text: str) -> int:
    """Write `text` (UTF-8) as the file `path` inside `root`, atomically; the bytes written.
    `write_failed` says why not."""
    data = text.encode("utf-8")
    try:
        replace_whole(root, path, data)
    except OSError as exc:
        raise _write_failed(path, exc) from exc
    return len(data)


def _write_failed(path: Path, exc: OSError) -> WarmkernelError:
    return WarmkernelError("write_failed", f"cannot write {path}: {exc.strerror or exc}")


def insert_cells(root: Path, path: Path, build: CellBuilder, after: str | int | None) -> InsertedCells:
    """Splice the cells `build` makes into the notebook at `path` (inside `root`) after cell `after`
    (an id, or a 0-based code-cell index; None: after the last cell). `invalid_notebook`,
    `invalid_arguments` (no such cell) or `write_failed` when nothing was written."""
    target = real_inside(root, path)
    try:
        raw, text = load_file(target)
        opening, closing, spans = _cells_spans(text)
    except WarmkernelError as exc:
        raise WarmkernelError("invalid_notebook", exc.message) from exc
    cells = raw.get("cells", [])
    code = [cell_id for cell_id, *_ in code_cells(raw)]
    code_positions = [
        index
        for index, cell in enumerate(cells)
        if isinstance(cell, dict) and cell.get("cell_type") == "code"
    ]
    position = _position(cells, code, code_positions, after, path.name)
    minor = nbformat_version(raw)[1]
    taken = frozenset(
        cell["id"] for cell in cells if isinstance(cell, dict) and isinstance(cell.get("id"), str)
    )
    new_cells = build(minor, taken)
    new_text = _spliced(text, raw, opening, closing, spans, position, new_cells)
    try:
        replaced = rewrite_if_unchanged(root, target, text, new_text)
    except OSError as exc:
        raise _write_failed(path, exc) from exc
    if not replaced:
        raise WarmkernelError(
            "write_failed", f"{path.name} changed while the cells were added; nothing was written, try again"
        )
    first = sum(1 for index in code_positions if index <= position)
    after_id = None
    if position in code_positions:
        after_id = code[code_positions.index(position)]
    elif position >= 0 and isinstance(cells[position], dict):
        given = cells[position].get("id")
        after_id = given if isinstance(given, str) else None
    now = [cell_id for cell_id, *_ in code_cells(json.loads(new_text))]
    new_ids = tuple(now[first : first + len(new_cells)])
    return InsertedCells(new_ids, position + 1, after_id, _renamed(code, now, first, len(new_cells)))


def _cells_spans(text: str) -> tuple[int, int, list[tuple[int, int]]]:
    """Where the top-level `cells` array opens (after `[`) and closes (at `]`), and each element's span."""
    at = _skip(text, 0)
    _expect(text, at, "{")
    at = _skip(text, at + 1)
    while text[at] != "}":
        key, at = _DECODER.raw_decode(text, at)
        at = _skip(text, at)
        _expect(text, at, ":")
        at = _skip(text, at + 1)
        if key == "cells":
            return _array_spans(text, at)
        _, at = _DECODER.raw_decode(text, at)
        at = _skip(text, at)
        if text[at] == ",":
            at = _skip(text, at + 1)
    raise WarmkernelError("invalid_arguments", "the notebook has no cells list")


def _array_spans(text: str, at: int) -> tuple[int, int, list[tuple[int, int]]]:
    _expect(text, at, "[")
    opening = at + 1
    spans: list[tuple[int, int]] = []
    at = _skip(text, opening)
    while text[at] != "]":
        _, end = _DECODER.raw_decode(text, at)
        spans.append((at, end))
        at = _skip(text, end)
        if text[at] == ",":
            at = _skip(text, at + 1)
    return opening, at, spans


def _skip(text: str, at: int) -> int:
    match = _SPACE.match(text, at)
    assert match is not None  # the pattern matches the empty string
    return match.end()


def _expect(text: str, at: int, char: str) -> None:
    if text[at : at + 1] != char:
        raise WarmkernelError(
            "invalid_arguments", f"the notebook's JSON has {text[at : at + 1]!r} where {char!r} belongs"
        )


def _position(
    cells: Sequence[Any],
    code: Sequence[str],
    code_positions: Sequence[int],
    after: str | int | None,
    name: str,
) -> int:
    """The index among all cells of the cell to insert after (-1: the notebook has none)."""
    if after is None:
        return len(cells) - 1
    if isinstance(after, int):
        if 0 <= after < len(code):
            return code_positions[after]
    elif after in code:
        return code_positions[code.index(after)]
    else:
        for index, cell in enumerate(cells):
            if isinstance(cell, dict) and cell.get("id") == after:
                return index
    ids = ", ".join(repr(cell_id) for cell_id in code[:5]) + (", ..." if len(code) > 5 else "")
    valid = f"a cell id ({ids}) or a code-cell index 0-{len(code) - 1}" if code else "a cell id"
    raise WarmkernelError(
        "invalid_arguments",
        f"after_cell={json.dumps(after)} is not a cell of {name}; give {valid}, or null to append",
    )


def _spliced(
    text: str,
    raw: dict[str, Any],
    opening: int,
    closing: int,
    spans: Sequence[tuple[int, int]],
    position: int,
    new_cells: Sequence[dict[str, Any]],
) -> str:
    """`text` with `new_cells` after element `position` of the cells array (-1: into an empty one)."""
    style = FileStyle.of(text)
    newline, unit, escaped = style.newline, style.indent, style.ascii_escaped
    sort_keys = keys_sorted(raw)
    if unit is None:
        indent, separator = "", ", "
    elif spans:
        line_start = text.rfind("\n", 0, spans[0][0]) + 1
        indent = text[line_start : spans[0][0]]
        separator = "," + newline + indent
    else:
        line_start = text.rfind("\n", 0, opening) + 1
        outer = re.match(r"[ \t]*", text[line_start:]).group(0)  # type: ignore[union-attr]
        indent = outer + unit
        separator = "," + newline + indent
    written = []
    for cell in new_cells:
        dumped = json.dumps(cell, indent=unit, sort_keys=sort_keys, ensure_ascii=escaped)
        written.append(dumped.replace("\n", newline + indent))
    block = separator.join(written)
    if spans:
        end = spans[position][1]
        return text[:end] + separator + block + text[end:]
    if unit is None:
        return text[:opening] + block + text[closing:]
    outer = indent[: len(indent) - len(unit)]
    return text[:opening] + newline + indent + block + newline + outer + text[closing:]


def _renamed(before: Sequence[str], after: Sequence[str], first: int, count: int) -> dict[str, str]:
    """Old code-cell ids that changed, old -> new: the new cells sit at code index `first` on."""
    moved = [*after[:first], *after[first + count :]]
    return {old: new for old, new in zip(before, moved, strict=True) if old != new}
