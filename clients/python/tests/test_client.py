"""The sync and async clients against a live Engram, and their error and retry rules."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from engram_service_client import AsyncEngram, Engram, EngramError, Settings
from engram_service_client._base import Call, retry_delay

from .conftest import ENGRAM_LIMITED_URL, ENGRAM_URL, mint_token


def test_conversation_idempotent_appends_and_pagination(engram: Engram, agent_id: str) -> None:
    ids = {engram.create_conversation(agent_id, "alice", title=f"t{i}")["id"] for i in range(5)}
    assert {c["id"] for c in engram.iterate("conversations", agent_id=agent_id, limit=2)} == ids

    conversation = next(iter(ids))
    user = [{"role": "user", "content": "I like green tea."}]
    first = engram.append_messages(conversation, user, idempotency_key="k-1")
    again = engram.append_messages(conversation, user, idempotency_key="k-1")
    assert again["messages"][0]["id"] == first["messages"][0]["id"]
    with pytest.raises(EngramError) as conflict:
        engram.append_messages(conversation, [{"role": "user", "content": "other"}], idempotency_key="k-1")
    assert (conflict.value.status, conflict.value.code) == (409, "conflict")
    assert conflict.value.request_id
    engram.append_messages(conversation, [{"role": "assistant", "content": "Noted."}])
    contents = [m["content"] for m in engram.iterate("messages", conversation, limit=1)]
    assert contents == ["I like green tea.", "Noted."]


async def test_async_client_facts_and_memory_context(aengram: AsyncEngram, agent_id: str) -> None:
    await aengram.remember_fact(agent_id, "bob", "Prefers tea over coffee", tags=["drinks"])
    await aengram.remember_fact(agent_id, "bob", "Lives in Lyon")
    found = await aengram.search_facts(agent_id, "bob", "tea")
    assert found["items"][0]["fact"] == "Prefers tea over coffee"
    context = await aengram.memory_context(agent_id, "bob", query="coffee")
    assert context["enabled"] is True
    assert "- Prefers tea over coffee" in context["prompt"]
    facts = [f["fact"] async for f in aengram.iterate("facts", agent_id, "bob", limit=1)]
    assert sorted(facts) == ["Lives in Lyon", "Prefers tea over coffee"]


def _error(call: object, *args: object, **kwargs: object) -> EngramError:
    with pytest.raises(EngramError) as caught:
        call(*args, **kwargs)  # type: ignore[operator]
    return caught.value


def test_400_401_404_413(engram: Engram, agent_id: str) -> None:
    assert _error(engram.put_config, "not a valid id!", memory_enabled=True).code == "invalid_request"
    unauthorized = _error(Engram(ENGRAM_URL, "not-a-token").list_conversations)
    assert (unauthorized.status, unauthorized.code) == (401, "unauthorized")
    missing = _error(engram.get_conversation, "0193a1b2-0000-7000-8000-000000000000")
    assert (missing.status, missing.code) == (404, "not_found")
    conversation = engram.create_conversation(agent_id, "carol")["id"]
    too_large = _error(engram.append_messages, conversation, [{"role": "user", "content": "x" * 70 * 1024}])
    assert (too_large.status, too_large.code) == (413, "payload_too_large")


async def test_429_carries_retry_after_and_the_retrying_client_succeeds(tenant: str) -> None:
    token = mint_token(tenant=tenant, scope="admin")
    async with AsyncEngram(ENGRAM_LIMITED_URL, token, settings=Settings(max_retries=0)) as impatient:
        results = await asyncio.gather(*(impatient.list_conversations(limit=1) for _ in range(10)), return_exceptions=True)
    limited = [r for r in results if isinstance(r, Exception)]
    assert len(limited) >= 5, "10 requests at once go over a burst of 4"
    for error in limited:
        assert isinstance(error, EngramError) and (error.status, error.code) == (429, "rate_limited")
        assert error.retry_after is not None and error.retry_after > 0
    async with AsyncEngram(ENGRAM_LIMITED_URL, token, settings=Settings(max_retries=5)) as patient:
        pages = await asyncio.gather(*(patient.list_conversations(limit=1) for _ in range(3)))
    assert [page["items"] for page in pages] == [[]] * 3, "the retrying client waits Retry-After until all go through"


class _Flaky:
    """A local server answering 503 with ``Retry-After`` ``failures`` times, then 200."""

    def __init__(self, failures: int, retry_after: str = "1") -> None:
        self.hits: list[tuple[float, str | None]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                self.rfile.read(length)
                outer.hits.append((time.monotonic(), self.headers.get("idempotency-key")))
                failing = len(outer.hits) <= failures
                body = (
                    {"error": {"code": "unavailable", "message": "database down", "request_id": "r-1"}}
                    if failing
                    else {"items": [], "next_cursor": None}
                )
                self.send_response(503 if failing else 200)
                self.send_header("content-type", "application/json")
                if failing:
                    self.send_header("retry-after", retry_after)
                self.end_headers()
                self.wfile.write(json.dumps(body).encode())

            do_GET = do_POST = _answer

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def flaky() -> Iterator[type[_Flaky]]:
    servers: list[_Flaky] = []

    def make(*args: object) -> _Flaky:
        servers.append(_Flaky(*args))  # type: ignore[arg-type]
        return servers[-1]

    yield make  # type: ignore[misc]
    for server in servers:
        server.server.shutdown()


def test_503_read_waits_retry_after(flaky) -> None:  # type: ignore[no-untyped-def]
    server = flaky(1)
    Engram(server.url, "t").list_jobs()
    assert len(server.hits) == 2
    assert server.hits[1][0] - server.hits[0][0] >= 0.95


async def test_503_append_retries_with_the_same_key(flaky) -> None:  # type: ignore[no-untyped-def]
    server = flaky(1)
    await AsyncEngram(server.url, "t").append_messages("c", [{"role": "user", "content": "hi"}])
    assert len(server.hits) == 2 and server.hits[0][1] and server.hits[0][1] == server.hits[1][1]


def test_503_create_is_not_repeated_and_no_retry_storm(flaky) -> None:  # type: ignore[no-untyped-def]
    server = flaky(5)
    error = _error(Engram(server.url, "t").create_conversation, "a", "u")
    assert (error.status, error.code, error.retry_after, error.request_id) == (503, "unavailable", 1.0, "r-1")
    assert len(server.hits) == 1
    storm = flaky(100, "0")
    assert _error(Engram(storm.url, "t", settings=Settings(max_retries=3)).list_jobs).code == "unavailable"
    assert len(storm.hits) == 4
    slow = flaky(100, "3600")
    started = time.monotonic()
    assert _error(Engram(slow.url, "t").list_jobs).retry_after == 3600
    assert time.monotonic() - started < 1 and len(slow.hits) == 1


def test_retries_wait_retry_after_at_least_with_full_jitter_above() -> None:
    error = EngramError(429, "rate_limited", "slow down", retry_after=1.0)
    call = Call("GET", "/api/jobs")
    assert retry_delay(error, call, 0, Settings(), lambda: 0.0) == 1.0, "not before the server's second"
    assert retry_delay(error, call, 0, Settings(), lambda: 0.5) == 1.5, "jitter over one more such period"
    waits = [retry_delay(error, call, 0, Settings()) for _ in range(200)]
    assert len(set(waits)) > 190, "two hundred clients refused together come back at different times"
    assert all(w is not None and 1.0 <= w <= 2.0 for w in waits)
    unavailable = EngramError(503, "unavailable", "down")
    assert retry_delay(unavailable, call, 3, Settings(max_retries=5), lambda: 0.5) == 1.0, "full jitter over 0.25 s · 2^3"


def test_the_deadline_bounds_a_call_and_its_retries(flaky) -> None:  # type: ignore[no-untyped-def]
    storm = flaky(100, "0")
    error = _error(Engram(storm.url, "t", settings=Settings(max_retries=1000, deadline=0.3)).list_jobs)
    # The last 503, or the attempt the deadline cut short when it fell during one.
    assert error.code in ("unavailable", "timeout") and len(storm.hits) < 1000


def test_a_network_failure_names_its_cause() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    error = _error(Engram(url, "t", settings=Settings(max_retries=0)).healthz)
    assert error.code == "network" and url in error.message and "refused" in error.message.lower()


def test_wait_for_job_and_follow_events(engram: Engram, agent_id: str) -> None:
    engram.put_config(agent_id, memory_enabled=True, min_user_turns=1, extract_every_user_turns=None)
    conversation = engram.create_conversation(agent_id, "alice")["id"]
    engram.append_messages(conversation, [{"role": "user", "content": "I live in Lyon."}])
    job = engram.end_conversation(conversation)["extraction"]["job_id"]
    assert engram.wait_for_job(job, timeout=30)["status"] == "succeeded"
    facts: list[str] = []
    for event in engram.follow_events(types="fact.added"):
        facts.append(event["data"]["fact"]["fact"])
        if len(facts) == 1:
            engram.remember_fact(agent_id, "alice", "Plays the cello")
        else:
            break
    assert "Lyon" in facts[0] and facts[1] == "Plays the cello"


async def test_async_wait_for_job_and_follow_events(aengram: AsyncEngram, agent_id: str) -> None:
    await aengram.put_config(agent_id, memory_enabled=True, min_user_turns=1, extract_every_user_turns=None)
    conversation = (await aengram.create_conversation(agent_id, "alice"))["id"]
    await aengram.append_messages(conversation, [{"role": "user", "content": "I live in Lyon."}])
    job = (await aengram.end_conversation(conversation))["extraction"]["job_id"]
    assert (await aengram.wait_for_job(job, timeout=30))["status"] == "succeeded"
    async for event in aengram.follow_events(types="fact.added"):
        assert "Lyon" in event["data"]["fact"]["fact"]
        break
