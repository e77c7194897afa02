"""Working memory through the sync and async clients, against the live Engram: versions
(ETag, If-Match, If-None-Match), the size cap, memory context, export and erasure."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from engram_service_client import AsyncEngram, Engram, EngramError, NotModified

from .conftest import ENGRAM_URL


async def test_two_writers_with_one_etag_one_wins_the_other_gets_412_not_retried(token: str, agent_id: str) -> None:
    sent: list[list[str]] = [[], []]

    def counting(i: int) -> httpx.AsyncClient:
        async def hook(request: httpx.Request) -> None:
            sent[i].append(f"{request.method} {request.url.path}")

        return httpx.AsyncClient(event_hooks={"request": [hook]})

    async with AsyncEngram(ENGRAM_URL, token, http=counting(0)) as one, AsyncEngram(ENGRAM_URL, token, http=counting(1)) as two:
        first = await one.put_user_document(agent_id, "kira", "## Kira\n- learning the cello")
        read = await one.get_user_document(agent_id, "kira")
        assert read == first
        sent[0].clear()
        texts = ["## Kira\n- learning the cello\n- lessons on Mondays", "## Kira\n- learning the cello\n- owns a bow"]
        results = await asyncio.gather(
            one.put_user_document(agent_id, "kira", texts[0], if_match=read["etag"]),
            two.put_user_document(agent_id, "kira", texts[1], if_match=read["etag"]),
            return_exceptions=True,
        )
        winners = [i for i, r in enumerate(results) if not isinstance(r, BaseException)]
        losers = [i for i, r in enumerate(results) if isinstance(r, BaseException)]
        assert len(winners) == 1 and len(losers) == 1, results
        error = results[losers[0]]
        assert isinstance(error, EngramError)
        assert (error.status, error.code) == (412, "precondition_failed")
        assert len(sent[losers[0]]) == 1, "a 412 is not retried"
        stored = await two.get_user_document(agent_id, "kira")
        assert stored["content"] == texts[winners[0]], "the winner's text is stored; the loser changed nothing"
        assert stored["etag"] == results[winners[0]]["etag"]  # type: ignore[index]


def test_create_only_not_modified_and_guarded_delete(engram: Engram, agent_id: str) -> None:
    conversation = engram.create_conversation(agent_id, "lev")["id"]
    assert engram.get_conversation_document(conversation) is None
    v1 = engram.put_conversation_document(conversation, "draft the toast", if_none_match="*")
    with pytest.raises(EngramError) as exists:
        engram.put_conversation_document(conversation, "other", if_none_match="*")
    assert exists.value.code == "precondition_failed"

    assert engram.get_conversation_document(conversation, if_none_match=v1["etag"]) == NotModified(v1["etag"])
    v2 = engram.put_conversation_document(conversation, "draft the toast; keep it short", if_match=v1["etag"])
    assert engram.get_conversation_document(conversation, if_none_match=v1["etag"]) == v2

    with pytest.raises(EngramError) as stale:
        engram.delete_conversation_document(conversation, if_match=v1["etag"])
    assert (stale.value.status, stale.value.code) == (412, "precondition_failed")
    assert engram.get_conversation_document(conversation)["content"] == "draft the toast; keep it short"
    engram.delete_conversation_document(conversation, if_match=f'"{v2["etag"]}"')
    assert engram.get_conversation_document(conversation) is None
    with pytest.raises(EngramError) as gone:
        engram.delete_conversation_document(conversation)
    assert gone.value.code == "not_found"


def test_over_32_768_characters_is_413_and_changes_nothing(engram: Engram, agent_id: str) -> None:
    full = "é" * 32 * 1024  # the cap counts characters, as the spec's maxLength does
    engram.put_user_document(agent_id, "mona", full)
    with pytest.raises(EngramError) as too_large:
        engram.put_user_document(agent_id, "mona", "a" * (32 * 1024 + 1))
    assert (too_large.value.status, too_large.value.code) == (413, "payload_too_large")
    assert engram.get_user_document(agent_id, "mona")["content"] == full


async def test_memory_context_export_and_erasure(aengram: AsyncEngram, agent_id: str) -> None:
    document = await aengram.put_user_document(agent_id, "nils", "## Nils\n- repairs bicycles")
    context = await aengram.memory_context(agent_id, "nils", working_memory=True)
    assert context["working_memory"] == document
    assert "<working-memory>" in context["prompt"] and "- repairs bicycles" in context["prompt"]
    exported = await aengram.export_user("nils")
    assert [(w["agent_id"], w["content"]) for w in exported["working_memories"]] == [(agent_id, document["content"])]
    erasure = await aengram.erase_user("nils")
    assert erasure["deleted"]["working_memories"] == 1
    assert await aengram.get_user_document(agent_id, "nils") is None
