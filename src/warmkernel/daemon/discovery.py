"""Daemon descriptors: how every client (a host's `warmkernel mcp`, a CLI verb) finds the one
daemon of its workspace.

Each daemon writes one descriptor (JSON: id, pid, workspace, socket, version, kernel options,
...) with mode 0600 into a per-user runtime directory with mode 0700, and removes it at exit. A
descriptor whose process is gone is ignored and deleted; fields a reader does not know are
ignored (a newer daemon may add some). This module also starts a detached daemon for a workspace
that has none, under a lock, so that any number of concurrent first calls end with one daemon;
and stops daemons.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import json
import os
import runpy
import signal
import stat
import sys
import time
import traceback
import zlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import psutil

from warmkernel.errors import WarmkernelError

RUNTIME_DIR_ENV = "WARMKERNEL_RUNTIME_DIR"
DAEMON_START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 15.0
KEPT_LOGS = 5
SOCKET_DIR_PREFIX = "wkd-"
"""A daemon's socket lives in a private directory of the temp directory named so."""


@dataclass(frozen=True)
class Descriptor:
    id: str
    pid: int
    workspace: str
    socket: str
    """The Unix socket that speaks MCP, one JSON message a line after a hello (`socket_face`)."""
    started_at: float
    version: str = ""
    """The warmkernel version the daemon runs."""
    kernel_options: dict[str, Any] = field(default_factory=dict)
    """The kernel options it runs with (`Settings` fields): a client asking for others is refused."""
    idle_stop_s: float = 0.0
    notebook: str | None = None
    public_url: str | None = None
    """While `warmkernel serve` runs: the Streamable HTTP endpoint it serves, with `public_token`."""
    public_token: str | None = None
    jupyter_url: str | None = None
    """For `start --serve`: the owned Jupyter Server's URL with its token (what VS Code takes)."""
    jupyter_lab_url: str | None = None
    """For `start --serve` with JupyterLab installed: the page (of the notebook) to open in a browser."""
    console_url: str | None = None
    """Once `warmkernel view` asked for it: where the console page listens (a link needs a token)."""

    def describe(self) -> str:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started_at))
        notebook = f"  notebook {self.notebook}" if self.notebook else ""
        return f"{self.id}  pid {self.pid:<7} since {started}  {self.workspace}{notebook}"

    @classmethod
    def from_json(cls, data: Any) -> Descriptor:
        """The descriptor a file holds; fields this version does not know are ignored."""
        if not isinstance(data, dict):
            raise TypeError("a descriptor is a JSON object")
        known = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in known})

    def jupyter_lines(self) -> list[str]:
        """Where a person attaches to the daemon's kernel, when it runs on a Jupyter Server it owns."""
        if self.jupyter_url is None:
            return []
        lab = self.jupyter_lab_url or "not installed here (`pip install jupyterlab`, then start again)"
        return [
            f"Jupyter Server: {self.jupyter_url}  (VS Code: Connect to existing Jupyter Server)",
            f"JupyterLab:     {lab}",
        ]


Describe = Callable[[str, Any], str]
"""How a kernel option (a `Settings` field) and its value are written in a message."""


def new_daemon_id() -> str:
    import secrets

    return secrets.token_hex(4)


def runtime_dir() -> Path:
    """The per-user directory of descriptors and daemon logs, created 0700 and checked.

    Found from the user id alone unless `WARMKERNEL_RUNTIME_DIR` says: every client must find
    every daemon, and an MCP host may start `warmkernel mcp` with little of the user's environment
    (the MCP SDK's clients pass HOME, PATH and a few more; not XDG_RUNTIME_DIR, nor TMPDIR).
    """
    override = os.environ.get(RUNTIME_DIR_ENV)
    login = Path(f"/run/user/{os.getuid()}")  # what XDG_RUNTIME_DIR names in a systemd login
    if override:
        path = Path(override)
    elif login.is_dir() and login.stat().st_uid == os.getuid():
        path = login / "warmkernel"
    else:
        path = Path("/tmp") / f"warmkernel-{os.getuid()}"
    return _private_dir(path, parents=True)


_ELSEWHERE = f"point {RUNTIME_DIR_ENV} at a directory of your own"
"""The way out of a refused runtime directory (another user's, in /tmp, is not ours to remove)."""


def _private_dir(path: Path, *, parents: bool = False) -> Path:
    """`path`, made 0700 if need be; refused unless it is a real directory of this user (a symlink's
    target would be chmod'ed and trusted, another user's would read and plant descriptors)."""
    try:
        path.mkdir(mode=0o700, parents=parents, exist_ok=True)
    except FileExistsError:
        pass  # there, but not a directory: refused below
    except OSError as exc:
        raise WarmkernelError("daemon_error", f"cannot make {path} ({exc.strerror}); {_ELSEWHERE}") from exc
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        raise WarmkernelError(
            "daemon_error", f"{path} is a symbolic link; refusing to use it: remove it, or {_ELSEWHERE}"
        )
    if info.st_uid != os.getuid():
        raise WarmkernelError(
            "daemon_error",
            f"{path} belongs to {_user(info.st_uid)}, not to {_user(os.getuid())}; refusing to use it: "
            f"{_ELSEWHERE} (or have it removed)",
        )
    if not stat.S_ISDIR(info.st_mode):
        raise WarmkernelError(
            "daemon_error", f"{path} is not a directory; refusing to use it: remove it, or {_ELSEWHERE}"
        )
    if info.st_mode & 0o077:
        path.chmod(0o700)
    return path


def _user(uid: int) -> str:
    import pwd  # here: only a refusal names a user

    try:
        return f"user {pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _descriptors_dir() -> Path:
    return _private_dir(runtime_dir() / "daemons")


def write_descriptor(descriptor: Descriptor) -> Path:
    """Write atomically with mode 0600, so a reader never sees half a file."""
    directory = _descriptors_dir()
    target = directory / f"{descriptor.id}.json"
    import tempfile

    # Not named *.json: readers list those, and must never see (or delete) a half-written one.
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".partial")
    with os.fdopen(fd, "w") as handle:  # mkstemp creates it 0600
        json.dump(asdict(descriptor), handle)
    os.replace(temporary, target)
    return target


def remove_descriptor(path: Path) -> None:
    path.unlink(missing_ok=True)


def daemon_title(workspace: Path | str) -> str:
    """What `ps` shows for the daemon of `workspace` (see `_fork_daemon`)."""
    return f"warmkernel daemon {workspace}"


def retitle(title: str) -> bool:
    """Make `ps` show `title` for this process; False if it still shows the command line.

    setproctitle finds the command line's memory from the address of the first environment
    variable, so its first call must come before any change to the environment: it renames nothing
    once that variable has been set again, nor in a process with no environment at all.
    """
    from setproctitle import setproctitle  # here: only the serving processes rename themselves

    setproctitle(title)
    return _titled(psutil.Process(), title)


def _titled(process: psutil.Process, title: str) -> bool:
    # The title, written over argv, is split on spaces when it outgrew argv and ran on into the
    # environment's memory, and followed by empty words when it did not.
    return " ".join(process.cmdline()).rstrip() == title


def _alive(descriptor: Descriptor) -> bool:
    """The descriptor's process still runs (not a zombie) and is that daemon, not a reused pid:
    it bears the daemon's title, or it started before the descriptor was written (a daemon of an
    older version, which did not always rename itself).

    The title decides first: psutil derives a start time from the boot time the wall clock implies
    now, so a clock stepped forward since (NTP, a resumed virtual machine) makes a live daemon
    look younger than its descriptor.
    """
    try:
        process = psutil.Process(descriptor.pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        titled = _titled(process, daemon_title(descriptor.workspace))
        return titled or process.create_time() <= descriptor.started_at + 1
    except psutil.Error:
        return False


def live_descriptors() -> list[Descriptor]:
    """Every live daemon of this user, oldest first; stale or unreadable descriptors are deleted."""
    found: list[Descriptor] = []
    for path in sorted(_descriptors_dir().glob("[!.]*.json")):
        try:
            if path.lstat().st_uid != os.getuid():
                continue  # planted by another user: never trusted
            descriptor = Descriptor.from_json(json.loads(path.read_text()))
        except FileNotFoundError:
            continue  # its daemon removed it meanwhile
        except (OSError, ValueError, TypeError):
            path.unlink(missing_ok=True)
            continue
        if _alive(descriptor):
            found.append(descriptor)
        else:
            _remove_socket_dir(descriptor)
            path.unlink(missing_ok=True)
    return sorted(found, key=lambda d: d.started_at)


def _remove_socket_dir(descriptor: Descriptor) -> None:
    """A killed daemon's socket directory (one it made: `wkd-*` in the temp directory) goes too,
    unless a process listens on a socket in it: a live daemon's, whatever descriptor names it."""
    import shutil  # here: every verb imports this module, few remove a stale daemon's files
    import tempfile

    directory = Path(descriptor.socket).parent
    if not directory.name.startswith(SOCKET_DIR_PREFIX) or directory.parent != Path(tempfile.gettempdir()):
        return
    try:
        sockets = [entry.path for entry in os.scandir(directory) if _is_socket(entry)]
    except OSError:
        return  # gone already, or not ours to list
    if not any(map(_listened, sockets)):
        shutil.rmtree(directory, ignore_errors=True)


def _is_socket(entry: os.DirEntry[str]) -> bool:
    return stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode)


def _listened(path: str) -> bool:
    """Whether a process listens on the Unix socket at `path` (a connection is tried, not kept)."""
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.setblocking(False)  # a full backlog must not make us wait
        try:
            probe.connect(path)
        except (ConnectionRefusedError, FileNotFoundError):
            return False
        except OSError:
            return True  # a full backlog (EAGAIN), or one we may not judge: kept
    return True


def _contains(workspace: str, cwd: Path) -> bool:
    return cwd == Path(workspace) or Path(workspace) in cwd.parents


def find_daemon(cwd: Path, daemon_id: str | None = None) -> Descriptor | None:
    """The live daemon of the innermost workspace that contains `cwd` (or the one named); None if
    there is none."""
    daemons = live_descriptors()
    if daemon_id is not None:
        for descriptor in daemons:
            if descriptor.id == daemon_id:
                return descriptor
        known = ", ".join(d.id for d in daemons) or "none"
        raise WarmkernelError("daemon_not_found", f"no live daemon {daemon_id!r}; live daemons: {known}")
    containing = [d for d in daemons if _contains(d.workspace, cwd.resolve())]
    innermost = max((len(Path(d.workspace).parts) for d in containing), default=0)
    matching = [d for d in containing if len(Path(d.workspace).parts) == innermost]
    if len(matching) > 1:
        listing = "\n".join(f"  {d.describe()}" for d in matching)
        raise WarmkernelError(
            "ambiguous_daemon",
            f"{len(matching)} live daemons serve {cwd}; choose one with --daemon ID:\n{listing}",
        )
    return matching[0] if matching else None


@contextmanager
def _start_lock(workspace: Path) -> Iterator[None]:
    """Held while a workspace's daemon is looked for and, if need be, started."""
    locks = _private_dir(runtime_dir() / "locks")
    name = f"{zlib.crc32(str(workspace.resolve()).encode()):08x}"  # a collision only serializes two starts
    fd = os.open(locks / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def ensure_daemon(
    workspace: Path,
    daemon_args: list[str],
    environment: Mapping[str, str],
    kernel_options: Mapping[str, Any],
    describe: Describe,
) -> tuple[Descriptor, bool]:
    """The live daemon of `workspace`, else one started with `daemon_args`; and whether it was started.

    `kernel_options` are the ones the caller asked for explicitly: a live daemon that runs with
    others is refused (`kernel_options_differ`, each difference as `describe` writes an option),
    never silently used.
    """
    with _start_lock(workspace):
        descriptor = find_daemon(workspace)
        if descriptor is not None:
            check_kernel_options(descriptor, kernel_options, describe)
            return descriptor, False
        return start_daemon(workspace, daemon_args, environment), True


def check_kernel_options(descriptor: Descriptor, asked: Mapping[str, Any], describe: Describe) -> None:
    """Refuse a live daemon whose kernel options differ from those asked, naming the difference."""
    different = [
        f"{describe(name, descriptor.kernel_options.get(name))} (you asked for {describe(name, value)})"
        for name, value in asked.items()
        if descriptor.kernel_options.get(name) != value
    ]
    if different:
        raise WarmkernelError(
            "kernel_options_differ",
            f"the daemon of {descriptor.workspace} (pid {descriptor.pid}) runs with "
            + "; ".join(different)
            + ". `warmkernel stop` it to start one with your options, or drop them to use it as it is",
        )


def start_daemon(
    workspace: Path, extra_args: list[str], environment: Mapping[str, str] | None = None
) -> Descriptor:
    """Start `warmkernel daemon` detached in `workspace` and return its descriptor.

    `environment` is added to ours for the daemon: secrets go there, never on its command line.

    The daemon writes its id to an inherited pipe once its descriptor exists, so
    this waits on that pipe, not on the file system.
    """
    log_path = runtime_dir() / f"daemon-{int(time.time())}-{os.getpid()}.log"
    read_fd, write_fd = os.pipe()
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        argv = ["daemon", "--ready-fd", str(write_fd), *extra_args]
        pid = _fork_daemon(workspace, argv, log_fd, write_fd, environment)
    finally:
        os.close(log_fd)
        os.close(write_fd)
    _rotate_logs(log_path.parent)
    try:
        daemon_id = _read_line(read_fd, DAEMON_START_TIMEOUT_S).strip()
    finally:
        os.close(read_fd)
    if not daemon_id:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # one that has ended leaves no zombie
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-15:])
        raise WarmkernelError("daemon_error", f"the daemon did not start (log {log_path}):\n{tail}")
    descriptor = find_daemon(workspace, daemon_id)
    assert descriptor is not None
    return descriptor


def _fork_daemon(
    workspace: Path, argv: list[str], log_fd: int, ready_fd: int, environment: Mapping[str, str] | None
) -> int:
    """Fork `warmkernel ARGV` off as a daemon; its pid. The child runs in a session of its own, in
    `workspace`, writes to `log_fd`, and holds no descriptor of ours but `ready_fd`.

    Forked rather than spawned: the child has an interpreter with the CLI's modules already, which
    a spawned daemon spends over a tenth of a second on (the callers, the CLI and the relay, run
    no thread). The child renames itself at once, so the command line it was forked from (a cell's
    source, a token typed there) does not stay in `ps` for its life; where it cannot (see
    `retitle`), it becomes a fresh `python -m warmkernel daemon ...` instead.
    """
    gc.collect()  # garbage holding a descriptor of ours must not close, in the child, a reuse of it
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        os.setsid()
        os.chdir(workspace)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        for fd in map(int, os.listdir("/dev/fd")):
            if fd > 2 and fd != ready_fd:
                with contextlib.suppress(OSError):  # the listing's own descriptor, gone
                    os.close(fd)
        if not retitle(daemon_title(workspace)):  # before the environment changes (see `retitle`)
            os.set_inheritable(ready_fd, True)
            command = [sys.executable, "-m", "warmkernel", *argv]  # a fresh argv holds no secret
            os.execve(sys.executable, command, {**os.environ, **(environment or {})})
        os.environ.update(environment or {})
        sys.argv = [sys.argv[0], *argv]
        runpy.run_module("warmkernel", run_name="__main__")  # as `python -m warmkernel ARGV` does
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # never back into the caller's frames: they are the parent's


def _rotate_logs(directory: Path) -> None:
    """Keep the newest `KEPT_LOGS` daemon logs (a live daemon writes on into one removed)."""
    logs = sorted(directory.glob("daemon-*.log"), key=_modified, reverse=True)
    for old in logs[KEPT_LOGS:]:
        old.unlink(missing_ok=True)


def _modified(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:  # removed meanwhile by another start
        return 0.0


def _read_line(fd: int, timeout_s: float) -> str:
    """What the daemon wrote up to its first newline; "" if it closed the pipe or timed out."""
    import select

    deadline = time.monotonic() + timeout_s
    data = b""
    while b"\n" not in data and (remaining := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([fd], [], [], remaining)
        chunk = os.read(fd, 256) if ready else b""
        if not chunk:
            break
        data += chunk
    return data.decode(errors="replace") if b"\n" in data else ""


def stop_daemon(descriptor: Descriptor) -> None:
    """SIGTERM a daemon and wait until it has cleaned up (its kernel and servers stopped)."""
    try:
        process = psutil.Process(descriptor.pid)
        process.send_signal(signal.SIGTERM)
    except psutil.NoSuchProcess:
        return
    # Not psutil's wait: where PID 1 reaps orphans late, a finished daemon lingers as a zombie.
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while _alive(descriptor):
        if time.monotonic() > deadline:
            raise WarmkernelError(
                "daemon_error",
                f"daemon {descriptor.id} (pid {descriptor.pid}) did not stop within {STOP_TIMEOUT_S:.0f} s; "
                f"if it is stuck, `kill -KILL {descriptor.pid}` ends it and its kernels (the records stay "
                "readable; a running one is marked died)",
            )
        time.sleep(0.02)
