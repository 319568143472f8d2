"""`warmkernel init`: set a project up for agents, without destroying anything.

It merges a `warmkernel` server into `.mcp.json`, writes or refreshes a marked block in
`AGENTS.md` and in `.claude/skills/warmkernel/SKILL.md`, and returns the snippets for the
hosts whose configuration lives outside the project. Running it twice changes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

from warmkernel.errors import WarmkernelError

BEGIN = "<!-- warmkernel:begin (managed by `warmkernel init`; edits inside are replaced) -->"
END = "<!-- warmkernel:end -->"
SERVER = {"command": "warmkernel", "args": ["mcp"]}

GUIDE = """\
## Python kernel (warmkernel)

A persistent IPython kernel is available through the `warmkernel` MCP tools (or the
`warmkernel` command). Variables, imports and definitions survive from cell to cell.

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
- From a shell: `warmkernel run "CODE"`, `warmkernel read N --lines -20:`, `warmkernel status`.
"""

SKILL_HEADER = """\
---
name: warmkernel
description: Run Python in a persistent IPython kernel (warmkernel MCP tools); use for data
  exploration, long computations and anything that should keep state between steps.
---

"""

SNIPPETS = """\
Other hosts keep their configuration outside the project; add warmkernel there:

Codex (~/.codex/config.toml):
  [mcp_servers.warmkernel]
  command = "warmkernel"
  args = ["mcp", "--inline-chars", "8000"]

Cursor (.cursor/mcp.json):
  { "mcpServers": { "warmkernel": { "command": "warmkernel", "args": ["mcp"] } } }

VS Code (.vscode/mcp.json):
  { "servers": { "warmkernel": { "type": "stdio", "command": "warmkernel", "args": ["mcp"] } } }"""


def init_project(root: Path) -> list[str]:
    """Apply every change; one line per file saying what happened to it."""
    return [
        _merge_mcp_json(root, Path(".mcp.json")),
        _refresh_block(root, Path("AGENTS.md"), ""),
        _refresh_block(root, Path(".claude/skills/warmkernel/SKILL.md"), SKILL_HEADER),
    ]


def _merge_mcp_json(root: Path, name: Path) -> str:
    path = root / name
    config: dict[str, object] = {}
    if path.exists():
        try:
            loaded = json.loads(path.read_text() or "{}")
        except json.JSONDecodeError as exc:
            raise WarmkernelError(
                "invalid_arguments", f"{path} is not valid JSON ({exc}); fix it and run init again"
            ) from exc
        if not isinstance(loaded, dict):
            raise WarmkernelError("invalid_arguments", f"{path} does not hold a JSON object")
        config = loaded
    servers = config.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise WarmkernelError("invalid_arguments", f'"mcpServers" in {path} is not a JSON object')
    if "warmkernel" in servers:
        return f"unchanged {name}: it already has a warmkernel server"
    servers["warmkernel"] = SERVER
    path.write_text(json.dumps(config, indent=2) + "\n")
    return f"updated {name}: added the warmkernel server"


def _refresh_block(root: Path, name: Path, header: str) -> str:
    path = root / name
    block = f"{BEGIN}\n{GUIDE}{END}\n"
    old = path.read_text() if path.exists() else ""
    if BEGIN in old and END in old:
        start, end = old.index(BEGIN), old.index(END) + len(END)
        new = old[:start] + block.rstrip("\n") + old[end:]
    elif old:
        new = old.rstrip("\n") + "\n\n" + block
    else:
        new = header + block
    if new == old:
        return f"unchanged {name}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(new)
    return f"{'updated' if old else 'created'} {name}"
