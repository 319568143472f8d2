"""Command-line words no file can be named by, from the CLI as a subprocess: a byte that is not
UTF-8 (which JSON cannot carry to the daemon) or a part past NAME_MAX is a coded error naming the
parameter, and the verb ends at once rather than wait for an answer that cannot come."""

from __future__ import annotations

from tests.cli.conftest import Cli


def test_a_word_that_is_not_utf8_or_a_part_past_name_max_is_refused_naming_the_parameter(cli: Cli) -> None:
    assert cli("run", "6 * 7").returncode == 0
    for verb in (("nb", "status", "\udcff.ipynb"), ("export", "-o", "\udcff.md")):
        refused = cli(*verb, timeout=30)
        assert refused.returncode == 2, refused.stderr
        assert refused.stderr.startswith(
            "warmkernel: invalid_arguments: path holds a lone surrogate (U+DCFF)"
        )
    refused = cli("run", "print('\udcff')", timeout=30)
    assert refused.returncode == 2 and refused.stderr.startswith("warmkernel: invalid_arguments: freeform ")
    refused = cli("nb", "status", "n" * 300 + ".ipynb", timeout=30)
    assert refused.returncode == 2
    assert "invalid_arguments: path " in refused.stderr and "has a part of 306 bytes" in refused.stderr
    assert "Out[" in cli("run", "6 * 7").stdout, "the daemon serves on"
