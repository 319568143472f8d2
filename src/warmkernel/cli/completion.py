"""`warmkernel completion bash|zsh|fish`: shell completion made from the argument parser, so
that every verb and flag (the tool verbs too) completes as `--help` shows it."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

SHELLS = ("bash", "zsh", "fish")


@dataclass
class Node:
    """One command (`warmkernel`, `warmkernel run`, `warmkernel nb status`): what may follow it."""

    words: tuple[str, ...]
    verbs: dict[str, str] = field(default_factory=dict)
    """Sub-verbs, with their one-line help."""
    flags: dict[str, str] = field(default_factory=dict)
    """Option strings, with their help."""
    choices: dict[str, list[str]] = field(default_factory=dict)
    """The values of the options that take one of a few."""
    arguments: list[str] = field(default_factory=list)
    """The values of a positional argument that takes one of a few (`completion SHELL`)."""


def command_tree(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()) -> list[Node]:
    """Every command reachable from `parser`, parents first; verbs without help (the daemon's own)
    left out."""
    node = Node(words)
    children: list[Node] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:  # only the verbs shown in help
                node.verbs[choice.dest] = choice.help or ""
                children += command_tree(action.choices[choice.dest], (*words, choice.dest))
            continue
        if not action.option_strings and action.choices is not None:
            node.arguments += [str(choice) for choice in action.choices]
        for flag in action.option_strings:
            node.flags[flag] = parser._get_formatter()._expand_help(action) if action.help else ""
            if action.choices is not None:
                node.choices[flag] = [str(choice) for choice in action.choices]
    return [node, *children]


def script(shell: str, parser: argparse.ArgumentParser) -> str:
    tree = command_tree(parser)
    return {"bash": _bash, "zsh": _zsh, "fish": _fish}[shell](tree)


def _bash(tree: list[Node]) -> str:
    """A completion function: the command so far is the chain of known verbs among the words."""
    steps = "|".join(f'"{" ".join(node.words[:-1])}:{node.words[-1]}"' for node in tree if node.words)
    values = "\n".join(
        f'        "{" ".join(node.words)}:{flag}") words="{" ".join(choices)}" ;;'
        for node in tree
        for flag, choices in node.choices.items()
    )
    words = "\n".join(
        f'        "{" ".join(node.words)}") words="{" ".join(_offered(node))}" ;;' for node in tree
    )
    return f"""\
# warmkernel completion for bash: eval "$(warmkernel completion bash)" (e.g. in ~/.bashrc)
_warmkernel() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD-1]}} node="" words="" i
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "$node:${{COMP_WORDS[i]}}" in
        {steps}) node="${{node:+$node }}${{COMP_WORDS[i]}}" ;;
        esac
    done
    case "$node:$prev" in
{values}
    esac
    if [[ -n $words ]]; then  # the value of an option that takes one of a few
        COMPREPLY=($(compgen -W "$words" -- "$cur"))
        return
    fi
    case "$node" in
{words}
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$words" -- "$cur"))
    else
        COMPREPLY=($(compgen -W "$(printf '%s\\n' $words | grep -v '^-')" -- "$cur"))
    fi
}}
complete -o default -F _warmkernel warmkernel
"""


def _offered(node: Node) -> list[str]:
    return [*node.verbs, *node.arguments, *node.flags]


def _zsh(tree: list[Node]) -> str:
    return (
        '# warmkernel completion for zsh: eval "$(warmkernel completion zsh)" (e.g. in ~/.zshrc)\n'
        "autoload -U +X compinit && compinit\n"
        "autoload -U +X bashcompinit && bashcompinit\n" + _bash(tree).split("\n", 1)[1]
    )


def _fish(tree: list[Node]) -> str:
    """One `complete` line per verb and flag, each under the condition that its command was typed.
    A verb of the top level is also a word of a nested one (`run`, `nb run`): the conditions say which."""
    nesting = [
        verb for verb in tree[0].verbs if any(node.words[:1] == (verb,) and node.verbs for node in tree)
    ]
    lines = ["# warmkernel completion for fish: warmkernel completion fish | source (e.g. in config.fish)"]
    for node in tree:
        if not node.words:
            condition = "__fish_use_subcommand"
        else:
            seen = [f"__fish_seen_subcommand_from {word}" for word in node.words]
            if len(node.words) == 1:
                seen += [
                    f"not __fish_seen_subcommand_from {verb}" for verb in nesting if verb != node.words[0]
                ]
            if node.verbs:
                seen.append(f"not __fish_seen_subcommand_from {' '.join(node.verbs)}")
            condition = "; and ".join(seen)
        for verb, help in node.verbs.items():
            lines.append(
                f"complete -c warmkernel -n {_quote(condition)} -f -a {verb} -d {_quote(_short(help))}"
            )
        for flag, help in node.flags.items():
            if not flag.startswith("--"):
                continue
            values = node.choices.get(flag)
            spelled = f"-l {flag[2:]}" + (f" -x -a {_quote(' '.join(values))}" if values else "")
            lines.append(f"complete -c warmkernel -n {_quote(condition)} {spelled} -d {_quote(_short(help))}")
    return "\n".join(lines) + "\n"


def _short(help: str) -> str:
    """The first clause of a help text: fish shows descriptions in one line."""
    return help.split(";")[0].split(" (")[0].strip()


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def completion(args: argparse.Namespace) -> int:
    """Print the completion script of `args.shell`."""
    from warmkernel.cli.parser import build_parser

    print(script(args.shell, build_parser()), end="")
    return 0
