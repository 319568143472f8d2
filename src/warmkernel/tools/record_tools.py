"""The tools that read what executions left: an execution's facts, its output by lines, a search of
it, the list of executions, and their export as a document."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Literal

from warmkernel.execution.selection import Selection
from warmkernel.tools.kinds import (
    Annotations,
    Choice,
    Executions,
    Flag,
    Integer,
    Spelling,
    Text,
    Tool,
    Verb,
    arg,
    arguments,
)
from warmkernel.tools.params import EXECUTION, EXECUTIONS, KNOWN_KERNEL, MAX_CHARS, RECORD_FACTS, STREAM
from warmkernel.types import EXPORT_FORMATS, READABLE_STREAMS, ExportFormat, ReadableStream

if TYPE_CHECKING:
    from warmkernel.execution.search import QueryMode  # the search itself (regex) stays out of the CLI


@arguments
class PythonExecutionStatusArgs:
    execution: int | None = arg(EXECUTION)
    kernel: str | None = arg(KNOWN_KERNEL)


PYTHON_EXECUTION_STATUS = Tool(
    "python_execution_status",
    "An execution's state, times, error name and value, and line counts per stream, without its output.",
    PythonExecutionStatusArgs,
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
)


@arguments
class ReadPythonOutputArgs:
    execution: int | None = arg(EXECUTION)
    stream: ReadableStream | Literal["images"] = arg(
        replace(
            STREAM,
            kind=Choice("invalid_stream", (*READABLE_STREAMS, "images")),
            description=STREAM.description
            + ' "images": the images, by ordinal (line_range "2:3" reads the second and third).',
        )
    )
    line_range: str | None = arg(
        Text("invalid_line_range", optional=True),
        'Lines to read, e.g. "20:40", ":10", "-10:". Default: all (up to the reply limit).',
        None,
        Spelling(("--lines",), "A:B"),
    )
    max_chars: int | None = arg(MAX_CHARS)
    kernel: str | None = arg(KNOWN_KERNEL)


READ_PYTHON_OUTPUT = Tool(
    "read_python_output",
    "Read an execution's output by line range: `START:STOP`, 1-based, STOP inclusive, either end "
    'may be empty, negatives count from the end (":10", "-10:", "20:40", "3:3"). '
    'stream="images" reads its images by ordinal in the same grammar.',
    ReadPythonOutputArgs,
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
)


@arguments
class SearchPythonOutputArgs:
    query: str = arg(Text("invalid_query"), "Text or regex to find.", cli=Spelling(metavar="QUERY"))
    execution: int | None = arg(EXECUTION)
    stream: ReadableStream = arg(STREAM)
    query_mode: QueryMode = arg(
        Choice("invalid_query", ("auto", "literal", "regex")),
        "auto: a regex if it compiles, else literal text.",
        "auto",
        Spelling(
            consts=(
                ("--regex", "regex", "QUERY is a regex"),
                ("--literal", "literal", "QUERY is plain text"),
            )
        ),
    )
    context_before: int = arg(
        Integer("invalid_context", 0),
        "Context lines before each match.",
        0,
        Spelling(("-B", "--before"), "K"),
    )
    context_after: int = arg(
        Integer("invalid_context", 0), "Context lines after each match.", 0, Spelling(("-A", "--after"), "K")
    )
    ignore_case: bool = arg(Flag(), "Match case-insensitively.", False, Spelling(("-i", "--ignore-case")))
    max_chars: int | None = arg(MAX_CHARS)
    max_matches: int = arg(
        Integer("invalid_limit", 1),
        "Show at most this many matching lines; the reply counts the rest.",
        200,
        Spelling(("--max-matches",), "N"),
    )
    kernel: str | None = arg(KNOWN_KERNEL)


SEARCH_PYTHON_OUTPUT = Tool(
    "search_python_output",
    "Search an execution's output. Replies `M n | text` for matching lines, `C n | text` for context, "
    "`--` between separate groups.",
    SearchPythonOutputArgs,
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
)


@arguments
class ListPythonExecutionsArgs:
    limit: int = arg(Integer("invalid_limit", 1), "How many to list.", 20, Spelling(("--limit",), "N"))
    kernel: str | None = arg(KNOWN_KERNEL)


LIST_PYTHON_EXECUTIONS = Tool(
    "list_python_executions",
    "Executions, newest first: number, state, elapsed time, line count and first source line.",
    ListPythonExecutionsArgs,
    Annotations(read_only=True),
    (
        Verb(
            ("history",),
            "executions, newest first",
            "warmkernel history --limit 5           the last five executions",
        ),
    ),
    output={"executions": "array", "total": "integer"},
)


@arguments
class ExportPythonExecutionsArgs:
    executions: Selection | None = arg(
        Executions(optional=True),
        EXECUTIONS + " Default: every execution.",
        None,
        Spelling(("--executions",), "3,5-9"),
    )
    path: str | None = arg(
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
    )
    format: ExportFormat | None = arg(
        Choice("invalid_arguments", EXPORT_FORMATS, optional=True),
        "ipynb, py, md or html. Default: from the path's suffix (.ipynb, .py, .md, .html), else ipynb.",
        None,
        Spelling(("--format",)),
    )
    kernel: str | None = arg(KNOWN_KERNEL)


EXPORT_PYTHON_EXECUTIONS = Tool(
    "export_python_executions",
    "Write executions as a document a person can open, rerun and keep: a Jupyter notebook (one code "
    "cell per execution with its outputs, images included, In [N] as its execution count, and its "
    "state, times and generation as `warmkernel` cell metadata), a `# %%` script (sources only), "
    "Markdown, or a self-contained HTML page. The file is written inside the workspace only.",
    ExportPythonExecutionsArgs,
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
)
