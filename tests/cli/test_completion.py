"""CLI manners: shell completion (run in a real bash), `--version`, and help without noise."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from importlib import metadata

import pytest

from tests.cli.conftest import Cli
from warmkernel import __version__
from warmkernel.cli.completion import script
from warmkernel.cli.parser import build_parser


def complete(bash_script: str, *words: str) -> list[str]:
    """What bash offers for the last of `words` (`""`: a new word) after `warmkernel`."""
    line = " ".join(["warmkernel", *(f"'{word}'" for word in words)])
    program = f"{bash_script}\nCOMP_WORDS=({line}); COMP_CWORD={len(words)}; _warmkernel\n"
    program += "printf '%s\\n' \"${COMPREPLY[@]}\""
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True)
    return sorted(done.stdout.split())


@pytest.fixture(scope="module")
def bash_script() -> str:
    done = subprocess.run(
        [sys.executable, "-m", "warmkernel", "completion", "bash"], capture_output=True, text=True
    )
    assert done.returncode == 0
    return done.stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completes_verbs_flags_nested_verbs_and_choices(bash_script: str) -> None:
    assert complete(bash_script, "se") == ["search", "serve", "sessions"]
    assert "daemon" not in complete(bash_script, ""), "the daemon's own verb is not for people"
    assert complete(bash_script, "nb", "") == ["add", "run", "status", "watch"]
    assert "--no-stop-on-error" in complete(bash_script, "nb", "run", "x.ipynb", "--no")
    assert "--no-stop-on-error" not in complete(bash_script, "run", "--no"), "`run` is not `nb run`"
    assert complete(bash_script, "mcp", "--inline-c") == ["--inline-chars"]
    assert complete(bash_script, "mcp", "--result-mode", "") == ["content", "structured"]
    assert complete(bash_script, "read", "3", "--stream", "s") == ["stderr", "stdout"]
    assert complete(bash_script, "completion", "") == ["bash", "fish", "zsh"]
    assert complete(bash_script, "run", "") == [], "a cell is not a word to complete (files are offered)"


def test_zsh_loads_the_bash_function_and_fish_gets_a_line_per_verb_and_flag() -> None:
    parser = build_parser()
    zsh = script("zsh", parser)
    assert "bashcompinit" in zsh and "complete -o default -F _warmkernel warmkernel" in zsh
    fish = script("fish", parser).splitlines()
    assert all(line.startswith("complete -c warmkernel -n '") for line in fish[1:])
    assert "complete -c warmkernel -n '__fish_use_subcommand' -f -a init" in "\n".join(fish)
    nb_run = "__fish_seen_subcommand_from nb; and __fish_seen_subcommand_from run"
    assert any(nb_run in line and "-l no-stop-on-error" in line for line in fish)
    assert any("-l result-mode -x -a 'content structured'" in line and "from mcp;" in line for line in fish)


def test_version_names_warmkernel_python_ipykernel_and_the_mcp_sdk(cli: Cli) -> None:
    done = cli("--version")
    assert done.returncode == 0
    assert done.stdout.splitlines() == [
        f"warmkernel {__version__}",
        f"Python {sys.version.split()[0]} ({sys.executable})",
        f"ipykernel {metadata.version('ipykernel')}",
        f"MCP SDK (mcp) {metadata.version('mcp')}",
    ]


@pytest.mark.parametrize("verb", ["serve", "mcp", "start", "run", "read", "search", "nb run"])
def test_help_shows_true_defaults_and_no_noise(cli: Cli, verb: str) -> None:
    text = " ".join(cli(*verb.split(), "--help").stdout.split())
    assert not re.search(r"\(default: (None|False|True|\[\]|\(\))\)", text), text
    assert not re.search(r"\(default: \d+\.0\)", text), "10, not 10.0"
    if verb in ("serve", "mcp", "start"):
        assert (
            "--wait SECONDS how long run_python waits for a cell before replying that it still runs " in text
        )
        assert "that it still runs (default: 10)" in text
        assert (
            "(default: auto)" in text
            and "--add-ipykernel when the project's environment lacks ipykernel" in text
        )
