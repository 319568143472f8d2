"""The hello on the daemon's raw socket, as any client of any version may say it: a malformed one
is `invalid_arguments` naming the field, a silent one times out, and none fails the daemon.

The tests share one daemon; its kernel's namespace must outlive them all.
"""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cli.conftest import Cli
from warmkernel.faces.listening import FIRST_WORDS_S
from warmkernel.settings.model import REPLY_SETTINGS

WAIT_S = 30


def socket_of(cli: Cli) -> str:
    (path,) = (cli.runtime / "daemons").glob("*.json")
    return json.loads(path.read_text())["socket"]


def answer_to(path: str, line: bytes) -> dict[str, Any]:
    """The daemon's answer to one line said on a new connection (then closed)."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(WAIT_S)
        sock.connect(path)
        sock.sendall(line)
        return json.loads(sock.makefile("rb").readline())


@pytest.fixture(scope="module")
def kept(daemon_cli: Cli) -> Cli:
    """The shared daemon, with a value in its kernel that every test here must leave alone."""
    assert daemon_cli("run", "kept = 41").returncode == 0
    return daemon_cli


MALFORMED = [
    (b'{"client": "cli", "options": [1, 2]}', '"options" must be a JSON object, not [1, 2]'),
    (b'{"client": 7}', '"client" must be a string, not 7'),
    (b'{"client": null}', '"client" must be a string, not null'),
    (b'{"client": "cli", "note": ["a"]}', '"note" must be a string, or null'),
    (b'{"client": "cli", "note": "\\ud800"}', '"note" must be a string'),
    (b'{"client": "cli", "options": {"default_wait_s": "soon"}}', '"options.default_wait_s" must be'),
    (b'{"client": "cli", "options": {"default_wait_s": 1e999}}', '"options.default_wait_s" must be'),
    (b'{"client": "cli", "options": {"inline_max_lines": true}}', '"options.inline_max_lines" must be'),
    (
        b'{"client": "cli", "options": {"result_mode": "loud"}}',
        "\"options.result_mode\" must be one of 'content', 'structured'",
    ),
    (b'{"client": "cli", "options": {"colour": 1}}', '"colour" in the hello\'s "options" are not reply'),
    (b'{"client": "view", "view": "127.0.0.1"}', '"view" must be a JSON object'),
    (b'{"client": "view", "view": {"port": "80"}}', '"view.port" must be a whole number, not "80"'),
    (b'{"client": "view", "view": {"port": Infinity}}', '"view.port" must be a whole number'),
    (
        b'{"client": "view", "view": {"allowed_hosts": "a.example"}}',
        '"view.allowed_hosts" must be a list',
    ),
    (b'{"client": "serve", "serve": {"token": 5}}', '"serve.token" must be a string, not 5'),
    (
        b'{"client": "serve", "serve": {"host": "127.0.0.1\\u0000", "port": 0, '
        b'"path": "/", "token": "t", "allowed_hosts": ["a"]}}',
        "host name must not contain null character",
    ),
    (b"[" * 50_000, "the hello is not JSON"),
    (b"\xff\xfe{}", "the hello is not JSON"),
    (b"[]", 'the hello is a JSON object with a "client" name'),
]
"""Hellos a client may send by mistake, and the words of the refusal that name the field."""


@pytest.mark.parametrize(("line", "named"), MALFORMED, ids=[named for _, named in MALFORMED])
def test_a_malformed_hello_is_invalid_arguments_naming_the_field(kept: Cli, line: bytes, named: str) -> None:
    answer = answer_to(socket_of(kept), line + b"\n")
    assert answer["ok"] is False and answer["error"]["code"] == "invalid_arguments", answer
    assert named in answer["error"]["message"]


def test_a_hello_past_its_length_is_refused(kept: Cli) -> None:
    answer = answer_to(socket_of(kept), b'{"client": "cli", "note": "' + b"x" * 70_000 + b'"}\n')
    assert answer["error"] == {
        "code": "invalid_arguments",
        "message": "the hello is one line of JSON, of at most 65536 bytes",
    }


def test_a_hello_that_never_ends_its_line_times_out(kept: Cli) -> None:
    answer = answer_to(socket_of(kept), b'{"client": "cli"')
    assert answer["error"] == {
        "code": "invalid_arguments",
        "message": f"no hello within {FIRST_WORDS_S:g} s: "
        "a client says its one line of JSON as soon as it connects",
    }
    assert kept("run", "kept").stdout.splitlines()[-1].endswith(": 41")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
"""Any JSON value (floats include NaN and the infinities, which Python's JSON writes and reads)."""
OPTIONS = st.dictionaries(
    st.sampled_from(sorted(REPLY_SETTINGS)) | st.text(max_size=6),
    JSON | st.sampled_from([0, 1, 0.5, "content", "structured"]),
    max_size=3,
)
ENDPOINT = st.fixed_dictionaries(
    {},
    optional={
        # Loopback names only, on port 0 or none at all: a hello that binds takes a free loopback port.
        "host": st.sampled_from(["127.0.0.1", "localhost"])
        | JSON.filter(lambda value: not isinstance(value, str)),
        "port": st.sampled_from([0, -1, 70_000]) | JSON.filter(lambda value: not isinstance(value, int)),
        "path": st.sampled_from(["/mcp", ""]) | JSON,
        "token": JSON,
        "allowed_hosts": st.lists(st.text(max_size=8), max_size=2) | JSON,
    },
)
HELLOS = st.fixed_dictionaries(
    {},
    optional={
        "client": st.sampled_from(["status", "cli", "relay", "view", "serve", "future"]) | JSON,
        "options": OPTIONS | JSON,
        "serve": ENDPOINT | JSON,
        "view": ENDPOINT | JSON,
        "note": JSON,
        "warmkernel": JSON,
    },
).map(lambda hello: json.dumps(hello).encode()) | st.binary(max_size=64).filter(lambda raw: b"\n" not in raw)


def test_fuzzed_hellos_are_answered_and_a_refusal_is_always_the_callers_mistake(kept: Cli) -> None:
    path = socket_of(kept)

    @settings(max_examples=1000, database=None, suppress_health_check=[HealthCheck.too_slow])
    @given(HELLOS)
    def one_hello(line: bytes) -> None:
        answer = answer_to(path, line + b"\n")
        assert isinstance(answer, dict) and isinstance(answer.get("ok"), bool), answer
        if not answer["ok"]:
            assert answer["error"]["code"] == "invalid_arguments", (line, answer)

    one_hello()
    assert kept("run", "kept + 1").stdout.splitlines()[-1].endswith(": 42")
