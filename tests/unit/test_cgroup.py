"""Where this process's cgroup (v2) is, read from /proc/self/mountinfo and /proc/self/cgroup."""

from __future__ import annotations

from pathlib import Path

import pytest

from warmkernel.kernel.cgroup import cgroup2_mounts, cgroup_directory, own_cgroup

HYBRID = (
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
)
"""systemd's hybrid layout: v1 controllers beside a cgroup2 hierarchy at /sys/fs/cgroup/unified."""

UNIFIED = (
    "22 1 259:1 / / rw,relatime shared:1 - ext4 /dev/root rw\n"
    "26 22 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n"
)
"""A current distribution: only cgroup2, at /sys/fs/cgroup (with an optional field, shared:9)."""

V1_ONLY = "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"


@pytest.mark.parametrize(
    ("mountinfo", "mounts"),
    [
        pytest.param(HYBRID, [("/", Path("/sys/fs/cgroup/unified"))], id="hybrid"),
        pytest.param(UNIFIED, [("/", Path("/sys/fs/cgroup"))], id="unified"),
        pytest.param(V1_ONLY, [], id="v1 only"),
        pytest.param("", [], id="empty"),
        pytest.param(
            "50 22 0:23 /user.slice /mnt/my\\040cgroups rw - cgroup2 cgroup2 rw\n",
            [("/user.slice", Path("/mnt/my cgroups"))],
            id="a subtree mounted at a path with a space",
        ),
        pytest.param("50 22 0:23 / /x rw\n", [], id="a line without its separator"),
    ],
)
def test_cgroup2_mounts_are_read_from_mountinfo(mountinfo: str, mounts: list[tuple[str, Path]]) -> None:
    assert cgroup2_mounts(mountinfo) == mounts


@pytest.mark.parametrize(
    ("proc_cgroup", "path"),
    [
        pytest.param("0::/\n", "/", id="the root"),
        pytest.param(
            "12:memory:/user.slice\n1:name=systemd:/user.slice/session-2.scope\n"
            "0::/user.slice/user-1000.slice/session-2.scope\n",
            "/user.slice/user-1000.slice/session-2.scope",
            id="hybrid",
        ),
        pytest.param("4:memory:/a\n1:cpu:/\n", None, id="v1 only"),
        pytest.param("0::/gone.scope (deleted)\n", None, id="a removed cgroup"),
    ],
)
def test_own_cgroup_is_the_v2_line(proc_cgroup: str, path: str | None) -> None:
    assert own_cgroup(proc_cgroup) == path


@pytest.mark.parametrize(
    ("mountinfo", "proc_cgroup", "directory"),
    [
        pytest.param(HYBRID, "0::/\n", Path("/sys/fs/cgroup/unified"), id="hybrid, at the root"),
        pytest.param(
            UNIFIED,
            "0::/user.slice/user-1000.slice/user@1000.service/app.slice/wk.scope\n",
            Path("/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/wk.scope"),
            id="a delegated user cgroup",
        ),
        pytest.param(
            "50 22 0:23 /user.slice /mnt/c rw - cgroup2 cgroup2 rw\n",
            "0::/user.slice/a.scope\n",
            Path("/mnt/c/a.scope"),
            id="inside a mounted subtree",
        ),
        pytest.param(
            "50 22 0:23 /user /mnt/c rw - cgroup2 cgroup2 rw\n",
            "0::/user.slice/a.scope\n",
            None,
            id="beside a mounted subtree with a common prefix",
        ),
        pytest.param(V1_ONLY, "4:cpu:/\n", None, id="no cgroup2"),
        pytest.param(HYBRID, "1:cpu:/\n", None, id="no v2 line"),
    ],
)
def test_the_cgroup_directory_is_where_a_cgroup2_mount_shows_it(
    mountinfo: str, proc_cgroup: str, directory: Path | None
) -> None:
    assert cgroup_directory(mountinfo, proc_cgroup) == directory
