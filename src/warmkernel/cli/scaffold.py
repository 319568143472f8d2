"""`warmkernel init`: set a project up for agents, without destroying anything.

It merges a `warmkernel` server into `.mcp.json` (Claude Code), `.codex/config.toml` (Codex,
with a tool timeout longer than the longest wait and a smaller inline budget), and
`.cursor/mcp.json` and `.vscode/mcp.json` when those directories exist; writes or refreshes a
marked block in `AGENTS.md`, `.claude/skills/warmkernel/SKILL.md` and an existing `CLAUDE.md`;
and returns the snippets for the hosts it did not configure. The server's command is one the
host can run: `warmkernel` when it is on PATH, else its absolute path, or `uvx warmkernel`
(`--from` the directory or wheel it was installed from, when that is local).
Running it twice changes nothing; a file it cannot read is left untouched and named.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BEGIN = "<!-- warmkernel:begin (managed by `warmkernel init`; edits inside are replaced) -->"
END = "<!-- warmkernel:end -->"

CODEX_TOOL_TIMEOUT_S = 660
"""Codex cuts a tool call at `tool_timeout_sec` (60 s by default): a cell waited on with
`--wait 600` needs 600 s and a margin."""
CODEX_INLINE_CHARS = 8000
"""Codex truncates tool output near 10 KiB."""

GUIDE = """\
## Python kernel (warmkernel)

A persistent IPython kernel is available through the `warmkernel` MCP tools (or the
`warmkernel` command). Questions, imports and definitions survive from cell to cell.

- `run_python(freeform)` runs a cell and waits up to 10 s. The reply starts `In [N] · 1.2 s:`.
  For long work put `# warmkernel: --wait 120` on the first line, or keep going and call
  `wait_python(execution=N)` later: waiting ends the call, never the cell.
- A long reply shows head and tail and names the omitted lines; read them with
  `read_python_output(execution=N, line_range="151:850")` (1-based, inclusive; `"-20:"` is the
  last 20 lines) instead of printing again. Find things with
  `search_python_output(query, execution=N, context_after=3)`.
- Learn what a variable holds with `inspect_python_variable(name)` and
  `list_python_variables()` instead of printing it.
- A cell sent while another runs is rejected as `busy`: wait for it or `interrupt_python()`.
  `reset_python()` kills the kernel and everything it started; records stay readable.
- From a shell: `{cli} run "CODE"`, `{cli} read N --lines -20:`, `{cli} status`.
"""

SKILL_HEADER = """\
---
name: warmkernel
description: Run Python in a persistent IPython kernel (warmkernel MCP tools); use for data
  exploration, long computations and anything that should keep state between steps.
---

"""

CLAUDE_SECTION = """\
## Python kernel (warmkernel)

Run Python in the persistent kernel of the `warmkernel` MCP tools (`run_python`,
`read_python_output`, `inspect_python_variable`, ...): variables and imports survive between
cells. AGENTS.md says how to use them.
"""


@dataclass(frozen=True)
class ServerCommand:
    """How a host starts `warmkernel mcp`."""

    command: str
    args: tuple[str, ...]

    def with_args(self, *more: str) -> list[str]:
        return [*self.args, *more]

    @property
    def cli(self) -> str:
        """The same warmkernel as a shell reaches it (the command without `mcp`)."""
        import shlex  # here: only `init` needs it

        return shlex.join([self.command, *self.args[:-1]])


def _local_source() -> str | None:
    """The directory or wheel the running warmkernel was installed from, when not from an index
    (its `direct_url.json`, PEP 610, names a `file:` URL)."""
    from importlib.metadata import PackageNotFoundError, distribution
    from urllib.parse import urlparse
    from urllib.request import url2pathname

    try:
        recorded = distribution("warmkernel").read_text("direct_url.json")
    except PackageNotFoundError:
        return None
    url = urlparse(json.loads(recorded).get("url", "")) if recorded else None
    return url2pathname(url.path) if url is not None and url.scheme == "file" else None


def server_command(
    script: str,
    prefix: str = sys.prefix,
    environ: Mapping[str, str] = os.environ,
    which: Callable[[str], str | None] = shutil.which,
    local_source: Callable[[], str | None] = _local_source,
) -> ServerCommand:
    """A command for the running warmkernel that a host can run: `uvx warmkernel mcp` when uvx
    runs it (`uvx --from SOURCE ...` when it was installed from a local directory or wheel, which
    PyPI does not have), `python -m warmkernel mcp` when run so, `warmkernel mcp` when PATH finds
    this very script, else the script's absolute path. uv puts the environment it runs on PATH
    (and says so in `$UV`): then PATH is not the host's."""
    run_by_uv = "UV" in environ
    tool = Path(prefix).parent.name.startswith("archive-v") or (Path(prefix) / "uv-receipt.toml").is_file()
    if run_by_uv and tool:  # an environment uvx made, or the `uv tool install` one it reuses
        source = local_source()
        return ServerCommand("uvx", (*(("--from", source) if source else ()), "warmkernel", "mcp"))
    path = Path(script).absolute()
    if path.name == "__main__.py":
        return ServerCommand(sys.executable, ("-m", "warmkernel", "mcp"))
    on_path = None if run_by_uv else which("warmkernel")
    if on_path is not None and Path(on_path).resolve() == path.resolve():
        return ServerCommand("warmkernel", ("mcp",))
    return ServerCommand(str(path), ("mcp",))


def init_project(root: Path, server: ServerCommand) -> tuple[list[str], str]:
    """Apply every change: one line per file saying what happened to it (`skipped ...` for a file
    left untouched because it cannot be read), and the snippets for the hosts not configured."""
    entry = {"command": server.command, "args": server.with_args()}
    changes = [
        _merge_json(root, Path(".mcp.json"), "mcpServers", entry),
        _merge_codex(root, Path(".codex/config.toml"), server),
        _refresh_block(root, Path("AGENTS.md"), guide := GUIDE.format(cli=server.cli), ""),
        _refresh_block(root, Path(".claude/skills/warmkernel/SKILL.md"), guide, SKILL_HEADER),
    ]
    if (root / "CLAUDE.md").is_file():
        changes.append(_refresh_block(root, Path("CLAUDE.md"), CLAUDE_SECTION, ""))
    snippets = []
    for directory, key, host_entry, host in (
        (".cursor", "mcpServers", entry, "Cursor"),
        (".vscode", "servers", {"type": "stdio", **entry}, "VS Code"),
    ):
        name = Path(directory) / "mcp.json"
        if (root / directory).is_dir():
            changes.append(_merge_json(root, name, key, host_entry))
        else:
            snippets.append(f"{host} ({name}):\n  {json.dumps({key: {'warmkernel': host_entry}})}")
    if not snippets:
        return changes, ""
    return changes, "Other hosts of this project; add warmkernel there:\n\n" + "\n\n".join(snippets)


def _merge_json(root: Path, name: Path, key: str, entry: dict[str, Any]) -> str:
    path = root / name
    config: dict[str, Any] = {}
    if path.exists():
        try:
            loaded = json.loads(path.read_text(encoding="utf-8") or "{}")
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            return f"skipped {name}: it is not valid JSON ({exc}); fix it and run init again"
        if not isinstance(loaded, dict):
            return f"skipped {name}: it does not hold a JSON object; fix it and run init again"
        config = loaded
    servers = config.setdefault(key, {})
    if not isinstance(servers, dict):
        return f'skipped {name}: its "{key}" is not a JSON object; fix it and run init again'
    if "warmkernel" in servers:
        return f"unchanged {name}: it already has a warmkernel server"
    servers["warmkernel"] = entry
    existed = path.exists()
    _write(path, json.dumps(config, indent=2) + "\n")
    return f"{'updated' if existed else 'created'} {name}: added the warmkernel server"


def _merge_codex(root: Path, name: Path, server: ServerCommand) -> str:
    """Codex's project configuration: a `[mcp_servers.warmkernel]` table appended, the rest kept
    byte for byte."""
    path = root / name
    try:
        old = path.read_text(encoding="utf-8") if path.exists() else ""
        config = tomllib.loads(old)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return f"skipped {name}: it is not valid TOML ({exc}); fix it and run init again"
    servers = config.get("mcp_servers", {})
    if isinstance(servers, dict) and "warmkernel" in servers:
        timeout = servers["warmkernel"].get("tool_timeout_sec", 60)
        unchanged = f"unchanged {name}: it already has a warmkernel server"
        if isinstance(timeout, int | float) and timeout < CODEX_TOOL_TIMEOUT_S:
            unchanged += (
                f" (its tool_timeout_sec, {timeout}, cuts longer waits off; {CODEX_TOOL_TIMEOUT_S} fits)"
            )
        return unchanged
    table = "\n".join(
        [
            "[mcp_servers.warmkernel]",
            f"command = {json.dumps(server.command)}",
            f"args = {json.dumps(server.with_args('--inline-chars', str(CODEX_INLINE_CHARS)))}",
            f"tool_timeout_sec = {CODEX_TOOL_TIMEOUT_S}",
        ]
    )
    new = (old.rstrip("\n") + "\n\n" if old.strip() else "") + table + "\n"
    try:
        tomllib.loads(new)
    except tomllib.TOMLDecodeError:  # e.g. `mcp_servers = { ... }` inline: a table cannot extend it
        return f"skipped {name}: its mcp_servers cannot take a table; add [mcp_servers.warmkernel] by hand"
    _write(path, new)
    return f"{'updated' if old else 'created'} {name}: added the warmkernel server"


def _refresh_block(root: Path, name: Path, text: str, header: str) -> str:
    path = root / name
    block = f"{BEGIN}\n{text}{END}\n"
    try:
        old = path.read_text(encoding="utf-8") if path.exists() else ""
    except (OSError, UnicodeDecodeError) as exc:
        return f"skipped {name}: it cannot be read as text ({exc})"
    if BEGIN in old and END in old:
        start, end = old.index(BEGIN), old.index(END) + len(END)
        new = old[:start] + block.rstrip("\n") + old[end:]
    elif old:
        new = old.rstrip("\n") + "\n\n" + block
    else:
        new = header + block
    if new == old:
        return f"unchanged {name}"
    _write(path, new)
    return f"{'updated' if old else 'created'} {name}"


def _write(path: Path, text: str) -> None:
    """Replace `path` whole or not at all: a crash mid-write must not leave half a config."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".warmkernel-tmp")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)
