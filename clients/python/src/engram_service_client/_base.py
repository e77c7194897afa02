"""What the sync and async clients share: one method per operation of the spec, each
describing its request; the retry rules; the transport settings."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Concatenate, Generic, Literal, ParamSpec, TypeVar, overload
from urllib.parse import quote

from .errors import EngramError
from .models import (
    AgentConfig,
    Appended,
    Cleared,
    Consent,
    Conversation,
    Deleted,
    Delivery,
    DeliveryDetail,
    DeliveryPage,
    Ended,
    Erasure,
    EventPage,
    Export,
    Fact,
    History,
    ImportJob,
    Job,
    LineReport,
    MemoryContext,
    Message,
    NotModified,
    Page,
    Receipt,
    SearchResults,
    Subscription,
    Subscriptions,
    ThreadContext,
    TokenUsage,
    ToolDefinitions,
    Validation,
    WithSecret,
    WorkingMemory,
)

T = TypeVar("T")
P = ParamSpec("P")

IDEMPOTENT = frozenset({"GET", "PUT", "DELETE"})


@dataclass
class Call(Generic[T]):
    """One request, and (as ``T``) the type of its answer."""

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
    # Seconds this call may take in all, retries included, when shorter than the client's
    # deadline (an adapter's memory read, which must not hold up the model).
    deadline: float | None = None

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
    call: Call[Any],
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


def _read_document(path: str, if_none_match: str | None) -> Call[Any]:
    return Call("GET", path, headers=_conditions(if_none_match=if_none_match), answers=frozenset({304, 404}), shape=_document)


def _get(path: str, **query: Any) -> Call[Any]:
    return Call("GET", path, query)


class SyncSender:
    """A client that answers a call when it is made (:class:`Engram`)."""

    def _send(self, call: Call[T]) -> T:  # pragma: no cover - the client defines it
        raise NotImplementedError


class AsyncSender:
    """A client whose answers are awaited (:class:`AsyncEngram`)."""

    async def _send(self, call: Call[T]) -> T:  # pragma: no cover - the client defines it
        raise NotImplementedError


class CallBuilder:
    """No client: each method returns the call it would send (what the adapters yield)."""

    def _send(self, call: Call[T]) -> Call[T]:
        return call


class operation(Generic[P, T]):
    """One operation, written once as the function building its :class:`Call`, and typed
    for each client that inherits it: on :class:`Engram` it answers ``T``, on
    :class:`AsyncEngram` a coroutine of ``T`` (so a forgotten ``await`` is a type error), on
    the adapters' builder the ``Call[T]`` itself. The parameters stay the function's own,
    so a misspelt keyword is a type error too."""

    def __init__(self, build: Callable[Concatenate[Any, P], Call[T]]) -> None:
        self.build = build
        self.__doc__ = build.__doc__
        self.__name__ = build.__name__

    @overload
    def __get__(self, client: None, owner: type) -> Callable[Concatenate[Any, P], Call[T]]: ...
    @overload
    def __get__(self, client: SyncSender, owner: type) -> Callable[P, T]: ...
    @overload
    def __get__(self, client: AsyncSender, owner: type) -> Callable[P, Coroutine[Any, Any, T]]: ...
    @overload
    def __get__(self, client: CallBuilder, owner: type) -> Callable[P, Call[T]]: ...
    def __get__(self, client: Any, owner: type) -> Any:
        build = self.build
        if client is None:
            return build

        def send(*args: P.args, **kwargs: P.kwargs) -> Any:
            return client._send(build(client, *args, **kwargs))

        send.__name__, send.__doc__ = build.__name__, build.__doc__
        return send


class Operations:
    """One method per operation of ``openapi/openapi.json``, named by its ``operationId``,
    each describing its request (see :class:`operation`)."""

    # Every method's parameters are declared, so that a misspelt one is a type error (and a
    # TypeError) rather than a silently ignored query parameter. Optional body fields
    # default to UNSET (not sent); None sends null, which clears a field where the API allows.

    # Operations and health
    @operation
    def healthz(self) -> Call[dict[str, Any]]:
        return _get("/healthz")

    @operation
    def readyz(self) -> Call[dict[str, Any]]:
        return _get("/readyz")

    @operation
    def metrics(self) -> Call[str]:
        return _get("/metrics")

    # Agent configuration
    @operation
    def list_configs(self, *, limit: int | None = None, cursor: str | None = None) -> Call[Page[AgentConfig]]:
        return _get("/api/agents-config", limit=limit, cursor=cursor)

    @operation
    def get_config(self, agent_id: str) -> Call[AgentConfig]:
        return _get(f"/api/agents-config/{_seg(agent_id)}")

    @operation
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
        delete_facts_with_conversation: bool | None = UNSET,
        reads_facts_of: list[str] | None = UNSET,
    ) -> Call[AgentConfig]:
        body = _given(locals(), exclude=("self", "agent_id"))
        return Call("PUT", f"/api/agents-config/{_seg(agent_id)}", body=body)

    @operation
    def delete_config(self, agent_id: str) -> Call[None]:
        return Call("DELETE", f"/api/agents-config/{_seg(agent_id)}")

    # Consent
    @operation
    def get_consent(self, external_ref: str) -> Call[Consent]:
        return _get(f"/api/users/{_seg(external_ref)}/consent")

    @operation
    def put_consent(self, external_ref: str, ai_consent: bool) -> Call[Consent]:
        return Call("PUT", f"/api/users/{_seg(external_ref)}/consent", body={"ai_consent": ai_consent})

    # Conversations
    @operation
    def list_conversations(
        self,
        *,
        agent_id: str | None = None,
        external_ref: str | None = None,
        status: Literal["open", "ended"] | None = None,
        key: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Call[Page[Conversation]]:
        query = {"agent_id": agent_id, "external_ref": external_ref, "status": status, "key": key}
        return _get("/api/conversations", **query, limit=limit, cursor=cursor)

    @operation
    def create_conversation(
        self,
        agent_id: str,
        external_ref: str,
        *,
        key: str | None = UNSET,
        title: str | None = UNSET,
        metadata: dict[str, Any] | None = UNSET,
        memory: bool | None = UNSET,
    ) -> Call[Conversation]:
        body = _given(locals(), exclude=("self",))
        return Call("POST", "/api/conversations", body=body)

    @operation
    def get_conversation(self, id: str) -> Call[Conversation]:
        return _get(f"/api/conversations/{_seg(id)}")

    @operation
    def update_conversation(
        self,
        id: str,
        *,
        title: str | None = UNSET,
        metadata: dict[str, Any] | None = UNSET,
        memory: bool | None = UNSET,
    ) -> Call[Conversation]:
        body = _given(locals(), exclude=("self", "id"))
        return Call("PATCH", f"/api/conversations/{_seg(id)}", body=body)

    @operation
    def delete_conversation(self, id: str) -> Call[None]:
        return Call("DELETE", f"/api/conversations/{_seg(id)}")

    @operation
    def end_conversation(self, id: str) -> Call[Ended]:
        return Call("POST", f"/api/conversations/{_seg(id)}/end")

    @operation
    def get_context(self, id: str, *, window: int | None = None, sanitize: bool | None = None) -> Call[ThreadContext]:
        return _get(f"/api/conversations/{_seg(id)}/context", window=window, sanitize=sanitize)

    @operation
    def validate_history(self, id: str, *, messages: list[dict[str, Any]]) -> Call[Validation]:
        return Call("POST", f"/api/conversations/{_seg(id)}/validate", body={"messages": messages})

    # Messages
    @operation
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
    ) -> Call[Page[Message]]:
        query = {"last": last, "sanitize": sanitize, "roles": roles, "after_seq": after_seq}
        return _get(f"/api/conversations/{_seg(id)}/messages", **query, limit=limit, cursor=cursor)

    @operation
    def append_messages(
        self,
        id: str,
        messages: list[dict[str, Any]],
        *,
        idempotency_key: str | None | bool = True,
        expected_last_seq: int | None = None,
    ) -> Call[Appended]:
        """Appends ``messages``. By default with a fresh ``Idempotency-Key`` that its retries
        reuse, so a retried append is stored once; pass your own key, or ``False`` for none."""
        body: dict[str, Any] = {"messages": messages}
        if expected_last_seq is not None:
            body["expected_last_seq"] = expected_last_seq
        key = str(uuid.uuid4()) if idempotency_key is True else idempotency_key
        headers = {"Idempotency-Key": key} if isinstance(key, str) else {}
        return Call("POST", f"/api/conversations/{_seg(id)}/messages", body=body, headers=headers)

    @operation
    def clear_messages(self, id: str) -> Call[Cleared]:
        return Call("DELETE", f"/api/conversations/{_seg(id)}/messages")

    # Facts and memory context
    @operation
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
        source_conversation: str | None = None,
    ) -> Call[Page[Fact]]:
        query = {
            "tag": tag,
            "include_superseded": include_superseded,
            "as_of": as_of,
            "source_conversation": source_conversation,
        }
        return _get(_user(agent_id, external_ref, "/facts"), **query, limit=limit, cursor=cursor)

    @operation
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
    ) -> Call[Fact]:
        body = _given(locals(), exclude=("self", "agent_id", "external_ref"))
        return Call("POST", _user(agent_id, external_ref, "/facts"), body=body)

    @operation
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
    ) -> Call[SearchResults]:
        query = {"q": q, "limit": limit, "tag": tag, "include_superseded": include_superseded, "as_of": as_of}
        return _get(_user(agent_id, external_ref, "/facts/search"), **query)

    @operation
    def update_fact(
        self,
        agent_id: str,
        external_ref: str,
        fact_id: str,
        *,
        fact: str = UNSET,
        tags: list[str] = UNSET,
        score: float | None = UNSET,
    ) -> Call[Fact]:
        body = _given(locals(), exclude=("self", "agent_id", "external_ref", "fact_id"))
        return Call("PATCH", _user(agent_id, external_ref, f"/facts/{_seg(fact_id)}"), body=body)

    @operation
    def delete_fact(self, agent_id: str, external_ref: str, fact_id: str) -> Call[None]:
        return Call("DELETE", _user(agent_id, external_ref, f"/facts/{_seg(fact_id)}"))

    @operation
    def delete_facts(self, agent_id: str, external_ref: str) -> Call[Deleted]:
        return Call("DELETE", _user(agent_id, external_ref, "/facts"))

    @operation
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
    ) -> Call[MemoryContext]:
        """Memory context; ``working_memory=True`` adds the user's working memory document."""
        params = {"query": query, "max_facts": max_facts, "token_budget": token_budget, "as_of": as_of}
        return _get(_user(agent_id, external_ref, "/memory-context"), **params, working_memory=working_memory)

    # Working memory: the agent's own document about a user, and one per conversation.
    # Reads answer the document, None before the first write, or NotModified when
    # ``if_none_match`` names the stored version. Writes and deletes take ``if_match`` (the
    # ``etag`` you read, quoted for you; or ``*``): a document changed since raises
    # EngramError ``precondition_failed`` (412, not retried) and nothing changes.
    # ``if_none_match="*"`` on a write creates only.
    @operation
    def get_user_document(self, agent_id: str, external_ref: str, *, if_none_match: str | None = None) -> Call[WorkingMemory | NotModified | None]:
        return (_read_document(_user(agent_id, external_ref, "/working-memory"), if_none_match))

    @operation
    def put_user_document(
        self,
        agent_id: str,
        external_ref: str,
        content: str,
        *,
        if_match: str | Sequence[str] | None = None,
        if_none_match: str | None = None,
    ) -> Call[WorkingMemory]:
        path = _user(agent_id, external_ref, "/working-memory")
        return Call("PUT", path, body={"content": content}, headers=_conditions(if_match, if_none_match))

    @operation
    def delete_user_document(self, agent_id: str, external_ref: str, *, if_match: str | Sequence[str] | None = None) -> Call[None]:
        return Call("DELETE", _user(agent_id, external_ref, "/working-memory"), headers=_conditions(if_match))

    @operation
    def get_conversation_document(self, id: str, *, if_none_match: str | None = None) -> Call[WorkingMemory | NotModified | None]:
        """None also when there is no such conversation: the server answers both with ``not_found``."""
        return (_read_document(f"/api/conversations/{_seg(id)}/working-memory", if_none_match))

    @operation
    def put_conversation_document(
        self,
        id: str,
        content: str,
        *,
        if_match: str | Sequence[str] | None = None,
        if_none_match: str | None = None,
    ) -> Call[WorkingMemory]:
        path = f"/api/conversations/{_seg(id)}/working-memory"
        return Call("PUT", path, body={"content": content}, headers=_conditions(if_match, if_none_match))

    @operation
    def delete_conversation_document(self, id: str, *, if_match: str | Sequence[str] | None = None) -> Call[None]:
        path = f"/api/conversations/{_seg(id)}/working-memory"
        return Call("DELETE", path, headers=_conditions(if_match))

    # Jobs
    @operation
    def list_jobs(
        self,
        *,
        status: str | None = None,
        conversation_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Call[Page[Job]]:
        return _get("/api/jobs", status=status, conversation_id=conversation_id, limit=limit, cursor=cursor)

    @operation
    def get_job(self, id: str) -> Call[Job]:
        return _get(f"/api/jobs/{_seg(id)}")

    @operation
    def retry_job(self, id: str) -> Call[Job]:
        return Call("POST", f"/api/jobs/{_seg(id)}/retry")

    @operation
    def get_usage(self, *, days: int | None = None) -> Call[TokenUsage]:
        """Tokens per agent over the last ``days`` UTC days (default 7), and the daily budget."""
        return _get("/api/usage", days=days)

    # Import (NDJSON, one record a line: the format of `engram export`)
    @operation
    def import_records(self, ndjson: str) -> Call[ImportJob]:
        """Imports the records; the finished import with its counts and bad-line reports."""
        return Call("POST", "/api/import", content=ndjson, headers={"content-type": "application/x-ndjson"})

    @operation
    def list_imports(self) -> Call[list[ImportJob]]:
        return _get("/api/import")

    @operation
    def get_import(self, id: str) -> Call[ImportJob]:
        return _get(f"/api/import/{_seg(id)}")

    @operation
    def list_import_errors(self, id: str, *, limit: int | None = None, cursor: str | None = None) -> Call[Page[LineReport]]:
        """An import's bad-line reports, every one of them, a page at a time."""
        return _get(f"/api/import/{_seg(id)}/errors", limit=limit, cursor=cursor)

    # Events, fact history and webhooks
    @operation
    def list_events(
        self,
        *,
        after: int | None = None,
        types: str | None = None,
        limit: int | None = None,
        wait: int | None = None,
        agent_id: str | None = None,
        external_ref: str | None = None,
    ) -> Call[EventPage]:
        """The tenant's change feed (`after`, `types`, `wait` to long-poll, ...)."""
        query = {"after": after, "types": types, "limit": limit, "wait": wait}
        return _get("/api/events", **query, agent_id=agent_id, external_ref=external_ref)

    @operation
    def list_person_events(
        self,
        agent_id: str,
        external_ref: str,
        *,
        after: int | None = None,
        types: str | None = None,
        limit: int | None = None,
        wait: int | None = None,
    ) -> Call[EventPage]:
        """One person's events (what a user-bound token may read)."""
        query = {"after": after, "types": types, "limit": limit, "wait": wait}
        return _get(_user(agent_id, external_ref, "/events"), **query)

    @operation
    def fact_history(self, agent_id: str, external_ref: str, fact_id: str) -> Call[History]:
        """Every version of a fact, oldest first, with who changed it."""
        return _get(_user(agent_id, external_ref, f"/facts/{_seg(fact_id)}/history"))

    @operation
    def list_subscriptions(self) -> Call[Subscriptions]:
        return _get("/api/webhooks")

    @operation
    def create_subscription(
        self, url: str, *, event_types: list[str] = UNSET, enabled: bool | None = UNSET
    ) -> Call[WithSecret]:
        """Subscribes a receiver; the answer's `secret` is shown only here."""
        return Call("POST", "/api/webhooks", body=_given(locals(), exclude=("self",)))

    @operation
    def get_subscription(self, id: str) -> Call[Subscription]:
        return _get(f"/api/webhooks/{_seg(id)}")

    @operation
    def update_subscription(
        self,
        id: str,
        *,
        url: str | None = UNSET,
        event_types: list[str] | None = UNSET,
        enabled: bool | None = UNSET,
    ) -> Call[Subscription]:
        body = _given(locals(), exclude=("self", "id"))
        return Call("PATCH", f"/api/webhooks/{_seg(id)}", body=body)

    @operation
    def delete_subscription(self, id: str) -> Call[None]:
        return Call("DELETE", f"/api/webhooks/{_seg(id)}")

    @operation
    def rotate_secret(self, id: str) -> Call[WithSecret]:
        return Call("POST", f"/api/webhooks/{_seg(id)}/rotate-secret")

    @operation
    def list_deliveries(
        self, id: str, *, status: str | None = None, before: int | None = None, limit: int | None = None
    ) -> Call[DeliveryPage]:
        return _get(f"/api/webhooks/{_seg(id)}/deliveries", status=status, before=before, limit=limit)

    @operation
    def get_delivery(self, id: str, event_id: int) -> Call[DeliveryDetail]:
        return _get(f"/api/webhooks/{_seg(id)}/deliveries/{int(event_id)}")

    @operation
    def redeliver(self, id: str, event_id: int) -> Call[Delivery]:
        return Call("POST", f"/api/webhooks/{_seg(id)}/deliveries/{int(event_id)}/retry")

    # GDPR
    @operation
    def export_user(self, external_ref: str) -> Call[Export]:
        return _get(f"/api/rgpd/users/{_seg(external_ref)}/ai-data")

    @operation
    def erase_user(self, external_ref: str) -> Call[Erasure]:
        return Call("DELETE", f"/api/rgpd/users/{_seg(external_ref)}/ai-data")

    @operation
    def get_receipt(self, receipt_id: str) -> Call[Receipt]:
        return _get(f"/api/rgpd/receipts/{_seg(receipt_id)}")

    # Tools
    @operation
    def list_tools(self, format: str) -> Call[ToolDefinitions]:
        return _get("/api/tools", format=format)

    @operation
    def call_tool(self, /, **invocation: Any) -> Call[dict[str, Any]]:
        return Call("POST", "/api/tools/call", body=invocation)
