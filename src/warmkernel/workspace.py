"""Which directory is the workspace: the launch directory, or what a trusted resolver says.

Nothing found inside the workspace is ever executed to decide this; only a file the user
names by absolute path in `WARMKERNEL_WORKSPACE_CONFIG` is.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from warmkernel.errors import WarmkernelError

CONFIG_ENV = "WARMKERNEL_WORKSPACE_CONFIG"


@dataclass(frozen=True)
class Workspace:
    path: Path
    resolution: Literal["launch_cwd", "explicit_config"]
    config_file: Path | None = None


def resolve_workspace(launch_cwd: Path, env: Mapping[str, str] = os.environ) -> Workspace:
    """The workspace for a server launched in `launch_cwd`."""
    configured = env.get(CONFIG_ENV)
    if not configured:
        return Workspace(launch_cwd.resolve(), "launch_cwd")
    config = Path(configured)
    if not config.is_absolute():
        raise _failure(f"{CONFIG_ENV} must be an absolute path to a Python file, got {configured!r}")
    if not config.is_file():
        raise _failure(f"{CONFIG_ENV} names {config}, which is not a file")
    answer = _call_resolver(config, launch_cwd)
    path = (launch_cwd / answer).resolve()
    if not path.is_dir():
        raise _failure(f"resolve_workspace() in {config} returned {answer!r}, which is not a directory")
    return Workspace(path, "explicit_config", config)


def _call_resolver(config: Path, launch_cwd: Path) -> Path:
    spec = importlib.util.spec_from_file_location("warmkernel_workspace_config", config)
    if spec is None or spec.loader is None:
        raise _failure(f"{config} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        resolver = getattr(module, "resolve_workspace", None)
        if not callable(resolver):
            raise _failure(f"{config} does not define resolve_workspace(launch_cwd: Path) -> Path | str")
        answer = resolver(launch_cwd)
    except WarmkernelError:
        raise
    except Exception as exc:
        raise _failure(f"{config} raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(answer, str | os.PathLike):
        raise _failure(f"resolve_workspace() in {config} returned {type(answer).__name__}, not a Path or str")
    return Path(answer)


def _failure(message: str) -> WarmkernelError:
    return WarmkernelError("workspace_config_failed", message)
