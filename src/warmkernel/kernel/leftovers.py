"""Leftovers of servers that are gone: their private runtime roots (`wk-*` in the temp directory)
and their kernels' cgroups.

A server that is killed cannot remove its root, and kernels it started may have left IPC sockets
and logs there, and processes in their cgroups (a double-forked one outlives its kernel). Each
root names its owner (pid and start time) in a file; a root whose owner is gone is removed by the
next server that starts, after its kernels' cgroups (named after the root) are emptied and
removed. The owner's start is kept in seconds since boot, which no step of the wall clock moves
(an epoch start time, as psutil gives it, moves with every step: NTP, a resumed virtual machine).
A root without that file was made by an older version, whose server may still use it without a
kernel naming it anywhere: it is left alone; so is one whose owner an older version named by its
epoch start time, while a process of that pid runs.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time
from pathlib import Path

import psutil

from warmkernel.kernel import cgroup

ROOT_PREFIX = "wk-"
OWNER_FILE = "owner"
_SINCE_BOOT = "since-boot"
"""The owner file's middle word: `PID since-boot SECONDS` (an older version's has two words)."""
_YOUNG_S = 60.0
"""A root this new may still be getting its owner file: left alone."""


def write_owner(root: Path) -> None:
    """Name this process as the owner of `root`."""
    me = psutil.Process()
    (root / OWNER_FILE).write_text(f"{me.pid} {_SINCE_BOOT} {_since_boot(me)}")


def sweep() -> None:
    """Remove the roots of this user's servers that are gone, and their kernels' cgroups.

    A root whose cgroups could not all be removed stays, so the next sweep tries again.
    """
    for root in Path(tempfile.gettempdir()).glob(f"{ROOT_PREFIX}*"):
        if _ours(root) and not _in_use(root) and cgroup.sweep(f"{root.name}-"):
            shutil.rmtree(root, ignore_errors=True)


def _ours(path: Path) -> bool:
    """A real directory (not a symlink) of this user, old enough to have its owner file."""
    try:
        info = path.lstat()
    except OSError:
        return False
    return (
        stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and time.time() - info.st_mtime > _YOUNG_S
    )


def _in_use(root: Path) -> bool:
    try:
        pid, *started = (root / OWNER_FILE).read_text().split()
        owner_pid = int(pid)
    except (OSError, ValueError):
        return True  # no owner named (an older version's) or unreadable: not ours to judge
    try:
        owner = psutil.Process(owner_pid)
        if owner.status() == psutil.STATUS_ZOMBIE:
            return False
        match started:
            case [_SINCE_BOOT, seconds]:
                return abs(_since_boot(owner) - float(seconds)) < 1
            case _:
                return True  # an older version's epoch start time: live while its pid is
    except (psutil.Error, ValueError):
        return False


def _since_boot(process: psutil.Process) -> float:
    """When `process` started, in seconds since boot (psutil adds to this the boot time the wall
    clock implies now, which the subtraction takes off again)."""
    return process.create_time() - psutil.boot_time()
