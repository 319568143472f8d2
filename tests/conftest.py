"""Shared pytest set-up: the anyio backend, and private daemon directories for every test.

jupyter_client runs on asyncio only, so anyio tests use asyncio. Daemons outlive their clients
by design, so every test gets its own runtime and state directories (through the environment
its subprocesses inherit), and a test that leaves a daemon running fails.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest
from hypothesis import settings

from tests.gates import Gate, opened_at_exit
from warmkernel.daemon.discovery import RUNTIME_DIR_ENV, live_descriptors, stop_daemon
from warmkernel.kernel.cgroup import own_directory
from warmkernel.session.journal import STATE_DIR_ENV

# Tests never assert wall-clock times (the machines are shared): no Hypothesis deadline either.
settings.register_profile("warmkernel", deadline=None)
settings.load_profile("warmkernel")


@pytest.fixture(scope="session", autouse=True)
def matplotlib_config(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One matplotlib configuration (and font cache) for every kernel of the session. A kernel that
    tests share (`memory_client`) outlives the test it started under, whose private
    XDG_CONFIG_HOME is removed before the kernel imports matplotlib, which would make it again."""
    saved = os.environ.get("MPLCONFIGDIR")
    os.environ["MPLCONFIGDIR"] = str(tmp_path_factory.mktemp("matplotlib"))
    yield
    if saved is None:
        os.environ.pop("MPLCONFIGDIR")
    else:
        os.environ["MPLCONFIGDIR"] = saved


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def gate(tmp_path: Path) -> Iterator[Gate]:
    """A closed gate a cell of this test waits on until the test opens it; opened for good at
    teardown, so a failed test leaves no shared kernel blocked."""
    with opened_at_exit(tmp_path / "gate") as closed:
        yield closed


def _cgroups_writable() -> bool:
    """Whether this user may make a cgroup in its own, as a kernel's is made: tried, not guessed."""
    own = own_directory()
    if own is None:
        return False
    probe = own / f"wkt-probe-{os.getpid()}"
    try:
        probe.mkdir()
    except OSError:
        return False
    probe.rmdir()
    return True


needs_cgroups = pytest.mark.skipif(
    not _cgroups_writable(),
    reason="this user may not create cgroups (v2) here (not root, no delegated cgroup): kernels are "
    "tracked by session scan and environment marker, which a clean-environment double fork escapes",
)
"""For tests of what only a kernel's cgroup catches."""


def unmarked_grandchild_cell(program: str = "import time; time.sleep(600)") -> str:
    """A cell whose value is the pid of a grandchild running `program` that left the kernel's tree
    (its parent exited), its session (setsid) and its environment (empty: no marker). Only the
    kernel's cgroup still holds it."""
    double_fork = (
        "import subprocess, sys\n"
        f"print(subprocess.Popen([sys.executable, '-c', {program!r}], start_new_session=True, env={{}}, "
        "stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)"
    )
    return (
        "import subprocess, sys\n"
        f"int(subprocess.run([sys.executable, '-c', {double_fork!r}], capture_output=True, text=True).stdout)"
    )


def gone(pid: int) -> bool:
    """Dead or a zombie (some machines' PID 1 does not reap orphans)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def daemon_env(root: Path) -> dict[str, str]:
    """The environment that keeps daemons, their descriptors and journals (and the user's
    configuration file) under `root`."""
    return {
        RUNTIME_DIR_ENV: str(root / "rt"),
        STATE_DIR_ENV: str(root / "state"),
        "XDG_CONFIG_HOME": str(root / "config"),
    }


@contextmanager
def _runtime(root: Path) -> Iterator[None]:
    saved = os.environ.get(RUNTIME_DIR_ENV)
    os.environ[RUNTIME_DIR_ENV] = str(root / "rt")
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(RUNTIME_DIR_ENV)
        else:
            os.environ[RUNTIME_DIR_ENV] = saved


def stop_daemons(root: Path) -> list[str]:
    """Stop every daemon whose descriptor is under `root`; the ids of those that were live."""
    if not (root / "rt").exists():
        return []
    with _runtime(root):
        live = live_descriptors()
        for descriptor in live:
            stop_daemon(descriptor)
    return [descriptor.id for descriptor in live]


def private_root() -> Path:
    """A short directory (socket paths are limited to about 107 bytes) for one test's daemons."""
    return Path(tempfile.mkdtemp(prefix="wkt-"))


@pytest.fixture(autouse=True)
def private_daemons(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """This test's runtime and state directories; fails the test if it leaves a daemon running.
    Kernels run on the suite's interpreter (`--python auto` finds no project around a test's
    workspace), whatever environment the suite was started from."""
    root = private_root()
    for name, value in daemon_env(root).items():
        monkeypatch.setenv(name, value)
    for name in ("VIRTUAL_ENV", "CONDA_PREFIX"):  # `--python auto` must not find the runner's own
        monkeypatch.delenv(name, raising=False)
    yield root
    left = stop_daemons(root)
    shutil.rmtree(root, ignore_errors=True)
    assert not left, f"the test left daemons running ({', '.join(left)}): stop them before it ends"
