"""Kernel options on the command line: the flags that set a server's `Settings`, and how they
reach a daemon (flags on its command line, the Jupyter token in its environment).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from warmkernel.config import Settings


@dataclass(frozen=True)
class _KernelOption:
    """A command-line flag that sets one `Settings` field of a server."""

    flag: str
    field: str
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


_KERNEL_OPTIONS = (
    _KernelOption("--python", "python", "interpreter that runs the kernel; it needs ipykernel", "PATH"),
    _KernelOption(
        "--result-mode",
        "result_mode",
        "structured adds structuredContent and output schemas; the text is the same",
        choices=("content", "structured"),
    ),
    _KernelOption(
        "--wait",
        "default_wait_s",
        "how long run_python waits for a cell before replying that it still runs",
        "SECONDS",
        float,
    ),
    _KernelOption(
        "--inline-lines",
        "inline_max_lines",
        "lines of a finished cell shown inline before head and tail",
        "N",
        int,
    ),
    _KernelOption(
        "--inline-chars",
        "inline_max_chars",
        "characters of a finished cell shown inline before head and tail",
        "N",
        int,
    ),
    _KernelOption(
        "--max-output-bytes",
        "max_output_bytes",
        "cap on spilled output; past it the oldest finished executions' output is dropped (and says so)",
        "BYTES",
        int,
    ),
    _KernelOption(
        "--spill-threshold-bytes",
        "spill_threshold_bytes",
        "an execution's output moves from memory to private files past this size",
        "BYTES",
        int,
    ),
    _KernelOption(
        "--spare-kernels",
        "spare_kernels",
        "fresh kernels kept started in the background, so that a reset swaps one in at once "
        "(a spare started before a package was installed is replaced)",
        "N",
        _count,
    ),
    _KernelOption(
        "--jupyter-url",
        "jupyter_url",
        "create the kernel on this Jupyter Server, Kernel Gateway or Enterprise Gateway instead of locally",
        "URL",
    ),
    _KernelOption("--kernel-name", "kernel_name", "kernelspec the Jupyter server starts", "NAME"),
    _KernelOption(
        "--max-images", "max_images_per_reply", "images one reply shows; the rest are named", "N", int
    ),
    _KernelOption("--max-image-bytes", "max_image_bytes", "larger images are named, not shown", "BYTES", int),
)


_JUPYTER_TOKEN_VARIABLE = "WARMKERNEL_JUPYTER_TOKEN"


def add_kernel_options(parser: argparse.ArgumentParser) -> None:
    defaults = Settings()
    group = parser.add_argument_group("kernel and replies")
    for option in _KERNEL_OPTIONS:
        group.add_argument(
            option.flag,
            dest=option.field,
            default=getattr(defaults, option.field),
            type=option.type,
            metavar=option.metavar,
            choices=option.choices,
            help=option.help,
        )
    group.add_argument(
        "--no-save-outputs",
        dest="save_outputs",
        action="store_false",
        help="do not write the outputs of notebook cells back into the .ipynb",
    )
    group.add_argument(
        "--jupyter-token",
        metavar="TOKEN",
        default=argparse.SUPPRESS,
        help=f"token of --jupyter-url (default: ${_JUPYTER_TOKEN_VARIABLE}, which other users cannot "
        "read in the process list, unlike a flag)",
    )
    group.add_argument(
        "--log-level",
        default="WARNING",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="server log level (the log goes to stderr)",
    )


def kernel_flags(args: argparse.Namespace) -> list[str]:
    """The kernel options given on this command line, to pass on to a daemon (the token goes in
    its environment: see `kernel_environment`)."""
    flags = [
        item
        for option in _KERNEL_OPTIONS
        if getattr(args, option.field) is not None
        for item in (option.flag, str(getattr(args, option.field)))
    ]
    saving = [] if args.save_outputs else ["--no-save-outputs"]
    return [*flags, *saving, "--log-level", args.log_level]


def _jupyter_token(args: argparse.Namespace) -> str | None:
    return getattr(args, "jupyter_token", None) or os.environ.get(_JUPYTER_TOKEN_VARIABLE) or None


def kernel_environment(args: argparse.Namespace) -> dict[str, str]:
    """What a daemon inherits beside the flags: the Jupyter token, kept out of its argv."""
    token = _jupyter_token(args)
    return {_JUPYTER_TOKEN_VARIABLE: token} if token else {}


def settings_from(args: argparse.Namespace) -> Settings:
    fields = {option.field: getattr(args, option.field) for option in _KERNEL_OPTIONS}
    return Settings(save_outputs=args.save_outputs, jupyter_token=_jupyter_token(args), **fields)
