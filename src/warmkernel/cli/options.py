"""Server options on the command line: the catalog's flags (`settings.catalog`) in the groups their
scope says, and how they travel: kernel options as flags on a new daemon's command line (a secret
in its environment) and as what a live daemon must match (`workspace_daemon`), reply options in the
client's hello, the daemon's own options as flags of its command line.
"""

from __future__ import annotations

import argparse
import os
from functools import partial
from pathlib import Path
from typing import Any

from warmkernel.cli.configured import workspace_of
from warmkernel.daemon.discovery import Descriptor, ensure_daemon, find_daemon
from warmkernel.errors import WarmkernelError
from warmkernel.settings.declarations import CONFIGURABLE, DECLARED
from warmkernel.settings.model import Settings
from warmkernel.settings.setting import Scope, Setting

_JUPYTER_TOKEN = DECLARED["jupyter_token"]


def add_server_options(parser: argparse.ArgumentParser, verb: str | None = None) -> None:
    """The flags every serving verb takes (kernel, reply and daemon options), and `verb`'s own.

    A kernel or reply option's default is None here (the `Settings` default applies): what the
    caller did not give is neither sent to a daemon nor compared with a live one's options.
    """
    kernel = parser.add_argument_group("kernel (the daemon's; a live daemon with other ones is refused)")
    replies = parser.add_argument_group("replies (this client's own)")
    own = [setting for setting in CONFIGURABLE if verb is not None and setting.verb == verb]
    for setting in [*own, *(setting for setting in CONFIGURABLE if setting.verb is None)]:
        group = parser if setting.verb else replies if setting.scope == "reply" else kernel
        default = setting.default if setting.scope == "daemon" else None
        help = (setting.help + _default_text(setting)).replace("%", "%%")
        if setting.switch:
            const = not setting.default
            group.add_argument(
                setting.flag, dest=setting.dest, action="store_const", const=const, default=default, help=help
            )
            continue
        group.add_argument(
            setting.flag,
            dest=setting.dest,
            type=setting.parse,
            metavar=setting.metavar or setting.kind.metavar,
            choices=setting.choices,
            action="append" if setting.many else "store",
            default=list(default) if setting.many and default is not None else default,
            help=help,
        )


def _default_text(setting: Setting) -> str:
    shown = shown_default(setting)
    return "" if shown is None else f" (default: {shown})"


def shown_default(setting: Setting) -> str | None:
    """A setting's default as `--help` shows it (`43200, 12 h`); None for a switch or a list, and for
    an unset value that means nothing to say."""
    if setting.switch or setting.many:
        return None
    if setting.default is None:
        return setting.shown_absent
    gloss = setting.kind.gloss(setting.default)
    word = setting.kind.word(setting.default)
    return word if gloss is None else f"{word}, {gloss}"


def _given(args: argparse.Namespace, scope: Scope) -> dict[str, Any]:
    """The options of `scope` this command line gives (or its configuration), secrets aside."""
    return {
        setting.dest: getattr(args, setting.dest)
        for setting in CONFIGURABLE
        if setting.scope == scope and not setting.secret and getattr(args, setting.dest, None) is not None
    }


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


_TOKEN = f"{_JUPYTER_TOKEN.dest}_sha256"
"""How a descriptor states the Jupyter token: its fingerprint, never the secret."""


def _fingerprint(token: str | None) -> str | None:
    import hashlib  # here: only a token needs it, and it loads OpenSSL

    return hashlib.sha256(token.encode()).hexdigest()[:16] if token else None


def describe_kernel_option(field: str, value: Any) -> str:
    """A kernel option as its flag writes it (`--max-kernel-memory 8G`); `no FLAG` when unset."""
    if field == _TOKEN:
        return f"{_JUPYTER_TOKEN.flag} (sha256 {value[:8]}…)" if value else f"no {_JUPYTER_TOKEN.flag}"
    setting = DECLARED[field]
    words = _words(setting, value)
    return " ".join(words) if words else f"no {setting.flag}"


def _words(setting: Setting, value: Any) -> list[str]:
    """A setting's value as the words of its flag; none for an unset value or a switch left off."""
    if value is None:
        return []
    if setting.switch:
        return [setting.flag] if value != setting.default else []
    items = value if setting.many else [value]
    return [word for item in items for word in (setting.flag, setting.kind.word(item))]


def kernel_options_of(settings: Settings) -> dict[str, Any]:
    """What a daemon states about its kernel options, for clients to compare with theirs."""
    stated = {
        setting.dest: getattr(settings, setting.dest)
        for setting in CONFIGURABLE
        if setting.scope == "kernel" and not setting.secret
    }
    return stated | {_TOKEN: _fingerprint(settings.jupyter_token)}


def reply_options(args: argparse.Namespace) -> dict[str, Any]:
    """The reply options given on this command line, for this client's hello."""
    return _given(args, "reply")


def daemon_flags(args: argparse.Namespace) -> list[str]:
    """The command line of a daemon started for this one: its kernel options and its own (the
    Jupyter token goes in the daemon's environment: see `daemon_environment`)."""
    return [
        word
        for setting in CONFIGURABLE
        if setting.scope != "reply" and setting.verb is None and not setting.secret
        for word in _words(setting, getattr(args, setting.dest, _unset(setting)))
    ]


def _unset(setting: Setting) -> Any:
    """What a command line without the flag means: the default for the daemon's own options, nothing
    for a kernel option (the daemon's own default applies)."""
    return setting.default if setting.scope == "daemon" else None


def state_dir_of(args: argparse.Namespace) -> Path | None:
    """Where the workspace's journal is: `state_dir` (--state-dir, $WARMKERNEL_STATE_DIR or a
    configuration file); None: the per-user default (`journal.state_dir`)."""
    if getattr(args, "state_dir", None) is not None:
        return args.state_dir.absolute()
    return None


def _jupyter_token(args: argparse.Namespace) -> str | None:
    """The token its flag, a file or its variable gives (the configuration read the last two)."""
    return getattr(args, _JUPYTER_TOKEN.dest, None) or None


def daemon_environment(args: argparse.Namespace) -> dict[str, str]:
    """What a daemon inherits beside the flags: the Jupyter token, kept out of its argv."""
    token = _jupyter_token(args)
    return {_JUPYTER_TOKEN.variable: token} if token else {}


def settings_from(args: argparse.Namespace) -> Settings:
    """A server's settings: the defaults, and the options given on its command line."""
    given: dict[str, Any] = {
        dest: tuple(value) if DECLARED[dest].many else value
        for dest, value in (_given(args, "kernel") | _given(args, "reply")).items()
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
    setting = DECLARED.get(field)
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
