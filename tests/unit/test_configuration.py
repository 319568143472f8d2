"""Configuration files and variables read as flags: every flag of the serving verbs is a setting,
and a value from a file gives exactly the arguments its flag gives."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from warmkernel.cli.configured import configure
from warmkernel.cli.options import add_server_options
from warmkernel.cli.parser import build_parser
from warmkernel.errors import WarmkernelError
from warmkernel.settings.declarations import CONFIGURABLE
from warmkernel.settings.setting import Setting
from warmkernel.settings.value_kinds import Size

SETTINGS = CONFIGURABLE
CONFIGURABLE_VERBS = ("mcp", "serve", "start")
PER_RUN_FLAGS = frozenset({"--help", "--daemon", "--json", "--timeout", "--kernel", "--ephemeral"})
"""Flags of those verbs that choose what one command does, not how warmkernel is set up."""


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty workspace as the current directory, with no user file and no WARMKERNEL_* setting."""
    (tmp_path / "ws").mkdir()
    monkeypatch.chdir(tmp_path / "ws")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for setting in SETTINGS:
        monkeypatch.delenv(setting.variable, raising=False)
    return tmp_path / "ws"


def _verb_with(flag: str) -> str:
    parser = build_parser()
    verbs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices  # pyright: ignore[reportPrivateUsage]
    return next(verb for verb in CONFIGURABLE_VERBS if flag in verbs[verb]._option_string_actions)  # pyright: ignore[reportPrivateUsage]


def _sample(setting: Setting) -> tuple[list[str], str]:
    """A flag's words and the same value as TOML."""
    if setting.switch:
        negated = setting.flag.startswith("--no-")
        return [setting.flag], "false" if negated else "true"
    if setting.choices is not None:
        word = str(setting.choices[-1])
    else:
        word = next(w for w in ("3", "2.5", "x", "NAME=x") if _accepts(setting, w))
    numeric = word[0].isdigit() and not isinstance(setting.parse(word), Path)
    toml = word if numeric else f'"{word}"'
    return [setting.flag, word], f"[{toml}]" if setting.many else toml


def _accepts(setting: Setting, word: str) -> bool:
    try:
        setting.parse(word)
    except (ValueError, TypeError, argparse.ArgumentTypeError):
        return False
    return True


def test_every_server_flag_is_a_setting_named_after_it() -> None:
    parser = argparse.ArgumentParser()
    add_server_options(parser)
    flags = {
        action.option_strings[0]
        for action in parser._actions  # pyright: ignore[reportPrivateUsage]
        if action.option_strings and action.option_strings[0] not in PER_RUN_FLAGS | {"-h"}
    }
    assert flags <= {setting.flag for setting in SETTINGS}
    by_flag = {setting.flag: setting.name for setting in SETTINGS}
    assert by_flag["--inline-chars"] == "inline_chars"
    assert by_flag["--no-save-outputs"] == "save_outputs"
    assert {"notebook", "inspect_timeout", "inspect_sample_rows", "serve", "server_port", "log_level"} <= set(
        by_flag.values()
    )


@pytest.mark.parametrize("setting", SETTINGS, ids=[s.name for s in SETTINGS])
def test_a_value_in_a_file_gives_the_arguments_its_flag_gives(
    workspace: Path, tmp_path: Path, setting: Setting
) -> None:
    verb = _verb_with(setting.flag)
    words, toml = _sample(setting)
    unset = getattr(configure(build_parser(), [verb]), setting.dest)
    by_flag = configure(build_parser(), [verb, *words])
    assert getattr(by_flag, setting.dest) != unset
    # Secrets are refused in project files (tested below): the user's file holds them.
    file = (
        tmp_path / "config" / "warmkernel" / "config.toml"
        if setting.secret
        else workspace / "warmkernel.toml"
    )
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(f"# set by the test\n{setting.name} = {toml}\n")
    by_file = configure(build_parser(), [verb])
    assert getattr(by_file, setting.dest) == getattr(by_flag, setting.dest)
    found = by_file.configuration.values[setting.name]
    assert found.source.where == f"{file}:2"


def test_precedence_is_default_user_project_environment_flag(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def inline_chars(*words: str) -> tuple[Any, str]:
        args = configure(build_parser(), ["mcp", *words])
        found = args.configuration.values.get("inline_chars")
        return args.inline_max_chars, found.source.describe() if found else "default"

    assert inline_chars() == (None, "default")
    user = tmp_path / "config" / "warmkernel" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text("inline_chars = 1000\n")
    assert inline_chars() == (1000, f"user {user}:1")
    (workspace / "pyproject.toml").write_text(
        "[project]\nname = 'x'\n\n[tool.warmkernel]\ninline_chars = 2000\n"
    )
    assert inline_chars() == (2000, f"project {workspace / 'pyproject.toml'}:5")
    (workspace / "warmkernel.toml").write_text("# ours\ninline_chars = 3000\n")
    assert inline_chars() == (3000, f"project {workspace / 'warmkernel.toml'}:2")
    monkeypatch.setenv("WARMKERNEL_INLINE_CHARS", "4000")
    assert inline_chars() == (4000, "environment WARMKERNEL_INLINE_CHARS")
    assert inline_chars("--inline-chars", "5000") == (5000, "flag --inline-chars")


def test_kernel_options_from_a_file_travel_to_a_new_daemon_as_flags(workspace: Path) -> None:
    from warmkernel.cli.options import asked_kernel_options, daemon_flags

    (workspace / "warmkernel.toml").write_text("max_kernels = 2\nsave_outputs = false\nidle_stop = 60\n")
    args = configure(build_parser(), ["run", "1"])  # a verb without these flags still starts a daemon
    assert asked_kernel_options(args) == {"max_kernels": 2, "save_outputs": False}
    flags = daemon_flags(args)
    assert flags[:5] == ["--max-kernels", "2", "--no-save-outputs", "--idle-stop", "60"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("inline_chars = 'many'\n", ':1: inline_chars = "many": expected a whole number, not \'many\''),
        ("wait = true\n", ":1: wait = true: expected a number of seconds, not 'true'"),
        ("idle_stop = true\n", ":1: idle_stop = true: expected a number of seconds, not 'true'"),
        ("spare_kernels = -1\n", ":1: spare_kernels = -1: must be 0 or more, not -1"),
        ("wait = -1\n", ":1: wait = -1: must be a finite number of seconds more than 0, not -1"),
        ("inline_lines = 0\n", ":1: inline_lines = 0: must be 1 or more, not 0"),
        ("max_kernels = 0\n", ":1: max_kernels = 0: must be 1 or more, not 0"),
        ("max_images = -1\n", ":1: max_images = -1: must be 0 or more, not -1"),
        ("kernel_idle_stop = -5\n", ":1: kernel_idle_stop = -5: must be a finite number of seconds, 0 or"),
        ("idle_stop = inf\n", ":1: idle_stop = inf: must be a finite number of seconds, 0 or more, not inf"),
        ("state_dir = ''\n", ':1: state_dir = "": expected a directory\'s path, not an empty one'),
        ("state_dir = 5\n", ":1: state_dir = 5: valid is a path, as a string"),
        ("result_mode = 'fancy'\n", ":1: result_mode = \"fancy\": valid is one of 'content', 'structured'"),
        ("save_outputs = 'no'\n", ':1: save_outputs = "no": valid is true or false'),
        ("\n\ninline_chrs = 8000\n", ":3: inline_chrs = 8000: unknown setting; did you mean inline_chars?"),
        ("inspect_timeout_s = 3\n", "inspect_timeout_s = 3: unknown setting; did you mean inspect_timeout?"),
        ("inline_chars = \n", " is not valid TOML: "),
        ("[inspection]\nsummarizers = 3\n", ':2: inspection.summarizers = 3: must be a list of "package.'),
        ("[inspection]\nsummarizer = []\n", ":2: inspection.summarizer = []: unknown setting; the insp"),
        ("inspection = 3\n", ":1: inspection = 3: valid is a table: summarizers = "),
        ("[tool.warmkernel]\nwait = 5\n", "sets them at its top level, without pyproject's [tool.warm"),
    ],
    ids=["not a number", "a bool for a number", "a bool for a duration", "out of range", "no wait",
         "no line", "no kernel", "fewer than no image", "a negative idle time", "an endless idle time",
         "an empty directory", "a number for a directory", "not a choice", "not a bool",
         "unknown key", "ipykeep's name", "malformed", "summarizers not a list", "unknown inspection key",
         "inspection not a table", "pyproject's table"],
)  # fmt: skip
def test_a_bad_file_is_refused_in_one_line_naming_file_key_value_and_what_is_valid(
    workspace: Path, text: str, expected: str
) -> None:
    (workspace / "warmkernel.toml").write_text(text)
    with pytest.raises(WarmkernelError) as caught:
        configure(build_parser(), ["mcp"])
    assert caught.value.code == "invalid_config"
    assert caught.value.message.startswith(str(workspace / "warmkernel.toml"))
    assert expected in caught.value.message
    assert "\n" not in caught.value.message


def test_a_level_is_taken_in_either_case_as_its_flag_takes_it(workspace: Path) -> None:
    (workspace / "warmkernel.toml").write_text('log_level = "debug"\n')
    assert configure(build_parser(), ["mcp"]).log_level == "DEBUG"
    assert configure(build_parser(), ["mcp", "--log-level", "info"]).log_level == "INFO"


def test_a_token_in_a_project_file_is_refused_pointing_at_the_environment(workspace: Path) -> None:
    (workspace / "pyproject.toml").write_text('[tool.warmkernel]\njupyter_token = "s3cret"\n')
    with pytest.raises(WarmkernelError) as caught:
        configure(build_parser(), ["mcp"])
    assert caught.value.code == "invalid_config"
    assert "$WARMKERNEL_JUPYTER_TOKEN" in caught.value.message and "committed" in caught.value.message


def test_a_token_in_the_user_file_is_taken(workspace: Path, tmp_path: Path) -> None:
    user = tmp_path / "config" / "warmkernel" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text('jupyter_token = "s3cret"\n')
    assert configure(build_parser(), ["mcp"]).jupyter_token == "s3cret"


def test_a_bad_variable_is_refused_naming_it(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WARMKERNEL_MAX_KERNELS", "lots")
    with pytest.raises(WarmkernelError) as caught:
        configure(build_parser(), ["mcp"])
    assert caught.value.message == "$WARMKERNEL_MAX_KERNELS='lots': expected a whole number, not 'lots'"


def test_a_pyproject_of_another_tool_is_not_a_configuration_file(workspace: Path) -> None:
    (workspace / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert configure(build_parser(), ["mcp"]).configuration.files == ()


PYPROJECT = """\
[project]
name = "demo"

[tool.warmkernel.inspection]
summarizers = ["team.summaries:frame", "other:Summaries.model"]
"""


def _summarizers() -> tuple[str, ...]:
    return configure(build_parser(), ["mcp"]).configuration.summarizers


def test_summarizers_are_read_from_pyproject_and_warmkernel_toml_wins(workspace: Path) -> None:
    assert _summarizers() == ()
    (workspace / "pyproject.toml").write_text(PYPROJECT)
    assert _summarizers() == ("team.summaries:frame", "other:Summaries.model")
    (workspace / "warmkernel.toml").write_text("[inspection]\n")
    assert _summarizers() == ("team.summaries:frame", "other:Summaries.model"), "no key: pyproject's"
    (workspace / "warmkernel.toml").write_text('[inspection]\nsummarizers = ["local:mine"]\n')
    assert _summarizers() == ("local:mine",)


@pytest.mark.parametrize(
    "value",
    ['"pkg:func"', '["pkg.func"]', '["pkg:"]', '[":func"]', '["1pkg:func"]', '["pkg:func()"]', "[1]"],
)
def test_summarizers_that_are_not_module_colon_function_strings_are_invalid_config(
    workspace: Path, value: str
) -> None:
    (workspace / "pyproject.toml").write_text(f"[tool.warmkernel.inspection]\nsummarizers = {value}\n")
    with pytest.raises(WarmkernelError) as caught:
        _summarizers()
    assert caught.value.code == "invalid_config"
    assert '"package.module:function"' in caught.value.message


def test_stop_works_whatever_the_configuration_says(workspace: Path) -> None:
    (workspace / "warmkernel.toml").write_text("not toml at all")
    assert configure(build_parser(), ["stop", "--all"]).all is True


@pytest.mark.parametrize("text", ["save_outputs = true\n", "add_ipykernel = false\n"])
def test_a_switch_configured_to_its_default_starts_a_daemon_that_states_what_was_asked(
    workspace: Path, text: str
) -> None:
    from warmkernel.cli.options import asked_kernel_options, daemon_flags, kernel_options_of, settings_from

    (workspace / "warmkernel.toml").write_text(text)
    args = configure(build_parser(), ["run", "1"])
    daemon = configure(build_parser(), ["daemon", *daemon_flags(args)])
    stated = kernel_options_of(settings_from(daemon))
    assert {field: stated[field] for field in asked_kernel_options(args)} == asked_kernel_options(args)


SIZE_FLAGS = [setting.flag for setting in SETTINGS if isinstance(setting.kind, Size)]


def test_the_byte_sizes_are_the_five_limits() -> None:
    assert SIZE_FLAGS == [
        "--max-output-bytes",
        "--max-cell-output-bytes",
        "--max-kernel-memory",
        "--spill-threshold-bytes",
        "--max-image-bytes",
    ]


@pytest.mark.parametrize("flag", SIZE_FLAGS)
def test_every_byte_size_takes_8g_style_sizes_in_flags_files_and_variables(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, flag: str
) -> None:
    setting = next(setting for setting in SETTINGS if setting.flag == flag)
    assert getattr(configure(build_parser(), ["mcp", flag, "8G"]), setting.dest) == 8 << 30
    (workspace / "warmkernel.toml").write_text(f'{setting.name} = "512M"\n')
    assert getattr(configure(build_parser(), ["mcp"]), setting.dest) == 512 << 20
    monkeypatch.setenv(setting.variable, "1.5K")
    assert getattr(configure(build_parser(), ["mcp"]), setting.dest) == 1536


def test_config_shows_an_empty_list_as_a_dash_whatever_its_default(workspace: Path) -> None:
    from warmkernel.cli.config_verb import describe, effective

    args = configure(build_parser(), ["config"])
    lines = describe(effective(args.settings, args.configuration), []).splitlines()
    shown = {
        line.split()[0]: line.split()[1] for line in lines[1:] if line.strip() and not line.startswith(" ")
    }
    assert (shown["kernel_env"], shown["jupyter_header"], shown["allowed_host"]) == ("-", "-", "-")
