"""The live Engram that scripts/test-clients started, and a tenant of each test's own."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import time
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from engram_service_client import AsyncEngram, Engram


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.exit(f"{name} is not set: run the tests through scripts/test-clients", returncode=2)
    return value


ENGRAM_URL = _env("ENGRAM_URL")
# A second server whose tenants may send 2 requests a second (burst 4), for the 429 tests.
ENGRAM_LIMITED_URL = _env("ENGRAM_LIMITED_URL")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def mint_token(**claims: object) -> str:
    """A token signed with the server's HS256 secret."""
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = _b64(json.dumps({"exp": int(time.time()) + 3600, **claims}).encode())
    signature = hmac.new(_env("ENGRAM_JWT_SECRET").encode(), f"{header}.{body}".encode(), hashlib.sha256).digest()
    return f"{header}.{body}.{_b64(signature)}"


@pytest.fixture
def tenant() -> str:
    return f"py-{uuid.uuid4()}"


@pytest.fixture
def token(tenant: str) -> str:
    return mint_token(tenant=tenant, scope="admin rgpd")


@pytest.fixture
def engram(token: str) -> Iterator[Engram]:
    with Engram(ENGRAM_URL, token) as client:
        yield client


@pytest.fixture
async def aengram(token: str) -> AsyncIterator[AsyncEngram]:
    async with AsyncEngram(ENGRAM_URL, token) as client:
        yield client


@pytest.fixture
def agent_id(engram: Engram) -> str:
    """An agent with memory switched on."""
    agent = f"agent-{uuid.uuid4()}"
    engram.put_config(agent, memory_enabled=True)
    return agent
