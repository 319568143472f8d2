"""A full disk under the output log, the image store and the journal (a small tmpfs, root only):
nothing raises into the cell, what was written stays readable and whole, what could not be is
counted, and a journal line waits for room, except a start, which is refused."""

from __future__ import annotations

import errno
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.tmpfs import fill, grow, needs_root, small_tmpfs
from warmkernel.errors import WarmkernelError
from warmkernel.execution.displays import DisplayLog
from warmkernel.execution.images import Image
from warmkernel.execution.output_log import OutputLog
from warmkernel.execution.record import ExecutionRecord
from warmkernel.execution.spill import Spill
from warmkernel.session.journal import Journal
from warmkernel.session.output_budget import spill_prefix
from warmkernel.types import ExecutionNumber, ExecutionState, Generation

pytestmark = needs_root

LINE = "y" * 99 + "\n"


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path / "disk", "64k") as mounted:
        yield mounted


def _spill(directory: Path, errors: list[OSError], threshold_bytes: int = 1_000) -> Spill:
    return Spill(directory, threshold_bytes, lambda _: None, on_full=errors.append)


def test_an_output_log_on_a_full_disk_keeps_what_it_wrote_and_counts_the_rest(disk: Path) -> None:
    errors: list[OSError] = []
    log = OutputLog(_spill(disk, errors))
    for _ in range(2_000):  # 200 KB into 64 KB
        log.append("stdout", LINE)
    log.append("stderr", "after the disk filled\n")
    log.close()
    kept = log.line_count("stdout")
    assert [error.errno for error in errors] == [errno.ENOSPC]  # told once
    assert 0 < kept < 2_000 and log.line_count("stderr") == 0
    assert log.not_kept_bytes == (2_000 - kept) * len(LINE) + len("after the disk filled\n")
    assert log.lines("stdout", 0, kept) == [LINE[:-1]] * kept
    (file,) = disk.iterdir()
    assert file.stat().st_size == kept * len(LINE)  # the failed write was cut off again


def test_an_image_that_cannot_be_spilled_stays_in_memory(disk: Path) -> None:
    errors: list[OSError] = []
    fill(disk)
    displays = DisplayLog(_spill(disk, errors, threshold_bytes=10))
    stored = displays.images.add(Image("image/png", b"\x89PNG\r\n\x1a\n" + b"p" * 100))
    assert displays.images.read(stored.ordinal) == b"\x89PNG\r\n\x1a\n" + b"p" * 100
    assert [error.errno for error in errors] == [errno.ENOSPC]
    assert [path.name for path in disk.iterdir()] == ["filler"]


def _record(journal: Journal, number: int, source: str) -> ExecutionRecord:
    spill = Spill(journal.output_directory, 1_000_000, lambda _: None, spill_prefix(ExecutionNumber(number)))
    return ExecutionRecord(
        ExecutionNumber(number), source, Generation(1), output=OutputLog(spill), displays=DisplayLog(spill)
    )


def test_a_journal_on_a_full_disk_refuses_a_start_and_writes_the_rest_once_there_is_room(
    disk: Path, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    told: list[OSError | None] = []
    with Journal.open(workspace, disk) as journal:
        journal.on_write = told.append
        first = _record(journal, 1, "print(1)")
        journal.started(first)
        first.output.append("stdout", "1\n")
        filler = fill(disk)
        events = journal.directory / "journal.jsonl"
        before = events.read_bytes()
        with pytest.raises(OSError, match="No space left on device"):
            journal.started(_record(journal, 2, "x = 2  # " + "x" * 8_000))
        first.finish(ExecutionState.INTERRUPTED, reason="r" * 8_000)  # a line longer than a page
        journal.finished(first)  # waits for room
        assert events.read_bytes() == before  # no torn line
        filler.unlink()
        grow(disk, "1m")
        journal.started(_record(journal, 2, "x = 2"))
        assert [error is None for error in told] == [True, False, False, False, True]
    lines = [json.loads(line) for line in events.read_bytes().splitlines()]
    assert [(line["event"], line["execution"]) for line in lines] == [
        ("start", 1),
        ("finish", 1),
        ("start", 2),
    ]
    lost = "its output was not journaled: the disk is full (No space left on device)"
    assert lines[1]["end_reason"] == "r" * 8_000 + "; " + lost
    with Journal.open(workspace, disk) as again:
        assert [(record.number, record.state) for record in again.load()] == [
            (1, ExecutionState.INTERRUPTED),
            (2, ExecutionState.DIED),
        ]


def test_a_journal_that_cannot_be_made_on_a_full_disk_is_journal_unavailable_and_leaves_nothing_broken(
    disk: Path, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    filler = fill(disk)
    with pytest.raises(WarmkernelError) as refused:
        Journal.open(workspace, disk)
    assert refused.value.code == "journal_unavailable"
    assert "the disk is full (No space left on device)" in refused.value.message
    assert "WARMKERNEL_STATE_DIR" in refused.value.message
    filler.unlink()
    with Journal.open(workspace, disk) as journal:  # no half-written file stands in the way
        assert journal.load() == []
