"""Client verbs: each one MCP tool call on the live daemon of the current workspace (started
when there is none), printing the text a model reads, or `--json` facts.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from warmkernel.cli.exits import exit_status
from warmkernel.cli.options import chosen_daemon
from warmkernel.daemon.client import ToolOutcome, open_daemon
from warmkernel.daemon.discovery import Descriptor, runtime_dir
from warmkernel.errors import WarmkernelError
from warmkernel.execution.submission import parse_cell
from warmkernel.settings.declarations import DECLARED
from warmkernel.settings.value_kinds import number_word
from warmkernel.tools.kinds import Param, Tool, Verb
from warmkernel.tools.params import NOTEBOOK

RUN = "run_python"
INPUT = "send_python_input"
MAX_CELL_BYTES = 32 * 1024 * 1024
"""The largest cell `run -f` or `run -` sends (one socket message, JSON-escaped, stays far below
the daemon's limit)."""


@dataclass(frozen=True)
class _WaitFlag:
    """A `run` flag for how this call waits: the reply option it sets on the call's connection. A
    directive of the cell's own wins, as over any client's default; the source stays as written."""

    flag: str
    setting: str
    help: str

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--")


_WAIT = DECLARED["default_wait_s"]
RUN_WAITS = (
    _WaitFlag(
        "--timeout",
        _WAIT.dest,
        f"wait up to S seconds in all (default: the daemon's {_WAIT.flag}, {number_word(_WAIT.default)} s "
        "unless it was started with another)",
    ),
    _WaitFlag(
        "--silence",
        "default_silence_s",
        "also return once the cell has printed nothing for S seconds",
    ),
)


def offered(tool: Tool, verb: Verb) -> list[Param]:
    """The tool's parameters a verb lets the caller set."""
    return [param for param in tool.params if param.name not in verb.fixed]


def _source(args: argparse.Namespace) -> str:
    if args.file is not None and args.freeform is not None:
        raise WarmkernelError("invalid_arguments", "give CODE or -f FILE, not both")
    if args.file is not None:
        try:
            with open(args.file, "rb") as handle:
                return _cell_text(handle.read(MAX_CELL_BYTES + 1), str(args.file))
        except OSError as exc:
            raise WarmkernelError("invalid_arguments", f"cannot read {args.file}: {exc.strerror}") from exc
    if args.freeform == "-":
        return _cell_text(sys.stdin.buffer.read(MAX_CELL_BYTES + 1), "standard input")
    if args.freeform is None:
        raise WarmkernelError(
            "invalid_arguments", 'give the cell: warmkernel run "CODE", -f FILE, or - for stdin'
        )
    return args.freeform


def _cell_text(data: bytes, where: str) -> str:
    """A cell read from a file or stdin: UTF-8, and small enough for one message to the daemon."""
    if len(data) > MAX_CELL_BYTES:
        raise WarmkernelError(
            "invalid_arguments",
            f"{where} holds more than {MAX_CELL_BYTES:,} bytes; a cell that large should read its data "
            "from a file instead (`open(...)` in a shorter cell)",
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WarmkernelError(
            "invalid_arguments",
            f"{where} is not UTF-8 text (byte {data[exc.start]:#04x} at offset {exc.start}); "
            "save it as UTF-8",
        ) from exc


def _wait_options(args: argparse.Namespace) -> dict[str, float]:
    """`run --timeout S --silence S` as the reply options of this call's connection."""
    options: dict[str, float] = {}
    for wait in RUN_WAITS:
        seconds = getattr(args, wait.dest, None)
        if seconds is None:
            continue
        if not (math.isfinite(seconds) and seconds >= 0.001):
            raise WarmkernelError(
                "invalid_timeout",
                f"{wait.flag} {seconds:g} is not valid; {wait.flag} must be a finite number of seconds, "
                "at least 0.001",
            )
        options[wait.setting] = seconds
    return options


def _answer_from_stdin() -> str:
    """`input -`: one line of standard input, without its line end; typed at a terminal, not
    echoed (it may be a password)."""
    if sys.stdin.isatty():
        import getpass  # here: only a typed answer needs it

        return getpass.getpass("answer (not shown): ")
    line = sys.stdin.readline()
    if not line:
        raise WarmkernelError("invalid_arguments", "input -: standard input gave no line to answer with")
    return line.removesuffix("\n").removesuffix("\r")


def _tool_call(args: argparse.Namespace) -> tuple[Tool, dict[str, Any]]:
    """The tool a client verb stands for, and its checked arguments."""
    tool: Tool = args.tool
    verb: Verb = args.tool_verb
    arguments = dict(verb.fixed)
    for param in offered(tool, verb):
        value = getattr(args, param.name)
        if value is None and param is NOTEBOOK:
            value = getattr(args, "notebook", None)  # the configured notebook
        arguments[param.name] = str(Path.cwd() / value) if param.cli.from_cwd and value is not None else value
    if tool.name == INPUT and arguments["text"] == "-":
        arguments["text"] = _answer_from_stdin()
    if tool.name == RUN:
        arguments["freeform"] = _source(args)
        # Parsed as the daemon parses it, so that a bad directive is refused here, before a
        # daemon is started for a cell that cannot run.
        parse_cell(arguments["freeform"])
    tool.parse(arguments)  # a bad value is refused here, before a daemon is found or started
    return tool, arguments


def run_tool_verb(args: argparse.Namespace) -> int:
    """Call the verb's tool on the workspace's daemon (started if there is none) and print the reply."""
    tool, arguments = _tool_call(args)
    options = _wait_options(args) if tool.name == RUN else {}
    descriptor = chosen_daemon(args, start=tool.starts_daemon)
    live = tool.name == RUN and sys.stdout.isatty() and not args.json
    if live:
        options["progress_interval_s"] = _LIVE_S
    with open_daemon(descriptor, options) as client, _live_line(live) as show:
        try:
            outcome = client.call_tool(tool.name, arguments, show)
        except KeyboardInterrupt:
            if args.tool_verb.name in WAITING_VERBS:  # the cell was sent: a Ctrl-C here stops the wait
                print(
                    "warmkernel: stopped waiting; the cell goes on in the kernel: `warmkernel wait` "
                    "follows it, `warmkernel interrupt` stops it",
                    file=sys.stderr,
                )
            raise
    attach = tool.name == "python_status" and outcome.error_code is None
    if args.json:
        where = {"jupyter_url": descriptor.jupyter_url, "jupyter_lab_url": descriptor.jupyter_lab_url}
        print(json.dumps(outcome.data | (where if attach else {}), indent=2))
    elif outcome.error_code is not None:
        print(f"warmkernel: {outcome.text}", file=sys.stderr)
    else:
        chosen = getattr(args, "output_dir", None)
        text = printed(outcome, lambda: _image_dir(chosen, descriptor), by_content=chosen is None)
        print("\n".join([text, *(descriptor.jupyter_lines() if attach else [])]))
    return exit_status(args.tool_verb.name, outcome)


WAITING_VERBS = frozenset({"run", "wait", "input", "nb run"})
"""Verbs that wait on a cell, which a Ctrl-C does not stop."""
IMAGE_VERBS = frozenset({"run", "input", "wait", "show", "read", "nb run"})
"""Verbs whose replies may carry images, which they write to files (`-o DIR`)."""


def _image_dir(chosen: Path | None, descriptor: Descriptor) -> Path:
    """Where this verb writes its images: `-o DIR` (made if missing), else the daemon's folder of
    the private runtime directory."""
    folder = chosen if chosen is not None else runtime_dir() / "images" / descriptor.id
    try:
        if chosen is not None:
            chosen.mkdir(parents=True, exist_ok=True)  # the person's own folder, with their umask
        else:
            folder.parent.mkdir(mode=0o700, exist_ok=True)
            folder.mkdir(mode=0o700, exist_ok=True)
    except OSError as exc:
        message = f"cannot write images to {folder}: {exc.strerror}"
        raise WarmkernelError("invalid_arguments", message) from exc
    return folder


_CAPTION = re.compile(r"\[image (\d+): ")
_EXECUTION = re.compile(r"^In \[(\d+)\]|^execution (\d+) · images", re.MULTILINE)


def printed(outcome: ToolOutcome, directory: Callable[[], Path], *, by_content: bool = False) -> str:
    """The reply's text, each image written to a file of `directory()` (asked for only when there
    is an image) and its path printed after its caption: `[image 1 saved: .../execution-7-image-1.png]`.
    The execution and the ordinal come from the text before the image (a `nb run` reply has several
    executions). `by_content`: the name ends with a digest of the image too, for a folder that
    images of every kernel share (each kernel numbers its own executions); showing the same image
    again writes the same file."""
    lines: list[str] = []
    folder: Path | None = None
    execution = outcome.data.get("execution")
    written = 0
    for block in outcome.blocks or (outcome.text,):
        if isinstance(block, str):
            lines.append(block)
            for found in _EXECUTION.finditer(block):
                execution = int(found.group(1) or found.group(2))
            continue
        folder = folder or directory()
        written += 1
        captions = _CAPTION.findall(lines[-1]) if lines else []
        ordinal = captions[-1] if captions else str(written)
        name = f"execution-{execution}-image-{ordinal}" if execution is not None else f"image-{ordinal}"
        if by_content:
            import hashlib  # here: only an image needs it, and it loads OpenSSL

            name += f"-{hashlib.sha256(block.data).hexdigest()[:8]}"
        path = folder / f"{name}{_EXTENSIONS.get(block.mime, '.bin')}"
        try:
            path.write_bytes(block.data)
        except OSError as exc:
            message = f"cannot write {path}: {exc.strerror}; -o DIR chooses where images go"
            raise WarmkernelError("invalid_arguments", message) from exc
        lines.append(f"[image {ordinal} saved: {path}]")
    return "\n".join(lines)


_EXTENSIONS = {"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp"}


_LIVE_S = 0.5
"""How often a cell run at a terminal tells how it goes (its latest output line or progress bar)."""


@contextmanager
def _live_line(enabled: bool) -> Iterator[Callable[[str], None] | None]:
    """On a terminal, a live line on stderr while a cell is waited for: `running 3.2 s`, then what
    the daemon says of the cell (`In [5] running for 3.5 s: epoch 2 loss 0.31`); yields what to
    tell it with (None when not enabled)."""
    if not enabled:
        yield None
        return
    start = time.monotonic()
    done = threading.Event()
    said: list[str] = []

    def redraw() -> None:
        while not done.wait(0.1):
            line = said[-1] if said else f"running {time.monotonic() - start:.1f} s"
            width = (os.get_terminal_size(sys.stderr.fileno()).columns if sys.stderr.isatty() else 0) or 80
            sys.stderr.write(f"\r\x1b[K{line[: max(1, width - 1)]}")
            sys.stderr.flush()

    drawer = threading.Thread(target=redraw, daemon=True)
    drawer.start()
    try:
        yield said.append
    finally:
        done.set()
        drawer.join()
        sys.stderr.write("\r\x1b[K")
        sys.stderr.flush()
