"""The argument parser: tool verbs made from the tool declarations, and the daemon verbs."""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from warmkernel import __version__
from warmkernel.cli.completion import SHELLS
from warmkernel.cli.configured import subparsers
from warmkernel.cli.exits import EXIT_STATUSES, STATE_VERBS
from warmkernel.cli.options import add_server_options, shown_default
from warmkernel.cli.tool_verbs import IMAGE_VERBS, RUN, RUN_WAITS, offered
from warmkernel.tools.catalog import TOOLS
from warmkernel.tools.kinds import Cells, Choice, Flag, Integer, Kind, Param, Seconds, Text, Tool, Verb
from warmkernel.types import MAX_PORT
from warmkernel.workspace import CONFIG_ENV

_LOCAL_EXAMPLES = {
    "sessions": "warmkernel sessions                     the live daemons of this user",
    "start": "warmkernel start analysis.ipynb        a daemon whose kernel has run the notebook's cells\n"
    "warmkernel start --serve               the same, on a Jupyter Server JupyterLab or VS Code attaches to",
    "stop": "warmkernel stop                        stop this workspace's daemon\n"
    "warmkernel stop --all                  stop every daemon of this user\n"
    "warmkernel stop --kernel train         stop one kernel; the daemon and the others go on",
    "mcp": "warmkernel mcp                         serve the tools over stdio (what MCP hosts launch)\n"
    "warmkernel mcp --inline-chars 8000     the same, with replies of at most 8,000 characters",
    "serve": "warmkernel serve --port 8801           serve the tools over Streamable HTTP",
    "forget": "warmkernel forget --stop              stop the daemon and delete its records",
    "view": "warmkernel view                        open the live console page of this workspace's kernel\n"
    "warmkernel view --no-open              only print its link (good for one browser)",
    "init": "warmkernel init                        set the project up for agents",
    "completion": "warmkernel completion fish | source   complete verbs and flags in fish (in config.fish)\n"
    'eval "$(warmkernel completion bash)"  the same in bash (in ~/.bashrc); zsh: the same with zsh',
    "config": "warmkernel config                      every setting, its value and where it came from\n"
    "warmkernel config --json               the same as JSON",
}


_EXAMPLE_WIDTH = 36


_NB_HELP = "notebook mode: which cells are stale, re-running them, file watches"


_NB_DESCRIPTION = (
    "Notebook mode on this workspace's kernel: NB is a .ipynb file. A kernel serves one notebook."
)


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Show the defaults that mean something and keep line breaks. A flag's default is its absence,
    and None or an empty list is no default: those are not shown; nor where the help says its own."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        default, help = action.default, action.help or ""
        if action.nargs == 0 or default in (None, "", [], ()) or default is argparse.SUPPRESS:
            return action.help
        if "(default:" in help or "%(default)" in help:
            return action.help
        if not action.option_strings and action.nargs not in ("?", "*"):  # a positional one must give
            return action.help
        return f"{help} (default: {shown_default(default)})".replace("%", "%%").replace("%%(", "%(")


class _Versions(argparse.Action):
    """`--version`: what a bug report needs, read from the installed metadata (nothing imported)."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        import platform  # here: every verb builds this parser, only --version reads
        from importlib import metadata

        lines = [f"warmkernel {__version__}", f"Python {platform.python_version()} ({sys.executable})"]
        for distribution, what in (("ipykernel", "ipykernel"), ("mcp", "MCP SDK (mcp)")):
            try:
                lines.append(f"{what} {metadata.version(distribution)}")
            except metadata.PackageNotFoundError:
                lines.append(f"{what}: not installed")
        print("\n".join(lines))
        parser.exit()


def _example(text: str, heading: str = "example") -> str:
    """Example lines, `command  what it does`, the explanations in one column (a long command
    puts its explanation on the next line)."""
    rows = [re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in text.splitlines()]
    width = min(max(len(row[0]) for row in rows), _EXAMPLE_WIDTH) + 2
    lines = [f"{heading}:"]
    for command, *what in rows:
        if len(command) + 2 > width and what:
            lines += [f"  {command}", f"  {'':<{width}}{what[0]}"]
        else:
            lines.append(f"  {command:<{width}}{''.join(what)}".rstrip())
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    examples = [verb.example for tool in TOOLS for verb in tool.verbs] + list(_LOCAL_EXAMPLES.values())
    parser = argparse.ArgumentParser(
        prog="warmkernel",
        description="A persistent, observable IPython kernel for AI coding agents, over MCP, and the same "
        "kernel from the command line.",
        epilog=_example("\n".join(examples), "examples"),
        formatter_class=_HelpFormatter,
    )
    parser.add_argument(
        "--version",
        action=_Versions,
        help="print the versions of warmkernel, Python, ipykernel and the MCP SDK, and exit",
    )
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)

    client = argparse.ArgumentParser(add_help=False)
    client.add_argument(
        "--daemon",
        "--session",
        dest="daemon",
        metavar="ID",
        help="the daemon to use (see `warmkernel sessions`)",
    )
    client.add_argument("--json", action="store_true", help="print the structured result as JSON")

    def verb(name: str, help: str, description: str = "", *, parents: bool = True) -> argparse.ArgumentParser:
        return verbs.add_parser(
            name,
            help=help,
            description=description or help,
            epilog=_example(_LOCAL_EXAMPLES[name]),
            parents=[client] if parents else [],
            formatter_class=_HelpFormatter,
        )

    nb_verbs: argparse._SubParsersAction[argparse.ArgumentParser] | None = None
    for tool in TOOLS:
        for tool_verb in tool.verbs:
            if tool_verb.words[0] != "nb":
                _add_tool_verb(verbs, tool, tool_verb, client)
                continue
            if nb_verbs is None:
                notebook = verbs.add_parser(
                    "nb",
                    help=_NB_HELP,
                    description=_NB_DESCRIPTION,
                    epilog=_example(
                        "\n".join(v.example for t in TOOLS for v in t.verbs if v.words[0] == "nb")
                    ),
                    formatter_class=_HelpFormatter,
                )
                nb_verbs = notebook.add_subparsers(dest="nb_verb", metavar="NB_VERB", required=True)
            _add_tool_verb(nb_verbs, tool, tool_verb, client)

    verb(
        "sessions",
        "the live daemons of this user: workspace, clients, kernel, memory, idle time",
        "The live daemons of this user: for each, its workspace and pid, the clients connected, its "
        "kernel's state and pid, how many executions it keeps, the memory of the daemon and of the "
        "kernel (with what it started), and how long it has been idle.",
    )

    start = verb(
        "start",
        "start a daemon for this workspace (if none is live)",
        "Start a daemon for this workspace (if none is live). With NB, run every cell of that notebook "
        "that is not fresh once, in order, continuing past errors, in the notebook's own kernel "
        "(nb-<stem>, or --kernel). With --serve, the kernel main runs on a Jupyter Server of the "
        "daemon's own (loopback, with a token), NB's cells run in main, and the URL to open in "
        "JupyterLab or VS Code is printed; `stop` ends both.",
    )
    start.add_argument(
        "warm_notebook",
        nargs="?",
        metavar="NB",
        help="a .ipynb file to warm the kernel with (default: the configured notebook, if any)",
    )
    start.add_argument(
        "--serve",
        action="store_true",
        help="run the kernel on a Jupyter Server this daemon owns, for JupyterLab or VS Code to attach "
        "to (in NB's server session when NB is given); needs warmkernel[serve]",
    )
    start.add_argument(
        "--server-port",
        type=_port,
        metavar="PORT",
        help="with --serve: the loopback port of that Jupyter Server (default: a free one)",
    )
    start.add_argument(
        "--timeout", type=float, default=120.0, metavar="S", help="seconds to wait for NB's run"
    )
    start.add_argument(
        "--kernel", metavar="NAME", help="the kernel that runs NB (default: its own; main with --serve)"
    )
    add_server_options(start)
    stop = verb(
        "stop",
        "stop the daemon of this workspace, its kernel and its servers",
        "Stop the daemon of this workspace (or the one --daemon names), its kernel and its servers. "
        "Its records stay in the journal for the next daemon.",
    )
    stop.add_argument("--all", action="store_true", help="stop every live daemon of this user")
    stop.add_argument(
        "--kernel",
        metavar="NAME",
        help="stop only this kernel of the daemon (as `warmkernel stop-kernel NAME`); its records stay",
    )
    forget = verb(
        "forget",
        "delete this workspace's journal: its executions' records and output",
        "Delete this workspace's journal (the records and output of its executions, kept in the "
        "per-user state directory so that a new daemon continues where the last one ended). Refused "
        "while the workspace's daemon runs, unless --stop.",
    )
    forget.add_argument("--stop", action="store_true", help="stop the workspace's daemon first")

    mcp = verb(
        "mcp",
        "serve the MCP tools over stdio (what MCP hosts launch)",
        "Serve the MCP tools over stdin/stdout for an MCP host: a relay to the workspace's daemon, "
        "started if there is none. When the host ends, the daemon and its kernel stay for the next "
        "conversation. The workspace is the current directory, or what the trusted resolver named by "
        f"{CONFIG_ENV} (an absolute path) returns. Kernel options are the daemon's: a live daemon with "
        "other ones is refused (kernel_options_differ). Reply options are this client's own. Every flag "
        "is also a setting of the user's and the project's configuration files (`warmkernel config`).",
        parents=False,
    )
    mcp.add_argument(
        "--ephemeral",
        action="store_true",
        help="own a kernel in this process instead (CI, sandboxes): nothing outlives it, and no other "
        "client reaches it",
    )
    add_server_options(mcp)

    serve = verb(
        "serve",
        "serve the MCP tools over Streamable HTTP",
        "Serve the tools of this workspace's daemon (started if there is none) over Streamable HTTP, "
        "until stopped (Ctrl-C, SIGTERM). Every request needs 'Authorization: Bearer TOKEN'; the token "
        "is --token or --token-file, else $WARMKERNEL_TOKEN, else generated and written to the daemon's "
        "descriptor (see `warmkernel sessions --json`). HTTP clients, hosts over stdio and the CLI share "
        "one kernel.",
        parents=False,
    )
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to bind; beyond loopback needs --allowed-host"
    )
    serve.add_argument("--port", type=_port, default=8801, help="port to bind; 0 picks a free one")
    serve.add_argument("--path", default="/mcp", help="URL path of the MCP endpoint")
    serve.add_argument(
        "--token", help="bearer token to require (default: $WARMKERNEL_TOKEN, else a generated one)"
    )
    serve.add_argument(
        "--token-file",
        type=Path,
        metavar="PATH",
        help="file holding the bearer token (whitespace around it dropped); unlike --token, the "
        "process list never shows it",
    )
    serve.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME[:PORT]",
        help="a Host header to accept (repeatable); required to bind beyond loopback",
    )
    add_server_options(serve)

    view = verb(
        "view",
        "print and open the link to this workspace's live console page",
        "Print a link to the console page of this workspace's daemon (started if there is none), and "
        "open it in a browser when there is one. The page shows, live: the kernels, the executions "
        "newest first, the selected execution's output as a terminal shows it (images inline, "
        "searchable, read by windows however long it is), the variables and the bound notebook's "
        "stale cells; it can interrupt the running cell and change nothing else. The daemon serves it "
        "on a loopback port from the first `view` until it stops. The link carries a one-time token "
        "that the browser trades for a session cookie: each `view` prints a new link.",
    )
    view.add_argument("--no-open", action="store_true", help="print the link without opening a browser")
    view.add_argument(
        "--host",
        default="127.0.0.1",
        help="address the page listens on; beyond loopback needs --allowed-host",
    )
    view.add_argument("--port", type=_port, default=0, help="port the page listens on; 0 picks a free one")
    view.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME[:PORT]",
        help="a Host header to accept (repeatable); required to listen beyond loopback",
    )

    # The daemon itself, as `discovery.start_daemon` runs it (no help: not for people to call).
    daemon = verbs.add_parser("daemon", formatter_class=_HelpFormatter)
    daemon.add_argument("--ready-fd", type=int)
    daemon.add_argument("--jupyter-server", action="store_true")
    daemon.add_argument("--jupyter-port", type=_port)
    daemon.add_argument("--jupyter-notebook", type=Path)
    daemon.add_argument("--resolved-by", metavar="RESOLVER")
    add_server_options(daemon)

    completion = verb(
        "completion",
        "print a shell completion script for warmkernel's verbs and flags",
        "Print a script that completes warmkernel's verbs, flags and choices in SHELL. Load it from the "
        "shell's start-up file, as the examples show.",
        parents=False,
    )
    completion.add_argument("shell", choices=SHELLS, metavar="SHELL", help="bash, zsh or fish")
    config = verb(
        "config",
        "the effective settings and where each came from (default, file and line, environment, flag)",
        "The effective settings of this workspace and where each came from. Every flag of mcp, serve "
        "and start is a setting, named after it (inline_chars for --inline-chars): in the user's "
        "file ($XDG_CONFIG_HOME/warmkernel/config.toml, else ~/.config/warmkernel/config.toml), the "
        "project's pyproject.toml ([tool.warmkernel]) or warmkernel.toml (top level), or the "
        "environment (WARMKERNEL_INLINE_CHARS). Each wins over the one before; flags win over all.",
        parents=False,
    )
    config.add_argument("--json", action="store_true", help="print the settings as JSON")
    add_server_options(config)

    init = verb(
        "init",
        "set this project up for agents (.mcp.json, .codex/config.toml, AGENTS.md, a Claude skill)",
        "Set this project up for agents: the warmkernel server in .mcp.json (Claude Code), "
        ".codex/config.toml (Codex: a tool timeout that fits every wait, replies within its output "
        "limit), and .cursor/mcp.json and .vscode/mcp.json when those directories exist; usage notes "
        "in AGENTS.md, a Claude skill and an existing CLAUDE.md. The server command is one the host "
        "can run: `warmkernel` when it is on PATH, else this script's absolute path, or `uvx "
        "warmkernel` when run by uvx. Running it again changes nothing; a file it cannot read is left "
        "untouched and named (exit status 1).",
        parents=False,
    )
    init.add_argument("--json", action="store_true", help="print what changed as JSON")
    return parser


def check_verb(parser: argparse.ArgumentParser, words: Sequence[str]) -> None:
    """An unknown verb is refused as such, with the nearest one, and without the daemon's own
    verb among those offered (argparse lists every choice)."""
    if not words or words[0].startswith("-") or words[0] in subparsers(parser).choices:
        return
    import difflib  # here: only a mistake needs it

    verbs = [name for name in subparsers(parser).choices if name != "daemon"]
    close = difflib.get_close_matches(words[0], verbs, n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    parser.error(
        f"unknown verb {words[0]!r}{hint} (the verbs: {', '.join(verbs)}; `warmkernel --help` says "
        "what each does)"
    )


def _add_tool_verb(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    tool: Tool,
    verb: Verb,
    client: argparse.ArgumentParser,
) -> None:
    """A verb's parser, made from the declaration of the tool it calls."""
    description = tool.describe("the daemon's wait")
    notes = [f"{verb.help[0].upper()}{verb.help[1:]}.", f"Calls the MCP tool {tool.name}: {description}"]
    if verb.name in STATE_VERBS:
        notes.append(EXIT_STATUSES)
    parser = verbs.add_parser(
        verb.words[-1],
        help=verb.help,
        description="\n\n".join(textwrap.fill(note, 100) for note in notes),
        epilog=_example(verb.example),
        parents=[client],
        formatter_class=_HelpFormatter,
    )
    parser.set_defaults(tool=tool, tool_verb=verb)
    for param in offered(tool, verb):
        _add_param(parser, param, verb.defaults.get(param.name, param.default), optional=tool.name == RUN)
    if verb.name in IMAGE_VERBS:
        parser.add_argument(
            "-o",
            "--output-dir",
            type=Path,
            metavar="DIR",
            help="write the reply's images to files in DIR and print their paths (default: the "
            "daemon's folder in warmkernel's private runtime directory, made only when there is an image)",
        )
    if tool.name == RUN:
        parser.add_argument("-f", "--file", type=Path, help="read the cell from FILE (CODE - reads stdin)")
        for wait in RUN_WAITS:
            parser.add_argument(wait.flag, type=float, metavar="S", help=wait.help)


def _add_param(parser: argparse.ArgumentParser, param: Param, default: Any, *, optional: bool) -> None:
    """One parameter as its spelling says; a positional the tool needs is optional only when told."""
    spelling = param.cli
    described = spelling.help or param.description
    if spelling.consts:
        group = parser.add_mutually_exclusive_group()
        for flag, value, help in spelling.consts:
            group.add_argument(flag, dest=param.name, action="store_const", const=value, help=help)
        parser.set_defaults(**{param.name: default})
        return
    if isinstance(param.kind, Flag):
        action = "store_false" if default else "store_true"
        parser.add_argument(*spelling.flags, dest=param.name, action=action, help=described)
        return
    choices = param.kind.choices if isinstance(param.kind, Choice) else None
    value_of = _value_of(param.kind)
    if not spelling.flags:
        parser.add_argument(
            param.name,
            nargs="?" if optional or not param.required else None,
            default=None if param.required else default,
            type=value_of,
            choices=choices,
            metavar=spelling.metavar,
            help=described,
        )
        return
    parser.add_argument(
        *spelling.flags,
        dest=param.name,
        required=param.required,
        default=None if param.required else default,
        type=value_of,
        choices=choices,
        metavar=spelling.metavar,
        help=described,
    )


def _value_of(kind: Kind) -> Callable[[str], Any]:
    """What a command-line word means for a parameter of this kind (the tool checks the value)."""
    match kind:
        case Integer():
            return _whole_number
        case Seconds():
            return float
        case Cells():
            return lambda text: text if text in ("stale", "all") else text.split(",")
        case _:
            return str


def _whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None


def _port(text: str) -> int:
    port = _whole_number(text)
    if not 0 <= port <= MAX_PORT:
        raise argparse.ArgumentTypeError(f"{port} is not a port: give 1 to {MAX_PORT}, or 0 for a free one")
    return port


_DASH_VALUE_FLAGS = frozenset(
    flag
    for tool in TOOLS
    for param in tool.params
    if isinstance(param.kind, Text)
    for flag in param.cli.flags
)
"""Flags whose value may start with "-" (`--lines -20:`), which argparse would take for an option."""


def attach_dash_values(argv: Sequence[str]) -> list[str]:
    """`--lines -20:` as `--lines=-20:`, so that argparse reads it as the flag's value."""
    words: list[str] = []
    for word in argv:
        if words and words[-1] in _DASH_VALUE_FLAGS and word.startswith("-") and word != "--":
            words[-1] = f"{words[-1]}={word}"
        else:
            words.append(word)
    return words
