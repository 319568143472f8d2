"""The journal: an output log persisted and reopened, and records that outlive their process
(events, died records, drops, the lock, forget, the state directory and its permissions)."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from warmkernel.errors import WarmkernelError
from warmkernel.execution.directive import Directives
from warmkernel.execution.displays import DisplayLog
from warmkernel.execution.output_log import OutputLog
from warmkernel.execution.record import ExecutionRecord
from warmkernel.execution.search import compile_query, search
from warmkernel.execution.spill import OutputDropped, Spill
from warmkernel.session.journal import Journal, forget, journaled_executions, state_dir, workspace_dir
from warmkernel.session.output_budget import OutputBudget, spill_prefix
from warmkernel.types import READABLE_STREAMS, ExecutionNumber, ExecutionState, Generation, StreamName


def spilled_log(directory: Path, threshold_bytes: int = 1_000_000) -> tuple[OutputLog, list[int]]:
    writes: list[int] = []
    return OutputLog(Spill(directory, threshold_bytes, writes.append)), writes


def reopened(log: OutputLog, directory: Path) -> OutputLog:
    """Close, persist, send the manifest through JSON (as the journal does) and reopen."""
    log.close()
    manifest = json.loads(json.dumps(log.persist()))
    return OutputLog.reopen(directory, manifest)


def everything(log: OutputLog, stream: str) -> list[str]:
    return log.lines(stream, 0, log.line_count(stream))  # type: ignore[arg-type]


def assert_same(before: OutputLog, after: OutputLog) -> None:
    for stream in READABLE_STREAMS:
        assert after.line_count(stream) == before.line_count(stream), stream
        assert after.char_count(stream) == before.char_count(stream), stream
        assert everything(after, stream) == everything(before, stream), stream


MIXED: list[tuple[StreamName, str]] = [
    ("stdout", "first\nsecond"),
    ("stderr", "warning: ünïcödé ✓ 漢字 🙂\n"),
    ("stdout", " continued\n"),
    ("result", "Out[1]: 42"),
    ("traceback", "Traceback\n  lone \ud800 surrogate\nValueError: x"),
]


def test_small_log_round_trips_counts_lines_and_unicode(tmp_path: Path) -> None:
    log, writes = spilled_log(tmp_path)
    for stream, text in MIXED:
        log.append(stream, text)
    after = reopened(log, tmp_path)
    assert_same(log, after)
    assert "warning: ünïcödé ✓ 漢字 🙂" in everything(after, "combined")
    assert "  lone \ufffd surrogate" in everything(after, "traceback")
    assert sum(writes) == log.disk_bytes == after.disk_bytes > 0


def test_big_spilled_log_round_trips_line_ranges(tmp_path: Path) -> None:
    log, writes = spilled_log(tmp_path, threshold_bytes=10_000)
    for chunk in range(100):
        log.append("stdout", "".join(f"line {chunk * 500 + i} {'x' * (i % 40)}\n" for i in range(500)))
        log.append("stderr", f"progress {chunk}\n")
    after = reopened(log, tmp_path)
    assert after.line_count("stdout") == 50_000
    assert after.line_count("combined") == 50_100
    assert after.lines("stdout", 31_337, 31_339) == log.lines("stdout", 31_337, 31_339)
    assert after.lines("combined", 25_049, 25_053) == log.lines("combined", 25_049, 25_053)
    assert after.last_lines("combined", 2) == ["line 49999 " + "x" * 19, "progress 99"]
    assert sum(writes) == after.disk_bytes
    assert_same(log, after)


def test_search_finds_the_same_lines_after_reopen(tmp_path: Path) -> None:
    log, _ = spilled_log(tmp_path, threshold_bytes=5_000)
    for i in range(3_000):
        log.append("stdout" if i % 7 else "stderr", f"row {i} {'needle' if i % 500 == 0 else 'hay'}\n")
    after = reopened(log, tmp_path)
    query = compile_query("needle", "literal", False)

    def found(source: OutputLog) -> list[tuple[int, str]]:
        result = search(
            source.blocks("combined"),
            query,
            context_before=1,
            context_after=1,
            max_matches=100,
            timeout_s=5,
        )
        return [(line.number, line.text) for group in result.groups for line in group]

    assert found(after) == found(log)
    assert len([1 for _, text in found(after) if "needle" in text]) == 6


def test_reopened_log_reads_its_files_on_demand(tmp_path: Path) -> None:
    log, _ = spilled_log(tmp_path)
    log.append("stdout", "kept on disk\n")
    after = reopened(log, tmp_path)
    for path in tmp_path.iterdir():
        path.unlink()
    assert after.line_count("stdout") == 1
    with pytest.raises(OutputDropped):
        after.lines("stdout", 0, 1)


def test_dropping_a_reopened_log_removes_its_files_and_keeps_counts(tmp_path: Path) -> None:
    log, _ = spilled_log(tmp_path)
    log.append("stdout", "a\nb\n")
    after = reopened(log, tmp_path)
    assert after.drop() == 4
    assert list(tmp_path.iterdir()) == []
    assert after.dropped
    assert after.line_count("combined") == 2
    with pytest.raises(OutputDropped):
        after.lines("combined", 0, 2)


def test_an_empty_log_persists_without_files(tmp_path: Path) -> None:
    log, _ = spilled_log(tmp_path)
    after = reopened(log, tmp_path)
    assert list(tmp_path.iterdir()) == []
    assert after.line_count("combined") == 0


def test_a_running_log_cannot_be_persisted(tmp_path: Path) -> None:
    log, _ = spilled_log(tmp_path)
    with pytest.raises(RuntimeError, match="still running"):
        log.persist()


# -- the journal ----------------------------------------------------------------------------


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def journal(workspace: Path, state: Path) -> Iterator[Journal]:
    with Journal.open(workspace, state) as opened:
        yield opened


def new_record(journal: Journal, number: int, source: str, **facts: object) -> ExecutionRecord:
    spill = Spill(journal.output_directory, 1_000_000, lambda _: None, spill_prefix(ExecutionNumber(number)))
    record = ExecutionRecord(
        ExecutionNumber(number),
        source,
        Generation(1),
        output=OutputLog(spill),
        displays=DisplayLog(spill),
        **facts,  # type: ignore[arg-type]
    )
    journal.started(record)
    return record


def reload(workspace: Path, state: Path) -> list[ExecutionRecord]:
    with Journal.open(workspace, state) as again:
        return again.load()


def test_records_come_back_finished_with_their_facts(journal: Journal, workspace: Path, state: Path) -> None:
    first = new_record(
        journal, 1, "print('hi')", client="claude-code", directives=Directives(full_output=True)
    )
    first.output.append("stdout", "hi\n")
    first.finish(ExecutionState.COMPLETED)
    journal.finished(first)
    second = new_record(journal, 2, "1/0", cell_id="cell-a")
    second.error_name, second.error_value = "ZeroDivisionError", "division by zero"
    second.output.append("traceback", "ZeroDivisionError: division by zero\n")
    second.finish(ExecutionState.ERROR)
    journal.finished(second)
    journal.close()

    one, two = reload(workspace, state)
    assert (one.number, one.source, one.state, one.client) == (
        1,
        "print('hi')",
        ExecutionState.COMPLETED,
        "claude-code",
    )
    assert one.directives == Directives(full_output=True)
    assert one.started_at == first.started_at
    assert one.elapsed() == pytest.approx(first.elapsed())
    assert one.ended_at is not None
    assert one.output.lines("combined", 0, 1) == ["hi"]
    assert (two.state, two.error_name, two.error_value) == (
        ExecutionState.ERROR,
        "ZeroDivisionError",
        "division by zero",
    )
    assert two.cell_id == "cell-a"
    assert two.generation == 1
    assert two.done.is_set()


def test_a_record_running_when_its_process_ended_becomes_died(
    journal: Journal, workspace: Path, state: Path
) -> None:
    record = new_record(journal, 1, "import time; time.sleep(100)")
    record.output.append("stdout", "spilled before the end\n")
    journal.close()

    (died,) = reload(workspace, state)
    assert died.state is ExecutionState.DIED
    assert died.end_reason == f"the daemon (pid {os.getpid()}) ended while it ran; its output was not kept"
    assert died.elapsed() < 1  # the journal was last written by its start
    assert list((journal.output_directory).iterdir()) == []


def marked_alive(journal: Journal, record: ExecutionRecord, after_s: float) -> None:
    """As the session does every second while a cell runs, `after_s` into the cell's run."""
    journal.alive()
    at = record.started_at.timestamp() + after_s
    os.utime(journal.directory / "journal.jsonl", (at, at))


def test_a_died_record_runs_until_the_journal_was_last_marked_alive(
    journal: Journal, workspace: Path, state: Path
) -> None:
    record = new_record(journal, 1, "import time; time.sleep(100)")
    record.output.write_through()
    marked_alive(journal, record, 42.0)
    journal.close()

    (died,) = reload(workspace, state)
    assert died.elapsed() == pytest.approx(42.0)
    assert died.end_reason.endswith("ended while it ran; it had printed nothing")
    # Decided once: events the next daemons write do not move its end.
    later = died.started_at.timestamp() + 3600
    os.utime(journal.directory / "journal.jsonl", (later, later))
    (again,) = reload(workspace, state)
    assert (again.elapsed(), again.end_reason) == (died.elapsed(), died.end_reason)


def test_a_died_record_keeps_what_it_wrote_through_and_not_a_line_cut_short(
    journal: Journal, workspace: Path, state: Path
) -> None:
    record = new_record(journal, 1, "import time; time.sleep(100)")
    record.output.append("stdout", "in memory until the write-through\n")
    record.output.write_through()
    many = [f"line {n} ✓" for n in range(20_000)]  # past several marks
    record.output.append("stdout", "\n".join(many) + "\n")
    record.output.append("stderr", "a warning\n")
    record.output.append("stdout", "never ended")  # the open line: in memory only
    (stdout_file,) = journal.output_directory.glob("1-stdout-*")
    with open(stdout_file, "ab") as torn:
        torn.write(b"a write cut sho")  # as a kill in the middle of a write leaves it
    marked_alive(journal, record, 3.0)
    journal.close()

    (died,) = reload(workspace, state)
    assert died.state is ExecutionState.DIED
    assert "the output it had written until then is kept" in died.end_reason
    assert everything(died.output, "stdout") == ["in memory until the write-through", *many]
    assert died.output.char_count("stdout") == sum(map(len, everything(died.output, "stdout")))
    assert died.output.lines("stdout", 12_345, 12_347) == many[12_344:12_346]
    assert everything(died.output, "combined")[-2:] == [many[-1], "a warning"]
    assert died.elapsed() == pytest.approx(3.0)
    # What it wrote stays for the next processes too.
    assert everything(reload(workspace, state)[0].output, "stderr") == ["a warning"]
    assert everything(reload(workspace, state)[0].output, "stdout")[-1] == many[-1]


def test_the_executions_kept_are_counted_without_taking_the_journal(
    journal: Journal, workspace: Path, state: Path
) -> None:
    assert journaled_executions(workspace, state) == {}
    new_record(journal, 1, "x = 1")
    trained = journal.kernel("train")
    new_record(trained, 1, "y = 2")
    new_record(trained, 2, "z = 3")
    trained.close()
    assert journaled_executions(workspace, state) == {"main": 1, "train": 2}, "while the journal is held"
    assert journaled_executions(workspace / "elsewhere", state) == {}


def test_a_drop_survives_a_restart(journal: Journal, workspace: Path, state: Path) -> None:
    record = new_record(journal, 1, "print('x' * 10)")
    record.output.append("stdout", "x" * 10 + "\n")
    record.finish(ExecutionState.COMPLETED)
    journal.finished(record)
    record.output.drop()
    journal.dropped(record)
    journal.close()

    (again,) = reload(workspace, state)
    assert again.output.dropped
    assert again.output.line_count("combined") == 1


def test_the_budget_counts_reloaded_output_and_drops_the_oldest(
    journal: Journal, workspace: Path, state: Path
) -> None:
    for number in (1, 2, 3):
        record = new_record(journal, number, "print('x' * 99)")
        record.output.append("stdout", "x" * 99 + "\n")
        record.finish(ExecutionState.COMPLETED)
        journal.finished(record)
    journal.close()

    with Journal.open(workspace, state) as again:
        records = again.load()
        by_number = {record.number: record for record in records}
        budget = OutputBudget(
            again.output_directory,
            threshold_bytes=1_000,
            limit_bytes=250,
            record_of=by_number.__getitem__,
            on_drop=again.dropped,
        )
        budget.adopt(records)
    assert [record.output.dropped for record in records] == [True, False, False]
    assert [record.output.dropped for record in reload(workspace, state)] == [True, False, False]


def test_a_torn_last_line_is_cut(journal: Journal, workspace: Path, state: Path) -> None:
    record = new_record(journal, 1, "x = 1")
    record.finish(ExecutionState.COMPLETED)
    journal.finished(record)
    journal.close()
    with (journal.directory / "journal.jsonl").open("a") as events:
        events.write('{"event": "start", "execu')

    with Journal.open(workspace, state) as again:
        assert [r.state for r in again.load()] == [ExecutionState.COMPLETED]
        new_record(again, 2, "y = 2")
    assert [r.number for r in reload(workspace, state)] == [1, 2]


def test_a_second_writer_is_refused_while_the_first_holds_the_journal(
    journal: Journal, workspace: Path, state: Path
) -> None:
    with pytest.raises(WarmkernelError) as refused:
        Journal.open(workspace, state)
    assert refused.value.code == "daemon_error"
    assert f"in use by another warmkernel process (pid {os.getpid()})" in refused.value.message
    journal.close()
    Journal.open(workspace, state).close()


def test_forget_deletes_the_journal_once_and_not_while_held(
    journal: Journal, workspace: Path, state: Path
) -> None:
    with pytest.raises(WarmkernelError) as refused:
        forget(workspace, state)
    assert refused.value.code == "daemon_error"
    journal.close()
    assert forget(workspace, state) is True
    assert not journal.directory.exists()
    assert forget(workspace, state) is False


def test_directories_are_0700_and_files_0600(journal: Journal, state: Path, workspace: Path) -> None:
    record = new_record(journal, 1, "print(1)")
    record.output.append("stdout", "1\n")
    record.finish(ExecutionState.COMPLETED)
    journal.finished(record)
    for directory in (state, state / "workspaces", journal.directory, journal.output_directory):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
    files = [path for path in journal.directory.rglob("*") if path.is_file()]
    assert {path.name for path in files} >= {"journal.jsonl", "lock", "workspace.json"}
    assert len(files) == 4  # and the one output file
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    claim = json.loads((journal.directory / "workspace.json").read_text())
    assert claim == {"workspace": str(workspace.resolve())}
    assert journal.directory == workspace_dir(workspace, state)


def test_the_state_directory_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("WARMKERNEL_STATE_DIR", raising=False)
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    assert state_dir() == tmp_path / "home" / ".local" / "state" / "warmkernel"
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert state_dir() == tmp_path / "xdg" / "warmkernel"
    monkeypatch.setenv("WARMKERNEL_STATE_DIR", str(tmp_path / "chosen"))
    assert state_dir() == tmp_path / "chosen"
    assert stat.S_IMODE((tmp_path / "chosen").stat().st_mode) == 0o700


def test_a_loose_state_directory_is_tightened(tmp_path: Path, workspace: Path) -> None:
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    loose.chmod(0o755)
    Journal.open(workspace, loose).close()
    assert stat.S_IMODE(loose.stat().st_mode) == 0o700


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_a_state_directory_of_another_user_is_refused(tmp_path: Path, workspace: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 54321, 54321)
    linked = tmp_path / "linked"
    linked.symlink_to(theirs)
    for path in (theirs, linked):
        with pytest.raises(WarmkernelError) as refused:
            Journal.open(workspace, path)
        assert refused.value.code == "daemon_error"
        assert "belongs to another user (uid 54321)" in refused.value.message
