"""The catalog of settings is the one statement of each setting: the `Settings` fields, the flags
of the serving verbs, their `--help`, the hello's reply options and the README's options table are
all read from it, and the names it gives are the ones users already write."""

from __future__ import annotations

import dataclasses
import re
import typing
from pathlib import Path

import pytest

from warmkernel.cli.configured import subparsers
from warmkernel.cli.options import shown_default
from warmkernel.cli.parser import build_parser
from warmkernel.errors import WarmkernelError
from warmkernel.settings.declarations import CATALOG, CONFIGURABLE, DECLARED
from warmkernel.settings.model import REPLY_SETTINGS, ResultMode, Settings
from warmkernel.settings.setting import Setting
from warmkernel.settings.value_kinds import Size

README = Path(__file__).parents[2] / "README.md"
SERVING_VERBS = ("mcp", "serve", "start")
PER_RUN_FLAGS = frozenset({"--help", "--daemon", "--json", "--timeout", "--kernel", "--ephemeral"})
"""Flags of the serving verbs that choose what one command does, not how warmkernel is set up."""

NAMES = {
    "--python": "python",
    "--result-mode": "result_mode",
    "--wait": "wait",
    "--inline-lines": "inline_lines",
    "--inline-chars": "inline_chars",
    "--max-output-bytes": "max_output_bytes",
    "--max-cell-output-bytes": "max_cell_output_bytes",
    "--max-kernel-memory": "max_kernel_memory",
    "--spill-threshold-bytes": "spill_threshold_bytes",
    "--spare-kernels": "spare_kernels",
    "--max-kernels": "max_kernels",
    "--kernel-idle-stop": "kernel_idle_stop",
    "--jupyter-url": "jupyter_url",
    "--kernel-name": "kernel_name",
    "--kernel-username": "kernel_username",
    "--kernel-working-dir": "kernel_working_dir",
    "--kernel-env": "kernel_env",
    "--kernel-launch-timeout": "kernel_launch_timeout",
    "--jupyter-header": "jupyter_header",
    "--jupyter-ca-bundle": "jupyter_ca_bundle",
    "--jupyter-client-cert": "jupyter_client_cert",
    "--jupyter-client-key": "jupyter_client_key",
    "--jupyter-token-file": "jupyter_token_file",
    "--inspect-timeout": "inspect_timeout",
    "--inspect-sample-rows": "inspect_sample_rows",
    "--notebook": "notebook",
    "--max-images": "max_images",
    "--max-image-bytes": "max_image_bytes",
    "--no-save-outputs": "save_outputs",
    "--add-ipykernel": "add_ipykernel",
    "--jupyter-token": "jupyter_token",
    "--idle-stop": "idle_stop",
    "--idle-stop-unused": "idle_stop_unused",
    "--state-dir": "state_dir",
    "--log-level": "log_level",
    "--host": "host",
    "--port": "port",
    "--path": "path",
    "--token": "token",
    "--token-file": "token_file",
    "--allowed-host": "allowed_host",
    "--serve": "serve",
    "--server-port": "server_port",
}
"""Every flag and the file key it is (its variable is WARMKERNEL_ and the key in capitals): a
contract with the users' files, variables and host configurations, so none may change."""


def test_the_flags_file_keys_and_variables_are_the_ones_users_write() -> None:
    assert {setting.flag: setting.name for setting in CONFIGURABLE} == NAMES
    assert {setting.variable for setting in CONFIGURABLE} == {
        f"WARMKERNEL_{n.upper()}" for n in NAMES.values()
    }


def test_every_flag_of_a_serving_verb_is_a_declared_setting_or_chooses_what_one_command_does() -> None:
    verbs = subparsers(build_parser()).choices
    for verb in SERVING_VERBS:
        flags = {
            next(flag for flag in action.option_strings if flag.startswith("--"))
            for action in verbs[verb]._actions  # pyright: ignore[reportPrivateUsage]
            if action.option_strings
        }
        assert flags - PER_RUN_FLAGS == {s.flag for s in CONFIGURABLE if s.verb in (None, verb)}, verb


def test_settings_fields_are_the_kernel_and_reply_declarations_with_their_defaults() -> None:
    declared = {s.dest: s.default for s in CATALOG if s.scope in ("kernel", "reply")}
    fields = {field.name: field.default for field in dataclasses.fields(Settings)}
    assert fields == declared
    assert len({s.dest for s in CATALOG}) == len(CATALOG), "one declaration a setting"


def test_the_result_mode_type_names_the_declared_choices() -> None:
    assert typing.get_args(ResultMode) == DECLARED["result_mode"].choices


def test_a_secret_is_not_shown_by_a_settings_repr() -> None:
    assert [s.dest for s in CATALOG if s.secret and s.scope != "daemon"] == ["jupyter_token"]
    assert "s3cret" not in repr(Settings(jupyter_token="s3cret"))


def test_the_hello_takes_the_reply_declarations_and_refuses_any_other() -> None:
    from warmkernel.daemon.hello import Hello

    replies = {s.dest for s in CATALOG if s.scope == "reply"}
    assert REPLY_SETTINGS == replies >= {"default_wait_s", "inline_max_chars", "progress_interval_s"}
    hello = Hello.parse(b'{"client": "cli", "options": {"inline_max_chars": 8000, "default_wait_s": 2}}')
    assert hello.options == {"inline_max_chars": 8000, "default_wait_s": 2}
    with pytest.raises(WarmkernelError) as caught:
        Hello.parse(b'{"client": "cli", "options": {"max_kernels": 9}}')
    assert caught.value.message.startswith('"max_kernels" in the hello\'s "options" are not reply options; ')
    assert caught.value.message.endswith(", ".join(sorted(replies)))


def test_every_byte_size_is_of_the_one_size_kind() -> None:
    sized = {s.flag for s in CONFIGURABLE if isinstance(s.kind, Size)}
    assert sized == {s.flag for s in CONFIGURABLE if "bytes" in s.dest}
    assert {s.kind.metavar for s in CONFIGURABLE if s.flag in sized} == {"SIZE"}


@pytest.mark.parametrize("setting", [s for s in CATALOG if s.default is not None], ids=lambda s: s.dest)
def test_a_default_written_as_a_word_means_the_default_again(setting: Setting) -> None:
    defaults = setting.default if setting.many else (setting.default,)
    if not setting.switch:
        assert tuple(setting.parse(setting.kind.word(value)) for value in defaults) == tuple(defaults)


@pytest.mark.parametrize(("size", "word"), [(8 << 30, "8G"), (1 << 20, "1M"), (3000, "3000"), (1536, "1.5K")])
def test_a_size_is_written_short_only_when_that_is_exact(size: int, word: str) -> None:
    kind = next(s.kind for s in CATALOG if isinstance(s.kind, Size))
    assert kind.word(size) == word


def test_help_shows_each_default_with_its_unit() -> None:
    help = " ".join(subparsers(build_parser()).choices["mcp"].format_help().split())
    assert "--idle-stop SECONDS a daemon started here stops after" in help
    assert "(default: 43200, 12 h)" in help and "(default: 7200, 2 h)" in help
    assert "--max-output-bytes SIZE" in help
    for setting in CONFIGURABLE:
        if setting.verb is None and (shown := shown_default(setting)) is not None:
            assert f"(default: {shown})" in help, setting.flag


def _spelled(setting: Setting) -> str:
    """The flag as the table shows it: with its value's word, or its choices."""
    if setting.switch:
        return setting.flag
    value = setting.metavar or setting.kind.metavar or "|".join(setting.choices or ())
    return f"{setting.flag} {value}"


def _default(setting: Setting) -> str:
    if setting.switch:
        return "off"
    if setting.many or setting.default is None:
        return re.sub(r"([$~]\S+?)(?=,|$)", r"`\1`", setting.shown_absent or "none")
    gloss = setting.kind.gloss(setting.default)
    return f"`{setting.kind.word(setting.default)}`" + (f" ({gloss})" if gloss else "")


def options_table() -> str:
    """The README's table of the flags every serving verb takes, made from their declarations."""
    rows = ["| option | default | meaning |", "|---|---|---|"]
    for setting in CONFIGURABLE:
        if setting.verb is None:
            cells = (f"`{_spelled(setting)}`", _default(setting), setting.help)
            rows.append("| " + " | ".join(cell.replace("|", r"\|") for cell in cells) + " |")
    return "\n".join(rows)


def test_the_readme_options_table_is_the_one_the_declarations_make() -> None:
    found = re.search(r"^\| option \| default \| meaning \|\n(?:\|.*\n)+", README.read_text(), re.MULTILINE)
    assert found is not None, "README.md has no options table"
    expected = options_table()
    assert found.group(0).rstrip("\n") == expected, f"README.md's options table should read:\n{expected}"
