"""The `.ipynb` file: reading its code cells, and writing run outputs back atomically.

`read_notebook(path)` returns the code cells in order, each with its index among code
cells, id and source. `write_outputs(path, outputs)` puts outputs and execution counts of
cells that warmkernel ran into the file, and nothing else.

Ids. A code cell's `id` is its nbformat id when it has a usable one: a non-empty string
that no earlier cell in the file already uses. Otherwise (nbformat 4.0-4.4 files have no
ids; copy-pasted cells can repeat one) its id is derived, `wk-<h>-<n>`: `<h>` is the first
12 hex digits of the sha256 of its source (UTF-8) and `<n>` counts the code cells above it
with the very same source. So a derived id survives moving, inserting and deleting other
cells; editing the cell gives it a new id, and undoing the edit gives the old one back.
Older minor versions are read as if upgraded to 4.5 in memory, with derived ids rather than
nbformat's random ones, which would differ on every read.

Reading parses the JSON directly and uses nbformat for the version and for output line
splitting: nbformat's reader validates (logging on imperfect files Jupyter opens fine),
warns and assigns random ids where ids are missing.

Writing changes only `outputs` and `execution_count` of the given cells, and only if each
of them is still in the file with the source that ran; otherwise it writes nothing and says
which cells blocked it. The rest of the file is kept: key order, metadata, other cells,
minor version, indentation, line endings and the trailing newline. New outputs have sorted
keys if the file sorts its keys; numbers are written the way Jupyter writes them. The file is
rewritten in place (it keeps its inode, owner, group, mode and hard links), under a lock and only
if it still holds what was read, compared right before writing; a failed write leaves it as it was
(`file_write`). The path is resolved again when it is written: a notebook that now leads out of
the workspace is not written.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from warmkernel.errors import WarmkernelError
from warmkernel.notebook.file_write import backup_of, rewrite_if_unchanged
from warmkernel.notebook.workspace_paths import real_inside

BlockReason = Literal["cell_missing", "source_changed", "file_changed_during_write"]
_INDENT = re.compile(r"\{\r?\n([ \t]+)\S")
_NON_ASCII_ESCAPE = re.compile(r"\\u(?!00[01][0-9a-fA-F])[0-9a-fA-F]{4}")
"""A `\\u` escape (four hex digits) of a printable character: a writer that escaped non-ASCII text."""


@dataclass(frozen=True)
class NotebookCell:
    """A code cell of the notebook on disk."""

    index: int
    """0-based among the code cells."""
    id: str
    source: str
    id_derived: bool
    """The file gives it no usable id; `id` is derived from its source and position."""
    tags: tuple[str, ...] = ()
    """Its `metadata.tags` (`skip-execution` and `raises-exception` change how it runs)."""


@dataclass(frozen=True)
class Notebook:
    path: Path
    nbformat_minor: int
    """The minor version in the file (cells are read as 4.5 whatever it is)."""
    cells: tuple[NotebookCell, ...]


@dataclass(frozen=True)
class CellOutputs:
    """What one run of a cell left, to be written into the file."""

    source: str
    """The source that ran; the write is refused if the file now has another."""
    execution_count: int | None
    outputs: Sequence[Mapping[str, Any]]
    """nbformat v4 output dicts (`nbformat.v4.output_from_msg` makes them)."""


@dataclass(frozen=True)
class BlockedCell:
    id: str
    reason: BlockReason


@dataclass(frozen=True)
class WriteBack:
    written: bool
    """The file holds the given outputs now (also when it already did and was left alone)."""
    blocked: tuple[BlockedCell, ...]


def derived_id(source: str, repeats_above: int) -> str:
    """The id of a cell without a usable one; see the module docstring."""
    digest = hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()
    return f"wk-{digest[:12]}-{repeats_above}"


def nbformat_version(raw: Mapping[str, Any]) -> tuple[int, int]:
    # nbformat is imported on first use: it imports jsonschema, whose format checkers can take
    # seconds to import (rfc3987-syntax builds a grammar), and most sessions never read a notebook.
    from nbformat.reader import get_version

    return get_version(raw)


def read_notebook(path: Path) -> Notebook:
    """The notebook's code cells; a file that is not an nbformat 4 notebook is `invalid_arguments`."""
    raw, _ = load_file(path)
    _, minor = nbformat_version(raw)
    cells = tuple(
        NotebookCell(index=index, id=cell_id, source=source, id_derived=derived, tags=_tags(cell))
        for index, (cell_id, source, derived, cell) in enumerate(code_cells(raw))
    )
    return Notebook(path=path, nbformat_minor=minor, cells=cells)


def write_outputs(path: Path, outputs: Mapping[str, CellOutputs], *, root: Path) -> WriteBack:
    """Write outputs of cells by id, all or nothing, into the notebook at `path` if it is still
    inside `root` (the workspace); see the module docstring."""
    target = real_inside(root, path)  # the file a symlink points to, not the link
    raw, text = load_file(target)
    on_disk = {cell_id: (source, cell) for cell_id, source, _, cell in code_cells(raw)}
    blocked = tuple(
        BlockedCell(cell_id, "cell_missing" if cell_id not in on_disk else "source_changed")
        for cell_id, ran in outputs.items()
        if cell_id not in on_disk or on_disk[cell_id][0] != ran.source
    )
    if blocked or not outputs:
        return WriteBack(written=not blocked, blocked=blocked)
    sort_keys = keys_sorted(raw)
    for cell_id, ran in outputs.items():
        cell = on_disk[cell_id][1]
        cell["outputs"] = _file_outputs(ran.outputs, sort_keys=sort_keys)
        cell["execution_count"] = ran.execution_count
    new_text = _dumps_like(raw, text)
    if new_text == text:
        return WriteBack(written=True, blocked=())  # leave the mtime alone: editors reload on it
    if not rewrite_if_unchanged(root, target, text, new_text):
        return WriteBack(
            written=False,
            blocked=tuple(BlockedCell(cell_id, "file_changed_during_write") for cell_id in outputs),
        )
    return WriteBack(written=True, blocked=())


def load_file(path: Path) -> tuple[dict[str, Any], str]:
    """The file's JSON and text, or `invalid_arguments` saying why it is not a v4 notebook."""
    try:
        text = path.read_bytes().decode("utf-8")  # not read_text: it would turn \r\n into \n
    except FileNotFoundError as exc:
        raise WarmkernelError("invalid_arguments", f"notebook {path} does not exist") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise WarmkernelError("invalid_arguments", f"notebook {path} cannot be read: {exc}") from exc
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        kept = backup_of(path)
        where = f"; {kept.name} beside it holds its content from before a write that did not finish"
        also = where if kept.is_file() else ""
        raise WarmkernelError("invalid_arguments", f"notebook {path} is not JSON: {exc}{also}") from exc
    if not isinstance(raw, dict) or not isinstance(raw.get("cells", []), list):
        raise WarmkernelError("invalid_arguments", f"notebook {path} is not a Jupyter notebook")
    major, minor = nbformat_version(raw)
    if major != 4:
        raise WarmkernelError(
            "invalid_arguments",
            f"notebook {path} is nbformat {major}.{minor}; warmkernel reads nbformat 4 "
            "(open and save it in Jupyter to upgrade it)",
        )
    return raw, text


def code_cells(raw: Mapping[str, Any]) -> list[tuple[str, str, bool, dict[str, Any]]]:
    """(id, source, whether the id is derived, the cell's own dict) of each code cell, in order."""
    ids_above: set[str] = set()
    same_source_above: Counter[str] = Counter()
    found: list[tuple[str, str, bool, dict[str, Any]]] = []
    for cell in raw.get("cells", []):
        if not isinstance(cell, dict):
            continue
        given = cell.get("id")
        usable = isinstance(given, str) and given != "" and given not in ids_above
        if isinstance(given, str):
            ids_above.add(given)  # any cell type: the first holder of a repeated id keeps it
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        cell_id = str(given) if usable else derived_id(source, same_source_above[source])
        same_source_above[source] += 1
        found.append((cell_id, source, not usable, cell))
    return found


def _tags(cell: Mapping[str, Any]) -> tuple[str, ...]:
    metadata = cell.get("metadata")
    tags = metadata.get("tags") if isinstance(metadata, dict) else None
    return tuple(tag for tag in tags if isinstance(tag, str)) if isinstance(tags, list) else ()


def keys_sorted(raw: Mapping[str, Any]) -> bool:
    """Whether the file sorts its keys, as Jupyter and VS Code do."""
    dicts = [raw, *(cell for cell in raw.get("cells", []) if isinstance(cell, dict))]
    return all(list(each) == sorted(each) for each in dicts)


def _file_outputs(outputs: Sequence[Mapping[str, Any]], *, sort_keys: bool) -> list[Any]:
    """Outputs as the file stores them: multi-line text split into lists of lines."""
    import nbformat  # on first use, as in `nbformat_version`
    from nbformat.v4.rwbase import split_lines

    holder = nbformat.from_dict({"cells": [{"cell_type": "code", "outputs": list(outputs)}]})  # copies
    return json.loads(json.dumps(split_lines(holder).cells[0].outputs, sort_keys=sort_keys))


@dataclass(frozen=True)
class FileStyle:
    """How a notebook file is written (tools differ), so that a rewrite changes only what it means to."""

    indent: str | None
    """One level of indentation; None: the file is one line."""
    ascii_escaped: bool
    """Non-ASCII characters are written as JSON escapes (`\\u00e9` for é)."""
    newline: str
    final_newline: bool

    @classmethod
    def of(cls, text: str) -> FileStyle:
        return cls(
            indent=match.group(1) if (match := _INDENT.match(text)) else None,
            ascii_escaped=text.isascii() and _NON_ASCII_ESCAPE.search(text) is not None,
            newline="\r\n" if "\r\n" in text else "\n",
            final_newline=text.endswith("\n"),
        )


def _dumps_like(raw: Mapping[str, Any], original: str) -> str:
    """Serialise `raw` in the original file's style, so only changed values differ."""
    style = FileStyle.of(original)
    text = json.dumps(raw, indent=style.indent, ensure_ascii=style.ascii_escaped)
    if style.newline != "\n":
        text = text.replace("\n", style.newline)
    return text + style.newline if style.final_newline else text
