"""The command-line face: `warmkernel VERB ...`.

Client verbs (`cli.tool_verbs`) are MCP tool calls on the live daemon of the current workspace;
daemon verbs (`cli.daemon_verbs`) list, start, stop and serve. Server-side modules are imported
only by the serving verbs, so a client verb stays a light, short-lived process.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Sequence

from warmkernel.cli.configured import configure
from warmkernel.cli.daemon_verbs import LOCAL_VERBS
from warmkernel.cli.exits import EXIT_BROKEN_PIPE, EXIT_ERROR, EXIT_USAGE
from warmkernel.cli.parser import attach_dash_values, build_parser, check_verb
from warmkernel.cli.serving import SERVING_VERBS
from warmkernel.cli.tool_verbs import run_tool_verb
from warmkernel.errors import CALLER_MISTAKES, WarmkernelError


def main(argv: Sequence[str] | None = None) -> int:
    try:
        try:
            return _run(attach_dash_values(sys.argv[1:] if argv is None else argv))
        finally:
            sys.stdout.flush()  # here, not at exit (also after --help): a closed pipe is handled below
    except BrokenPipeError:
        # The reader left (`warmkernel read 3 | head -2`, `--version | head -1`): end quietly, as a
        # process killed by SIGPIPE would, and keep Python from complaining again when it flushes
        # stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def _run(words: list[str]) -> int:
    parser = build_parser()
    check_verb(parser, words)
    args = parser.parse_args(words)
    try:
        args = configure(parser, words)
        handler = LOCAL_VERBS.get(args.verb) or SERVING_VERBS.get(args.verb) or run_tool_verb
        return handler(args)
    except WarmkernelError as exc:
        if args.verb == "mcp" and not args.ephemeral:
            from warmkernel.daemon.relay import refused

            refused(exc)  # the host is answered; on a resume this process goes on as the pump
        if getattr(args, "json", False):
            print(json.dumps({"error": {"code": exc.code, "message": exc.message}}, indent=2))
        else:
            print(f"warmkernel: {exc}", file=sys.stderr)
        return EXIT_USAGE if exc.code in CALLER_MISTAKES else EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        raise  # for `main`
    except Exception as exc:  # our bug: one line, never a traceback (a server's goes to its log)
        if args.verb in SERVING_VERBS:
            raise
        with contextlib.suppress(OSError):
            print(f"warmkernel: internal_error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_ERROR
