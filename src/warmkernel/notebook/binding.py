"""NotebookBinding: the notebook a session is bound to, and the runtime facts of its cells.

Owns which `.ipynb` the session serves, the last run of each of its code cells in the
current kernel (`CellRun`), the names' versions as last fetched from the kernel, the manual
file watches, and the I/O at the rim of the pure staleness model: what to ask the kernel-side
notebook helper and when (`kernel/cell_tracking.py` words the questions and reads the
answers), the file stamps, and the write-back of a cell's outputs. `Session` runs the cells
and calls these; `staleness.evaluate` decides.

Files are hashed here, not in the kernel: the kernel reports a file's size and mtime_ns as a
cell opened it, and the server hashes the file when it next looks. While size and mtime are
still what the cell saw, that hash is the content the cell read; a file that changed before
the server could hash it counts as changed. A stamp is reused while size and mtime stay the
same. Files over `HASH_LIMIT_BYTES` are told apart by size and mtime alone, so touching one
makes its readers stale. A kernel on a Jupyter server stamps the files itself, on its machine
(`kernel_stamps_expression`): they are its files, not this machine's.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import anyio

from warmkernel.errors import ErrorCode, WarmkernelError
from warmkernel.execution.record import ExecutionRecord
from warmkernel.kernel import cell_tracking
from warmkernel.kernel.channel import Inbox
from warmkernel.notebook.analysis import analyze, unconditional_binds
from warmkernel.notebook.cell_outputs import Output, OutputCollector
from warmkernel.notebook.document import CellOutputs, Notebook, NotebookCell, read_notebook, write_outputs
from warmkernel.notebook.staleness import (
    RAISES_TAG,
    CellRun,
    FileStamp,
    KernelFacts,
    NotebookStatus,
    source_hash,
)
from warmkernel.notebook.workspace_paths import checked_path, quoted
from warmkernel.types import ExecutionNumber, ExecutionState, Generation

HASH_LIMIT_BYTES = 64 * 1024 * 1024
"""Larger files are not hashed: their size and mtime stand for their content."""
UNSEEN = "unseen"
"""The digest of a read whose file changed before the server hashed it: it equals no real one."""
_CHUNK = 1024 * 1024

SaveOutcome = Literal[
    "saved",
    "pending",
    "not_saved",
    "cell_missing",
    "source_changed",
    "file_changed_during_write",
    "write_failed",
]
"""What became of a run cell's outputs: written into the file, to be written, turned off, or why not."""
Saved = tuple[SaveOutcome, str]
"""An outcome, and the error message of `write_failed`."""


def locate(workspace: Path, given: str) -> Path:
    """The notebook's absolute path (`given`, the parameter `path`, is relative to the workspace);
    `notebook_not_found`."""
    return _existing_file(workspace, given, "notebook", "notebook_not_found", "path")


def watched_file(workspace: Path, given: str) -> Path:
    """A file to watch, as an absolute path (`given`, the parameter `file`, is relative to the workspace)."""
    return _existing_file(workspace, given, "file", "invalid_arguments", "file")


def _existing_file(workspace: Path, given: str, noun: str, code: ErrorCode, param: str) -> Path:
    """`given` resolved inside the workspace (symlinks followed). A path that leads out of it is
    refused before anything about it is looked at, so the answer tells nothing of files elsewhere."""
    path = checked_path(workspace, given, param)
    try:
        inside = path.resolve().is_relative_to(workspace.resolve())
    except (OSError, RuntimeError):  # a symlink loop
        inside = False
    if not inside:
        raise WarmkernelError(
            "path_outside_workspace",
            f"{noun} {quoted(given)} is outside the workspace {workspace}; give a path inside it",
        )
    where = f"give a path relative to the workspace {workspace}"
    try:
        found = path.is_file()
    except OSError as exc:  # e.g. a symlink inside that expands past PATH_MAX
        why = f"{noun} {quoted(given)} cannot be read: {exc.strerror}; {where}"
        raise WarmkernelError(code, why) from exc
    if not found:
        resolved = "" if str(path) == given else f" ({path})"
        raise WarmkernelError(code, f"{noun} {quoted(given)} does not exist{resolved}; {where}")
    return path


def shown_path(workspace: Path, path: Path) -> str:
    """How replies name a file: relative to the workspace when it is inside it."""
    return str(path.relative_to(workspace)) if path.is_relative_to(workspace) else str(path)


def read_cells(path: Path) -> Notebook:
    """The notebook's code cells; a file that is not an nbformat 4 notebook is `invalid_notebook`."""
    try:
        return read_notebook(path)
    except WarmkernelError as exc:
        raise WarmkernelError("invalid_notebook", exc.message) from exc


@dataclass(frozen=True)
class NotebookView:
    """A notebook's code cells and their verdicts, at one moment."""

    shown: str
    notebook: Notebook
    status: NotebookStatus
    facts_current: bool
    """False while a cell runs: names and files are as of the last finished execution."""
    unsaved: Mapping[str, Saved] = field(default_factory=dict)
    """Cells whose last run's outputs are not in the file, and why."""


@dataclass(eq=False)
class NotebookRun:
    """Cells of the bound notebook being run in order, one execution each.

    Outputs are written into the file in batches: at most once a second while cells finish,
    and when the run ends, so a long run of quick cells does not rewrite the file per cell.
    """

    shown: str
    cells: tuple[NotebookCell, ...]
    stop_on_error: bool
    skipped: tuple[tuple[str, str], ...] = ()
    """Cells asked for that are not run, as Jupyter's runners skip them: (id, why)."""
    results: list[tuple[NotebookCell, ExecutionRecord]] = field(default_factory=list)
    """The cells that finished, in order, with their executions."""
    saves: dict[str, Saved] = field(default_factory=dict)
    """Cell id -> what became of its outputs; a finished cell not in it is still `pending`."""
    to_save: dict[str, CellOutputs] = field(default_factory=dict)
    current: tuple[NotebookCell, ExecutionRecord] | None = None
    stop_requested: bool = False
    """An interrupt arrived: no further cell starts."""
    failure: WarmkernelError | None = None
    """A cell that could not be submitted at all (e.g. an invalid directive)."""
    done: anyio.Event = field(default_factory=anyio.Event)

    @property
    def not_run(self) -> tuple[NotebookCell, ...]:
        started = len(self.results) + (self.current is not None)
        return self.cells[started:]


@dataclass(frozen=True)
class _Started:
    cell_id: str
    source_hash: str
    read_versions: Mapping[str, ExecutionNumber]
    outputs: OutputCollector
    expects_error: bool
    """Tagged raises-exception: an error is how it is meant to end."""


class NotebookBinding:
    """One notebook's runs in the current kernel, and how to learn and stamp their facts."""

    def __init__(self, path: Path, shown: str, generation: Generation, workspace: Path) -> None:
        self.path = path
        self.workspace = workspace
        """Write-backs go into the notebook only while it is inside the workspace."""
        self.shown = shown
        self.generation = generation
        self.released = False
        """The kernel was reset since the notebook was bound: another notebook may be bound now."""
        self.runs: dict[str, CellRun] = {}
        self.versions: dict[str, ExecutionNumber] = {}
        self.executions: set[ExecutionNumber] = set()
        """Every execution that ran a cell of this notebook in the current kernel."""
        self.watches: dict[str, set[str]] = {}
        """Cell id -> files it depends on that no audit hook can see (declared by the caller)."""
        self.unsaved: dict[str, Saved] = {}
        """Cell id -> why the outputs of its last run are not in the file (when they are not)."""
        self._helper_generation: Generation | None = None
        self._started: dict[ExecutionNumber, _Started] = {}
        self._unfetched: set[ExecutionNumber] = set()
        """Finished runs whose file reads are still in the kernel."""
        self._reads: dict[ExecutionNumber, dict[str, tuple[int, int]]] = {}
        """File reads (size, mtime_ns as the cell saw them) not yet hashed into their run."""
        self._stamps: dict[str, FileStamp] = {}
        self._displays: dict[str, dict[str, list[Output]]] = {}
        """Display id -> cell id -> the saved outputs shown with it (a later cell may update them)."""
        self._last_outputs: dict[str, CellOutputs] = {}
        """Cell id -> the outputs of its last run in this kernel, as they go into the file."""
        self._updated: set[str] = set()
        """Cells whose saved outputs a later cell's display update changed since `take_updated`."""

    def is_for(self, path: Path) -> bool:
        with contextlib.suppress(OSError):
            return path == self.path or os.path.samefile(path, self.path)
        return False

    def forget_kernel(self, generation: Generation) -> None:
        """A new kernel: no cell has run in it, no name has a version."""
        self.generation = generation
        self.runs.clear()
        self.versions.clear()
        self.executions.clear()
        self._unfetched.clear()
        self._reads.clear()
        self._displays.clear()
        self._last_outputs.clear()
        self._updated.clear()

    # -- questions to the kernel ------------------------------------------------------------

    def begin_request(self, cell: NotebookCell, number: ExecutionNumber) -> tuple[str, str]:
        """The silent code and expression to send just before `cell` runs as `number`."""
        analysis = analyze(cell.source)
        names = analysis.reads | analysis.optional_reads | analysis.defines | analysis.mutates
        reads = analysis.reads | analysis.optional_reads
        load = self._helper_generation != self.generation
        return cell_tracking.begin_request(load, number, names, reads, unconditional_binds(cell.source))

    def start_run(
        self, cell: NotebookCell, record: ExecutionRecord, answer: str, inbox: Inbox
    ) -> OutputCollector:
        """The kernel tracks `cell` as `record` now (`answer` holds the versions of what it reads);
        the inbox to send its events to, which collects its outputs for the file."""
        self._helper_generation = self.generation
        read_versions = cell_tracking.read_begin(answer)
        outputs = OutputCollector(inbox, record.number, self._update_display)
        self._started[record.number] = _Started(
            cell.id, source_hash(cell.source), read_versions, outputs, RAISES_TAG in cell.tags
        )
        return outputs

    def _update_display(self, display_id: str, data: Mapping[str, Any], metadata: Mapping[str, Any]) -> None:
        """A display update: the outputs earlier cells showed with that id change too (nbclient)."""
        for cell_id, shown in self._displays.get(display_id, {}).items():
            for output in shown:
                output.update(data=dict(data), metadata=dict(metadata))
            self._updated.add(cell_id)

    def take_updated(self) -> dict[str, CellOutputs]:
        """The last outputs of the cells that display updates changed since the last call."""
        updated = {
            cell_id: self._last_outputs[cell_id] for cell_id in self._updated if cell_id in self._last_outputs
        }
        self._updated.clear()
        return updated

    def finish_run(self, cell: NotebookCell, record: ExecutionRecord) -> CellOutputs:
        """Record a finished notebook execution as its cell's last run (unless its kernel is gone);
        its outputs for the file."""
        started = self._started.pop(record.number)
        saved = CellOutputs(cell.source, record.number, started.outputs.outputs)
        if record.generation != self.generation:
            return saved
        for shown in self._displays.values():
            shown.pop(started.cell_id, None)  # its earlier outputs are replaced
        for display_id, outputs in started.outputs.displays().items():
            self._displays.setdefault(display_id, {})[started.cell_id] = outputs
        self._last_outputs[started.cell_id] = saved
        self._updated.discard(started.cell_id)
        self.runs[started.cell_id] = CellRun(
            started.source_hash,
            record.number,
            raised=record.state is not ExecutionState.COMPLETED
            and not (started.expects_error and record.state is ExecutionState.ERROR),
            read_versions=started.read_versions,
        )
        self.executions.add(record.number)
        self._unfetched.add(record.number)
        for path in self.watches.get(started.cell_id, ()):
            self._note_read(record.number, path)
        return saved

    def facts_request(self) -> tuple[str, list[ExecutionNumber]] | None:
        """The expression that fetches versions and file reads, or None before any cell ran here."""
        if self._helper_generation != self.generation:
            return None
        numbers = sorted(self._unfetched)
        return cell_tracking.facts_expression(numbers), numbers

    def absorb(self, answer: str, numbers: Sequence[ExecutionNumber]) -> None:
        """Take the kernel's versions and what the runs asked about did."""
        facts = cell_tracking.read_facts(answer)
        self.versions = facts.versions
        own = str(self.path)  # rewritten by every write-back: no cell depends on it
        cell_of = {run.execution: cell_id for cell_id, run in self.runs.items()}
        for number, did in facts.cells.items():
            reads = self._reads.setdefault(number, {})
            reads.update((path, seen) for path, seen in did.files.items() if path != own)
            cell_id = cell_of.get(number)
            if cell_id is not None:
                self.runs[cell_id] = replace(
                    self.runs[cell_id],
                    observed=True,
                    wrote=did.wrote,
                    unbound=did.unbound,
                    files_written=did.files_written - {own},
                )
        self._unfetched.difference_update(numbers)

    def record_saves(self, saves: Mapping[str, Saved]) -> None:
        for cell_id, (outcome, error) in saves.items():
            if outcome in ("saved", "not_saved"):
                self.unsaved.pop(cell_id, None)
            else:
                self.unsaved[cell_id] = (outcome, error)

    def rename_cells(self, renamed: Mapping[str, str]) -> None:
        """Cells whose derived ids changed (cells added above them) keep their runs, watches and saves."""
        for table in (self.runs, self.watches, self.unsaved):
            moved = {renamed[cell_id]: table.pop(cell_id) for cell_id in list(table) if cell_id in renamed}
            table.update(moved)  # type: ignore[arg-type]

    # -- files ------------------------------------------------------------------------------

    def watch(self, cell_id: str, path: str) -> None:
        """From now on `cell_id` depends on `path`; a run it already had is taken to have read it as it is."""
        self.watches.setdefault(cell_id, set()).add(path)
        run = self.runs.get(cell_id)
        if run is not None and path not in run.files_read:
            self._note_read(run.execution, path)

    def _note_read(self, number: ExecutionNumber, path: str) -> None:
        seen = _stat(path)
        if seen is not None:
            self._reads.setdefault(number, {})[path] = (seen.st_size, seen.st_mtime_ns)

    def stamp_request(self) -> tuple[set[str], dict[str, FileStamp]]:
        """The paths to stamp now, and the stamps known so far (for `stamp_files`, in a thread)."""
        paths = {path for run in self.runs.values() for path in run.files_read}
        paths.update(path for reads in self._reads.values() for path in reads)
        return paths, dict(self._stamps)

    def facts(self, stamps: Mapping[str, FileStamp | None], running: str | None) -> KernelFacts:
        """Fold pending reads into their runs with `stamps` (the files now), and take the facts.

        Reads that arrived after `stamp_request` wait for the next call."""
        self._stamps.update((path, stamp) for path, stamp in stamps.items() if stamp is not None)
        cell_of = {run.execution: cell_id for cell_id, run in self.runs.items()}
        later: dict[ExecutionNumber, dict[str, tuple[int, int]]] = {}
        for number, reads in self._reads.items():
            cell_id = cell_of.get(number)
            if cell_id is None:
                continue  # a later run of the cell replaced this one
            if not reads.keys() <= stamps.keys():
                later[number] = reads
                continue
            read = {path: _read_stamp(seen, stamps[path]) for path, seen in reads.items()}
            run = self.runs[cell_id]
            self.runs[cell_id] = replace(run, files_read={**run.files_read, **read})
        self._reads = later
        return KernelFacts(
            runs=dict(self.runs),
            versions=dict(self.versions),
            files=dict(stamps),
            running=running,
            notebook_executions=frozenset(self.executions),
        )


def stamp_files(paths: Iterable[str], known: Mapping[str, FileStamp]) -> dict[str, FileStamp | None]:
    """Each file's stamp now (None: missing), hashing only files whose size or mtime moved."""
    return {path: _current_stamp(path, known.get(path)) for path in paths}


def kernel_stamps_expression(paths: Iterable[str], known: Mapping[str, FileStamp]) -> str:
    """What to ask a kernel on another machine for the stamps of `paths` (its files, not ours)."""
    given = {path: (stamp.size, stamp.mtime_ns, stamp.sha256) for path, stamp in known.items()}
    return cell_tracking.stamps_expression(paths, given, HASH_LIMIT_BYTES)


def read_kernel_stamps(answer: str) -> dict[str, FileStamp | None]:
    """The stamps a kernel took, as `stamp_files` gives them."""
    return {
        path: FileStamp(*stamp) if stamp is not None else None
        for path, stamp in cell_tracking.read_stamps(answer).items()
    }


def _current_stamp(path: str, known: FileStamp | None) -> FileStamp | None:
    info = _stat(path)
    if info is None:
        return None
    if known is not None and (known.size, known.mtime_ns) == (info.st_size, info.st_mtime_ns):
        return known
    if info.st_size > HASH_LIMIT_BYTES:
        return FileStamp(info.st_size, info.st_mtime_ns, f"size-mtime:{info.st_size}:{info.st_mtime_ns}")
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)
    except OSError:
        return None
    return FileStamp(info.st_size, info.st_mtime_ns, digest.hexdigest())


def _stat(path: str) -> os.stat_result | None:
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return info if stat.S_ISREG(info.st_mode) else None


def _read_stamp(seen: tuple[int, int], now: FileStamp | None) -> FileStamp:
    """What a cell read: the file now, if it has not changed since; else a stamp matching nothing."""
    if now is not None and (now.size, now.mtime_ns) == seen:
        return now
    return FileStamp(seen[0], seen[1], UNSEEN)


def save_outputs(binding: NotebookBinding, batch: Mapping[str, CellOutputs]) -> dict[str, Saved]:
    """Write run cells' outputs into the notebook file; a cell whose source changed on disk (or
    that is gone) is skipped, and the others are written without it."""
    saves: dict[str, Saved] = {}
    remaining = dict(batch)
    while remaining:
        try:
            written = write_outputs(binding.path, remaining, root=binding.workspace)
        except WarmkernelError as exc:
            return saves | dict.fromkeys(remaining, ("write_failed", exc.message))
        except OSError as exc:
            return saves | dict.fromkeys(remaining, ("write_failed", f"{type(exc).__name__}: {exc}"))
        if written.written:
            return saves | dict.fromkeys(remaining, ("saved", ""))
        for blocked in written.blocked:  # all of them when the file changed while it was written
            saves[blocked.id] = (blocked.reason, "")
            remaining.pop(blocked.id, None)
    return saves
