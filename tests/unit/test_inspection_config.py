"""Pure parts of variable inspection: which names may be inspected."""

from __future__ import annotations

import pytest

from warmkernel.errors import WarmkernelError
from warmkernel.tools.kinds import check_path


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
