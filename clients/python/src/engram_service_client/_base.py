"""What the sync and async clients share: one method per operation of the spec, each
describing its request; the retry rules; the transport settings."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote

from .errors import EngramError
from .models import NotModified

IDEMPOTENT = frozenset({"GET", "PUT", "DELETE"})


@dataclass
class Call:
    method: str
    path: str
    query: dict[str, Any] | None = None
    body: Any = None
    # A body sent as it is, not as JSON (NDJSON for an import); its content type goes in headers.
    content: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    # Statuses besides 2xx that are answers, not errors (a read's 304, a 404 meaning "none
    # yet"), and what makes the answer of (status, headers, body) when they are set.
    answers: frozenset[int] = frozenset()
    shape: Callable[[int, Mapping[str, str], Any], Any] | None = None

    def params(self) -> dict[str, Any]:
        return {k: _query_value(v) for k, v in (self.query or {}).items() if v is not None}

    @property
    def replayable(self) -> bool:
        return self.method in IDEMPOTENT or "Idempotency-Key" in self.headers


def _query_value(value: Any) -> Any:
    return ("true" if value else "false") if isinstance(value, bool) else value


@dataclass
class Settings:
    """How patient to be: ``max_retries`` after a 429, a 503, a timeout or a network failure;
    a ``Retry-After`` over ``max_retry_delay`` seconds is not waited for (the error is raised);
    ``deadline`` bounds a call in all, its retries and their waits included."""

    timeout: float = 30.0
    max_retries: int = 2
    max_retry_delay: float = 30.0
    deadline: float = 60.0


def retry_delay(
    error: EngramError,
    call: Call,
    attempt: int,
    settings: Settings,
    draw: Callable[[], float] = random.random,
) -> float | None:
    """Seconds to wait before retrying ``call`` after ``error``, or None to raise it. A 429 is
    always retried (the server refused it before doing anything); a 503, a timeout or a
    network failure only when repeating cannot do the work twice (GET, PUT, DELETE, or an
    ``Idempotency-Key``). The wait is never shorter than ``Retry-After``, plus full jitter over
    the larger of it and 0.25 s · 2^attempt, so clients refused together do not return together."""
    retryable = error.status == 429 or (error.status in (0, 503) and call.replayable)
    if not retryable or attempt >= settings.max_retries:
        return None
    floor = error.retry_after or 0.0
    if floor > settings.max_retry_delay:
        return None
    return min(settings.max_retry_delay, floor + draw() * max(floor, 0.25 * 2.0**attempt))


class _Unset:
    """A body field the caller did not give: left out of the request (None sends null)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


def _given(arguments: dict[str, Any], exclude: Sequence[str]) -> dict[str, Any]:
    """The body of a method's keyword arguments (its ``locals()``): those given, by name."""
    return {k: v for k, v in arguments.items() if k not in exclude and v is not UNSET}


def _seg(value: str) -> str:
    return quote(value, safe="")


def _user(agent_id: str, external_ref: str, rest: str) -> str:
    return f"/api/agents/{_seg(agent_id)}/users/{_seg(external_ref)}{rest}"


def _tag(tag: str) -> str:
    """An entity tag as a header wants it: quoted, unless it is ``*`` or already quoted."""
    tag = tag.strip()
    return tag if tag == "*" or tag.startswith(('"', 'W/"')) else f'"{tag}"'


def _conditions(if_match: str | Sequence[str] | None = None, if_none_match: str | None = None) -> dict[str, str]:
    headers = {}
    if if_match is not None:
        headers["If-Match"] = ", ".join(_tag(t) for t in ([if_match] if isinstance(if_match, str) else if_match))
    if if_none_match is not None:
        headers["If-None-Match"] = _tag(if_none_match)
    return headers


def _document(status: int, headers: Mapping[str, str], body: Any) -> Any:
    """A working memory read's answer: the document, None (404), or :class:`NotModified` (304)."""
    if status == 404:
        return None
    if status == 304:
        etag = headers.get("etag", "")
        return NotModified(etag.removeprefix("W/").strip('"'))
    return body


def _read_document(path: str, if_none_match: str | None) -> Call:
    return Call("GET", path, headers=_conditions(if_none_match=if_none_match), answers=frozenset({304, 404}), shape=_document)


class Operations:
    """One method per operation of ``openapi/openapi.json``, named by its ``operationId``.
    Each returns ``self._send(call)``: the answer (sync client) or an awaitable of it (async)."""

    def _send(self, call: Call) -> Any:  # pragma: no cover - each client defines it
        raise NotImplementedError

    def _get(self, path: str, **query: Any) -> Any:
        return self._send(Call("GET", path, query))

    # Every method's parameters are declared, so that a misspelt one is a type error (and a
    # TypeError) rather than a silently ignored query parameter. Optional body fields
    # default to UNSET (not sent); None sends null, which clears a field where the API allows.

    # Operations and health
    def healthz(self) -> Any:
        return self._get("/healthz")

    def readyz(self) -> Any:
        return self._get("/readyz")

    def metrics(self) -> Any:
        return self._get("/metrics")

    # Agent configuration
    def list_configs(self, *, limit: int | None = None, cursor: str | None = None) -> Any:
        return self._get("/api/agents-config", limit=limit, cursor=cursor)

    def get_config(self, agent_id: str) -> Any:
        return self._get(f"/api/agents-config/{_seg(agent_id)}")

    def put_config(
        self,
        agent_id: str,
        *,
        memory_enabled: bool | None = UNSET,
        min_user_turns: int | None = UNSET,
        max_injected_facts: int | None = UNSET,
        min_confidence: float | None = UNSET,
        extraction_instructions: str | None = UNSET,
        extract_every_user_turns: int | None = UNSET,
        summarize_after_messages: int | None = UNSET,
        summary_window: int | None = UNSET,
        max_messages_per_conversation: int | None = UNSET,
        delete_conversations_after_days: int | None = UNSET,
        forget_extracted_after_days: int | None = UNSET,
        forget_unrecalled_after_days: int | None = UNSET,
        keep_best_facts: int | None = UNSET,
        forget_curated_facts: bool | None = UNSET,
    ) -> Any:
        body = _given(locals(), exclude=("self", "agent_id"))
        return self._send(Call("PUT", f"/api/agents-config/{_seg(agent_id)}", body=body))

    def delete_config(self, agent_id: str) -> Any:
        return self._send(Call("DELETE", f"/api/agents-config/{_seg(agent_id)}"))

    # Consent
    def get_consent(self, external_ref: str) -> Any:
        return self._get(f"/api/users/{_seg(external_ref)}/consent")

    def put_consent(self, external_ref: str, ai_consent: bool) -> Any:
        return self._send(Call("PUT", f"/api/users/{_seg(external_ref)}/consent", body={"ai_consent": ai_consent}))

    # Conversations
    def list_conversations(
        self,
        *,
        agent_id: str | None = None,
        external_ref: str | None = None,
        status: Literal["open", "ended"] | None = None,
        key: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Any:
        query = {"agent_id": agent_id, "external_ref": external_ref, "status": status, "key": key}
        return self._get("/api/conversations", **query, limit=limit, cursor=cursor)

    def create_conversation(
        self,
        agent_id: str,
        external_ref: str,
        *,
        key: str | None = UNSET,
        title: str | None = UNSET,
        metadata: dict[str, Any] | None = UNSET,
        memory: bool | None = UNSET,
    ) -> Any:
        body = _given(locals(), exclude=("self",))
        return self._send(Call("POST", "/api/conversations", body=body))

    def get_conversation(self, id: str) -> Any:
        return self._get(f"/api/conversations/{_seg(id)}")

    def update_conversation(
        self,
        id: str,
        *,
        title: str | None = UNSET,
        metadata: dict[str, Any] | None = UNSET,
        memory: bool | None = UNSET,
    ) -> Any:
        body = _given(locals(), exclude=("self", "id"))
        return self._send(Call("PATCH", f"/api/conversations/{_seg(id)}", body=body))

    def delete_conversation(self, id: str) -> Any:
        return self._send(Call("DELETE", f"/api/conversations/{_seg(id)}"))

    def end_conversation(self, id: str) -> Any:
        return self._send(Call("POST", f"/api/conversations/{_seg(id)}/end"))

    def get_context(self, id: str, *, window: int | None = None, sanitize: bool | None = None) -> Any:
        return self._get(f"/api/conversations/{_seg(id)}/context", window=window, sanitize=sanitize)

    def validate_history(self, id: str, *, messages: list[dict[str, Any]]) -> Any:
        return self._send(Call("POST", f"/api/conversations/{_seg(id)}/validate", body={"messages": messages}))

    # Messages
    def list_messages(
        self,
        id: str,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        last: int | None = None,
        sanitize: bool | None = None,
        roles: str | None = None,
        after_seq: int | None = None,
    ) -> Any:
        query = {"last": last, "sanitize": sanitize, "roles": roles, "after_seq": after_seq}
        return self._get(f"/api/conversations/{_seg(id)}/messages", **query, limit=limit, cursor=cursor)

    def append_messages(
        self,
        id: str,
        messages: list[dict[str, Any]],
        *,
        idempotency_key: str | None | bool = True,
        expected_last_seq: int | None = None,
    ) -> Any:
        """Appends ``messages``. By default with a fresh ``Idempotency-Key`` that its retries
        reuse, so a retried append is stored once; pass your own key, or ``False`` for none."""
        body: dict[str, Any] = {"messages": messages}
        if expected_last_seq is not None:
            body["expected_last_seq"] = expected_last_seq
        key = str(uuid.uuid4()) if idempotency_key is True else idempotency_key
        headers = {"Idempotency-Key": key} if isinstance(key, str) else {}
        return self._send(Call("POST", f"/api/conversations/{_seg(id)}/messages", body=body, headers=headers))

    def clear_messages(self, id: str) -> Any:
        return self._send(Call("DELETE", f"/api/conversations/{_seg(id)}/messages"))

    # Facts and memory context
    def list_facts(
        self,
        agent_id: str,
        external_ref: str,
        *,
        tag: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        include_superseded: bool | None = None,
        as_of: str | None = None,
    ) -> Any:
        query = {"tag": tag, "include_superseded": include_superseded, "as_of": as_of}
        return self._get(_user(agent_id, external_ref, "/facts"), **query, limit=limit, cursor=cursor)

    def remember_fact(
        self,
        agent_id: str,
        external_ref: str,
        fact: str,
        *,
        tags: list[str] | None = UNSET,
        score: float | None = UNSET,
        observed_at: str | None = UNSET,
        expires_at: str | None = UNSET,
        ttl_seconds: int | None = UNSET,
    ) -> Any:
        body = _given(locals(), exclude=("self", "agent_id", "external_ref"))
        return self._send(Call("POST", _user(agent_id, external_ref, "/facts"), body=body))

    def search_facts(
        self,
        agent_id: str,
        external_ref: str,
        q: str,
        *,
        limit: int | None = None,
        tag: str | None = None,
        include_superseded: bool | None = None,
        as_of: str | None = None,
    ) -> Any:
        query = {"q": q, "limit": limit, "tag": tag, "include_superseded": include_superseded, "as_of": as_of}
        return self._get(_user(agent_id, external_ref, "/facts/search"), **query)

    def update_fact(
        self,
        agent_id: str,
        external_ref: str,
        fact_id: str,
        *,
        fact: str = UNSET,
        tags: list[str] = UNSET,
        score: float | None = UNSET,
    ) -> Any:
        body = _given(locals(), exclude=("self", "agent_id", "external_ref", "fact_id"))
        return self._send(Call("PATCH", _user(agent_id, external_ref, f"/facts/{_seg(fact_id)}"), body=body))

    def delete_fact(self, agent_id: str, external_ref: str, fact_id: str) -> Any:
        return self._send(Call("DELETE", _user(agent_id, external_ref, f"/facts/{_seg(fact_id)}")))

    def delete_facts(self, agent_id: str, external_ref: str) -> Any:
        return self._send(Call("DELETE", _user(agent_id, external_ref, "/facts")))

    def memory_context(
        self,
        agent_id: str,
        external_ref: str,
        *,
        query: str | None = None,
        max_facts: int | None = None,
        token_budget: int | None = None,
        working_memory: bool | None = None,
        as_of: str | None = None,
    ) -> Any:
        """Memory context; ``working_memory=True`` adds the user's working memory document."""
        params = {"query": query, "max_facts": max_facts, "token_budget": token_budget, "as_of": as_of}
        return self._get(_user(agent_id, external_ref, "/memory-context"), **params, working_memory=working_memory)

    # Working memory: the agent's own document about a user, and one per conversation.
    # Reads answer the document, None before the first write, or NotModified when
    # ``if_none_match`` names the stored version. Writes and deletes take ``if_match`` (the
    # ``etag`` you read, quoted for you; or ``*``): a document changed since raises
    # EngramError ``precondition_failed`` (412, not retried) and nothing changes.
    # ``if_none_match="*"`` on a write creates only.
    def get_user_document(self, agent_id: str, external_ref: str, *, if_none_match: str | None = None) -> Any:
        return self._send(_read_document(_user(agent_id, external_ref, "/working-memory"), if_none_match))

    def put_user_document(
        self,
        agent_id: str,
        external_ref: str,
        content: str,
        *,
        if_match: str | Sequence[str] | None = None,
        if_none_match: str | None = None,
    ) -> Any:
        path = _user(agent_id, external_ref, "/working-memory")
        return self._send(Call("PUT", path, body={"content": content}, headers=_conditions(if_match, if_none_match)))

    def delete_user_document(self, agent_id: str, external_ref: str, *, if_match: str | Sequence[str] | None = None) -> Any:
        return self._send(Call("DELETE", _user(agent_id, external_ref, "/working-memory"), headers=_conditions(if_match)))

    def get_conversation_document(self, id: str, *, if_none_match: str | None = None) -> Any:
        """None also when there is no such conversation: the server answers both with ``not_found``."""
        return self._send(_read_document(f"/api/conversations/{_seg(id)}/working-memory", if_none_match))

    def put_conversation_document(
        self,
        id: str,
        content: str,
        *,
        if_match: str | Sequence[str] | None = None,
        if_none_match: str | None = None,
    ) -> Any:
        path = f"/api/conversations/{_seg(id)}/working-memory"
        return self._send(Call("PUT", path, body={"content": content}, headers=_conditions(if_match, if_none_match)))

    def delete_conversation_document(self, id: str, *, if_match: str | Sequence[str] | None = None) -> Any:
        path = f"/api/conversations/{_seg(id)}/working-memory"
        return self._send(Call("DELETE", path, headers=_conditions(if_match)))

    # Jobs
    def list_jobs(
        self,
        *,
        status: str | None = None,
        conversation_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Any:
        return self._get("/api/jobs", status=status, conversation_id=conversation_id, limit=limit, cursor=cursor)

    def get_job(self, id: str) -> Any:
        return self._get(f"/api/jobs/{_seg(id)}")

    def retry_job(self, id: str) -> Any:
        return self._send(Call("POST", f"/api/jobs/{_seg(id)}/retry"))

    # Import (NDJSON, one record a line: the format of `engram export`)
    def import_records(self, ndjson: str) -> Any:
        """Imports the records; the finished import with its counts and bad-line reports."""
        return self._send(Call("POST", "/api/import", content=ndjson, headers={"content-type": "application/x-ndjson"}))

    def list_imports(self) -> Any:
        return self._get("/api/import")

    def get_import(self, id: str) -> Any:
        return self._get(f"/api/import/{_seg(id)}")

    def list_import_errors(self, id: str, *, limit: int | None = None, cursor: str | None = None) -> Any:
        """An import's bad-line reports, every one of them, a page at a time."""
        return self._get(f"/api/import/{_seg(id)}/errors", limit=limit, cursor=cursor)

    # Events, fact history and webhooks
    def list_events(
        self,
        *,
        after: int | None = None,
        types: str | None = None,
        limit: int | None = None,
        wait: int | None = None,
        agent_id: str | None = None,
        external_ref: str | None = None,
    ) -> Any:
        """The tenant's change feed (`after`, `types`, `wait` to long-poll, ...)."""
        query = {"after": after, "types": types, "limit": limit, "wait": wait}
        return self._get("/api/events", **query, agent_id=agent_id, external_ref=external_ref)

    def list_person_events(
        self,
        agent_id: str,
        external_ref: str,
        *,
        after: int | None = None,
        types: str | None = None,
        limit: int | None = None,
        wait: int | None = None,
    ) -> Any:
        """One person's events (what a user-bound token may read)."""
        query = {"after": after, "types": types, "limit": limit, "wait": wait}
        return self._get(_user(agent_id, external_ref, "/events"), **query)

    def fact_history(self, agent_id: str, external_ref: str, fact_id: str) -> Any:
        """Every version of a fact, oldest first, with who changed it."""
        return self._get(_user(agent_id, external_ref, f"/facts/{_seg(fact_id)}/history"))

    def list_subscriptions(self) -> Any:
        return self._get("/api/webhooks")

    def create_subscription(
        self, url: str, *, event_types: list[str] = UNSET, enabled: bool | None = UNSET
    ) -> Any:
        """Subscribes a receiver; the answer's `secret` is shown only here."""
        return self._send(Call("POST", "/api/webhooks", body=_given(locals(), exclude=("self",))))

    def get_subscription(self, id: str) -> Any:
        return self._get(f"/api/webhooks/{_seg(id)}")

    def update_subscription(
        self,
        id: str,
        *,
        url: str | None = UNSET,
        event_types: list[str] | None = UNSET,
        enabled: bool | None = UNSET,
    ) -> Any:
        body = _given(locals(), exclude=("self", "id"))
        return self._send(Call("PATCH", f"/api/webhooks/{_seg(id)}", body=body))

    def delete_subscription(self, id: str) -> Any:
        return self._send(Call("DELETE", f"/api/webhooks/{_seg(id)}"))

    def rotate_secret(self, id: str) -> Any:
        return self._send(Call("POST", f"/api/webhooks/{_seg(id)}/rotate-secret"))

    def list_deliveries(
        self, id: str, *, status: str | None = None, before: int | None = None, limit: int | None = None
    ) -> Any:
        return self._get(f"/api/webhooks/{_seg(id)}/deliveries", status=status, before=before, limit=limit)

    def get_delivery(self, id: str, event_id: int) -> Any:
        return self._get(f"/api/webhooks/{_seg(id)}/deliveries/{int(event_id)}")

    def redeliver(self, id: str, event_id: int) -> Any:
        return self._send(Call("POST", f"/api/webhooks/{_seg(id)}/deliveries/{int(event_id)}/retry"))

    # GDPR
    def export_user(self, external_ref: str) -> Any:
        return self._get(f"/api/rgpd/users/{_seg(external_ref)}/ai-data")

    def erase_user(self, external_ref: str) -> Any:
        return self._send(Call("DELETE", f"/api/rgpd/users/{_seg(external_ref)}/ai-data"))

    def get_receipt(self, receipt_id: str) -> Any:
        return self._get(f"/api/rgpd/receipts/{_seg(receipt_id)}")

    # Tools
    def list_tools(self, format: str) -> Any:
        return self._get("/api/tools", format=format)

    def call_tool(self, **invocation: Any) -> Any:
        return self._send(Call("POST", "/api/tools/call", body=invocation))
