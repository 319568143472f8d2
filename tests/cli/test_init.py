"""`warmkernel init`: every host's configuration merged, twice without a change, a command the host
can run, and a file it cannot read left as it is."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.cli.conftest import Cli
from warmkernel.cli.scaffold import ServerCommand, server_command

MODULE = [sys.executable, "-m", "warmkernel", "mcp"]
"""The tests run `python -m warmkernel`: the command a host gets is that one."""


def snapshot(root: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def test_init_configures_every_host_present_and_changes_nothing_the_second_time(cli: Cli) -> None:
    ws = cli.workspace
    (ws / ".mcp.json").write_text(json.dumps({"mcpServers": {"other": {"command": "other"}}}))
    (ws / "AGENTS.md").write_text("# Project notes\n\nKeep this.\n")
    (ws / "CLAUDE.md").write_text("# Claude\n\nHouse rules.\n")
    (ws / ".codex").mkdir()
    (ws / ".codex" / "config.toml").write_text('model = "o3"  # kept\n\n[mcp_servers.other]\ncommand = "x"\n')
    (ws / ".cursor").mkdir()
    (ws / ".vscode").mkdir()
    (ws / ".vscode" / "mcp.json").write_text(
        json.dumps({"servers": {"db": {"type": "stdio", "command": "db"}}})
    )

    first = cli("init")
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[:7] == [
        "updated .mcp.json: added the warmkernel server",
        "updated .codex/config.toml: added the warmkernel server",
        "updated AGENTS.md",
        "created .claude/skills/warmkernel/SKILL.md",
        "updated CLAUDE.md",
        "created .cursor/mcp.json: added the warmkernel server",
        "updated .vscode/mcp.json: added the warmkernel server",
    ]
    assert "Other hosts" not in first.stdout, "every host is configured: no snippet is left to print"
    entry = {"command": MODULE[0], "args": MODULE[1:]}
    assert json.loads((ws / ".mcp.json").read_text())["mcpServers"] == {
        "other": {"command": "other"},
        "warmkernel": entry,
    }
    assert json.loads((ws / ".cursor" / "mcp.json").read_text()) == {"mcpServers": {"warmkernel": entry}}
    assert json.loads((ws / ".vscode" / "mcp.json").read_text())["servers"] == {
        "db": {"type": "stdio", "command": "db"},
        "warmkernel": {"type": "stdio", **entry},
    }
    codex_text = (ws / ".codex" / "config.toml").read_text()
    assert codex_text.startswith('model = "o3"  # kept\n\n[mcp_servers.other]\ncommand = "x"\n\n')
    codex = tomllib.loads(codex_text)
    assert codex["mcp_servers"]["warmkernel"] == {
        "command": MODULE[0],
        "args": [*MODULE[1:], "--inline-chars", "8000"],
        "tool_timeout_sec": 660,
    }
    agents = (ws / "AGENTS.md").read_text()
    assert agents.startswith("# Project notes\n\nKeep this.\n\n<!-- warmkernel:begin")
    cli_words = shlex.join(MODULE[:-1])  # the shell reaches the same warmkernel as the hosts
    assert f'From a shell: `{cli_words} run "CODE"`' in agents
    claude = (ws / "CLAUDE.md").read_text()
    assert claude.startswith("# Claude\n\nHouse rules.\n\n<!-- warmkernel:begin") and "AGENTS.md" in claude

    files = snapshot(ws)
    second = json.loads(cli("init", "--json").stdout)
    assert all(change.startswith("unchanged") for change in second["changes"]), second
    assert snapshot(ws) == files


def test_init_prints_the_hosts_it_did_not_configure_and_leaves_claude_md_absent(cli: Cli) -> None:
    done = cli("init")
    assert done.returncode == 0
    assert "created .codex/config.toml: added the warmkernel server" in done.stdout
    assert "Cursor (.cursor/mcp.json):" in done.stdout and "VS Code (.vscode/mcp.json):" in done.stdout
    assert not (cli.workspace / "CLAUDE.md").exists() and not (cli.workspace / ".cursor").exists()


def test_a_malformed_file_is_left_untouched_and_named_and_the_rest_is_done(cli: Cli) -> None:
    ws = cli.workspace
    (ws / ".mcp.json").write_text('{"mcpServers": {"other": ')
    (ws / ".codex").mkdir()
    (ws / ".codex" / "config.toml").write_text("mcp_servers = { other = { command = 'x' } }\n")
    (ws / ".cursor").mkdir()
    (ws / ".cursor" / "mcp.json").write_text('["not", "an", "object"]')
    before = snapshot(ws)
    done = cli("init")
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[0].startswith("skipped .mcp.json: it is not valid JSON (")
    assert lines[0].endswith("); fix it and run init again")
    assert lines[1] == (
        "skipped .codex/config.toml: its mcp_servers cannot take a table; "
        "add [mcp_servers.warmkernel] by hand"
    )
    assert "skipped .cursor/mcp.json: it does not hold a JSON object; fix it and run init again" in lines
    assert "created AGENTS.md" in lines
    assert {path: snapshot(ws)[path] for path in before} == before
    assert not list(ws.rglob("*.warmkernel-tmp"))


def test_an_existing_codex_server_is_kept_and_a_short_timeout_named(cli: Cli) -> None:
    (cli.workspace / ".codex").mkdir()
    (cli.workspace / ".codex" / "config.toml").write_text(
        '[mcp_servers.warmkernel]\ncommand = "warmkernel"\n'
    )
    done = cli("init")
    assert (
        "unchanged .codex/config.toml: it already has a warmkernel server (its tool_timeout_sec, 60, cuts "
        "longer waits off; 660 fits)" in done.stdout
    )


def test_the_installed_script_is_named_by_its_path_unless_path_finds_it(cli: Cli, tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("warmkernel")
    bare = {**cli.env, "PATH": "/usr/bin:/bin"}
    absolute = subprocess.run(
        [str(script), "init", "--json"], cwd=cli.workspace, env=bare, capture_output=True, text=True
    )
    entry = json.loads((cli.workspace / ".mcp.json").read_text())["mcpServers"]["warmkernel"]
    assert absolute.returncode == 0 and entry == {"command": str(script), "args": ["mcp"]}
    other = tmp_path / "other"
    other.mkdir()
    on_path = {**cli.env, "PATH": f"{script.parent}{os.pathsep}/usr/bin:/bin"}
    subprocess.run([str(script), "init"], cwd=other, env=on_path, capture_output=True, check=True)
    assert json.loads((other / ".mcp.json").read_text())["mcpServers"]["warmkernel"] == {
        "command": "warmkernel",
        "args": ["mcp"],
    }


def test_uvx_is_named_as_uvx_and_a_path_uv_made_is_not_trusted(tmp_path: Path) -> None:
    by_uv = {"UV": "/usr/local/bin/uv"}
    cached = "/root/.cache/uv/archive-v0/Ab12"
    from_pypi = ServerCommand("uvx", ("warmkernel", "mcp"))
    assert server_command(f"{cached}/bin/warmkernel", cached, by_uv, local_source=lambda: None) == from_pypi
    # installed from a clone or a wheel, which PyPI does not have: uvx is told where it is
    assert server_command(
        f"{cached}/bin/warmkernel", cached, by_uv, local_source=lambda: "/src/warmkernel"
    ) == ServerCommand("uvx", ("--from", "/src/warmkernel", "warmkernel", "mcp"))
    tool = tmp_path / "tools" / "warmkernel"  # `uv tool install`'s, which uvx reuses
    (tool / "bin").mkdir(parents=True)
    (tool / "uv-receipt.toml").touch()
    script = str(tool / "bin" / "warmkernel")
    assert server_command(script, str(tool), by_uv, local_source=lambda: None) == from_pypi
    assert server_command(script, str(tool), {}, lambda _: script) == ServerCommand("warmkernel", ("mcp",))
    project = tmp_path / "project" / ".venv"  # `uv run warmkernel init`: uv put its bin on PATH
    ran = str(project / "bin" / "warmkernel")
    assert server_command(ran, str(project), by_uv, lambda _: ran) == ServerCommand(ran, ("mcp",))
