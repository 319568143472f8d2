"""Shared pytest set-up: jupyter_client runs on asyncio only, so anyio tests use asyncio."""

import pytest


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"
