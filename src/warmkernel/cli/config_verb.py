"""`warmkernel config`: the effective settings of this workspace and where each one came from."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from warmkernel.cli.configured import workspace_of
from warmkernel.cli.exits import EXIT_OK
from warmkernel.settings.layers import Configuration, Source, project_files, user_config_file
from warmkernel.settings.setting import Setting
from warmkernel.settings.value_kinds import number_word


def config(args: argparse.Namespace) -> int:
    rows = effective(args.settings, args.configuration)
    files = candidate_files(workspace_of(args).path, args.configuration)
    if args.json:
        print(json.dumps({"settings": rows, "files": files}, indent=2))
    else:
        print(describe(rows, files))
    return EXIT_OK


def effective(settings: tuple[Setting, ...], configuration: Configuration) -> dict[str, dict[str, Any]]:
    """Each setting's value and source: a flag, the environment, a file and line, or the default."""
    rows: dict[str, dict[str, Any]] = {}
    for setting in settings:
        found = configuration.values.get(setting.name)
        value, source = (
            (found.value, found.source) if found is not None else (setting.default, Source("default"))
        )
        shown = "(set)" if setting.secret and value else str(value) if isinstance(value, Path) else value
        rows[setting.name] = {"value": shown, "source": source.layer, "where": source.where or None}
    return rows


def candidate_files(workspace: Path, configuration: Configuration) -> list[dict[str, Any]]:
    """Every file warmkernel reads settings from, lowest first, and whether it counted."""
    paths = [user_config_file(), *(path for path, _ in project_files(workspace))]
    return [{"path": str(path), "used": path in configuration.files} for path in paths]


def describe(rows: dict[str, dict[str, Any]], files: list[dict[str, Any]]) -> str:
    width = max(len(name) for name in rows) + 2
    values = {name: _text(row["value"]) for name, row in rows.items()}
    value_width = min(max(len(value) for value in values.values()), 40) + 2
    lines = [f"{'setting':<{width}}{'value':<{value_width}}source"]
    for name, row in rows.items():
        source = row["source"] + (f" {row['where']}" if row["where"] else "")
        lines.append(f"{name:<{width}}{values[name]:<{value_width}}{source}")
    lines.append("")
    lines.append("files (lowest first; environment WARMKERNEL_<SETTING> and flags win over them):")
    lines += [f"  {file['path']}{'' if file['used'] else '  (not used)'}" for file in files]
    return "\n".join(lines)


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ", ".join(str(item) for item in value) or "-"  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    return number_word(value)
