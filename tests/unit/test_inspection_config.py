"""Pure parts of variable inspection: which names may be inspected, and where summarizers are configured."""

from __future__ import annotations

from pathlib import Path

import pytest

from warmkernel.config import load_summarizers
from warmkernel.errors import WarmkernelError
from warmkernel.tool_params import check_path


@pytest.mark.parametrize("name", ["df", "df.columns", "_x", "model.config.depth", "ünïcode", "a1.b2"])
def test_names_and_dotted_paths_are_accepted(name: str) -> None:
    assert check_path(name) == name


@pytest.mark.parametrize(
    "name", ["", "a.", ".a", "1a", "a..b", "a[0]", "a()", "a b", "a;b", "a-b", "a.1", "x" * 201]
)
def test_anything_else_is_invalid_name(name: str) -> None:
    with pytest.raises(WarmkernelError) as caught:
        check_path(name)
    assert caught.value.code == "invalid_name"


PYPROJECT = """\
[project]
name = "demo"

[tool.warmkernel.inspection]
summarizers = ["team.summaries:frame", "other:Summaries.model"]
"""


def test_no_configuration_means_no_summarizers(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    assert load_summarizers(tmp_path) == ()


def test_pyproject_tool_table_is_read(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    assert load_summarizers(tmp_path) == ("team.summaries:frame", "other:Summaries.model")


def test_warmkernel_toml_wins_over_pyproject(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "warmkernel.toml").write_text('[inspection]\nsummarizers = ["local:mine"]\n')
    assert load_summarizers(tmp_path) == ("local:mine",)


def test_warmkernel_toml_without_the_key_falls_back_to_pyproject(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "warmkernel.toml").write_text("[inspection]\n")
    assert load_summarizers(tmp_path) == ("team.summaries:frame", "other:Summaries.model")


@pytest.mark.parametrize(
    "value",
    ['"pkg:func"', '["pkg.func"]', '["pkg:"]', '[":func"]', '["1pkg:func"]', '["pkg:func()"]', "[1]"],
)
def test_summarizers_that_are_not_module_colon_function_strings_are_invalid_config(
    tmp_path: Path, value: str
) -> None:
    (tmp_path / "pyproject.toml").write_text(f"[tool.warmkernel.inspection]\nsummarizers = {value}\n")
    with pytest.raises(WarmkernelError) as caught:
        load_summarizers(tmp_path)
    assert caught.value.code == "invalid_config"
    assert '"package.module:function"' in caught.value.message


def test_unreadable_toml_is_invalid_config(tmp_path: Path) -> None:
    (tmp_path / "warmkernel.toml").write_text("[inspection\n")
    with pytest.raises(WarmkernelError) as caught:
        load_summarizers(tmp_path)
    assert caught.value.code == "invalid_config"
    assert "warmkernel.toml cannot be read" in caught.value.message
