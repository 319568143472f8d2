"""A cgroup (v2) per local kernel, where the system lets this user make one.

Every process a kernel starts stays in its cgroup whatever it does (double fork, setsid, a clean
environment): only a deliberate move, writing its pid into another cgroup, takes it out. Kernel
cgroups are children of this process's own cgroup, named after the kernel's mark
(`LaunchSpec.mark`), so a server that was killed leaves cgroups the next one finds by its runtime
root's name. Where there is no cgroup2 mount, or this user may not create cgroups in its own
(as anyone but root, unless systemd delegated that cgroup to the user), kernels are tracked by
their session and an environment marker instead (`local.kill_process_tree`); that is said once
in the log.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import signal
import stat
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

log = logging.getLogger(__name__)

_MOUNTINFO = Path("/proc/self/mountinfo")
_OWN_CGROUP = Path("/proc/self/cgroup")
_KILL_WAIT_S = 5.0
_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")


def cgroup2_mounts(mountinfo: str) -> list[tuple[str, Path]]:
    """The cgroup2 mounts in the text of /proc/self/mountinfo: (the cgroup mounted, mount point)."""
    mounts: list[tuple[str, Path]] = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if "-" not in fields[6:]:
            continue
        separator = fields.index("-", 6)
        if fields[separator + 1 : separator + 2] == ["cgroup2"]:
            mounts.append((_unescape(fields[3]), Path(_unescape(fields[4]))))
    return mounts


def own_cgroup(proc_cgroup: str) -> str | None:
    """The cgroup (v2) path in the text of /proc/self/cgroup: its `0::PATH` line."""
    for line in proc_cgroup.splitlines():
        if line.startswith("0::/") and not line.endswith(" (deleted)"):
            return line[3:]
    return None


def cgroup_directory(mountinfo: str, proc_cgroup: str) -> Path | None:
    """The directory of this process's cgroup, where a cgroup2 mount shows it."""
    own = own_cgroup(proc_cgroup)
    if own is None:
        return None
    for mounted, mount_point in cgroup2_mounts(mountinfo):
        with contextlib.suppress(ValueError):  # a mount of another part of the hierarchy
            return mount_point / PurePosixPath(own).relative_to(mounted)
    return None


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash in paths as octal escapes."""
    return _OCTAL_ESCAPE.sub(lambda match: chr(int(match.group(1), 8)), field)


def own_directory() -> Path | None:
    """The directory of this process's cgroup (v2), if one shows."""
    try:
        return cgroup_directory(_MOUNTINFO.read_text(), _OWN_CGROUP.read_text())
    except OSError:
        return None


@functools.cache
def _parent() -> Path | None:
    """Where kernel cgroups are made: this process's own cgroup (read once: it does not move)."""
    parent = own_directory()
    if parent is None:
        _fall_back("no cgroup v2 hierarchy shows this process's cgroup")
    return parent


@functools.cache
def _fall_back(reason: str) -> None:
    """Say once (for each reason) why kernels are tracked without cgroups."""
    log.info("kernels are tracked by session and environment marker, not by cgroup: %s", reason)


@dataclass(frozen=True)
class KernelCgroup:
    """The cgroup that holds one kernel and every process it starts."""

    path: Path

    @classmethod
    def create(cls, name: str, pid: int) -> KernelCgroup | None:
        """A new cgroup `name` holding the process `pid` (with its threads), or None where this
        user may not make one. Call it before `pid` forks: children stay where they were born."""
        parent = _parent()
        if parent is None:
            return None
        group = cls(parent / name)
        try:
            group.path.mkdir()
        except OSError as exc:
            _fall_back(f"cannot create a cgroup in {parent} ({exc.strerror})")
            return None
        try:
            (group.path / "cgroup.procs").write_text(str(pid))
        except OSError as exc:
            group.remove()
            _fall_back(f"cannot move a process into a cgroup in {parent} ({exc.strerror})")
            return None
        return group

    def pids(self) -> list[int]:
        """The processes in the cgroup now."""
        try:
            return [int(pid) for pid in (self.path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def kill(self) -> None:
        """SIGKILL every process in the cgroup and wait until it is empty.

        `cgroup.kill` (Linux 5.14) kills them all at once, so none can fork away meanwhile;
        without it each is killed by pid until none is left.
        """
        with contextlib.suppress(OSError):  # FileNotFoundError before 5.14
            (self.path / "cgroup.kill").write_text("1")
        deadline = time.monotonic() + _KILL_WAIT_S
        while (pids := self.pids()) and time.monotonic() < deadline:
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)

    def remove(self) -> bool:
        """Remove the (empty) cgroup; False if it is still there."""
        try:
            self.path.rmdir()
        except FileNotFoundError:
            return True
        except OSError:
            return False
        return True


def sweep(prefix: str) -> bool:
    """Kill and remove this user's kernel cgroups whose names start with `prefix` (a gone
    server's runtime root); False if one could not be removed."""
    parent = _parent()
    if parent is None:
        return True
    removed = True
    with contextlib.suppress(OSError):
        for path in parent.iterdir():
            if path.name.startswith(prefix) and _ours(path):
                group = KernelCgroup(path)
                group.kill()
                removed = group.remove() and removed
    return removed


def _ours(path: Path) -> bool:
    """A directory (not a symlink) this user made."""
    try:
        info = path.lstat()
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()
