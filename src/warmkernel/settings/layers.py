"""The configuration layers: what the user's file, the project's files and the `WARMKERNEL_*`
variables set, and where each value came from.

Lowest first: the user's file (`$XDG_CONFIG_HOME/warmkernel/config.toml`, else the platform's
config directory), the project's `pyproject.toml` (`[tool.warmkernel]`), its `warmkernel.toml`
(top level), the environment. Flags win over all of them; the command line applies that last
step (`cli.configured`). Files are data: they are parsed, never run.
"""

from __future__ import annotations

import os
import re
import sys
from argparse import ArgumentTypeError
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from warmkernel.errors import WarmkernelError
from warmkernel.settings.setting import Setting

PROJECT_TABLES = frozenset({"inspection"})
"""Tables a project file may hold beside the settings (`[inspection] summarizers`)."""

Layer = Literal["default", "user", "project", "environment", "flag"]
_SUMMARIZER = re.compile(r"[^\W\d]\w*(?:\.[^\W\d]\w*)*:[^\W\d]\w*(?:\.[^\W\d]\w*)*")


@dataclass(frozen=True)
class Source:
    layer: Layer
    where: str = ""
    """The file and line (`/w/pyproject.toml:12`), the variable, or the flag; "" for a default."""

    def describe(self) -> str:
        return self.layer if not self.where else f"{self.layer} {self.where}"


@dataclass(frozen=True)
class Found:
    value: Any
    source: Source


@dataclass(frozen=True)
class Configuration:
    """What the layers set (by setting name; flags not included) and the files that were read."""

    values: Mapping[str, Found]
    files: tuple[Path, ...]
    summarizers: tuple[str, ...] = ()
    """The project's `[inspection] summarizers` (`warmkernel.toml`'s win over `pyproject.toml`'s)."""


def user_config_file(env: Mapping[str, str] = os.environ) -> Path:
    """`$XDG_CONFIG_HOME/warmkernel/config.toml`, else the platform's config directory's."""
    if env.get("XDG_CONFIG_HOME"):
        base = Path(env["XDG_CONFIG_HOME"])
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path.home() / ".config"
    return base / "warmkernel" / "config.toml"


def project_files(workspace: Path) -> tuple[tuple[Path, tuple[str, ...]], ...]:
    """The project's files, lowest first, with the table that holds warmkernel's settings."""
    return ((workspace / "pyproject.toml", ("tool", "warmkernel")), (workspace / "warmkernel.toml", ()))


def load(settings: Sequence[Setting], workspace: Path, env: Mapping[str, str] = os.environ) -> Configuration:
    """Every layer but the flags, checked; a bad file, key or value is `invalid_config`."""
    by_name = {setting.name: setting for setting in settings}
    values: dict[str, Found] = {}
    files: list[Path] = []
    summarizers: tuple[str, ...] = ()
    user = user_config_file(env)
    for path, table, layer in [
        (user, (), "user"),
        *((path, table, "project") for path, table in project_files(workspace)),
    ]:
        text = _read(path)
        if text is None:
            continue
        found = _file_values(by_name, path, text, table, project=layer == "project", user_file=user)
        if found is None:
            continue
        files.append(path)
        file_values, file_summarizers = found
        values |= file_values
        summarizers = summarizers if file_summarizers is None else file_summarizers
    values |= _environment_values(settings, env)
    return Configuration(values, tuple(files), summarizers)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise WarmkernelError("invalid_config", f"{path} cannot be read: {exc}") from exc


def _file_values(
    settings: Mapping[str, Setting],
    path: Path,
    text: str,
    table_path: tuple[str, ...],
    *,
    project: bool,
    user_file: Path,
) -> tuple[dict[str, Found], tuple[str, ...] | None] | None:
    """The settings one file sets, and its summarizers (None: it sets none); None when it has no
    warmkernel table (a pyproject of another tool)."""
    import tomllib  # here: a verb in a workspace with no configuration file does without it

    try:
        document: Any = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise WarmkernelError("invalid_config", f"{path} is not valid TOML: {exc}") from exc
    table = document
    for name in table_path:
        table = table.get(name) if isinstance(table, dict) else None
    if not isinstance(table, dict):
        return None
    found: dict[str, Found] = {}
    summarizers: tuple[str, ...] | None = None
    for key, raw in table.items():
        where, shown = _located(path, text, table_path, key, raw)
        if project and key in PROJECT_TABLES:
            summarizers = _inspection(path, text, (*table_path, key), raw, shown)
            continue
        setting = settings.get(key)
        if setting is None:
            import difflib  # here: only a mistake needs it

            close = difflib.get_close_matches(key, [*settings, *(PROJECT_TABLES if project else ())], n=1)
            hint = f"did you mean {close[0]}?" if close else "`warmkernel config` lists the settings"
            if key == "tool" and not table_path:
                hint = f"{path.name} sets them at its top level, without pyproject's [tool.warmkernel]"
            raise WarmkernelError("invalid_config", f"{shown}: unknown setting; {hint}")
        if project and setting.secret:
            raise WarmkernelError(
                "invalid_config",
                f"{shown}: a secret does not belong in a project file, which is committed; set "
                f"${setting.variable} in the environment, or {key} in {user_file}",
            )
        found[key] = Found(_file_value(setting, raw, shown), Source("project" if project else "user", where))
    return found, summarizers


def _located(path: Path, text: str, table_path: tuple[str, ...], key: str, raw: Any) -> tuple[str, str]:
    """Where a key is set (`/w/pyproject.toml:12`), and that with the key and its value, for messages."""
    line = _line_of(text, table_path, key)
    where = f"{path}:{line}" if line else str(path)
    return where, f"{where}: {'.'.join([*table_path, key])} = {_show(raw)}"


def _inspection(
    path: Path, text: str, table_path: tuple[str, ...], table: Any, shown: str
) -> tuple[str, ...] | None:
    """The summarizers of an `[inspection]` table (None: it names none), refused as a setting is."""
    if not isinstance(table, dict):
        raise WarmkernelError(
            "invalid_config", f'{shown}: valid is a table: summarizers = ["package.module:function"]'
        )
    for key, raw in table.items():
        _, entry = _located(path, text, table_path, key, raw)
        if key != "summarizers":
            raise WarmkernelError(
                "invalid_config", f"{entry}: unknown setting; the inspection table has summarizers"
            )
        problem = _summarizers_problem(raw)
        if problem is not None:
            raise WarmkernelError("invalid_config", f"{entry}: {problem}")
    summarizers = table.get("summarizers")
    return None if summarizers is None else tuple(summarizers)


def _summarizers_problem(entries: Any) -> str | None:
    """Why `entries` is no `summarizers` value; None when it is one."""
    if isinstance(entries, list) and all(
        isinstance(entry, str) and _SUMMARIZER.fullmatch(entry) for entry in entries
    ):
        return None
    return f'must be a list of "package.module:function" strings, not {entries!r}'


def _file_value(setting: Setting, raw: Any, shown: str) -> Any:
    """A TOML value as the flag would have it."""
    if setting.switch:
        if not isinstance(raw, bool):
            raise WarmkernelError("invalid_config", f"{shown}: valid is true or false")
        return raw
    if setting.many:
        if not isinstance(raw, list) or not all(isinstance(item, str | int) for item in raw):
            raise WarmkernelError("invalid_config", f"{shown}: valid is a list, each {_valid(setting)}")
        return [_word_value(setting, str(item), shown) for item in raw]
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        _word_value(setting, _show(raw), shown)  # refused in the flag's own words, where it has them
        raise WarmkernelError("invalid_config", f"{shown}: valid is {_valid(setting)}")
    value = _word_value(setting, str(raw), shown)
    if isinstance(value, Path) and not isinstance(raw, str):
        raise WarmkernelError("invalid_config", f"{shown}: valid is a path, as a string")
    return value.expanduser() if isinstance(value, Path) else value


def _word_value(setting: Setting, word: str, shown: str) -> Any:
    """What the flag's word means; refused as the flag would be, naming what is valid."""
    try:
        value = setting.parse(word)
    except (ArgumentTypeError, ValueError, TypeError, ArithmeticError) as exc:
        detail = str(exc) if isinstance(exc, ArgumentTypeError) else ""
        raise WarmkernelError(
            "invalid_config", f"{shown}: {detail or f'valid is {_valid(setting)}'}"
        ) from exc
    if setting.choices is not None and value not in setting.choices:
        raise WarmkernelError("invalid_config", f"{shown}: valid is {_valid(setting)}")
    return value


def _valid(setting: Setting) -> str:
    if setting.choices is not None:
        return "one of " + ", ".join(repr(choice) for choice in setting.choices)
    return setting.kind.valid


def _show(raw: Any) -> str:
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, str):
        return f'"{raw}"'
    return repr(raw)


_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def _environment_values(settings: Iterable[Setting], env: Mapping[str, str]) -> dict[str, Found]:
    """`WARMKERNEL_<NAME>` as the flag's word (a switch: 1/0, true/false; a list: commas)."""
    found: dict[str, Found] = {}
    for setting in settings:
        word = env.get(setting.variable)
        if not word:
            continue
        shown = f"${setting.variable}={'…' if setting.secret else word!r}"
        if setting.switch:
            if word.lower() not in _TRUE | _FALSE:
                raise WarmkernelError("invalid_config", f"{shown}: valid is 1 or 0 (true or false)")
            value: Any = word.lower() in _TRUE
        elif setting.many:
            value = [_word_value(setting, item.strip(), shown) for item in word.split(",") if item.strip()]
        else:
            value = _word_value(setting, word, shown)
        found[setting.name] = Found(value, Source("environment", setting.variable))
    return found


_TABLE = re.compile(r"\s*\[\s*([^\[\]]+?)\s*\]\s*(?:#.*)?$")


def _line_of(text: str, table_path: tuple[str, ...], key: str) -> int | None:
    """The line that sets `key` in the table (1-based); None when it is set some other way."""
    current: tuple[str, ...] = ()
    assignment = re.compile(rf"\s*(?:{re.escape(key)}|\"{re.escape(key)}\"|'{re.escape(key)}')\s*=")
    for number, line in enumerate(text.splitlines(), 1):
        if header := _TABLE.match(line):
            current = tuple(part.strip().strip("\"'") for part in header.group(1).split("."))
        elif current == table_path and assignment.match(line):
            return number
    return None
