"""Local kernel processes: started, watched for exit, interrupted, killed with everything they started."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
from pathlib import Path

import anyio
import anyio.abc
import psutil

from warmkernel.errors import WarmkernelError
from warmkernel.kernel.base import Kernel, KernelPlace
from warmkernel.kernel.cgroup import KernelCgroup
from warmkernel.kernel.channel import KernelChannel, ZmqTransport
from warmkernel.kernel.environment import Environment, find_environment, prepare_environment
from warmkernel.kernel.launch import KERNEL_MARK_ENV, RuntimeRoot, prepare_launch
from warmkernel.types import Generation

_LOG_TAIL_LINES = 20
_SCAN_TRACKING = "session scan and environment marker"


class LocalKernel(Kernel):
    """A kernel process started by this server, with its router and exit watcher."""

    def __init__(
        self,
        generation: Generation,
        process: anyio.abc.Process,
        channel: KernelChannel,
        log_file: Path,
        connection_file: Path,
        environment: Environment,
        mark: str | None = None,
        cgroup: KernelCgroup | None = None,
    ) -> None:
        super().__init__(generation, channel)
        self.environment = environment
        self._mark = mark
        self.cgroup = cgroup
        """Holds every process the kernel starts, where this user may make one (`kernel.cgroup`)."""
        self._process = process
        self.pid = process.pid
        self.connection_file = connection_file
        self.log_file = log_file
        self.returncode: int | None = None

    @classmethod
    async def start(
        cls,
        tg: anyio.abc.TaskGroup,
        root: RuntimeRoot,
        environment: Environment,
        cwd: Path,
        generation: Generation,
        *,
        name: str,
    ) -> LocalKernel:
        """Launch the process, connect, and return once the kernel answers on shell and IOPub.

        `name` names the kernel's files in the runtime root.
        """
        variables = environment.variables(os.environ)
        spec = prepare_launch(root, environment.command, cwd, name, variables)
        with open(spec.log_file, "ab") as log:  # noqa: ASYNC230 (a new file in our private root)
            try:
                process = await anyio.open_process(
                    spec.argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    cwd=spec.cwd,
                    env=spec.env,
                    start_new_session=True,  # a Ctrl-C in the user's terminal must not reach the kernel
                )
            except OSError as exc:
                raise WarmkernelError(
                    "kernel_start_failed", f"could not run {environment.describe()}: {exc}"
                ) from exc
        # At once: the kernel starts no process before it answers, so all of them are born inside.
        cgroup = KernelCgroup.create(spec.mark, process.pid)
        channel = KernelChannel(ZmqTransport(spec.connection_info))
        kernel = cls(
            generation, process, channel, spec.log_file, spec.connection_file, environment, spec.mark, cgroup
        )
        try:
            await tg.start(kernel._supervise)
            await kernel._handshake()
        except BaseException:
            # Also when cancelled (the server shutting down mid-start): never orphan a kernel.
            with anyio.CancelScope(shield=True):
                await kernel.kill()
            raise
        return kernel

    async def _supervise(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        # The router outlives the process on purpose: IOPub messages sent just before a
        # death are still in our socket and are read until `stop()`.
        with self._scope:
            async with anyio.create_task_group() as tg:
                await tg.start(self.channel.run)
                task_status.started()
                self.returncode = await self._process.wait()
                self.exited.set()
                if not self.killed_on_purpose:
                    # A death: what the kernel started goes with it, as with a reset.
                    await anyio.to_thread.run_sync(self._end_cgroup)
        if not self.exited.is_set():
            # Stopped while the process still ran: reap it so it does not linger as a zombie.
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                self.returncode = await self._process.wait()
            self.exited.set()

    def place(self) -> KernelPlace:
        return KernelPlace(
            pid=self.pid,
            connection_file=self.connection_file,
            environment=self.environment.describe(),
            tracking=f"cgroup {self.cgroup.path}" if self.cgroup is not None else _SCAN_TRACKING,
        )

    def exit_reason(self) -> str:
        code = self.returncode
        if code is None:
            return "still running"
        if code < 0:
            try:
                return f"signal {signal.Signals(-code).name}"
            except ValueError:
                return f"signal {-code}"
        return f"exit code {code}"

    def start_failure_detail(self) -> str:
        try:
            lines = self.log_file.read_text(errors="replace").splitlines()[-_LOG_TAIL_LINES:]
        except OSError:
            return "(no kernel log)"
        return "kernel log (last lines):\n" + "\n".join(lines) if lines else "(the kernel log is empty)"

    def interrupt(self) -> None:
        """SIGINT to the kernel process, as Ctrl-C in a terminal would send."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGINT)

    def memory_bytes(self) -> int | None:
        """The resident memory of every process in the kernel's cgroup, else in its tree."""
        processes = self._processes()
        if not processes:
            return None
        total = 0
        for proc in processes:
            with contextlib.suppress(psutil.Error):
                total += proc.memory_info().rss
        return total

    def process_stopped(self) -> bool:
        try:
            return psutil.Process(self.pid).status() == psutil.STATUS_STOPPED
        except (psutil.Error, OSError):  # gone, or no descriptor left to look (a flood): not known stopped
            return False

    def _processes(self) -> list[psutil.Process]:
        if self.cgroup is not None:
            found: list[psutil.Process] = []
            for pid in self.cgroup.pids():
                with contextlib.suppress(psutil.NoSuchProcess):
                    found.append(psutil.Process(pid))
            return found
        try:
            root = psutil.Process(self.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    async def kill(self) -> None:
        """Kill the kernel and every process it started, then stop routing.

        The scan comes first even with a cgroup: it also finds a process that moved itself to
        another cgroup but kept the kernel's session or marker (`systemd-run --scope` keeps the
        environment). The cgroup then takes what the scan cannot see: a double fork with setsid
        and a clean environment.
        """
        self.killed_on_purpose = True
        await anyio.to_thread.run_sync(kill_process_tree, self.pid, self._mark)
        # Reaped here, not by waiting for the supervisor: a shutdown may have cancelled it already.
        with anyio.move_on_after(5):
            self.returncode = await self._process.wait()
        self.exited.set()
        await anyio.to_thread.run_sync(self._end_cgroup)
        self.stop()

    def _end_cgroup(self) -> None:
        """Kill what is left in the kernel's cgroup and remove it."""
        if self.cgroup is not None:
            self.cgroup.kill()
            self.cgroup.remove()


class LocalLauncher:
    """Starts each kernel as a child process of this server, in the workspace."""

    step = ""
    spares_ready = None

    def __init__(
        self,
        tg: anyio.abc.TaskGroup,
        root: RuntimeRoot,
        python: str,
        cwd: Path,
        *,
        add_ipykernel: bool = False,
    ) -> None:
        self._tg = tg
        self._root = root
        self.python = python
        """A path, or `auto`: the project's environment (`kernel.environment`)."""
        self._cwd = cwd
        self._add_ipykernel = add_ipykernel
        self._environment: Environment | None = None
        self._starts = itertools.count(1)
        """Names each kernel's files: the launcher serves every named kernel, whose generations repeat."""

    async def environment(self) -> Environment:
        """The environment kernels run in, found at the first start (again after a failed one: the
        user may have fixed it meanwhile)."""
        if self._environment is None:
            self._environment = await anyio.to_thread.run_sync(find_environment, self.python, self._cwd)
        return self._environment

    async def start(self, generation: Generation) -> LocalKernel:
        try:
            return await self._launch(generation)
        except WarmkernelError as exc:
            if exc.code != "kernel_start_failed":
                raise
            self._environment = None
            # Only now is the environment asked whether it runs ipykernel (the question imports
            # it, which takes as long as a kernel's start): a missing one is named with its fix,
            # or added (--add-ipykernel) and the start tried once more.
            await anyio.to_thread.run_sync(
                lambda: prepare_environment(self.python, self._cwd, add_ipykernel=self._add_ipykernel)
            )
            if not self._add_ipykernel:
                raise
        return await self._launch(generation)

    async def _launch(self, generation: Generation) -> LocalKernel:
        environment = await self.environment()
        name = f"start-{next(self._starts)}"  # its files: kernel-start-3.json, cgroup wk-…-start-3
        return await LocalKernel.start(self._tg, self._root, environment, self._cwd, generation, name=name)

    async def retire(self, kernel: Kernel) -> None:
        await kernel.kill()

    async def aclose(self) -> None:
        pass


def kill_process_tree(pid: int, mark: str | None = None) -> None:
    """SIGKILL a process and all its descendants, including ones that called setsid.

    The tree is read before anything is killed: once a parent dies its children are
    reparented and can no longer be found from here. A process that already left the tree
    (a double fork) is found by its session, or by `mark` in its environment. The root is our
    own child and is reaped by its exit watcher, so only the others are waited for here.
    """
    try:
        root = psutil.Process(pid)
        descendants = root.children(recursive=True)
    except psutil.NoSuchProcess:
        return
    known = {proc.pid for proc in descendants} | {pid}
    descendants += [proc for proc in _strays(pid, mark) if proc.pid not in known]
    for proc in [root, *descendants]:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    # On machines whose PID 1 does not reap orphans, killed grandchildren stay zombies:
    # a zombie is dead for our purposes.
    _, alive = psutil.wait_procs(descendants, timeout=5)
    for proc in alive:
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                proc.kill()
        except psutil.NoSuchProcess:
            pass


def _strays(session: int, mark: str | None) -> list[psutil.Process]:
    """This user's processes in the kernel's session (it leads one) or marked as the kernel's."""
    found: list[psutil.Process] = []
    for proc in psutil.process_iter():
        try:
            if proc.uids().real != os.getuid() or proc.pid == os.getpid():
                continue
            if os.getsid(proc.pid) == session or (
                mark is not None and proc.environ().get(KERNEL_MARK_ENV) == mark
            ):
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found
