"""Configuration as flags: every setting of the catalog with a flag is also a key of the files and
a variable (`settings.layers`), named after the flag; what they set becomes the default of that
flag, so a value from a file behaves exactly as the flag would (it travels to a new daemon and is
compared with a live one's).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from warmkernel.settings.declarations import CONFIGURABLE
from warmkernel.settings.layers import Found, Source, load
from warmkernel.workspace import Workspace, resolve_workspace

UNCONFIGURED_VERBS = frozenset({"sessions", "stop", "init"})
"""Verbs that must work whatever the configuration says (a broken file must not keep a daemon alive)."""


def subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    """The parser's verbs (`nb`'s for `nb`'s parser)."""
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # pyright: ignore[reportPrivateUsage]


def _options(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.Action]]:
    """A parser's flags with a value or a switch, by their long spelling."""
    return [
        (flag, action)
        for action in parser._actions  # pyright: ignore[reportPrivateUsage]
        for flag in action.option_strings[:1]
        if flag.startswith("--")
    ]


def _verb_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The innermost parser of the verb given (`nb status` is `nb`'s `status`)."""
    current = parser
    while True:
        try:
            action = subparsers(current)
        except StopIteration:
            return current
        current = action.choices[getattr(args, action.dest)]


def workspace_of(args: argparse.Namespace) -> Workspace:
    """The workspace whose project files count, resolved once per command (the resolver is the
    user's code); the daemon is told it and asks no resolver again."""
    if getattr(args, "workspace", None) is None:
        if getattr(args, "resolved_by", None) is not None:
            args.workspace = Workspace(Path.cwd().resolve(), "explicit_config", Path(args.resolved_by))
        else:
            args.workspace = resolve_workspace(Path.cwd())
    return args.workspace


def configure(parser: argparse.ArgumentParser, words: Sequence[str]) -> argparse.Namespace:
    """The command line parsed over the configuration: each setting is its flag's default.

    `args.configuration` keeps what the layers set, with the flags given (for `warmkernel config`).
    """
    args = parser.parse_args(words)
    if args.verb in UNCONFIGURED_VERBS:
        return args
    settings = CONFIGURABLE
    workspace = workspace_of(args)
    configuration = load(settings, workspace.path, os.environ)
    verb = _verb_parser(parser, args)
    flags = dict(_options(verb))
    for setting in settings:
        found = configuration.values.get(setting.name)
        if found is not None and setting.flag in flags:
            flags[setting.flag].default = found.value
    given = _given(verb, parser, words)
    args = parser.parse_args(words)
    for setting in settings:
        found = configuration.values.get(setting.name)
        if found is not None and not hasattr(args, setting.dest):
            setattr(args, setting.dest, found.value)  # e.g. kernel options for a daemon `run` starts
    values = dict(configuration.values)
    for setting in settings:
        if setting.dest in given:
            values[setting.name] = Found(getattr(args, setting.dest), Source("flag", setting.flag))
    args.workspace = workspace
    args.settings = settings
    args.configuration = replace(configuration, values=values)
    return args


def _given(verb: argparse.ArgumentParser, parser: argparse.ArgumentParser, words: Sequence[str]) -> set[str]:
    """The destinations the command line itself sets (parsed once with every default suppressed)."""
    saved = [(action, action.default) for _, action in _options(verb)]
    for action, _ in saved:
        action.default = argparse.SUPPRESS
    try:
        return set(vars(parser.parse_args(words))) - {"verb", "nb_verb"}
    finally:
        for action, default in saved:
            action.default = default
