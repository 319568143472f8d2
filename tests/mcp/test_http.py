"""The Streamable HTTP face: a bearer token always, and the Host/Origin guard."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx2
import pytest

from warmkernel.faces.http_server import Endpoint

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}


async def post(endpoint: Endpoint, headers: dict[str, str]) -> httpx2.Response:
    base = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with httpx2.AsyncClient() as http:
        return await http.post(endpoint.url, json=INITIALIZE, headers=base | headers)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        pytest.param({}, 401, id="no-token"),
        pytest.param(bearer("wrong"), 401, id="wrong-token"),
        pytest.param({"Authorization": "Basic abc"}, 401, id="wrong-scheme"),
        pytest.param({"Authorization": "Bearer"}, 401, id="no-token-after-the-scheme"),
    ],
)
async def test_requests_without_the_token_are_refused(
    http_endpoint: Endpoint, headers: dict[str, str], status: int
) -> None:
    response = await post(http_endpoint, headers)
    assert response.status_code == status
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert "public_token of `warmkernel sessions --json`" in response.text, "where the token is"


async def test_bad_host_is_refused_even_with_the_token(http_endpoint: Endpoint) -> None:
    response = await post(http_endpoint, bearer(http_endpoint.token) | {"Host": "evil.example:80"})
    assert response.status_code == 421


async def test_foreign_origin_is_refused_even_with_the_token(http_endpoint: Endpoint) -> None:
    response = await post(http_endpoint, bearer(http_endpoint.token) | {"Origin": "http://evil.example"})
    assert response.status_code == 403


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
async def test_the_token_opens_the_endpoint_whatever_the_case_of_its_scheme(
    http_endpoint: Endpoint, scheme: str
) -> None:
    response = await post(http_endpoint, {"Authorization": f"{scheme} {http_endpoint.token}"})
    assert response.status_code == 200


def test_binding_beyond_loopback_needs_allowed_host(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "warmkernel", "serve", "--host", "0.0.0.0", "--port", "0"],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--allowed-host" in done.stderr
