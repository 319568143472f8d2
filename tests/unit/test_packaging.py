"""What `pyproject.toml` promises about the package, checked against its source: every imported
distribution declared, no private module of the MCP SDK, and the Pythons CI tests are those claimed."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[2]
PACKAGE = ROOT / "src" / "warmkernel"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def imported_modules() -> dict[str, set[Path]]:
    """Every absolute import of the package's modules (`kernel/inside` runs in the kernel, on the
    standard library only): the module imported, and the files that import it."""
    found: dict[str, set[Path]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name, set()).add(path.relative_to(ROOT))
    return found


def distribution_name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_every_imported_distribution_is_declared() -> None:
    """In the dependencies, or in the extra whose feature imports it (the chart renderers)."""
    extras = [requirement for extra in PROJECT["optional-dependencies"].values() for requirement in extra]
    requirements = [*PROJECT["dependencies"], *extras]
    declared = {distribution_name(requirement) for requirement in requirements}
    owners = importlib.metadata.packages_distributions()
    missing = {}
    for module, files in imported_modules().items():
        top = module.split(".")[0]
        if top in sys.stdlib_module_names or top == "warmkernel":
            continue
        distributions = {name.lower().replace("_", "-") for name in owners.get(top, [top])}
        if not distributions & declared:
            missing[module] = sorted(map(str, files))
    assert not missing, f"imported but not declared in [project]: {missing}"


def test_no_private_module_of_the_mcp_sdk_is_imported() -> None:
    private = {
        module: sorted(map(str, files))
        for module, files in imported_modules().items()
        if module.split(".")[0] in ("mcp", "mcp_types")
        and any(part.startswith("_") for part in module.split("."))
    }
    assert not private, f"private MCP SDK modules change without notice: {private}"


def test_requires_python_is_what_ci_tests_and_the_classifiers_say() -> None:
    lowest = re.fullmatch(r">=(3\.\d+)", PROJECT["requires-python"])
    assert lowest is not None
    ci = (ROOT / ".ci" / "run").read_text()
    tested = re.search(r"^LOWEST=(\S+) HIGHEST=(\S+)$", ci, re.MULTILINE)
    assert tested is not None and tested[1] == lowest[1]
    minors = range(int(tested[1].split(".")[1]), int(tested[2].split(".")[1]) + 1)
    claimed = {
        c.rsplit(" :: ", 1)[1] for c in PROJECT["classifiers"] if re.fullmatch(r".*Python :: 3\.\d+", c)
    }
    assert claimed == {f"3.{minor}" for minor in minors}
