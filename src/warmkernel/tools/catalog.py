"""Every tool's one declaration: name, description, annotations, parameters and CLI verbs.

The MCP face (`faces/mcp_server.py`) adds a handler to each; the CLI builds its verbs from them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from warmkernel.tools.kinds import (
    WAIT,
    Annotations,
    Cell,
    Cells,
    Choice,
    Executions,
    Flag,
    Integer,
    JsonType,
    KernelName,
    Param,
    Seconds,
    Spelling,
    Text,
    Tool,
    VariablePath,
    Verb,
)
from warmkernel.types import EXPORT_FORMATS, READABLE_STREAMS

# -- the table -------------------------------------------------------------------------------

_N = Spelling(metavar="N")
NOTEBOOK = Param(
    "path",
    Text(optional=True),
    "The .ipynb file, relative to the workspace. Default: the server's configured notebook.",
    None,
    Spelling(
        metavar="NB",
        from_cwd=True,
        help="the .ipynb file, from the current directory, inside the workspace (default: the configured "
        "notebook)",
    ),
)
EXECUTION = Param(
    "execution",
    Integer("execution_not_found", 1, optional=True),
    "Execution number N. Default: the running execution, else the most recent one.",
    None,
    _N,
)
STREAM = Param(
    "stream",
    Choice("invalid_stream", READABLE_STREAMS),
    "Which stream: combined (everything in order), stdout, stderr, result (values and displays), traceback.",
    "combined",
    Spelling(("--stream",)),
)
MAX_CHARS = Param(
    "max_chars",
    Integer("invalid_max_chars", 1, optional=True),
    "Clip each returned line to this many characters (stored text is unchanged).",
    None,
    Spelling(("--max-chars",), "K"),
)

KERNEL = Param(
    "kernel",
    KernelName(),
    'Which kernel: a short name such as "train"; a new name starts a kernel beside the others '
    "(same workspace and interpreter). Default: main.",
    None,
    Spelling(("--kernel",), "NAME"),
)
KNOWN_KERNEL = replace(
    KERNEL,
    description='Which kernel: one the workspace has (list_python_kernels), such as "train"; this '
    "call starts none. Default: main.",
)
NOTEBOOK_KERNEL = replace(
    KERNEL,
    description="Which kernel runs the notebook. Default: the kernel already bound to it, else a new one "
    "named after it (nb-<stem>), so main stays free.",
)

RECORD_FACTS: dict[str, JsonType] = {
    "execution": "integer",
    "state": "string",
    "elapsed_s": "number",
    "generation": "integer",
    "error": "object",
    "end_reason": "string",
    "lines": "integer",
}
EXECUTION_REPLY: dict[str, JsonType] = {
    **RECORD_FACTS,
    "output": "string",
    "omitted_lines": "array",
    "images": "array",
    "images_not_shown": "array",
    "waited_s": "number",
    "returned_because": "string",
    "last_lines": "array",
    "progress": "object",
    "prompt": "string",
    "password": "boolean",
    "joined": "object",
    "kernel_starting": "string",
}
"""A run or wait reply: the record's facts, then the output, or where a running cell is, or its prompt."""
EXECUTIONS = 'Which executions: numbers and inclusive ranges joined by commas, e.g. "3,5-9", or one number.'

_BESIDE_A_CELL = (
    "While a cell runs, it answers beside the cell where the kernel has subshells (ipykernel 7 or "
    "later), saying which execution ran meanwhile (values may be mid-update); other kernels answer busy."
)

TOOLS: tuple[Tool, ...] = (
    Tool(
        "run_python",
        f"Run a cell of Python (IPython syntax) in the persistent kernel and wait up to {WAIT} for it "
        "(or `# warmkernel: --wait SECONDS`). Replies `In [N] · 1.2 s:` and the output; a long output is "
        "shown as head and tail with the call that reads the rest. A cell still running after the wait "
        "keeps running: use wait_python. Rejected as busy while another cell runs in the same kernel; "
        'kernel="NAME" runs it in another (started on first use), beside the first.',
        (Param("freeform", Text(), "The cell's source code.", cli=Spelling(metavar="CODE")), KERNEL),
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
    ),
    Tool(
        "python_status",
        "The workspace, how it was resolved, the interpreter and why it was chosen, the kernel's pid "
        "and generation, whether a cell is running, every kernel of the workspace in brief, and the "
        "configuration files in use.",
        (KNOWN_KERNEL,),
        Annotations(read_only=True),
        (
            Verb(
                ("status",),
                "the workspace, interpreter and kernel of the daemon",
                "warmkernel status                      is a cell running, and in which kernel",
            ),
        ),
        output={
            "workspace": "string",
            "workspace_resolution": "string",
            "interpreter": "string",
            "environment": "string",
            "kernel_state": "string",
            "kernel_starting": "string",
            "kernel_pid": "integer",
            "connection_file": "string",
            "process_tracking": "string",
            "kernel_server_url": "string",
            "kernel_id": "string",
            "kernel_cwd": "string",
            "generation": "integer",
            "spare_kernels_ready": "integer",
            "busy": "boolean",
            "running_execution": "integer",
            "latest_execution": "integer",
            "kernels": "array",
            "charts": "object",
            "config_files": "array",
            "joined": "object",
        },
    ),
    Tool(
        "python_execution_status",
        "An execution's state, times, error name and value, and line counts per stream, without its output.",
        (EXECUTION, KNOWN_KERNEL),
        Annotations(read_only=True),
        (
            Verb(
                ("state",),
                "an execution's state, times, error and line counts, without its output",
                "warmkernel state 3                     how execution 3 ended, and how long its output is",
            ),
        ),
        output={
            **RECORD_FACTS,
            "started_at": "string",
            "ended_at": "string",
            "line_counts": "object",
            "patch_literals": "integer",
            "output_dropped": "boolean",
            "images_not_kept": "integer",
        },
    ),
    Tool(
        "read_python_output",
        "Read an execution's output by line range: `START:STOP`, 1-based, STOP inclusive, either end "
        'may be empty, negatives count from the end (":10", "-10:", "20:40", "3:3"). '
        'stream="images" reads its images by ordinal in the same grammar.',
        (
            EXECUTION,
            replace(
                STREAM,
                kind=Choice("invalid_stream", (*READABLE_STREAMS, "images")),
                description=STREAM.description
                + ' "images": the images, by ordinal (line_range "2:3" reads the second and third).',
            ),
            Param(
                "line_range",
                Text("invalid_line_range", optional=True),
                'Lines to read, e.g. "20:40", ":10", "-10:". Default: all (up to the reply limit).',
                None,
                Spelling(("--lines",), "A:B"),
            ),
            MAX_CHARS,
            KNOWN_KERNEL,
        ),
        Annotations(read_only=True),
        (
            Verb(
                ("read",),
                "read an execution's output by line range",
                "warmkernel read 3 --lines -20:         the last 20 lines of execution 3\n"
                "warmkernel read --stream images        the images of the latest execution",
            ),
        ),
        output={
            "execution": "integer",
            "stream": "string",
            "state": "string",
            "total_lines": "integer",
            "first_line": "integer",
            "last_line": "integer",
            "text": "string",
            "total_images": "integer",
            "images": "array",
            "images_not_kept": "integer",
        },
    ),
    Tool(
        "search_python_output",
        "Search an execution's output. Replies `M n | text` for matching lines, `C n | text` for context, "
        "`--` between separate groups.",
        (
            Param("query", Text("invalid_query"), "Text or regex to find.", cli=Spelling(metavar="QUERY")),
            EXECUTION,
            STREAM,
            Param(
                "query_mode",
                Choice("invalid_query", ("auto", "literal", "regex")),
                "auto: a regex if it compiles, else literal text.",
                "auto",
                Spelling(
                    consts=(
                        ("--regex", "regex", "QUERY is a regex"),
                        ("--literal", "literal", "QUERY is plain text"),
                    )
                ),
            ),
            Param(
                "context_before",
                Integer("invalid_context", 0),
                "Context lines before each match.",
                0,
                Spelling(("-B", "--before"), "K"),
            ),
            Param(
                "context_after",
                Integer("invalid_context", 0),
                "Context lines after each match.",
                0,
                Spelling(("-A", "--after"), "K"),
            ),
            Param(
                "ignore_case", Flag(), "Match case-insensitively.", False, Spelling(("-i", "--ignore-case"))
            ),
            MAX_CHARS,
            Param(
                "max_matches",
                Integer("invalid_limit", 1),
                "Show at most this many matching lines; the reply counts the rest.",
                200,
                Spelling(("--max-matches",), "N"),
            ),
            KNOWN_KERNEL,
        ),
        Annotations(read_only=True),
        (
            Verb(
                ("search",),
                "search an execution's output",
                'warmkernel search "Traceback" -A 5     the latest execution, 5 lines after each match',
            ),
        ),
        output={
            "execution": "integer",
            "stream": "string",
            "query": "string",
            "mode": "string",
            "matches_total": "integer",
            "matches_shown": "integer",
            "groups": "array",
        },
    ),
    Tool(
        "wait_python",
        "Wait for an execution to finish, up to timeout_seconds, then reply as run_python does. "
        "Waiting ends this call, never the cell; it also ends when the cell asks for input.",
        (
            EXECUTION,
            Param(
                "timeout_seconds",
                Seconds(),
                "How long to wait, in seconds.",
                30,
                Spelling(("--timeout",), "S"),
            ),
            Param(
                "silence_seconds",
                Seconds(optional=True, positive=True),
                "Also return once the cell has printed nothing for this long, counted from the later of "
                "this call's start and the last output. Default: no such limit.",
                None,
                Spelling(("--silence",), "S"),
            ),
            KNOWN_KERNEL,
        ),
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
    ),
    Tool(
        "send_python_input",
        "Answer the prompt of a cell waiting in input() or getpass(), then reply as run_python does. "
        "The answer is written to the output after its prompt, except for a password prompt.",
        (
            Param(
                "text",
                Text(),
                "The answer, without a trailing newline.",
                cli=Spelling(
                    metavar="TEXT",
                    help="the answer; - reads one line from standard input (a password stays out of "
                    "the process list and the shell's history)",
                ),
            ),
            replace(EXECUTION, cli=Spelling(("--execution",), "N")),
            KNOWN_KERNEL,
        ),
        Annotations(read_only=False, idempotent=False),
        (
            Verb(
                ("input",),
                "answer the prompt of a cell waiting in input() or getpass()",
                "warmkernel input Ada                   answer the running cell's input() prompt",
            ),
        ),
        output=EXECUTION_REPLY,
    ),
    Tool(
        "interrupt_python",
        "Send SIGINT (KeyboardInterrupt) to the running cell, also one waiting for input. "
        "Replies interrupt_sent or idle.",
        (KNOWN_KERNEL,),
        Annotations(read_only=False, idempotent=False),
        (
            Verb(
                ("interrupt",),
                "interrupt the running cell (SIGINT)",
                "warmkernel interrupt                   KeyboardInterrupt in the running cell",
            ),
        ),
        output={"status": "string", "execution": "integer"},
    ),
    Tool(
        "reset_python",
        "Kill the kernel and every process it started, and start a fresh one in the same workspace. "
        "A running cell becomes `killed`; earlier records and numbering stay readable.",
        (KERNEL,),
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
    ),
    Tool(
        "list_python_executions",
        "Executions, newest first: number, state, elapsed time, line count and first source line.",
        (
            Param(
                "limit",
                Integer("invalid_limit", 1),
                "How many to list.",
                20,
                Spelling(("--limit",), "N"),
            ),
            KNOWN_KERNEL,
        ),
        Annotations(read_only=True),
        (
            Verb(
                ("history",),
                "executions, newest first",
                "warmkernel history --limit 5           the last five executions",
            ),
        ),
        output={"executions": "array", "total": "integer"},
    ),
    Tool(
        "list_python_variables",
        "The user's variables in the live namespace, without running a cell: name, type, size, shape or "
        "length, shallow size, and the execution (In [N]) that last bound each. No `_` names or IPython "
        "internals; imports (modules, and functions and classes no cell defined) only with "
        f"include_imports. {_BESIDE_A_CELL}",
        (
            Param(
                "include_imports",
                Flag(),
                "Also list imports: modules, and functions and classes defined outside the cells.",
                False,
                Spelling(("--imports",)),
            ),
            Param(
                "include_modules",
                Flag(),
                "The same as include_imports (its earlier name, kept).",
                False,
                Spelling(("--modules",)),
            ),
            KNOWN_KERNEL,
        ),
        Annotations(read_only=True),
        (
            Verb(
                ("vars",),
                "the user's variables in the live namespace, without running a cell",
                "warmkernel vars --imports              every variable, imported modules, functions and "
                "classes too",
            ),
        ),
        output={
            "variables": "array",
            "total": "integer",
            "imports_hidden": "integer",
            "modules_hidden": "integer",
            "summary_status": "string",
            "during_execution": "integer",
        },
    ),
    Tool(
        "inspect_python_variable",
        "A compact typed summary of one variable as JSON, without running a cell (In, Out, _ and the "
        "numbering stay untouched). DataFrames: shape, column dtypes, nulls, describe, sample rows; "
        "arrays: shape, dtype, min/max/mean, sample; containers: length, element types, first items (a "
        "dict's with their values); functions and classes: signature and doc. size_bytes is the shallow "
        "size, as list_python_variables says it; deep_size_bytes (pandas) counts what object columns "
        "hold too. Past the time budget (5 s), type and size only. "
        f"{_BESIDE_A_CELL}",
        (
            Param(
                "name",
                VariablePath(),
                'A variable name or a dotted attribute path, e.g. "df" or "df.columns"; nothing else is '
                "evaluated.",
                cli=Spelling(metavar="NAME"),
            ),
            KNOWN_KERNEL,
        ),
        Annotations(read_only=True),
        (
            Verb(
                ("inspect",),
                "a typed summary of one variable, without running a cell",
                "warmkernel inspect df.columns          a typed summary of df.columns",
            ),
        ),
        # Beside these, a summary carries the facts of its kind (shape, dtypes, sample, ...).
        output={
            "name": "string",
            "type": "string",
            "size_bytes": "integer",
            "size_kind": "string",
            "deep_size_bytes": "integer",
            "summary_status": "string",
            "kind": "string",
            "execution": "integer",
            "during_execution": "integer",
        },
    ),
    Tool(
        "list_python_kernels",
        "The workspace's kernels: name, state, generation, pid, memory, executions, the running cell, "
        "the bound notebook and idle time. main always exists; any tool's kernel parameter starts "
        "another by name.",
        (),
        Annotations(read_only=True),
        (
            Verb(
                ("kernels",),
                "the workspace's kernels: state, memory, executions, notebook, idle time",
                "warmkernel kernels                     which kernels run, and what each is doing",
            ),
        ),
        output={"kernels": "array"},
    ),
    Tool(
        "stop_python_kernel",
        "Stop one kernel and every process it started; a running cell becomes `killed`. Its records stay "
        "readable; its next use starts a fresh kernel (main too).",
        (
            Param(
                "name",
                KernelName(optional=False),
                'The kernel to stop, e.g. "train".',
                cli=Spelling(metavar="NAME"),
            ),
        ),
        Annotations(read_only=False, destructive=True),
        (
            Verb(
                ("stop-kernel",),
                "stop one kernel; its records stay readable (`warmkernel stop` stops the daemon)",
                "warmkernel stop-kernel train           end the kernel train and its processes",
            ),
        ),
        output={"kernel": "string", "killed_execution": "integer"},
    ),
    Tool(
        "notebook_status",
        "Which code cells of a Jupyter notebook no longer match the kernel, and why, without running "
        "anything. Without `kernel`, the notebook gets a kernel of its own (nb-<stem>) on first use, so main "
        "stays free for scratch cells. Lists each "
        "code cell in order: index, id, state (fresh, stale, never_run, running, skipped: empty or tagged "
        "skip-execution), reasons (source_changed, never_run, errored, file_changed, changed_outside, "
        "upstream_changed, upstream_stale, undefined_name; empty, skip_execution) with why (the value or "
        "file and the execution that made it differ), the names it "
        "defines and the execution (In [N]) of its last run; then the plan: the cells to re-run, in order, "
        "each fresh one with why it must run again. Fresh means a top-to-bottom run of the notebook would "
        "give the same values.",
        (NOTEBOOK, NOTEBOOK_KERNEL),
        Annotations(read_only=True),
        (
            Verb(
                ("nb", "status"),
                "every code cell's state (fresh, stale, never_run, running, skipped), the reasons, and "
                "the plan",
                "warmkernel nb status analysis.ipynb    which notebook cells are stale, and why",
            ),
        ),
        output={
            "notebook": "string",
            "cells": "array",
            "plan": "array",
            "plan_why": "object",
            "facts_current": "boolean",
            "outputs_not_saved": "object",
        },
    ),
    Tool(
        "run_notebook_cells",
        "Run cells of the bound notebook in notebook order, each as an ordinary numbered execution, and "
        "reply with each cell's output as run_python does, then what is still stale. Stops at the first "
        "error unless stop_on_error is false or the cell is tagged raises-exception; empty cells and cells "
        "tagged skip-execution are not run. Outputs are written into the .ipynb as Jupyter writes them "
        "(outputs and execution counts only) unless the cell's source changed on disk meanwhile. Waits up "
        "to timeout_seconds "
        f"(default: the server's wait, {WAIT}); the run goes on after that.",
        (
            NOTEBOOK,
            Param(
                "cells",
                Cells(),
                '"stale" (the plan), "all", or cell ids and/or 0-based code-cell indices: a list, one, or '
                '"0,3,load".',
                "stale",
                Spelling(("--cells",), "stale|all|ID,..."),
            ),
            Param(
                "stop_on_error",
                Flag(),
                "Stop at the first cell that raises.",
                True,
                Spelling(("--no-stop-on-error",), help="go on past cells that raise (default: stop at one)"),
            ),
            Param(
                "timeout_seconds",
                Seconds(optional=True),
                "How long to wait for the run before replying; null: the server's wait.",
                None,
                Spelling(("--timeout",), "S", help="seconds to wait for the run before printing; it goes on"),
            ),
            NOTEBOOK_KERNEL,
        ),
        Annotations(read_only=False, destructive=True, idempotent=False),
        (
            Verb(
                ("nb", "run"),
                "run the stale cells (or --cells) in notebook order; stops at the first error",
                "warmkernel nb run analysis.ipynb       re-run exactly the stale cells\n"
                "warmkernel nb run analysis.ipynb --cells all --no-stop-on-error   every cell, past errors",
                defaults={"timeout_seconds": 120.0},
            ),
        ),
        output={
            "notebook": "string",
            "state": "string",
            "cells": "array",
            "not_run": "array",
            "skipped": "array",
            "failure": "object",
            "status": "object",
        },
        starts_daemon=True,
    ),
    Tool(
        "watch_notebook_file",
        "Declare that a cell depends on a file whose reads the kernel cannot see (e.g. a C library opens "
        "it): when the file's content changes, the cell becomes stale.",
        (
            NOTEBOOK,
            Param(
                "file",
                Text(),
                "The file, relative to the workspace.",
                cli=Spelling(metavar="FILE", from_cwd=True, help="the file, from the current directory"),
            ),
            Param(
                "cell",
                Cell(),
                "The cell's id or 0-based code-cell index.",
                cli=Spelling(("--cell",), "ID"),
            ),
            NOTEBOOK_KERNEL,
        ),
        Annotations(read_only=False),
        (
            Verb(
                ("nb", "watch"),
                "make a cell depend on a file whose reads the kernel cannot see",
                "warmkernel nb watch analysis.ipynb data.bin --cell load   cell load reads data.bin",
            ),
        ),
        output={
            "notebook": "string",
            "cell": "string",
            "file": "string",
            "state": "string",
            "reasons": "array",
        },
        starts_daemon=True,
    ),
    Tool(
        "export_python_executions",
        "Write executions as a document a person can open, rerun and keep: a Jupyter notebook (one code "
        "cell per execution with its outputs, images included, In [N] as its execution count, and its "
        "state, times and generation as `warmkernel` cell metadata), a `# %%` script (sources only), "
        "Markdown, or a self-contained HTML page. The file is written inside the workspace only.",
        (
            Param(
                "executions",
                Executions(optional=True),
                EXECUTIONS + " Default: every execution.",
                None,
                Spelling(("--executions",), "3,5-9"),
            ),
            Param(
                "path",
                Text(optional=True),
                "The file to write, relative to the workspace (it must stay inside it); an existing file is "
                "replaced. Null: the reply is the document itself.",
                None,
                Spelling(
                    ("-o", "--output"),
                    "FILE",
                    from_cwd=True,
                    help="the file to write, from the current directory, inside the workspace; an existing "
                    "file is replaced (default: print the document)",
                ),
            ),
            Param(
                "format",
                Choice("invalid_arguments", EXPORT_FORMATS, optional=True),
                "ipynb, py, md or html. Default: from the path's suffix (.ipynb, .py, .md, .html), "
                "else ipynb.",
                None,
                Spelling(("--format",)),
            ),
            KNOWN_KERNEL,
        ),
        Annotations(read_only=False, destructive=True),
        (
            Verb(
                ("export",),
                "write executions as a notebook, a script, Markdown or an HTML page",
                "warmkernel export -o explore.ipynb     every execution as a notebook, with outputs\n"
                "warmkernel export --executions 3,5-9 --format py   executions 3 and 5-9 as a script",
            ),
        ),
        output={
            "format": "string",
            "path": "string",
            "executions": "array",
            "cells": "integer",
            "images": "integer",
            "bytes": "integer",
        },
        starts_daemon=True,  # the records of a stopped daemon are in its journal
    ),
    Tool(
        "executions_to_notebook",
        "Add executions as code cells of an existing notebook, with their outputs, after the cell "
        "after_cell (or at the end), to keep exploration in the notebook. Only the new cells are written: "
        "every other cell stays byte for byte as it was.",
        (
            Param("executions", Executions(), EXECUTIONS, cli=Spelling(("--executions",), "3,5-9")),
            NOTEBOOK,
            Param(
                "after_cell",
                Cell(optional=True),
                "The cell (id, or 0-based code-cell index) the new cells follow. "
                "Default: after the last cell.",
                None,
                Spelling(("--after",), "ID"),
            ),
            KNOWN_KERNEL,
        ),
        Annotations(read_only=False, idempotent=False),
        (
            Verb(
                ("nb", "add"),
                "add executions as code cells of a notebook, after a cell or at the end",
                "warmkernel nb add analysis.ipynb --executions 3,5-9 --after load   after cell load",
            ),
        ),
        output={
            "notebook": "string",
            "cells": "array",
            "index": "integer",
            "after_cell": "string",
            "renamed": "object",
        },
    ),
)

TOOLS_BY_NAME: Mapping[str, Tool] = {tool.name: tool for tool in TOOLS}
