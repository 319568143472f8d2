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
from pathlib import Path
from typing import Any, Literal

from warmkernel.cli.configured import workspace_of
from warmkernel.config import Settings, load_summarizers
from warmkernel.discovery import Descriptor, ensure_daemon, find_daemon
from warmkernel.errors import WarmkernelError
from warmkernel.workspace import resolve_workspace


@dataclass(frozen=True)
class _Option:
    """A command-line flag that sets one `Settings` field."""

    flag: str
    field: str
    scope: Literal["kernel", "reply"]
    help: str
    metavar: str | None = None
    type: Callable[[str], Any] = str
    choices: tuple[str, ...] | None = None


def _count(text: str) -> int:
    """A whole number of things, 0 or more (argparse exits with status 2 otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def _seconds(text: str) -> float:
    """A duration, 0 or more seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, not {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {text}")
    return value


_OPTIONS = (
    _Option("--python", "python", "kernel", "interpreter that runs the kernel; it needs ipykernel", "PATH"),
    _Option(
        "--result-mode",
        "result_mode",
        "reply",
        "structured adds structuredContent and output schemas; the text is the same",
        choices=("content", "structured"),
    ),
    _Option(
        "--wait",
        "default_wait_s",
        "reply",
        "how long run_python waits for a cell before replying that it still runs",
        "SECONDS",
        float,
    ),
    _Option(
        "--inline-lines",
        "inline_max_lines",
        "reply",
        "lines of a finished cell shown inline before head and tail",
        "N",
        int,
    ),
    _Option(
        "--inline-chars",
        "inline_max_chars",
        "reply",
        "characters of a finished cell shown inline before head and tail",
        "N",
        int,
    ),
    _Option(
        "--max-output-bytes",
        "max_output_bytes",
        "kernel",
        "cap on spilled output; past it the oldest finished executions' output is dropped (and says so)",
        "BYTES",
        int,
    ),
    _Option(
        "--spill-threshold-bytes",
        "spill_threshold_bytes",
        "kernel",
        "an execution's output moves from memory to private files past this size",
        "BYTES",
        int,
    ),
    _Option(
        "--spare-kernels",
        "spare_kernels",
        "kernel",
        "fresh kernels kept started in the background, so that a reset swaps one in at once "
        "(a spare started before a package was installed is replaced)",
        "N",
        _count,
    ),
    _Option(
        "--max-kernels",
        "max_kernels",
        "kernel",
        "the most kernels (main and named ones) that run at once; a stopped kernel does not count",
        "N",
        _count,
    ),
    _Option(
        "--kernel-idle-stop",
        "kernel_idle_stop_s",
        "kernel",
        "stop a kernel other than main after this long without a call or a running cell; 0: never",
        "SECONDS",
        float,
    ),
    _Option(
        "--jupyter-url",
        "jupyter_url",
        "kernel",
        "create the kernel on this Jupyter Server, Kernel Gateway or Enterprise Gateway instead of locally",
        "URL",
    ),
    _Option("--kernel-name", "kernel_name", "kernel", "kernelspec the Jupyter server starts", "NAME"),
    _Option(
        "--inspect-timeout",
        "inspect_timeout_s",
        "kernel",
        "time budget of one variable summary or listing; past it a degraded summary comes back",
        "SECONDS",
        float,
    ),
    _Option(
        "--inspect-sample-rows",
        "inspect_sample_rows",
        "kernel",
        "rows of a DataFrame a variable summary shows as its sample",
        "N",
        _count,
    ),
    _Option(
        "--notebook",
        "notebook",
        "reply",
        "the notebook the nb verbs and the notebook tools use when a call gives no path",
        "NB",
    ),
    _Option(
        "--max-images", "max_images_per_reply", "reply", "images one reply shows; the rest named", "N", int
    ),
    _Option(
        "--max-image-bytes", "max_image_bytes", "reply", "larger images are named, not shown", "BYTES", int
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
            help=option.help + _default_text(getattr(defaults, option.field)),
        )
    kernel.add_argument(
        "--no-save-outputs",
        dest="save_outputs",
        action="store_const",
        const=False,
        help="do not write the outputs of notebook cells back into the .ipynb",
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
            type=_seconds,
            default=IDLE_STOP_DEFAULT_S,
            metavar="SECONDS",
            help="a daemon started here stops after this long with no client and no running cell; "
            "0: never (the default is 12 h)",
        )
        kernel.add_argument(
            "--state-dir",
            type=Path,
            metavar="DIR",
            help="where a daemon started here keeps the journal of its records (default: "
            "$XDG_STATE_HOME/warmkernel or ~/.local/state/warmkernel)",
        )
        kernel.add_argument(
            "--log-level",
            default="WARNING",
            choices=("DEBUG", "INFO", "WARNING", "ERROR"),
            help="daemon log level (its log is in the runtime directory)",
        )


def _default_text(default: object) -> str:
    return "" if default is None else f" (default: {default})"


def _given(args: argparse.Namespace, scope: str) -> dict[str, Any]:
    return {
        option.field: getattr(args, option.field)
        for option in _OPTIONS
        if option.scope == scope and getattr(args, option.field, None) is not None
    }


def asked_kernel_options(args: argparse.Namespace) -> dict[str, Any]:
    """The kernel options given on this command line, as a daemon's descriptor states them."""
    asked = _given(args, "kernel")
    if getattr(args, "save_outputs", None) is not None:
        asked["save_outputs"] = args.save_outputs
    if "python" in asked:  # relative to the workspace, as the daemon (started there) sees it
        asked["python"] = os.path.abspath(asked["python"])
    return asked


def kernel_options_of(settings: Settings) -> dict[str, Any]:
    """What a daemon states about its kernel options, for clients to compare with theirs."""
    fields = [option.field for option in _OPTIONS if option.scope == "kernel"]
    return {field: getattr(settings, field) for field in [*fields, "save_outputs"]}


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
        for item in (option.flag, str(getattr(args, option.field)))
    ]
    if getattr(args, "save_outputs", None) is False:
        flags.append("--no-save-outputs")
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
    if getattr(args, "save_outputs", None) is not None:
        given["save_outputs"] = args.save_outputs
    return Settings(jupyter_token=_jupyter_token(args), **given)


def live_daemon(daemon_id: str | None) -> Descriptor:
    """The live daemon named, else this workspace's; `daemon_not_found` (starting none) if there is none."""
    descriptor = find_daemon(Path.cwd(), daemon_id)
    if descriptor is None:
        workspace = resolve_workspace(Path.cwd()).path
        raise WarmkernelError(
            "daemon_not_found",
            f"no daemon serves {workspace}, so there is nothing to show (none was started); "
            "`warmkernel run CODE` or `warmkernel start` starts one",
        )
    return descriptor


def workspace_daemon(
    args: argparse.Namespace, extra_flags: list[str] | None = None
) -> tuple[Descriptor, bool]:
    """The daemon of this workspace, started with this command line's kernel options if there is
    none (and whether it was); refused (`kernel_options_differ`) when a live one runs with other
    options than those given."""
    workspace = workspace_of(args)
    # A bad configuration is refused here with its code, not in a daemon's log.
    load_summarizers(workspace.path)
    # The daemon runs in the workspace, told how it was found: it does not ask the resolver again.
    resolved = ["--resolved-by", str(workspace.config_file)] if workspace.config_file else []
    flags = [*daemon_flags(args), *resolved, *(extra_flags or [])]
    return ensure_daemon(workspace.path, flags, daemon_environment(args), asked_kernel_options(args))
