"""Engram as a LangGraph ``BaseStore``: long-term memory items are Engram facts.

A namespace is ``(agent_id, external_ref)``. An item is one fact: its key is the fact's
tag ``key:<key>``; its value is the fact's text when it is ``{"content": "<text>"}``, else
the value as JSON. Engram stores a fact once, so two keys with the same fact (compared as
Engram does: case, spaces and end punctuation aside) name one fact with two tags; each key
reads, replaces and deletes only its own name. ``search`` with a query is Engram's recall (``facts/search``: full text,
and by meaning when the server has embeddings); without one, the newest facts. TTLs are not
supported (Engram keeps facts until deleted or erased)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from ._sansio import FailOpen, FailOpenOptions, Steps, calls, every
from .client import AsyncEngram, Engram
from .errors import EngramError
from .models import Fact

if TYPE_CHECKING:
    from typing_extensions import Unpack

KEY_TAG = "key:"


def _owner(namespace: tuple[str, ...]) -> tuple[str, str]:
    if len(namespace) != 2:
        raise EngramError(
            0,
            "invalid_request",
            f"an Engram namespace is (agent_id, external_ref), not {namespace!r}",
        )
    return namespace[0], namespace[1]


def _text(value: Mapping[str, Any]) -> str:
    if set(value) == {"content"} and isinstance(value["content"], str):
        return value["content"]
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _value(fact: str) -> dict[str, Any]:
    try:
        parsed = json.loads(fact)
    except ValueError:
        parsed = None
    return parsed if isinstance(parsed, dict) else {"content": fact}


def _keys(fact: Fact) -> list[str]:
    """The keys naming a fact: two keys whose values are the same fact (Engram stores a fact
    once) share it, each with its tag; a fact stored without the store has its id as key."""
    return [t[len(KEY_TAG) :] for t in fact["tags"] if t.startswith(KEY_TAG)] or [fact["id"]]


def _item(namespace: tuple[str, ...], fact: Fact, key: str, score: float | None = None) -> SearchItem:
    return SearchItem(
        namespace=namespace,
        key=key,
        value=_value(fact["fact"]),
        created_at=datetime.fromisoformat(fact["created_at"].replace("Z", "+00:00")),
        updated_at=datetime.fromisoformat(fact["updated_at"].replace("Z", "+00:00")),
        score=score,
    )


def _matches(item: Item, filter: dict[str, Any] | None) -> bool:
    return all(item.value.get(k) == v for k, v in (filter or {}).items())


def _keyed(namespace: tuple[str, ...], key: str) -> Steps[list[Fact]]:
    """The key's fact, superseded ones included: a newer fact about the same thing under
    another key ("Lives in Paris" after "Lives in Lyon") replaces it in recall, not here."""
    agent, user = _owner(namespace)
    return every(calls.list_facts(agent, user, tag=KEY_TAG + key, include_superseded=True, limit=200))


def _get(op: GetOp) -> Steps[Item | None]:
    facts = yield from _keyed(op.namespace, op.key)
    return _item(op.namespace, facts[0], op.key) if facts else None


def _put(op: PutOp) -> Steps[None]:
    agent, user = _owner(op.namespace)
    tag = KEY_TAG + op.key
    for fact in (yield from _keyed(op.namespace, op.key)):
        others = [t for t in fact["tags"] if t != tag]
        if any(t.startswith(KEY_TAG) for t in others):  # another key names it too: keep it for that one
            yield calls.update_fact(agent, user, fact["id"], tags=others)
        else:
            yield calls.delete_fact(agent, user, fact["id"])
    if op.value is None:
        return None
    fact = yield calls.remember_fact(agent, user, _text(op.value), tags=[tag])
    if tag not in fact["tags"]:  # the same fact was already stored under another key
        yield calls.update_fact(agent, user, fact["id"], tags=[*fact["tags"], tag])
    return None


def _search(op: SearchOp) -> Steps[list[SearchItem]]:
    agent, user = _owner(op.namespace_prefix)
    if op.query:
        found = yield calls.search_facts(agent, user, op.query, limit=min(200, op.offset + op.limit))
        items = [_item(op.namespace_prefix, f, k, f.get("relevance")) for f in found["items"] for k in _keys(f)]
    else:
        facts = yield from every(calls.list_facts(agent, user, limit=200))
        items = [_item(op.namespace_prefix, f, k) for f in facts for k in _keys(f)]
    return [i for i in items if _matches(i, op.filter)][op.offset : op.offset + op.limit]


def _list_namespaces(op: ListNamespacesOp) -> Steps[list[tuple[str, ...]]]:
    """The (agent, user) pairs that have a conversation: Engram has no route listing the
    users who have facts, so a user with facts and no conversation is not listed."""
    conversations = yield from every(calls.list_conversations(limit=200))
    namespaces = sorted({(c["agent_id"], c["external_ref"]) for c in conversations})

    def matches(ns: tuple[str, ...]) -> bool:
        for condition in op.match_conditions or ():
            path = condition.path
            part = ns[: len(path)] if condition.match_type == "prefix" else ns[-len(path) :]
            if len(part) != len(path) or any(p != "*" and p != n for p, n in zip(path, part)):
                return False
        return True

    found = [ns[: op.max_depth] if op.max_depth else ns for ns in namespaces if matches(ns)]
    return list(dict.fromkeys(found))[op.offset : op.offset + op.limit]


def _steps(op: Op) -> Steps[Result]:
    if isinstance(op, GetOp):
        return _get(op)
    if isinstance(op, PutOp):
        return _put(op)
    if isinstance(op, SearchOp):
        return _search(op)
    if isinstance(op, ListNamespacesOp):
        return _list_namespaces(op)
    raise EngramError.unsupported(f"the store operation {type(op).__name__}")


class EngramStore(BaseStore):
    """``EngramStore(client)`` for graphs run with ``invoke``; pass ``aclient`` (an
    :class:`AsyncEngram`) too for ``ainvoke`` (without it, async calls run the sync client
    in a thread).

    Reads (``get``, ``search``, ``list_namespaces``) get ``memory_timeout`` seconds (default
    2) in all. ``on_engram_error="continue"`` lets the graph go on without memory when
    Engram is down, slow or overloaded: a read answers nothing found, a ``put`` or
    ``delete`` is skipped, and the failure goes to ``on_error`` (default: a warning on the
    ``engram_service_client`` logger); ``"raise"`` (the default) raises the EngramError."""

    supports_ttl = False

    def __init__(
        self,
        client: Engram,
        aclient: AsyncEngram | None = None,
        **fail_open: Unpack[FailOpenOptions],
    ) -> None:
        self.client = client
        self.aclient = aclient
        self.fail_open = FailOpen(**fail_open)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self.fail_open.run(self.client, _steps(op), _nothing(op), read=_reads(op)) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        if self.aclient is None:
            return await asyncio.to_thread(self.batch, list(ops))
        return [await self.fail_open.arun(self.aclient, _steps(op), _nothing(op), read=_reads(op)) for op in ops]


def _reads(op: Op) -> bool:
    return not isinstance(op, PutOp)


def _nothing(op: Op) -> Result:
    """What an operation answers when Engram could not be asked: nothing found, or done."""
    return [] if isinstance(op, (SearchOp, ListNamespacesOp)) else None
