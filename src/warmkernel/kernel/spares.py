"""Spare kernels: fresh local kernels started ahead of need, so that a reset swaps one in at once.

A spare is handed out only while the kernel interpreter's environment is the one it started
in (see `fingerprint`): after a package was installed, a reset gets a freshly started kernel
and the stale spare is killed, so a reset never yields an interpreter that misses the change.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

import anyio
import anyio.abc

from warmkernel.errors import WarmkernelError
from warmkernel.kernel.base import Kernel
from warmkernel.kernel.launch import RuntimeRoot
from warmkernel.kernel.local import LocalKernel, LocalLauncher
from warmkernel.types import Generation

log = logging.getLogger(__name__)

_SITE_PROBE = "import json, site; print(json.dumps([*site.getsitepackages(), site.getusersitepackages()]))"


class SiteDirectory(NamedTuple):
    """What an install changes in one site directory: its mtime, and its `.pth` files' names and mtimes."""

    path: str
    mtime_ns: int
    """-1 while the directory does not exist or cannot be read."""
    pth_files: tuple[tuple[str, int], ...]


Fingerprint = tuple[SiteDirectory, ...]


def fingerprint(directories: Iterable[Path]) -> Fingerprint:
    """The state of the site directories that decides what a newly started interpreter imports.

    Installing or removing a package adds or removes entries, which changes the directory's
    mtime; `.pth` files run at interpreter start, so one added, removed or edited changes the
    recorded names or mtimes.
    """
    return tuple(_site_directory(path) for path in directories)


def _site_directory(path: Path) -> SiteDirectory:
    try:
        mtime_ns = path.stat().st_mtime_ns
        with os.scandir(path) as entries:
            pth_files = sorted(
                (entry.name, entry.stat().st_mtime_ns) for entry in entries if entry.name.endswith(".pth")
            )
    except OSError:
        return SiteDirectory(str(path), -1, ())
    return SiteDirectory(str(path), mtime_ns, tuple(pth_files))


class _Spare:
    """One spare kernel: waiting in the pool until claimed, then handed out or killed by its keeper."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.environment: Fingerprint | None = None
        """Taken before the process starts, so a change it could miss always makes it stale."""
        self.kernel: LocalKernel | None = None
        self.started = anyio.Event()
        """The start has ended: `kernel` is set, or the start failed."""
        self.claimed = False
        """Out of the pool: a hand-out is deciding its fate, or it was decided."""
        self.handed_out = False
        self.settled = anyio.CancelScope()
        """Cancelled once its fate is decided; until then its keeper watches it for a death."""
        self.ended = anyio.Event()
        """Its keeper is done: the kernel is handed out, killed, or never started."""


class SpareLauncher:
    """Starts kernels as `LocalLauncher` does, but hands out a spare started ahead when one fits."""

    step = ""

    def __init__(
        self, fresh: LocalLauncher, tg: anyio.abc.TaskGroup, root: RuntimeRoot, cwd: Path, count: int
    ) -> None:
        self._tg = tg
        self._root = root
        self._cwd = cwd
        self._count = count
        self._fresh = fresh
        self._spares: list[_Spare] = []
        """Every spare whose keeper still runs, oldest first."""
        self._names = itertools.count(1)
        self._site_directories: list[Path] | None = None
        self._closed = False

    @property
    def spares_ready(self) -> int:
        """Spares started and alive, waiting to be handed out."""
        return sum(
            1 for spare in self._pool() if spare.kernel is not None and not spare.kernel.exited.is_set()
        )

    async def start(self, generation: Generation) -> LocalKernel:
        """A spare started in the current environment, else a fresh kernel; then the pool is refilled.

        The pool is refilled after a fresh start, so that the spares do not slow the kernel waited for.
        """
        try:
            kernel = await self._take_spare()
            if kernel is None:
                kernel = await self._fresh.start(generation)
        finally:
            self._refill()
        kernel.generation = generation
        return kernel

    async def retire(self, kernel: Kernel) -> None:
        await kernel.kill()

    async def aclose(self) -> None:
        """Kill every spare; one still starting is killed as soon as its start ends."""
        self._closed = True
        for spare in self._pool():
            self._settle(spare, hand_out=False)
        for spare in list(self._spares):
            await spare.ended.wait()

    def _pool(self) -> list[_Spare]:
        return [spare for spare in self._spares if not spare.claimed]

    def _refill(self) -> None:
        while not self._closed and len(self._pool()) < self._count:
            spare = _Spare(f"spare-{next(self._names)}")
            self._spares.append(spare)
            self._tg.start_soon(self._keep, spare)

    async def _take_spare(self) -> LocalKernel | None:
        """The oldest spare that started in the current environment; the others on the way are killed."""
        if not self._pool():
            return None
        try:
            current = await self._environment()
        except WarmkernelError:
            current = None  # no spare can be trusted; the fresh start reports what is wrong
        for spare in self._pool():
            if spare.claimed:  # by another hand-out meanwhile
                continue
            spare.claimed = True
            if current is not None and spare.environment in (None, current):
                await spare.started.wait()  # a spare still starting began before a fresh start would
            kernel = spare.kernel
            fits = (
                current is not None
                and not self._closed
                and spare.environment == current
                and kernel is not None
                and not kernel.exited.is_set()
            )
            self._settle(spare, hand_out=fits)
            if fits:
                return kernel
        return None

    def _settle(self, spare: _Spare, *, hand_out: bool) -> None:
        spare.claimed = True
        spare.handed_out = hand_out
        spare.settled.cancel()

    async def _keep(self, spare: _Spare) -> None:
        """Start a spare and hold it until its fate is decided; kill it unless it was handed out."""
        try:
            kernel = await self._start_spare(spare)
            if kernel is None:
                return
            with spare.settled:
                await kernel.exited.wait()
            if spare.handed_out:
                return
            if not spare.settled.cancel_called:
                log.warning(
                    "spare kernel %s died while waiting (%s); starting another",
                    spare.name,
                    kernel.exit_reason(),
                )
                spare.claimed = True
                self._refill()
            await kernel.kill()
        finally:
            self._spares.remove(spare)
            spare.ended.set()

    async def _start_spare(self, spare: _Spare) -> LocalKernel | None:
        try:
            spare.environment = await self._environment()
            if not spare.settled.cancel_called:  # not discarded meanwhile
                spare.kernel = await LocalKernel.start(
                    self._tg,
                    self._root,
                    await self._fresh.environment(),
                    self._cwd,
                    Generation(0),
                    name=spare.name,
                )
        except WarmkernelError as exc:
            log.warning("spare kernel %s did not start: %s", spare.name, exc.message)
        except Exception:
            log.exception("spare kernel %s did not start", spare.name)
        finally:
            spare.started.set()
        return spare.kernel

    async def _environment(self) -> Fingerprint:
        """The fingerprint of the kernel interpreter's site directories, as they are now."""
        if self._site_directories is None:
            self._site_directories = await self._ask_site_directories()
        return await anyio.to_thread.run_sync(fingerprint, self._site_directories)

    async def _ask_site_directories(self) -> list[Path]:
        # Run in the private root: a workspace file named json.py or site.py must not answer.
        environment = await self._fresh.environment()
        try:
            probe = await anyio.run_process(
                [*environment.command, "-c", _SITE_PROBE],
                stdin=subprocess.DEVNULL,
                check=False,
                cwd=self._root.path,
            )
        except OSError as exc:
            raise WarmkernelError(
                "python_not_usable", f"could not run {environment.describe()}: {exc}"
            ) from exc
        if probe.returncode != 0:
            raise WarmkernelError(
                "kernel_start_failed",
                f"{environment.describe()} did not list its site directories: "
                f"{probe.stderr.decode(errors='replace')}",
            )
        return [Path(path) for path in json.loads(probe.stdout)]
