"""Journal owns a workspace's execution records on disk, so that they outlive the process that ran them.

Layout, in the per-user state directory (`state_dir()`, 0700; every file 0600):

    workspaces/<first 16 hex of sha256 of the resolved workspace path>/    0700
        workspace.json   {"workspace": "/abs/path"}: whose journal this is
        lock             flock'ed by the one process that writes the journal; holds its pid
        journal.jsonl    one JSON object per line: `start`, `finish` and `drop` events
        output/          0700: the records' output files, named by the `finish` events
        kernels/<name>/  0700: journal.jsonl and output/ of each named kernel but `main`

A record is written twice: when it starts (number, source, generation, cell, client, directives;
nothing per output message) and when it finishes (state, time taken, error, end reason, and
the manifest of its output, which `OutputLog.persist` moved into output/). A drop of its output
to stay under the output limit is a line of its own. Lines are written with one unbuffered
`write` each and not fsynced: a process that is killed loses nothing, a machine that loses
power may lose the last lines.

A full disk never stops a kernel. A line that cannot be written is cut off again (no torn line
stays), and `on_write` is told the error. A start that cannot be written raises: the caller
gives out no number (`journal_unavailable`), so a number is never reused after a restart. Any
other line waits in memory and is written before the next line, once there is room.

`load` replays the lines: a record that started but never finished was running when its
process ended and becomes `died`, its time running until the events file was last written (a
session marks it `alive` while a cell runs), and its finish is journaled then, once. Its output
is lost, unless it ran long enough that its session wrote it through to output/
(`OutputLog.write_through`): then its completed lines are kept. Any file in output/ that no kept
record names is removed. Images are not journaled: a reloaded record keeps their captions in
its result stream and counts them in `images_not_kept`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import stat
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from warmkernel.errors import WarmkernelError
from warmkernel.execution.directive import Directives
from warmkernel.execution.output_log import LogManifest, OutputLog
from warmkernel.execution.record import ExecutionRecord
from warmkernel.replies.disk import journal_cannot_open, output_not_journaled
from warmkernel.session.output_budget import spill_prefix
from warmkernel.types import MAIN_KERNEL, ExecutionNumber, ExecutionState, Generation

log = logging.getLogger(__name__)

STATE_DIR_ENV = "WARMKERNEL_STATE_DIR"
_EVENTS = "journal.jsonl"
_LOCK = "lock"
_CLAIM = "workspace.json"
_OUTPUT = "output"
_KERNELS = "kernels"
_TAIL_CHUNK = 65536
ALIVE_EVERY_S = 0.25
"""While a cell runs, its session marks the journal `alive` this often: a cell whose daemon is
killed reads back as having run until then, within this (`Session._keep_running_cell`)."""
WRITE_THROUGH_AFTER_S = 1.0
"""A cell that has run this long writes its output through to the journal (at the next mark)."""
_START = b'{"event":"start",'
"""How a start event's line begins, as `_append` writes it."""


def state_dir() -> Path:
    """The per-user state directory, created 0700: `$WARMKERNEL_STATE_DIR`, else
    `$XDG_STATE_HOME/warmkernel`, else `~/.local/state/warmkernel`."""
    return _private_dir(_configured_state_dir())


def workspace_dir(workspace: Path, state_dir: Path | None = None) -> Path:
    """Where the journal of `workspace` lives (the directory itself is not created here)."""
    return _private_dir(_private_dir(_root(state_dir)) / "workspaces") / _key(workspace)


def _root(state_dir: Path | None) -> Path:
    return state_dir if state_dir is not None else _configured_state_dir()


def _key(workspace: Path) -> str:
    return hashlib.sha256(str(workspace.resolve()).encode()).hexdigest()[:16]


def journaled_executions(workspace: Path, state_dir: Path | None = None) -> dict[str, int]:
    """How many executions the journal of `workspace` keeps, by kernel (those with any): read, not
    taken, and nothing created (for a message; empty when there is no journal)."""
    directory = _root(state_dir) / "workspaces" / _key(workspace)
    paths = {MAIN_KERNEL: directory / _EVENTS}
    paths |= {path.parent.name: path for path in sorted(directory.glob(f"{_KERNELS}/*/{_EVENTS}"))}
    counts: dict[str, int] = {}
    for kernel, path in paths.items():
        with contextlib.suppress(OSError), open(path, "rb") as lines:
            if count := sum(1 for line in lines if line.startswith(_START)):
                counts[kernel] = count
    return counts


def forget(workspace: Path, state_dir: Path | None = None) -> bool:
    """Delete the journal of `workspace`, records and output; False if it had none.

    `daemon_error` while a process writes that journal.
    """
    directory = workspace_dir(workspace, state_dir)
    if not directory.exists():
        return False
    lock = _lock(_private_dir(directory), workspace)
    try:
        shutil.rmtree(directory)
    finally:
        os.close(lock)
    return True


class Journal:
    """The journal of one workspace's kernel, written by this process alone until `close`.

    `open` gives `main`'s and holds the workspace's lock; `kernel` gives each kernel's under it.
    """

    def __init__(self, workspace: Path, directory: Path, lock: int | None, events: int) -> None:
        self.workspace = workspace
        self.directory = directory
        self.output_directory = directory / _OUTPUT
        """Where records' output files live: the session's spill directory."""
        self._lock = lock
        """The workspace's lock, held by `main`'s journal; None for another kernel's."""
        self._events: int | None = events
        self._waiting: list[bytes] = []
        """Lines that could not be written yet (a full disk), oldest first."""
        self.on_write: Callable[[OSError | None], None] = lambda _: None
        """Told the error of each line that could not be written, and None when a cell's start
        was: there is room for cells again."""

    @classmethod
    def open(cls, workspace: Path, state_dir: Path | None = None) -> Journal:
        """Take the workspace's journal for this process; `daemon_error` while another process holds it."""
        workspace = workspace.resolve()
        directory = workspace_dir(workspace, state_dir)
        try:
            lock = _lock(_private_dir(directory), workspace)
        except OSError as exc:  # a full disk, say: refused with words, not a traceback
            raise journal_cannot_open(directory, exc) from exc
        try:
            _claim(directory, workspace)
            return cls(workspace, directory, lock, _open_events(directory))
        except OSError as exc:
            os.close(lock)
            raise journal_cannot_open(directory, exc) from exc
        except BaseException:
            os.close(lock)
            raise

    def kernel(self, name: str) -> Journal:
        """The journal of the workspace's kernel `name`, under this one's lock; the caller closes it."""
        if name == MAIN_KERNEL:
            directory = self.directory
        else:
            directory = _private_dir(_private_dir(self.directory / _KERNELS) / name)
        return Journal(self.workspace, directory, None, _open_events(directory))

    def kernel_names(self) -> list[str]:
        """The kernels but `main` that have a journal here, by name."""
        kernels = self.directory / _KERNELS
        return sorted(path.name for path in kernels.iterdir() if path.is_dir()) if kernels.is_dir() else []

    def close(self) -> None:
        """Stop writing (for `main`'s journal: and let another process take the workspace's); a
        line still waiting for room is tried once more."""
        if self._events is not None:
            with contextlib.suppress(OSError):
                self._write_waiting(self._events)
            os.close(self._events)
            self._events = None
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def __enter__(self) -> Journal:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    # -- reading ------------------------------------------------------------------------------

    def load(self) -> list[ExecutionRecord]:
        """Every journaled record in number order, each finished: one that was running when its
        process ended is `died`. Output files no kept record names are removed."""
        starts: dict[int, dict[str, Any]] = {}
        finishes: dict[int, dict[str, Any]] = {}
        drops: set[int] = set()
        last_alive = (self.directory / _EVENTS).stat().st_mtime  # see `alive`
        with open(self.directory / _EVENTS, "rb") as lines:
            for index, line in enumerate(lines, 1):
                try:
                    event = json.loads(line)
                    kind, number = event["event"], int(event["execution"])
                except (ValueError, TypeError, KeyError):
                    log.warning("line %d of %s is not a journal event; skipped", index, lines.name)
                    continue
                if kind == "start":
                    starts[number] = event
                elif kind == "finish":
                    finishes[number] = event
                elif kind == "drop":
                    drops.add(number)
        records: list[ExecutionRecord] = []
        kept: set[str] = set()
        for number in sorted(starts):
            finish = finishes.get(number)
            try:
                manifest = self._manifest(number, finish)
                record = self._rebuild(starts[number], finish, manifest, last_alive)
            except (OSError, ValueError, TypeError, KeyError) as exc:
                log.warning("execution %d cannot be read back (%r); skipped", number, exc)
                continue
            if finish is None:  # decided once: later events must not move its end
                self._finish(record, manifest)
            if number in drops:
                record.output.drop()
            elif manifest is not None:
                kept.update(part["file"] for part in manifest["streams"].values() if part["file"])
            records.append(record)
        for path in self.output_directory.iterdir():
            if path.name not in kept:
                path.unlink(missing_ok=True)
        return records

    def _manifest(self, number: int, finish: dict[str, Any] | None) -> LogManifest | None:
        """The output of a finished record as journaled, or what one that died wrote through."""
        if finish is not None:
            return finish["output"]
        return OutputLog.recover(self.output_directory, spill_prefix(ExecutionNumber(number)))

    def _rebuild(
        self,
        start: dict[str, Any],
        finish: dict[str, Any] | None,
        manifest: LogManifest | None,
        last_alive: float,
    ) -> ExecutionRecord:
        """The record two events describe; without a finish, the record of a process that ended,
        which ran until `last_alive` (epoch seconds) as far as the journal knows."""
        output = OutputLog.reopen(self.output_directory, manifest) if manifest is not None else _empty_log()
        record = ExecutionRecord(
            ExecutionNumber(start["execution"]),
            start["source"],
            Generation(start["generation"]),
            directives=Directives(**start["directives"]),
            started_at=datetime.fromisoformat(start["started_at"]),
            output=output,
            patch_literals=start["patch_literals"],
            cell_id=start["cell_id"],
            client=start["client"],
        )
        if finish is None:
            elapsed = max(0.0, last_alive - record.started_at.timestamp())
            kept = "the output it had written until then is kept (stdout's lines, then stderr's)"
            if manifest is None:
                written_through = elapsed >= WRITE_THROUGH_AFTER_S + ALIVE_EVERY_S
                kept = "it had printed nothing" if written_through else "its output was not kept"
            reason = f"the daemon (pid {start['pid']}) ended while it ran; {kept}"
            record.ended_earlier(ExecutionState.DIED, elapsed, reason=reason)
            return record
        record.error_name, record.error_value = finish["error_name"], finish["error_value"]
        record.images_not_kept = finish["images"]
        record.displays.cleared_before = finish["cleared_before"]
        state, reason = ExecutionState(finish["state"]), finish["end_reason"]
        record.ended_earlier(state, finish["elapsed_s"], reason=reason)
        return record

    # -- writing ------------------------------------------------------------------------------

    def started(self, record: ExecutionRecord, *, refusable: bool = True) -> None:
        """A cell, before the kernel runs it (or, not `refusable`, a cell it already runs): if this
        process ends first, it reads back as died. A refusable start that cannot be written raises
        OSError: the cell must not get its number."""
        self._append(
            {
                "event": "start",
                "execution": record.number,
                "pid": os.getpid(),
                "source": record.source,
                "generation": record.generation,
                "started_at": record.started_at.isoformat(),
                "cell_id": record.cell_id,
                "client": record.client,
                "directives": asdict(record.directives),
                "patch_literals": record.patch_literals,
            },
            refusable=refusable,
        )

    def finished(self, record: ExecutionRecord) -> None:
        """How a record ended, and its output, moved into the output directory once, now (a full
        disk: the journaled record says its output was not kept)."""
        try:
            manifest = record.output.persist()
        except OSError as exc:
            log.warning("the output of execution %d could not be journaled: %s", record.number, exc)
            self.on_write(exc)
            self._finish(record, None, output_not_journaled(exc))
            return
        self._finish(record, manifest)

    def _finish(self, record: ExecutionRecord, manifest: LogManifest | None, lost: str = "") -> None:
        """Append the finish event; `lost` says why its output is not journaled."""
        reason = "; ".join(part for part in (record.end_reason, lost) if part)
        self._append(
            {
                "event": "finish",
                "execution": record.number,
                "state": record.state.value,
                "elapsed_s": record.elapsed(),
                "error_name": record.error_name,
                "error_value": record.error_value,
                "end_reason": reason,
                "images": len(record.displays.images),
                "cleared_before": record.displays.cleared_before,
                "output": manifest,
            }
        )

    def alive(self) -> None:
        """Mark the journal as written now, while a cell runs: a record that was running when
        this process ended ran until then (`load`)."""
        os.utime(self.directory / _EVENTS)

    def dropped(self, record: ExecutionRecord) -> None:
        """A record's output was dropped to stay under the output limit: also after a restart."""
        self._append({"event": "drop", "execution": record.number})

    def _append(self, event: dict[str, Any], *, refusable: bool = False) -> None:
        """One line, one unbuffered write, after the lines waiting for room. A journal that cannot
        be written must not stop the kernel: the line waits (a `refusable` one raises instead)."""
        events = self._events
        if events is None:
            raise RuntimeError(f"the journal {self.directory} of {self.workspace} is closed")
        line = (json.dumps(event, separators=(",", ":")) + "\n").encode()
        try:
            self._write_waiting(events)
            _write_line(events, line)
        except OSError as exc:
            what, number = event["event"], event["execution"]
            log.warning("the %s of execution %s could not be journaled: %s", what, number, exc)
            self.on_write(exc)
            if refusable:
                raise
            self._waiting.append(line)
            return
        if refusable:
            self.on_write(None)

    def _write_waiting(self, events: int) -> None:
        """Write the lines that waited for room, oldest first; OSError leaves the rest waiting."""
        while self._waiting:
            _write_line(events, self._waiting[0])
            del self._waiting[0]


def _write_line(events: int, line: bytes) -> None:
    """Append one line; a write that fails (a full disk) is cut off again, and raises."""
    view = memoryview(line)
    try:
        while view:
            view = view[os.write(events, view) :]
    except OSError:
        _cut_torn_tail(events)
        raise


def _open_events(directory: Path) -> int:
    """The events file of a kernel's journal in `directory`, opened for appending, torn tail cut."""
    _private_dir(directory / _OUTPUT)
    events = os.open(directory / _EVENTS, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    _cut_torn_tail(events)
    return events


def _configured_state_dir() -> Path:
    configured = os.environ.get(STATE_DIR_ENV)
    if configured:
        return Path(configured).absolute()
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".local" / "state"
    return base / "warmkernel"


def _private_dir(path: Path) -> Path:
    """`path` as a directory of this user that no one else may enter: created 0700, or checked
    (and tightened to 0700) if it exists. A symlink is followed; what it leads to is checked."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = path.stat()
    except OSError as exc:
        raise WarmkernelError("daemon_error", f"warmkernel cannot keep its state in {path}: {exc}") from exc
    if info.st_uid != os.getuid():
        raise WarmkernelError(
            "daemon_error",
            f"{path} belongs to another user (uid {info.st_uid}), so warmkernel will not keep its journal "
            f"there; set {STATE_DIR_ENV} to a directory of your own",
        )
    if stat.S_IMODE(info.st_mode) & 0o077:
        path.chmod(0o700)
    return path


def _lock(directory: Path, workspace: Path) -> int:
    """Hold the journal's lock (its descriptor); `daemon_error` naming the process that holds it."""
    fd = os.open(directory / _LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise WarmkernelError(
            "daemon_error",
            f"the journal of {workspace} is in use by another warmkernel process (pid {holder}); "
            "stop it first, or run with --ephemeral",
        ) from None
    os.ftruncate(fd, 0)
    with contextlib.suppress(OSError):  # the pid only names the holder; a full disk may refuse it
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _claim(directory: Path, workspace: Path) -> None:
    """Name the workspace in its directory; refuse a directory that names another one."""
    path = directory / _CLAIM
    try:
        named = json.loads(path.read_text(encoding="utf-8"))["workspace"]
    except FileNotFoundError:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                json.dump({"workspace": str(workspace)}, file)
        except OSError:
            path.unlink()  # an empty claim would be unreadable at the next start, with room or not
            raise
        return
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise WarmkernelError("daemon_error", f"{path} cannot be read: {exc!r}") from exc
    if named != str(workspace):
        raise WarmkernelError(
            "daemon_error", f"{directory} holds the journal of {named}, not of {workspace}; remove it"
        )


def _cut_torn_tail(fd: int) -> None:
    """Cut a last line its writer did not finish, so that the next event starts a line of its own."""
    end = at = os.fstat(fd).st_size
    while at > 0:
        start = max(0, at - _TAIL_CHUNK)
        newline = os.pread(fd, at - start, start).rfind(b"\n")
        if newline >= 0:
            at = start + newline + 1
            break
        at = start
    if at < end:
        log.warning("the last journal line was torn (%d bytes); cut", end - at)
        os.ftruncate(fd, at)


def _empty_log() -> OutputLog:
    """The output of a record whose output was not kept: closed, with no lines."""
    output = OutputLog()
    output.close()
    return output
