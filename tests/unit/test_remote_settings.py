"""The pure parts of remote kernels: the create request's environment, what a refusing server
said, and file stamps taken inside a kernel (the same as the server's own)."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest

from warmkernel.errors import WarmkernelError
from warmkernel.kernel.jupyter_api import kernel_environment, server_says, split_assignment
from warmkernel.notebook.binding import kernel_stamps_expression, read_kernel_stamps, stamp_files
from warmkernel.notebook.staleness import FileStamp
from warmkernel.settings.model import Settings


def test_the_environment_carries_the_user_our_kernel_variables_and_the_given_ones() -> None:
    settings = Settings(kernel_env=("KERNEL_IMAGE=repo/img:1", "KERNEL_TEAM=red", "GPU=a=b"))
    environ = {"KERNEL_TEAM": "blue", "KERNEL_NAMESPACE": "ml", "HOME": "/root"}
    assert kernel_environment(settings, environ, "ann") == {
        "KERNEL_TEAM": "red",  # --kernel-env wins over our environment
        "KERNEL_NAMESPACE": "ml",
        "KERNEL_USERNAME": "ann",
        "KERNEL_LAUNCH_TIMEOUT": "120",
        "KERNEL_IMAGE": "repo/img:1",
        "GPU": "a=b",
    }


@pytest.mark.parametrize(
    ("settings", "environ", "user"),
    [
        pytest.param(Settings(), {}, "ann", id="the local user"),
        pytest.param(Settings(), {"KERNEL_USERNAME": "bob"}, "bob", id="our KERNEL_USERNAME"),
        pytest.param(Settings(kernel_username="cy"), {"KERNEL_USERNAME": "bob"}, "cy", id="the flag"),
    ],
)
def test_the_username_is_the_flag_else_our_variable_else_the_local_user(
    settings: Settings, environ: dict[str, str], user: str
) -> None:
    assert kernel_environment(settings, environ, "ann")["KERNEL_USERNAME"] == user


def test_working_dir_and_launch_timeout_follow_the_settings() -> None:
    env = kernel_environment(Settings(kernel_working_dir="/home/ann/p", kernel_launch_timeout_s=600), {}, "a")
    assert env["KERNEL_WORKING_DIR"] == "/home/ann/p" and env["KERNEL_LAUNCH_TIMEOUT"] == "600"
    assert "KERNEL_WORKING_DIR" not in kernel_environment(Settings(), {}, "a")


@pytest.mark.parametrize("text", ["NOEQUALS", "=value", " A=1", ""])
def test_an_assignment_without_a_name_is_refused_with_its_form(text: str) -> None:
    with pytest.raises(WarmkernelError) as caught:
        split_assignment(text, "--kernel-env")
    assert caught.value.code == "invalid_arguments"
    assert "--kernel-env takes NAME=VALUE" in caught.value.message


@pytest.mark.parametrize(
    ("status", "body", "said"),
    [
        pytest.param(
            403,
            {"reason": "User 'root' is not authorized to start kernel 'Python 3'.", "message": ""},
            "User 'root' is not authorized to start kernel 'Python 3'.",
            id="enterprise gateway's reason",
        ),
        pytest.param(
            403,
            {"reason": "Forbidden", "message": "'_xsrf' argument missing"},
            "'_xsrf' argument missing",
            id="message",
        ),
        pytest.param(
            401, {"reason": "Unauthorized", "message": ""}, "Unauthorized", id="only the generic one"
        ),
        pytest.param(
            500,
            {"reason": "Internal Server Error", "message": "Unknown server error"},
            "Unknown server error",
            id="generic",
        ),
    ],
)
def test_what_the_server_said_is_its_most_specific_words(
    status: int, body: dict[str, str], said: str
) -> None:
    assert server_says(httpx2.Response(status, json=body)) == said


def test_a_server_that_said_no_json_is_quoted_as_text() -> None:
    assert server_says(httpx2.Response(502, text="  bad gateway\n")) == "bad gateway"


def test_stamps_taken_inside_a_kernel_match_the_servers_own(tmp_path: Path) -> None:
    small, empty, missing = tmp_path / "small.txt", tmp_path / "empty", tmp_path / "missing"
    small.write_text("some content")
    empty.write_bytes(b"")
    paths = {str(small), str(empty), str(missing), str(tmp_path)}
    here = stamp_files(paths, {})
    answer = eval(kernel_stamps_expression(paths, {}), {})  # as the kernel evaluates it
    assert read_kernel_stamps(repr(answer)) == here
    assert here[str(missing)] is None and here[str(tmp_path)] is None  # a directory is no file
    stamp = here[str(small)]
    assert stamp is not None
    known = {str(small): FileStamp(stamp.size, stamp.mtime_ns, "known")}  # reused: size and mtime hold
    again = read_kernel_stamps(repr(eval(kernel_stamps_expression(paths, known), {})))
    assert again == stamp_files(paths, known) and again[str(small)] == known[str(small)]
