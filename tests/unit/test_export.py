"""Executions as documents, without a kernel: the selection grammar, records to nbformat outputs,
the four formats, and cells spliced into an existing notebook."""

from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path
from typing import Any, NamedTuple

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from warmkernel.errors import WarmkernelError
from warmkernel.execution.displays import Placement
from warmkernel.execution.images import StoredImage
from warmkernel.execution.selection import parse_selection
from warmkernel.execution.transcript import Run, Transcript, notebook_outputs
from warmkernel.notebook.document import read_notebook
from warmkernel.notebook.export_files import (
    ExportedDocument,
    InsertedCells,
    format_for,
    insert_cells,
    inside_workspace,
    write_document,
)
from warmkernel.replies import documents
from warmkernel.replies.export import export_reply, insert_reply
from warmkernel.tools.catalog import TOOLS_BY_NAME
from warmkernel.types import StreamName

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)

# -- the selection grammar ----------------------------------------------------------------------


class Pick(NamedTuple):
    name: str
    text: str
    ranges: tuple[tuple[int, int], ...]


PICKS = [
    Pick("one number", "7", ((7, 7),)),
    Pick("numbers and a range", "3,5-9", ((3, 3), (5, 9))),
    Pick("spaces around items", " 3 , 5 - 9 ", ((3, 3), (5, 9))),
    Pick("order as written", "9,1-2", ((9, 9), (1, 2))),
    Pick("a one-number range", "4-4", ((4, 4),)),
]


@pytest.mark.parametrize("pick", PICKS, ids=[p.name for p in PICKS])
def test_selection_grammar_reads_numbers_and_ranges(pick: Pick) -> None:
    assert parse_selection(pick.text) == pick.ranges


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", '"" is neither'),
        ("3,,5", '"" is neither'),
        ("0", '"0" is neither'),
        ("-3", '"-3" is neither'),
        ("3-", '"3-" is neither'),
        ("a", '"a" is neither'),
        ("1.5", '"1.5" is neither'),
        ("9-5", "runs backwards (write 5-9)"),
    ],
)
def test_bad_selection_is_invalid_executions_with_the_valid_form(text: str, why: str) -> None:
    with pytest.raises(WarmkernelError) as caught:
        parse_selection(text)
    assert caught.value.code == "invalid_executions"
    assert why in caught.value.message and '"3,5-9"' in caught.value.message


def test_the_tool_parameter_takes_a_selection_a_number_or_nothing() -> None:
    tool = TOOLS_BY_NAME["export_python_executions"]
    assert tool.parse({"executions": "2,4-5"}).executions == ((2, 2), (4, 5))
    assert tool.parse({"executions": 3}).executions == ((3, 3),)
    assert tool.parse({}).executions is None
    for bad in (0, True, [1, 2], "x"):
        with pytest.raises(WarmkernelError) as caught:
            tool.parse({"executions": bad})
        assert caught.value.code == "invalid_executions"


@pytest.mark.parametrize(
    ("arguments", "shown"),
    [
        ({"timeout_seconds": None}, "timeout_seconds=null is not valid"),
        ({"timeout_seconds": True}, "timeout_seconds=true is not valid"),
        ({"execution": "3"}, 'execution="3" is not valid'),
        ({"execution": "x" * 500}, 'execution="' + "x" * 79 + "…"),
    ],
)
def test_a_refused_value_is_quoted_as_the_caller_sent_it(arguments: dict[str, Any], shown: str) -> None:
    with pytest.raises(WarmkernelError) as caught:
        TOOLS_BY_NAME["wait_python"].parse(arguments)
    assert caught.value.message.startswith(shown)


# -- records to nbformat outputs ------------------------------------------------------------------


def _split(tagged: list[tuple[StreamName, str]]) -> tuple[list[str], list[Run]]:
    """Lines, and the runs of one stream they form (as `OutputLog.runs` gives them)."""
    runs: list[Run] = []
    for index, (stream, _) in enumerate(tagged):
        if runs and runs[-1][0] == stream:
            runs[-1] = (stream, runs[-1][1], index + 1)
        else:
            runs.append((stream, index, index + 1))
    return [line for _, line in tagged], runs


def _image(ordinal: int) -> StoredImage:
    return StoredImage(ordinal, "image/png", len(PNG), 1, 1)


def test_streams_displays_results_and_errors_become_nbformat_outputs() -> None:
    lines: list[tuple[StreamName, str]] = [
        ("stdout", "a"),
        ("stdout", "b"),
        ("stderr", "warn"),
        ("result", "<Figure size 1x1>"),
        ("result", "[image 1: image/png 1x1, 70 bytes]"),
        ("stdout", "c"),
        ("result", "Out[4]: 42"),
        ("result", "  more"),
        ("traceback", "Traceback"),
        ("traceback", "ValueError: no"),
    ]
    displays = [(Placement(3, 5, _image(1)), False), (Placement(6, 8, None), False)]
    outputs = notebook_outputs(*_split(lines), displays, {1: PNG}, number=4, error=("ValueError", "no"))
    assert outputs == [
        {"output_type": "stream", "name": "stdout", "text": "a\nb\n"},
        {"output_type": "stream", "name": "stderr", "text": "warn\n"},
        {
            "output_type": "display_data",
            "data": {"text/plain": "<Figure size 1x1>", "image/png": base64.b64encode(PNG).decode()},
            "metadata": {},
        },
        {"output_type": "stream", "name": "stdout", "text": "c\n"},
        {
            "output_type": "execute_result",
            "execution_count": 4,
            "data": {"text/plain": "42\n  more"},
            "metadata": {},
        },
        {
            "output_type": "error",
            "ename": "ValueError",
            "evalue": "no",
            "traceback": ["Traceback", "ValueError: no"],
        },
    ]


def test_cleared_lines_and_replaced_display_states_are_left_out_as_jupyter_leaves_them() -> None:
    lines: list[tuple[StreamName, str]] = [
        ("stdout", "before the clear"),
        ("result", "10%"),
        ("stdout", "between"),
        ("result", "100%"),
    ]
    displays = [(Placement(1, 2, None), True), (Placement(3, 4, None), False)]
    outputs = notebook_outputs(*_split(lines), displays, {}, number=1, error=("", ""), start=1)
    assert outputs == [
        {"output_type": "stream", "name": "stdout", "text": "between\n"},
        {"output_type": "display_data", "data": {"text/plain": "100%"}, "metadata": {}},
    ]


def test_a_reloaded_record_without_placements_splits_its_results_at_the_out_label() -> None:
    lines: list[tuple[StreamName, str]] = [
        ("result", "shown"),
        ("result", "[image 1: image/png 1x1, 70 bytes]"),
        ("result", "Out[2]: 'value'"),
    ]
    outputs = notebook_outputs(*_split(lines), [], {}, number=2, error=("", ""))
    assert [output["output_type"] for output in outputs] == ["display_data", "execute_result"]
    assert outputs[0]["data"] == {"text/plain": "shown\n[image 1: image/png 1x1, 70 bytes]"}
    assert outputs[1]["data"] == {"text/plain": "'value'"}


def test_a_value_of_several_lines_is_one_execute_result_without_its_label_line() -> None:
    frame = ["   a  b", "0  1  4", "1  2  5"]
    lines: list[tuple[StreamName, str]] = [
        ("stdout", "x"),
        ("result", "Out[7]:"),
        *(("result", row) for row in frame),
    ]
    expected = {
        "output_type": "execute_result",
        "execution_count": 7,
        "data": {"text/plain": "\n".join(frame)},
    }
    with_placement = [(Placement(1, 5, None), False)]
    for displays in (with_placement, []):  # live, and reloaded from the journal
        outputs = notebook_outputs(*_split(lines), displays, {}, number=7, error=("", ""))
        assert outputs[1] == expected | {"metadata": {}}


# -- the four formats ---------------------------------------------------------------------------------


def _transcript(number: int, source: str, outputs: list[dict[str, Any]], **facts: Any) -> Transcript:
    return Transcript(
        number=number,
        source=source,
        state=facts.pop("state", "completed"),
        generation=1,
        started_at="2026-01-01T00:00:00+00:00",
        ended_at="2026-01-01T00:00:01+00:00",
        elapsed_s=1.0,
        outputs=tuple(outputs),
        **facts,
    )


PICTURE = {
    "output_type": "display_data",
    "data": {"text/plain": "<Figure>", "image/png": base64.b64encode(PNG).decode()},
    "metadata": {},
}
TRANSCRIPTS = [
    _transcript(3, "print('<b>')\n", [{"output_type": "stream", "name": "stdout", "text": "<b>\n"}]),
    _transcript(5, "plot()", [PICTURE]),
    _transcript(
        6,
        "s = '```'\n1/0",
        [
            {
                "output_type": "error",
                "ename": "ZeroDivisionError",
                "evalue": "division by zero",
                "traceback": ["tb"],
            }
        ],
        state="error",
        error_name="ZeroDivisionError",
        error_value="division by zero",
    ),
    _transcript(7, "big()", [], output_dropped=True),
]


def test_the_notebook_validates_and_keeps_counts_outputs_and_warmkernel_metadata() -> None:
    notebook = nbformat.reads(documents.notebook_text(TRANSCRIPTS), as_version=4)
    nbformat.validate(notebook)
    assert [cell.id for cell in notebook.cells] == [
        "execution-3",
        "execution-5",
        "execution-6",
        "execution-7",
    ]
    assert [cell.execution_count for cell in notebook.cells] == [3, 5, 6, 7]
    assert base64.b64decode(notebook.cells[1].outputs[0].data["image/png"]) == PNG
    facts = notebook.cells[2].metadata["warmkernel"]
    assert facts["state"] == "error" and facts["generation"] == 1
    assert facts["error"] == {"name": "ZeroDivisionError", "value": "division by zero"}
    assert notebook.cells[3].metadata["warmkernel"]["output_dropped"] is True


def test_the_script_has_one_percent_cell_per_execution_and_no_outputs() -> None:
    text = documents.script(TRANSCRIPTS)
    assert re.findall(r"^# %% .*$", text, re.MULTILINE) == [
        "# %% In [3] · completed · 1.0 s",
        "# %% In [5] · completed · 1.0 s",
        "# %% In [6] · error ZeroDivisionError · 1.0 s",
        "# %% In [7] · completed · 1.0 s",
    ]
    assert "<b>\n" not in text.replace("print('<b>')", "")
    compile(text.replace("plot()", "pass").replace("big()", "pass"), "export.py", "exec")


def test_markdown_fences_outlast_backticks_and_embed_images() -> None:
    text = documents.markdown(TRANSCRIPTS)
    assert "````python\ns = '```'\n1/0\n````" in text
    assert f"![<Figure>](data:image/png;base64,{base64.b64encode(PNG).decode()})" in text
    assert "output of execution 7 was dropped" in text


def test_the_html_page_escapes_text_embeds_images_and_loads_nothing() -> None:
    page = documents.html(TRANSCRIPTS, "ws: <executions>")
    assert "<title>ws: &lt;executions&gt;</title>" in page
    assert '<pre class="stdout">&lt;b&gt;</pre>' in page
    assert 'src="data:image/png;base64,' in page
    assert "<script" not in page and "http://" not in page and "https://" not in page
    assert "default-src 'none'" in page


def test_ranges_and_cell_ids() -> None:
    assert documents.ranges([3, 5, 6, 7, 8, 9, 12]) == "3, 5-9, 12"
    assert documents.cell_ids([1, 2], taken={"execution-1", "execution-1-2"}) == [
        "execution-1-3",
        "execution-2",
    ]


# -- files ------------------------------------------------------------------------------------------------


def test_paths_outside_the_workspace_are_refused_naming_it(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "sub").mkdir(parents=True)
    (workspace / "out").symlink_to(tmp_path)
    assert inside_workspace(workspace, "sub/x.ipynb") == workspace / "sub" / "x.ipynb"
    assert inside_workspace(workspace, str(workspace / "x.md")) == workspace / "x.md"
    for bad in ("../x.ipynb", "/etc/x.ipynb", "out/x.ipynb", "."):
        with pytest.raises(WarmkernelError) as caught:
            inside_workspace(workspace, bad)
        assert caught.value.code == "path_outside_workspace" and str(workspace) in caught.value.message


def test_a_format_follows_the_suffix() -> None:
    assert [format_for(Path(name)) for name in ("a.py", "a.MD", "a.htm", "a.ipynb", "a.txt")] == [
        "py",
        "md",
        "html",
        "ipynb",
        "ipynb",
    ]
    assert format_for(None) == "ipynb"


def test_write_document_replaces_a_file_keeping_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "x.md"
    target.write_text("old")
    target.chmod(0o640)
    assert write_document(tmp_path, target, "néw") == 4
    assert target.read_text(encoding="utf-8") == "néw" and target.stat().st_mode & 0o777 == 0o640
    with pytest.raises(WarmkernelError) as caught:
        write_document(tmp_path, tmp_path / "missing" / "x.md", "")
    assert caught.value.code == "write_failed"
    assert os.listdir(tmp_path) == ["x.md"]


def _jupyter_notebook(path: Path, minor: int = 5) -> str:
    cells = [
        new_markdown_cell("# Title", id="intro"),
        new_code_cell("import math", id="load"),
        new_code_cell("x = math.pi\nx", id="use"),
    ]
    notebook = new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "P"}})
    text = nbformat.writes(notebook)
    if minor < 5:
        raw = json.loads(text)
        raw["nbformat_minor"] = minor
        for cell in raw["cells"]:
            del cell["id"]
        text = json.dumps(raw, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    path.write_text(text, encoding="utf-8")
    return text


def _new(minor: int, taken: frozenset[str]) -> list[dict[str, Any]]:
    return documents.new_cells(TRANSCRIPTS[:2], minor, taken)


@pytest.mark.parametrize(("after", "index"), [("load", 2), (0, 2), ("intro", 1), (None, 3), (1, 3)])
def test_inserted_cells_leave_every_other_byte_as_it_was(
    tmp_path: Path, after: str | int | None, index: int
) -> None:
    path = tmp_path / "nb.ipynb"
    before = _jupyter_notebook(path)
    inserted = insert_cells(tmp_path, path, _new, after)
    assert (inserted.ids, inserted.index) == (("execution-3", "execution-5"), index)
    after_text = path.read_text(encoding="utf-8")
    notebook = nbformat.reads(after_text, as_version=4)
    nbformat.validate(notebook)
    old = json.loads(before)["cells"]
    assert [cell.id for cell in notebook.cells] == [
        *(cell["id"] for cell in old[:index]),
        "execution-3",
        "execution-5",
        *(cell["id"] for cell in old[index:]),
    ]
    # Every old cell's text is where it was, untouched: the new text is the old one with a block added.
    added = len(after_text) - len(before)
    start = next(i for i, (a, b) in enumerate(zip(before, after_text, strict=False)) if a != b)
    assert after_text[:start] + after_text[start + added :] == before
    assert nbformat.writes(notebook) == after_text  # written in Jupyter's own style


def test_cells_added_to_an_empty_or_compact_notebook_keep_its_style(tmp_path: Path) -> None:
    empty = tmp_path / "empty.ipynb"
    empty.write_text(nbformat.writes(new_notebook()), encoding="utf-8")
    insert_cells(tmp_path, empty, _new, None)
    assert nbformat.writes(nbformat.reads(empty.read_text(), as_version=4)) == empty.read_text()
    compact = tmp_path / "compact.ipynb"
    raw = nbformat.v4.new_notebook(cells=[new_code_cell("1", id="a")])
    compact.write_text(json.dumps(raw).replace("\n", "") + "\r\n")
    before = compact.read_text()
    insert_cells(tmp_path, compact, _new, "a")
    text = compact.read_bytes().decode()
    assert (
        text.startswith(before[: before.index('"id": "a"')])
        and text.endswith("\r\n")
        and "\n" not in text[:-2]
    )
    nbformat.validate(nbformat.reads(text, as_version=4))


def test_an_old_notebook_gets_cells_without_ids_and_says_which_derived_ids_moved(tmp_path: Path) -> None:
    path = tmp_path / "old.ipynb"
    before = _jupyter_notebook(path, minor=4)
    ids_before = [cell.id for cell in read_notebook(path).cells]

    def same_source_as_use(minor: int, taken: frozenset[str]) -> list[dict[str, Any]]:
        return documents.new_cells([_transcript(9, "x = math.pi\nx", [])], minor, taken)

    inserted = insert_cells(tmp_path, path, same_source_as_use, 0)
    ids_after = [cell.id for cell in read_notebook(path).cells]
    assert '"id"' not in path.read_text() and json.loads(path.read_text())["nbformat_minor"] == 4
    assert inserted.ids == (ids_after[1],) and ids_after[1] == ids_before[1]
    assert inserted.renamed == {ids_before[1]: ids_after[2]}
    assert len(path.read_text()) > len(before)


def test_an_unknown_cell_or_a_broken_file_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "nb.ipynb"
    before = _jupyter_notebook(path)
    with pytest.raises(WarmkernelError) as caught:
        insert_cells(tmp_path, path, _new, "nope")
    assert caught.value.code == "invalid_arguments" and "'load', 'use'" in caught.value.message
    with pytest.raises(WarmkernelError):
        insert_cells(tmp_path, path, _new, 2)
    assert path.read_text() == before
    broken = tmp_path / "broken.ipynb"
    broken.write_text("{not json")
    with pytest.raises(WarmkernelError) as caught:
        insert_cells(tmp_path, broken, _new, None)
    assert caught.value.code == "invalid_notebook"


# -- replies ------------------------------------------------------------------------------------------


def test_replies_say_where_the_document_and_the_cells_went() -> None:
    written = ExportedDocument((3, 5, 6, 7), "ipynb", "out/x.ipynb", None, 12345, 2)
    reply = export_reply(written)
    assert (
        reply.text == "exported executions 3, 5-7 (4 cells, 2 images) as ipynb to out/x.ipynb (12,345 bytes)"
    )
    assert reply.data["executions"] == [3, 5, 6, 7] and not reply.is_document
    printed = export_reply(ExportedDocument((1,), "py", None, "# %% In [1]\nx\n", 14, 0))
    assert printed.text == "# %% In [1]\nx" and printed.is_document and printed.data["path"] is None
    first = insert_reply("nb.ipynb", InsertedCells(("execution-1",), 0, None, {}))
    assert first.text.startswith(
        "added 1 code cell to nb.ipynb as its first cells (index 0 among all its cells, markdown too): "
        "execution-1"
    )
    moved = insert_reply("old.ipynb", InsertedCells(("wk-a-0", "wk-b-0"), 3, None, {"wk-a-0": "wk-a-1"}))
    assert "to old.ipynb after its cell 2 (index 3 among all its cells, markdown too)" in moved.text
    assert moved.text.endswith("cells without ids of their own now have other derived ids: wk-a-0 -> wk-a-1")
    assert 'notebook_status(path="old.ipynb") lists them as never_run' in moved.text


def test_a_running_cells_open_line_continues_the_output_of_its_stream() -> None:
    runs: list[Run] = [("stdout", 0, 1), ("stderr", 1, 2), ("stdout", 2, 3), ("stdout", 3, 4)]
    outputs = notebook_outputs(["a", "warn", "b", "open"], runs, [], {}, number=1, error=("", ""))
    assert [output["text"] for output in outputs] == ["a\n", "warn\n", "b\nopen\n"]
