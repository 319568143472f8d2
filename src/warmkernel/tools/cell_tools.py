"""The tools that run a cell and follow it: run it, wait for it, answer its prompt, interrupt it, or
reset its kernel."""

from __future__ import annotations

from dataclasses import replace

from warmkernel.tools.kinds import WAIT, Annotations, Seconds, Spelling, Text, Tool, Verb, arg, arguments
from warmkernel.tools.params import EXECUTION, EXECUTION_REPLY, KERNEL, KNOWN_KERNEL


@arguments
class RunPythonArgs:
    freeform: str = arg(Text(), "The cell's source code.", cli=Spelling(metavar="CODE"))
    kernel: str | None = arg(KERNEL)


RUN_PYTHON = Tool(
    "run_python",
    f"Run a cell of Python (IPython syntax) in the persistent kernel and wait up to {WAIT} for it "
    "(or `# warmkernel: --wait SECONDS`). Replies `In [N] · 1.2 s:` and the output; a long output is "
    "shown as head and tail with the call that reads the rest. A cell still running after the wait "
    "keeps running: use wait_python. Rejected as busy while another cell runs in the same kernel; "
    'kernel="NAME" runs it in another (started on first use), beside the first.',
    RunPythonArgs,
    Annotations(read_only=False, destructive=True, idempotent=False),
    (
        Verb(
            ("run",),
            "run a cell and wait for it",
            'warmkernel run "x = 41; x + 1"          run a cell in this workspace\'s kernel\n'
            "warmkernel run -f analysis.py --timeout 60   run a file as one cell, wait up to 60 s",
        ),
    ),
    output=EXECUTION_REPLY,
    starts_daemon=True,
)


@arguments
class WaitPythonArgs:
    execution: int | None = arg(EXECUTION)
    timeout_seconds: float = arg(
        Seconds(), "How long to wait, in seconds.", 30, Spelling(("--timeout",), "S")
    )
    silence_seconds: float | None = arg(
        Seconds(optional=True, positive=True),
        "Also return once the cell has printed nothing for this long, counted from the later of "
        "this call's start and the last output. Default: no such limit.",
        None,
        Spelling(("--silence",), "S"),
    )
    kernel: str | None = arg(KNOWN_KERNEL)


WAIT_PYTHON = Tool(
    "wait_python",
    "Wait for an execution to finish, up to timeout_seconds, then reply as run_python does. "
    "Waiting ends this call, never the cell; it also ends when the cell asks for input.",
    WaitPythonArgs,
    Annotations(read_only=True),
    (
        Verb(
            ("wait",),
            "wait for an execution to finish",
            "warmkernel wait 3 --timeout 120        wait up to 2 minutes for execution 3",
        ),
        Verb(
            ("show",),
            "an execution's reply, as the model reads it",
            "warmkernel show 3                      execution 3's reply, as run_python gave it",
            fixed={"timeout_seconds": 0, "silence_seconds": None},
        ),
    ),
    output=EXECUTION_REPLY,
)


@arguments
class SendPythonInputArgs:
    text: str = arg(
        Text(),
        "The answer, without a trailing newline.",
        cli=Spelling(
            metavar="TEXT",
            help="the answer; - reads one line from standard input (a password stays out of "
            "the process list and the shell's history)",
        ),
    )
    execution: int | None = arg(replace(EXECUTION, cli=Spelling(("--execution",), "N")))
    kernel: str | None = arg(KNOWN_KERNEL)


SEND_PYTHON_INPUT = Tool(
    "send_python_input",
    "Answer the prompt of a cell waiting in input() or getpass(), then reply as run_python does. "
    "The answer is written to the output after its prompt, except for a password prompt.",
    SendPythonInputArgs,
    Annotations(read_only=False, idempotent=False),
    (
        Verb(
            ("input",),
            "answer the prompt of a cell waiting in input() or getpass()",
            "warmkernel input Ada                   answer the running cell's input() prompt",
        ),
    ),
    output=EXECUTION_REPLY,
)


@arguments
class InterruptPythonArgs:
    kernel: str | None = arg(KNOWN_KERNEL)


INTERRUPT_PYTHON = Tool(
    "interrupt_python",
    "Send SIGINT (KeyboardInterrupt) to the running cell, also one waiting for input. "
    "Replies interrupt_sent or idle.",
    InterruptPythonArgs,
    Annotations(read_only=False, idempotent=False),
    (
        Verb(
            ("interrupt",),
            "interrupt the running cell (SIGINT)",
            "warmkernel interrupt                   KeyboardInterrupt in the running cell",
        ),
    ),
    output={"status": "string", "execution": "integer"},
)


@arguments
class ResetPythonArgs:
    kernel: str | None = arg(KERNEL)


RESET_PYTHON = Tool(
    "reset_python",
    "Kill the kernel and every process it started, and start a fresh one in the same workspace. "
    "A running cell becomes `killed`; earlier records and numbering stay readable.",
    ResetPythonArgs,
    Annotations(read_only=False, destructive=True, idempotent=False),
    (
        Verb(
            ("reset",),
            "kill the kernel and everything it started; start a fresh one",
            "warmkernel reset                       a fresh kernel; the records stay readable",
        ),
    ),
    output={"generation": "integer", "killed_execution": "integer"},
    starts_daemon=True,
)
