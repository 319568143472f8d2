"""Server options on the command line: which `Settings` field each flag sets, whether it belongs
to the daemon (kernel options) or to the client (reply options), and how they travel: kernel
options as flags on a new daemon's command line (the Jupyter token in its environment) and as
what a live daemon must match (`workspace_daemon`), reply options in the client's hello.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

from warmkernel.cli.configured import workspace_of
from warmkernel.daemon.discovery import Descriptor, ensure_daemon, find_daemon
from warmkernel.errors import WarmkernelError
from warmkernel.settings.model import REPLY_SETTINGS, Settings
from warmkernel.sizes import format_size, parse_size


@dataclass(frozen=True)
class _Option:
    """A command-line flag that sets one `Settings` field."""

    flag: str
    field: str
    help: str
    metavar: str | None = None
    type: Callable[[str], Any] = str
    choices: tuple[str, ...] | None = None
    repeat: bool = False
    """Given once per value (`--kernel-env A=1 --kernel-env B=2`); the field holds them all."""

    @property
    def scope(self) -> Literal["kernel", "reply"]:
        """A reply option is the client's own (`config.REPLY_SETTINGS`); any other is the daemon's."""
        return "reply" if self.field in REPLY_SETTINGS else "kernel"


def _whole(text: str, least: int) -> int:
    """A whole number, `least` or more (argparse exits with status 2 otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be {least} or more, not {value}")
    return value


def _count(text: str) -> int:
    """A whole number of things, 0 or more."""
    return _whole(text, 0)


def _positive(text: str) -> int:
    """A whole number, 1 or more."""
    return _whole(text, 1)


def _size(text: str) -> int:
    """A size in bytes, `8G` style (argparse exits with status 2 otherwise)."""
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive_size(text: str) -> int:
    """A size of 1 byte or more."""
    size = _size(text)
    if size < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {size}")
    return size


def _seconds(text: str) -> float:
    """A positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, not {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds more than 0, not {text}")
    return value


def _assignment(text: str) -> str:
    """`NAME=VALUE` (the value may be empty or hold `=`)."""
    name, equals, _ = text.partition("=")
    if not equals or not name.strip() or name != name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, not {text!r}")
    return text


def _path(text: str) -> str:
    """A file path, made absolute here: the daemon that reads it runs in the workspace."""
    return os.path.abspath(text)


def _duration(text: str) -> float:
    """A duration, 0 or more seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, not {text!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds, 0 or more, not {text}")
    return value


def _directory(text: str) -> Path:
    """A directory's path; an empty one would be the current directory, which no one means."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a directory's path, not an empty one")
    return Path(text)


_OPTIONS = (
    _Option(
        "--python",
        "python",
        "interpreter that runs the kernel (it needs ipykernel); auto: the project's environment "
        "($VIRTUAL_ENV, .venv or venv up to the repository root, a uv project, $CONDA_PREFIX, Poetry, "
        "Pixi), else warmkernel's own",
        "PATH",
    ),
    _Option(
        "--result-mode",
        "result_mode",
        "structured adds structuredContent and output schemas; the text is the same",
        choices=("content", "structured"),
    ),
    _Option(
        "--wait",
        "default_wait_s",
        "how long run_python waits for a cell before replying that it still runs",
        "SECONDS",
        _seconds,
    ),
    _Option(
        "--inline-lines",
        "inline_max_lines",
        "lines of a finished cell shown inline before head and tail",
        "N",
        _positive,
    ),
    _Option(
        "--inline-chars",
        "inline_max_chars",
        "characters of a finished cell shown inline before head and tail",
        "N",
        _positive,
    ),
    _Option(
        "--max-output-bytes",
        "max_output_bytes",
        "cap on spilled output; past it the oldest finished executions' output is dropped (and says so)",
        "SIZE",
        _positive_size,
    ),
    _Option(
        "--max-cell-output-bytes",
        "max_cell_output_bytes",
        "output one cell may produce; past it the cell's further output is dropped with one marker "
        "line, and counted, while the cell runs on",
        "SIZE",
        _size,
    ),
    _Option(
        "--max-kernel-memory",
        "max_kernel_memory_bytes",
        "memory ceiling of a local kernel and the processes it started (e.g. 8G): past it the running "
        "cell is interrupted, and if memory stays above it for 5 s the kernel is killed (default: none)",
        "SIZE",
        _size,
    ),
    _Option(
        "--spill-threshold-bytes",
        "spill_threshold_bytes",
        "an execution's output moves from memory to private files past this size",
        "SIZE",
        _size,
    ),
    _Option(
        "--spare-kernels",
        "spare_kernels",
        "fresh kernels kept started in the background (locally, or on --jupyter-url), so that a reset "
        "swaps one in at once (a local spare started before a package was installed is replaced)",
        "N",
        _count,
    ),
    _Option(
        "--max-kernels",
        "max_kernels",
        "the most kernels (main and named ones) that run at once; a stopped kernel does not count",
        "N",
        _positive,
    ),
    _Option(
        "--kernel-idle-stop",
        "kernel_idle_stop_s",
        "stop a kernel other than main after this long without a call or a running cell; 0: never",
        "SECONDS",
        _duration,
    ),
    _Option(
        "--jupyter-url",
        "jupyter_url",
        "create the kernel on this Jupyter Server, Kernel Gateway or Enterprise Gateway instead of locally",
        "URL",
    ),
    _Option("--kernel-name", "kernel_name", "kernelspec the Jupyter server starts", "NAME"),
    _Option(
        "--kernel-username",
        "kernel_username",
        "KERNEL_USERNAME sent when creating a kernel on --jupyter-url; Enterprise Gateway authorizes "
        "(and may impersonate) by it (default: $KERNEL_USERNAME, else your user name)",
        "NAME",
    ),
    _Option(
        "--kernel-working-dir",
        "kernel_working_dir",
        "KERNEL_WORKING_DIR sent when creating a kernel: its working directory, a path on the server's side",
        "PATH",
    ),
    _Option(
        "--kernel-env",
        "kernel_env",
        "a variable of the kernel's environment sent when creating it, e.g. KERNEL_IMAGE=repo/image:tag "
        "or KERNEL_NAMESPACE=ml (repeatable; every KERNEL_* variable of this environment goes too)",
        "NAME=VALUE",
        _assignment,
        repeat=True,
    ),
    _Option(
        "--kernel-launch-timeout",
        "kernel_launch_timeout_s",
        "how long creating a kernel on --jupyter-url and its first reply may take (a gateway may pull an "
        "image first); run_python meanwhile replies that the kernel is still starting",
        "SECONDS",
        _seconds,
    ),
    _Option(
        "--jupyter-header",
        "jupyter_headers",
        "a header sent with every request and websocket to --jupyter-url, e.g. for a proxy in front of it "
        "(repeatable; shown in the process list: keep secrets in the token)",
        "NAME=VALUE",
        _assignment,
        repeat=True,
    ),
    _Option(
        "--jupyter-ca-bundle",
        "jupyter_ca_bundle",
        "PEM file of the certificate authorities an https --jupyter-url is checked against (REST and "
        "websocket alike)",
        "PATH",
        _path,
    ),
    _Option(
        "--jupyter-client-cert",
        "jupyter_client_cert",
        "PEM client certificate (with its key, or see --jupyter-client-key) for a server that asks for one",
        "PATH",
        _path,
    ),
    _Option(
        "--jupyter-client-key",
        "jupyter_client_key",
        "PEM private key of --jupyter-client-cert, when it is in a file of its own",
        "PATH",
        _path,
    ),
    _Option(
        "--jupyter-token-file",
        "jupyter_token_file",
        "file holding the token of --jupyter-url, read again whenever the server answers 401, so a "
        "rotated token is picked up",
        "PATH",
        _path,
    ),
    _Option(
        "--inspect-timeout",
        "inspect_timeout_s",
        "time budget of one variable summary or listing; past it a degraded summary comes back",
        "SECONDS",
        _seconds,
    ),
    _Option(
        "--inspect-sample-rows",
        "inspect_sample_rows",
        "rows of a DataFrame a variable summary shows as its sample",
        "N",
        _count,
    ),
    _Option(
        "--notebook",
        "notebook",
        "the notebook the nb verbs and the notebook tools use when a call gives no path",
        "NB",
    ),
    _Option("--max-images", "max_images_per_reply", "images one reply shows; the rest named", "N", _count),
    _Option("--max-image-bytes", "max_image_bytes", "larger images are named, not shown", "SIZE", _size),
)


@dataclass(frozen=True)
class _Switch:
    """A kernel flag that turns one boolean `Settings` field away from its default."""

    flag: str
    field: str
    value: bool
    help: str


_SWITCHES = (
    _Switch(
        "--no-save-outputs",
        "save_outputs",
        False,
        "do not write the outputs of notebook cells back into the .ipynb",
    ),
    _Switch(
        "--add-ipykernel",
        "add_ipykernel",
        True,
        "when the project's environment lacks ipykernel, install it with the command the error names "
        "(also `add_ipykernel = true` in warmkernel.toml)",
    ),
)


_JUPYTER_TOKEN_VARIABLE = "WARMKERNEL_JUPYTER_TOKEN"
IDLE_STOP_DEFAULT_S = 12 * 3600.0


def add_server_options(parser: argparse.ArgumentParser, *, daemon: bool = True) -> None:
    """The kernel and reply flags; with `daemon`, those of a daemon this command may start too.

    Every default is None here (the `Settings` default applies): what the caller did not give
    is neither sent to a daemon nor compared with a live one's options.
    """
    defaults = Settings()
    kernel = parser.add_argument_group("kernel (the daemon's; a live daemon with other ones is refused)")
    replies = parser.add_argument_group("replies (this client's own)")
    for option in _OPTIONS:
        group = kernel if option.scope == "kernel" else replies
        group.add_argument(
            option.flag,
            dest=option.field,
            type=option.type,
            metavar=option.metavar,
            choices=option.choices,
            action="append" if option.repeat else "store",
            help=option.help + ("" if option.repeat else _default_text(getattr(defaults, option.field))),
        )
    for switch in _SWITCHES:
        kernel.add_argument(
            switch.flag, dest=switch.field, action="store_const", const=switch.value, help=switch.help
        )
    kernel.add_argument(
        "--jupyter-token",
        metavar="TOKEN",
        help=f"token of --jupyter-url (default: ${_JUPYTER_TOKEN_VARIABLE}, which other users cannot "
        "read in the process list, unlike a flag)",
    )
    if daemon:
        kernel.add_argument(
            "--idle-stop",
            type=_duration,
            default=IDLE_STOP_DEFAULT_S,
            metavar="SECONDS",
            help="a daemon started here stops after this long with no client and no running cell; "
            f"0: never (default: {IDLE_STOP_DEFAULT_S:g}, {IDLE_STOP_DEFAULT_S / 3600:g} h)",
        )
        kernel.add_argument(
            "--state-dir",
            type=_directory,
            metavar="DIR",
            help="where a daemon started here keeps the journal of its records (default: "
            "$WARMKERNEL_STATE_DIR, else $XDG_STATE_HOME/warmkernel, else ~/.local/state/warmkernel)",
        )
        kernel.add_argument(
            "--log-level",
            default="WARNING",
            type=str.upper,
            choices=("DEBUG", "INFO", "WARNING", "ERROR"),
            help="daemon log level (its log is in the runtime directory)",
        )


def _default_text(default: object) -> str:
    return "" if default is None else f" (default: {shown_default(default)})"


def shown_default(default: object) -> str:
    """A default as help shows it: `10`, not `10.0`."""
    return f"{default:g}" if isinstance(default, float) else str(default)


def _given(args: argparse.Namespace, scope: str) -> dict[str, Any]:
    """The options of `scope` given on the command line (switches are kernel options)."""
    fields = [option.field for option in _OPTIONS if option.scope == scope]
    if scope == "kernel":
        fields += [switch.field for switch in _SWITCHES]
    return {field: getattr(args, field) for field in fields if getattr(args, field, None) is not None}


def asked_kernel_options(args: argparse.Namespace) -> dict[str, Any]:
    """The kernel options given on this command line, as a daemon's descriptor states them."""
    asked = _given(args, "kernel")
    # A path is made absolute: relative to the workspace, as the daemon (started there) sees it.
    if asked.get("python") not in (None, "auto"):
        asked["python"] = os.path.abspath(asked["python"])
    # The token is compared only for a server named here: one in the environment for any use is not
    # a wish about this daemon.
    if asked.get("jupyter_url") is not None and (token := _jupyter_token(args)) is not None:
        asked[_TOKEN] = _fingerprint(token)
    return asked


_TOKEN = "jupyter_token_sha256"
"""How a descriptor states the Jupyter token: its fingerprint, never the secret."""


def _fingerprint(token: str | None) -> str | None:
    import hashlib  # here: only a token needs it, and it loads OpenSSL

    return hashlib.sha256(token.encode()).hexdigest()[:16] if token else None


def describe_kernel_option(field: str, value: Any) -> str:
    """A kernel option as its flag writes it (`--max-kernel-memory 8G`); `no FLAG` when unset."""
    if field == _TOKEN:
        return f"--jupyter-token (sha256 {value[:8]}…)" if value else "no --jupyter-token"
    switch = next((switch for switch in _SWITCHES if switch.field == field), None)
    if switch is not None:
        return switch.flag if value == switch.value else f"no {switch.flag}"
    option = next(option for option in _OPTIONS if option.field == field)
    if value is None or value == []:
        return f"no {option.flag}"
    if option.repeat:
        return " ".join(f"{option.flag} {item}" for item in value)
    sized = option.type in (_size, _positive_size)
    return f"{option.flag} {_size_word(value) if sized else shown_default(value)}"


def _size_word(size: int) -> str:
    """A size as a flag takes it: `8G` when that is exact, else its bytes (3000, not 2.9K)."""
    short = format_size(size)
    return short if parse_size(short) == size else str(size)


def kernel_options_of(settings: Settings) -> dict[str, Any]:
    """What a daemon states about its kernel options, for clients to compare with theirs."""
    fields = [option.field for option in _OPTIONS if option.scope == "kernel"]
    fields += [switch.field for switch in _SWITCHES]
    stated = {field: getattr(settings, field) for field in fields}
    return stated | {_TOKEN: _fingerprint(settings.jupyter_token)}


def reply_options(args: argparse.Namespace) -> dict[str, Any]:
    """The reply options given on this command line, for this client's hello."""
    return _given(args, "reply")


def daemon_flags(args: argparse.Namespace) -> list[str]:
    """The command line of a daemon started for this one: its kernel options and lifetime (the
    Jupyter token goes in the daemon's environment: see `daemon_environment`)."""
    flags = [
        item
        for option in _OPTIONS
        if option.scope == "kernel" and getattr(args, option.field, None) is not None
        for value in (getattr(args, option.field) if option.repeat else [getattr(args, option.field)])
        for item in (option.flag, str(value))
    ]
    # A switch set to its default (`save_outputs = true` in a file) is no flag: given, it would invert it.
    flags += [switch.flag for switch in _SWITCHES if getattr(args, switch.field, None) == switch.value]
    if getattr(args, "idle_stop", None) is not None:
        flags += ["--idle-stop", f"{args.idle_stop:g}"]
    if getattr(args, "state_dir", None) is not None:
        flags += ["--state-dir", str(args.state_dir.absolute())]
    return [*flags, "--log-level", getattr(args, "log_level", "WARNING")]


def state_dir_of(args: argparse.Namespace) -> Path | None:
    """Where the workspace's journal is: `state_dir` (--state-dir, $WARMKERNEL_STATE_DIR or a
    configuration file); None: the per-user default (`journal.state_dir`)."""
    if getattr(args, "state_dir", None) is not None:
        return args.state_dir.absolute()
    return None


def _jupyter_token(args: argparse.Namespace) -> str | None:
    return getattr(args, "jupyter_token", None) or os.environ.get(_JUPYTER_TOKEN_VARIABLE) or None


def daemon_environment(args: argparse.Namespace) -> dict[str, str]:
    """What a daemon inherits beside the flags: the Jupyter token, kept out of its argv."""
    token = _jupyter_token(args)
    return {_JUPYTER_TOKEN_VARIABLE: token} if token else {}


def settings_from(args: argparse.Namespace) -> Settings:
    """A server's settings: the defaults, and the options given on its command line."""
    given = _given(args, "kernel") | _given(args, "reply")
    given |= {
        option.field: tuple(given[option.field])
        for option in _OPTIONS
        if option.field in given and option.repeat
    }
    return Settings(jupyter_token=_jupyter_token(args), **given)


def workspace_daemon(
    args: argparse.Namespace, extra_flags: list[str] | None = None
) -> tuple[Descriptor, bool]:
    """The daemon of this workspace, started with this command line's kernel options if there is
    none (and whether it was); refused (`kernel_options_differ`) when a live one runs with other
    options than those given."""
    workspace = workspace_of(args)
    # The daemon runs in the workspace, told how it was found: it does not ask the resolver again.
    resolved = ["--resolved-by", str(workspace.config_file)] if workspace.config_file else []
    flags = [*daemon_flags(args), *resolved, *(extra_flags or [])]
    asked = asked_kernel_options(args)
    return ensure_daemon(workspace.path, flags, daemon_environment(args), asked, partial(_described, args))


def _described(args: argparse.Namespace, field: str, value: Any) -> str:
    """A kernel option as its flag writes it, and where it was set when not on this command line
    (a configuration file's line, a variable): a refusal must not blame a flag nobody typed."""
    words = describe_kernel_option(field, value)
    setting = next((setting for setting in args.settings if setting.dest == field), None)
    found = args.configuration.values.get(setting.name) if setting is not None else None
    if found is None or found.value != value or found.source.layer in ("flag", "default"):
        return words
    return f"{words}, set in {found.source.describe()}"


def chosen_daemon(args: argparse.Namespace, *, start: bool = True) -> Descriptor:
    """The daemon `--daemon` names, else the workspace's: started if there is none and `start`,
    else `daemon_not_found` (a verb that only looks starts nothing)."""
    daemon_id = getattr(args, "daemon", None)
    if daemon_id is None and start:
        return workspace_daemon(args)[0]
    descriptor = find_daemon(Path.cwd(), daemon_id)
    if descriptor is None:
        raise WarmkernelError("daemon_not_found", _no_daemon(workspace_of(args).path, state_dir_of(args)))
    return descriptor


def _no_daemon(workspace: Path, state_dir: Path | None) -> str:
    """Why a verb that only looks has nothing to show, and what would show something."""
    from warmkernel.session.journal import journaled_executions  # here: only this refusal reads the journal

    kept = journaled_executions(workspace, state_dir)
    if not kept:
        return (
            f"no daemon serves {workspace}, so there is nothing to show (none was started); "
            "`warmkernel run CODE` or `warmkernel start` starts one"
        )
    counted = ", ".join(f"{count} of kernel {kernel}" for kernel, count in kept.items())
    return (
        f"no daemon serves {workspace} (none was started); its journal keeps executions ({counted}), "
        "which a new daemon shows: `warmkernel start` starts one (with a fresh kernel)"
    )
