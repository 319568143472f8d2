"""The `.ipynb` document: code cells and ids as read, outputs written back and nothing else, and
never a destroyed file: a failed write leaves it as it was, and a path is checked again as it is written."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import resource
import signal
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from warmkernel.errors import WarmkernelError
from warmkernel.notebook.document import (
    BlockedCell,
    CellOutputs,
    NotebookCell,
    WriteBack,
    derived_id,
    read_notebook,
    write_outputs,
)
from warmkernel.notebook.file_write import backup_of, rewrite_if_unchanged
from warmkernel.notebook.workspace_paths import checked_path, directory_beneath

SOURCES = ["import json", "data = json.loads('[1, 2]')\nprint(data)", "total = sum(data)"]


def jupyter_notebook(minor: int = 5) -> nbformat.NotebookNode:
    """A notebook as Jupyter makes it: ids from 4.5 on, a markdown cell, outputs, metadata."""
    cells = [
        new_markdown_cell("# Title", id="md-1"),
        new_code_cell(SOURCES[0], id="c-import", execution_count=1),
        new_code_cell(
            SOURCES[1],
            id="c-load",
            execution_count=2,
            outputs=[new_output("stream", name="stdout", text="[1, 2]\n")],
        ),
        new_markdown_cell("Sum — naïve \u2713", id="md-2"),
        new_code_cell(SOURCES[2], id="c-sum", metadata={"tags": ["keep"]}),
    ]
    notebook = new_notebook(
        cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}, "ratio": 0.1}
    )
    if minor < 5:
        for cell in notebook.cells:
            del cell["id"]
    notebook.nbformat_minor = minor
    return notebook


def save(path: Path, notebook: nbformat.NotebookNode) -> Path:
    path.write_text(nbformat.writes(notebook), encoding="utf-8")
    return path


def save_raw(path: Path, raw: dict[str, Any], **dumps: Any) -> Path:
    path.write_text(json.dumps(raw, **dumps), encoding="utf-8")
    return path


def raw_notebook(minor: int = 5) -> dict[str, Any]:
    return json.loads(nbformat.writes(jupyter_notebook(minor)))


RESULT = CellOutputs(
    source=SOURCES[2],
    execution_count=7,
    outputs=[
        {"output_type": "stream", "name": "stdout", "text": "first\nsecond\n"},
        {"output_type": "execute_result", "execution_count": 7, "metadata": {}, "data": {"text/plain": "3"}},
    ],
)


# reading


def test_code_cells_are_read_in_order_with_their_ids(tmp_path: Path) -> None:
    notebook = read_notebook(save(tmp_path / "n.ipynb", jupyter_notebook()))
    assert notebook.nbformat_minor == 5
    assert notebook.cells == (
        NotebookCell(index=0, id="c-import", source=SOURCES[0], id_derived=False),
        NotebookCell(index=1, id="c-load", source=SOURCES[1], id_derived=False),
        NotebookCell(index=2, id="c-sum", source=SOURCES[2], id_derived=False, tags=("keep",)),
    )


def test_cells_without_ids_get_derived_ids(tmp_path: Path) -> None:
    notebook = read_notebook(save(tmp_path / "n.ipynb", jupyter_notebook(minor=4)))
    assert notebook.nbformat_minor == 4
    assert [cell.id for cell in notebook.cells] == [derived_id(source, 0) for source in SOURCES]
    assert all(cell.id_derived for cell in notebook.cells)


def test_derived_id_is_a_prefix_of_the_source_sha256_and_the_repeat_count() -> None:
    assert derived_id("", 0) == "wk-e3b0c44298fc-0"
    assert derived_id("", 2) == "wk-e3b0c44298fc-2"


def test_derived_ids_are_stable_across_reads_moves_and_undone_edits(tmp_path: Path) -> None:
    raw = raw_notebook(minor=4)
    path = save_raw(tmp_path / "n.ipynb", raw)
    first = read_notebook(path)
    assert read_notebook(path) == first
    raw["cells"].reverse()
    moved = read_notebook(save_raw(path, raw))
    assert {cell.id for cell in moved.cells} == {cell.id for cell in first.cells}
    raw["cells"][0]["source"] = "total = sum(data) + 1"
    assert read_notebook(save_raw(path, raw)).cells[0].id == derived_id("total = sum(data) + 1", 0)
    raw["cells"][0]["source"] = SOURCES[2]
    assert read_notebook(save_raw(path, raw)).cells[0].id == derived_id(SOURCES[2], 0)


def test_identical_cells_without_ids_are_told_apart_by_position(tmp_path: Path) -> None:
    raw = raw_notebook(minor=4)
    raw["cells"].append(dict(raw["cells"][1]))
    cells = read_notebook(save_raw(tmp_path / "n.ipynb", raw)).cells
    assert [cell.id for cell in cells] == [
        *(derived_id(source, 0) for source in SOURCES),
        derived_id(SOURCES[0], 1),
    ]


def test_cell_missing_its_id_in_a_4_5_notebook_gets_a_derived_one_without_warning(tmp_path: Path) -> None:
    raw = raw_notebook()
    del raw["cells"][2]["id"]
    cells = read_notebook(save_raw(tmp_path / "n.ipynb", raw)).cells
    assert [(cell.id, cell.id_derived) for cell in cells] == [
        ("c-import", False),
        (derived_id(SOURCES[1], 0), True),
        ("c-sum", False),
    ]


@pytest.mark.parametrize(
    "duplicate_of",
    [pytest.param(1, id="earlier code cell"), pytest.param(0, id="earlier markdown cell")],
)
def test_repeated_id_stays_with_its_first_holder(tmp_path: Path, duplicate_of: int) -> None:
    raw = raw_notebook()
    raw["cells"][4]["id"] = raw["cells"][duplicate_of]["id"]
    cells = read_notebook(save_raw(tmp_path / "n.ipynb", raw)).cells
    assert cells[2] == NotebookCell(
        index=2, id=derived_id(SOURCES[2], 0), source=SOURCES[2], id_derived=True, tags=("keep",)
    )
    assert [cell.id for cell in cells[:2]] == ["c-import", "c-load"]


def test_source_stored_as_a_string_is_read_too(tmp_path: Path) -> None:
    raw = raw_notebook()
    raw["cells"][2]["source"] = SOURCES[1]
    assert read_notebook(save_raw(tmp_path / "n.ipynb", raw)).cells[1].source == SOURCES[1]


def test_notebook_without_code_cells_has_none(tmp_path: Path) -> None:
    raw = raw_notebook()
    raw["cells"] = [raw["cells"][0]]
    assert read_notebook(save_raw(tmp_path / "n.ipynb", raw)).cells == ()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(None, "does not exist", id="missing file"),
        pytest.param("{not json", "is not JSON", id="not JSON"),
        pytest.param("[1, 2]", "is not a Jupyter notebook", id="JSON that is not an object"),
        pytest.param('{"cells": 3, "nbformat": 4}', "is not a Jupyter notebook", id="cells not a list"),
        pytest.param(
            '{"nbformat": 3, "nbformat_minor": 0, "worksheets": []}',
            "is nbformat 3.0; warmkernel reads nbformat 4 (open and save it in Jupyter to upgrade it)",
            id="nbformat 3",
        ),
        pytest.param('{"cells": []}', "is nbformat 1.0", id="no version"),
    ],
)
def test_unreadable_notebook_is_an_invalid_argument(
    tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "n.ipynb"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(WarmkernelError) as raised:
        read_notebook(path)
    assert raised.value.code == "invalid_arguments"
    assert message in raised.value.message


# writing


def test_outputs_and_execution_count_are_written_and_nothing_else(tmp_path: Path) -> None:
    path = save(tmp_path / "n.ipynb", jupyter_notebook())
    before = nbformat.reads(path.read_text(encoding="utf-8"), as_version=4)
    assert write_outputs(path, {"c-sum": RESULT}, root=tmp_path) == WriteBack(written=True, blocked=())
    after = nbformat.reads(path.read_text(encoding="utf-8"), as_version=4)
    nbformat.validate(after)
    written = after.cells[4]
    assert written.execution_count == 7
    assert written.outputs == [nbformat.from_dict(output) for output in RESULT.outputs]
    written.outputs, written.execution_count = [], None
    assert after == before


def test_multi_line_output_text_is_stored_as_lines_like_jupyter_does(tmp_path: Path) -> None:
    path = save(tmp_path / "n.ipynb", jupyter_notebook())
    write_outputs(path, {"c-sum": RESULT}, root=tmp_path)
    stored = json.loads(path.read_text(encoding="utf-8"))["cells"][4]["outputs"]
    assert stored[0]["text"] == ["first\n", "second\n"]
    assert stored[1]["data"] == {"text/plain": ["3"]}


def reverse_keys(value: Any) -> Any:
    """The same JSON with every object's keys in reverse order: a file that does not sort keys."""
    if isinstance(value, dict):
        return {key: reverse_keys(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [reverse_keys(item) for item in value]
    return value


STYLES = [
    pytest.param(False, {"indent": 1, "ensure_ascii": False}, id="as Jupyter writes"),
    pytest.param(True, {"indent": 2}, id="indent 2, ASCII escapes, unsorted keys"),
    pytest.param(False, {"indent": "\t", "ensure_ascii": False}, id="tabs"),
    pytest.param(False, {}, id="one line"),
]


@pytest.mark.parametrize(("unsorted", "dumps"), STYLES)
@pytest.mark.parametrize("newline", [pytest.param("\n", id="LF"), pytest.param("", id="no final newline")])
def test_writing_the_outputs_a_file_already_has_leaves_every_byte(
    tmp_path: Path, unsorted: bool, dumps: dict[str, Any], newline: str
) -> None:
    raw = raw_notebook()
    raw["cells"][2]["outputs"].append(
        {"name": "stdout", "output_type": "stream", "text": ["\x1b[31mred\x1b[0m"]}
    )
    raw = reverse_keys(raw) if unsorted else raw
    path = tmp_path / "n.ipynb"
    path.write_text(json.dumps(raw, **dumps) + newline, encoding="utf-8")
    before = path.read_bytes()
    cell = raw["cells"][2]
    same = CellOutputs(source=SOURCES[1], execution_count=cell["execution_count"], outputs=cell["outputs"])
    inode = path.stat().st_ino
    assert write_outputs(path, {"c-load": same}, root=tmp_path).written
    assert path.read_bytes() == before
    assert path.stat().st_ino == inode  # not even replaced: editors reload on a new mtime


@pytest.mark.parametrize(("unsorted", "dumps"), STYLES)
def test_writing_changes_only_the_written_cell(tmp_path: Path, unsorted: bool, dumps: dict[str, Any]) -> None:
    path = tmp_path / "n.ipynb"
    path.write_text(json.dumps(reverse_keys(raw_notebook()) if unsorted else raw_notebook(), **dumps) + "\n")
    write_outputs(path, {"c-sum": RESULT}, root=tmp_path)
    expected = raw_notebook()
    expected["cells"][4]["execution_count"] = 7
    expected["cells"][4]["outputs"] = [  # keys sorted, as Jupyter and VS Code write them
        {"name": "stdout", "output_type": "stream", "text": ["first\n", "second\n"]},
        {
            "data": {"text/plain": ["3"]},
            "execution_count": 7,
            "metadata": {},
            "output_type": "execute_result",
        },
    ]
    if unsorted:  # the cells' keys keep their order; new outputs come as given
        expected = reverse_keys(expected)
        expected["cells"][4]["outputs"] = [dict(output) for output in RESULT.outputs]
        expected["cells"][4]["outputs"][0]["text"] = ["first\n", "second\n"]
        expected["cells"][4]["outputs"][1]["data"] = {"text/plain": ["3"]}
    assert path.read_text(encoding="utf-8") == json.dumps(expected, **dumps) + "\n"


def test_crlf_file_keeps_its_line_endings(tmp_path: Path) -> None:
    path = tmp_path / "n.ipynb"
    path.write_bytes(nbformat.writes(jupyter_notebook()).replace("\n", "\r\n").encode("utf-8") + b"\r\n")
    write_outputs(path, {"c-sum": RESULT}, root=tmp_path)
    data = path.read_bytes()
    assert data.endswith(b"}\r\n")
    assert b"\n" not in data.replace(b"\r\n", b"")


def test_older_minor_version_is_written_back_as_it_was(tmp_path: Path) -> None:
    path = save(tmp_path / "n.ipynb", jupyter_notebook(minor=4))
    cell_id = derived_id(SOURCES[2], 0)
    assert write_outputs(path, {cell_id: RESULT}, root=tmp_path).written
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert raw["nbformat_minor"] == 4
    assert not any("id" in cell for cell in raw["cells"])
    assert raw["cells"][4]["execution_count"] == 7


def test_cell_whose_source_changed_on_disk_blocks_the_whole_write(tmp_path: Path) -> None:
    path = save(tmp_path / "n.ipynb", jupyter_notebook())
    before = path.read_bytes()
    edited = CellOutputs(source="total = 0", execution_count=8, outputs=[])
    result = write_outputs(path, {"c-sum": edited, "c-import": CellOutputs(SOURCES[0], 9, [])}, root=tmp_path)
    assert result == WriteBack(written=False, blocked=(BlockedCell("c-sum", "source_changed"),))
    assert path.read_bytes() == before


def test_cell_gone_from_the_file_blocks_the_write(tmp_path: Path) -> None:
    path = save(tmp_path / "n.ipynb", jupyter_notebook())
    before = path.read_bytes()
    result = write_outputs(path, {"deleted": CellOutputs("x = 1", 3, [])}, root=tmp_path)
    assert result == WriteBack(written=False, blocked=(BlockedCell("deleted", "cell_missing"),))
    assert path.read_bytes() == before


def test_nothing_to_write_writes_nothing(tmp_path: Path) -> None:
    path = save(tmp_path / "n.ipynb", jupyter_notebook())
    before = path.read_bytes()
    assert write_outputs(path, {}, root=tmp_path) == WriteBack(written=True, blocked=())
    assert path.read_bytes() == before


@pytest.mark.parametrize("mode", [0o644, 0o600, 0o664])
def test_write_keeps_the_file_mode_and_leaves_no_temporary_file(tmp_path: Path, mode: int) -> None:
    path = save(tmp_path / "n.ipynb", jupyter_notebook())
    path.chmod(mode)
    write_outputs(path, {"c-sum": RESULT}, root=tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["n.ipynb"]


def test_write_through_a_symlink_updates_its_target(tmp_path: Path) -> None:
    target = save(tmp_path / "real.ipynb", jupyter_notebook())
    link = tmp_path / "link.ipynb"
    link.symlink_to(target)
    write_outputs(link, {"c-sum": RESULT}, root=tmp_path)
    assert link.is_symlink()
    assert json.loads(target.read_text(encoding="utf-8"))["cells"][4]["execution_count"] == 7


def test_file_changed_between_read_and_replace_is_left_to_the_editor(tmp_path: Path) -> None:
    path = save(tmp_path / "n.ipynb", jupyter_notebook())
    before = path.read_bytes()
    assert (
        rewrite_if_unchanged(tmp_path, path, expected="what warmkernel read earlier", new_text="{}") is False
    )
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["n.ipynb"]


def test_replace_of_an_unchanged_file_swaps_in_the_new_text(tmp_path: Path) -> None:
    path = save(tmp_path / "n.ipynb", jupyter_notebook())
    assert (
        rewrite_if_unchanged(tmp_path, path, expected=path.read_text(encoding="utf-8"), new_text="{}\n")
        is True
    )
    assert path.read_text(encoding="utf-8") == "{}\n"


def test_write_to_an_unreadable_notebook_is_an_invalid_argument(tmp_path: Path) -> None:
    path = tmp_path / "n.ipynb"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(WarmkernelError, match="is not JSON"):
        write_outputs(path, {"c-sum": RESULT}, root=tmp_path)


def test_notebook_path_is_reported_as_given(tmp_path: Path) -> None:
    path = save(tmp_path / "n.ipynb", jupyter_notebook())
    assert read_notebook(path).path == path


# a write that fails, and a path that changed: the file is never destroyed


@contextlib.contextmanager
def file_size_limit(limit: int) -> Iterator[None]:
    """Writes past `limit` bytes fail with EFBIG in this process, as a full disk fails them."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)


def big_result(chars: int) -> CellOutputs:
    return CellOutputs(SOURCES[2], 7, [{"output_type": "stream", "name": "stdout", "text": "x" * chars}])


def test_a_write_the_disk_refuses_leaves_the_file_byte_for_byte_with_its_inode_and_mtime(
    tmp_path: Path,
) -> None:
    path = save(tmp_path / "n.ipynb", jupyter_notebook())
    before, info = path.read_bytes(), path.stat()
    with file_size_limit(len(before) + 100), pytest.raises(WarmkernelError) as raised:
        write_outputs(path, {"c-sum": big_result(10_000)}, root=tmp_path)
    assert raised.value.code == "write_failed"
    assert raised.value.message == "cannot write n.ipynb: File too large; it was left as it was"
    after = path.stat()
    assert path.read_bytes() == before
    assert (after.st_ino, after.st_mtime_ns) == (info.st_ino, info.st_mtime_ns)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["n.ipynb"]  # the copy beside it is gone


def test_no_room_for_the_copy_of_the_old_content_writes_nothing(tmp_path: Path) -> None:
    path = save(tmp_path / "n.ipynb", jupyter_notebook())
    before = path.read_bytes()
    with file_size_limit(100), pytest.raises(WarmkernelError) as raised:
        write_outputs(path, {"c-sum": RESULT}, root=tmp_path)
    assert raised.value.code == "write_failed"
    assert raised.value.message == (
        "cannot keep a copy of n.ipynb beside it before writing it: File too large; nothing was written"
    )
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["n.ipynb"]


def test_a_write_killed_midway_leaves_the_old_content_beside_the_file_and_reading_says_where(
    tmp_path: Path,
) -> None:
    path = save(tmp_path / "n.ipynb", jupyter_notebook())
    copy = backup_of(path)
    assert copy.name == ".~n.ipynb.warmkernel"
    copy.write_bytes(path.read_bytes())  # what the write had kept before it was killed
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(WarmkernelError) as raised:
        read_notebook(path)
    assert raised.value.message.endswith(
        "; .~n.ipynb.warmkernel beside it holds its content from before a write that did not finish"
    )
    path.write_bytes(copy.read_bytes())  # the person puts it back: the next write replaces the copy
    assert write_outputs(path, {"c-sum": RESULT}, root=tmp_path).written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["n.ipynb"]


def test_a_notebook_whose_name_leaves_no_room_for_the_copys_name_is_written_in_place(
    tmp_path: Path,
) -> None:
    path = save(tmp_path / ("n" * 240 + ".ipynb"), jupyter_notebook())
    inode = path.stat().st_ino
    assert write_outputs(path, {"c-sum": RESULT}, root=tmp_path).written
    assert json.loads(path.read_text(encoding="utf-8"))["cells"][4]["execution_count"] == 7
    assert path.stat().st_ino == inode
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_a_notebook_that_now_leads_out_of_the_workspace_is_not_written(tmp_path: Path) -> None:
    workspace, outside = tmp_path / "ws", save(tmp_path / "outside.ipynb", jupyter_notebook())
    workspace.mkdir()
    before = outside.read_bytes()
    (workspace / "n.ipynb").symlink_to(outside)  # swapped in after the notebook was checked
    with pytest.raises(WarmkernelError) as raised:
        write_outputs(workspace / "n.ipynb", {"c-sum": RESULT}, root=workspace)
    assert raised.value.code == "path_outside_workspace"
    assert raised.value.message.startswith(f"n.ipynb now leads outside the workspace {workspace}")
    assert outside.read_bytes() == before
    with pytest.raises(WarmkernelError, match="now leads outside"):
        rewrite_if_unchanged(workspace, workspace / "n.ipynb", before.decode("utf-8"), "{}")
    assert outside.read_bytes() == before


def test_a_directory_swapped_for_a_symlink_after_it_was_resolved_is_not_walked_through(
    tmp_path: Path,
) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "sub").symlink_to(tmp_path / "elsewhere")
    with (
        pytest.raises(OSError, match=r"symbolic links|Not a directory") as raised,
        directory_beneath(tmp_path, tmp_path / "sub"),
    ):
        pass
    assert raised.value.errno in (errno.ELOOP, errno.ENOTDIR)
    with directory_beneath(tmp_path, tmp_path / "elsewhere") as fd:
        assert os.path.samestat(os.fstat(fd), (tmp_path / "elsewhere").stat())


class BadPath(NamedTuple):
    given: str
    says: str


BAD_PATHS = [
    pytest.param(BadPath("a\0b.ipynb", "has a NUL byte at position 1"), id="NUL byte"),
    pytest.param(
        BadPath("\ud800.ipynb", "is not UTF-8 text (a lone surrogate at position 0)"), id="surrogate"
    ),
    pytest.param(BadPath("n" * 256, "has a part of 256 bytes; a file name has at most 255"), id="long part"),
    pytest.param(BadPath("é" * 128, "has a part of 256 bytes"), id="long part in bytes"),
    pytest.param(BadPath("d/" * 2100 + "x", "is too long: with the workspace before it"), id="long path"),
]


@pytest.mark.parametrize("bad", BAD_PATHS)
def test_a_path_no_file_can_have_is_an_invalid_argument_naming_the_parameter(
    tmp_path: Path, bad: BadPath
) -> None:
    with pytest.raises(WarmkernelError) as raised:
        checked_path(tmp_path, bad.given, "file")
    assert raised.value.code == "invalid_arguments"
    assert raised.value.message.startswith("file '") and bad.says in raised.value.message
    assert len(raised.value.message) < 400  # a 4 KB path is clipped where it is quoted
