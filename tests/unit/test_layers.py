"""The layers of DESIGN §1 hold: the import-linter contracts in pyproject.toml are all kept."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_every_layer_contract_is_kept() -> None:
    lint_imports = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint_imports is not None, "import-linter is a dev dependency"
    done = subprocess.run(
        [lint_imports, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout[-4000:]
    assert "0 broken" in done.stdout
