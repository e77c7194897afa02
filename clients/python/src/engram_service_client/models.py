"""The spec's main objects as TypedDicts (what the clients' methods answer), written by hand
and checked against ``openapi/openapi.json`` by ``tests/test_spec.py``: a field the spec
adds or drops fails that test."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict

Role = Literal["system", "user", "assistant", "tool"]


class Conversation(TypedDict, total=False):
    id: str
    agent_id: str
    external_ref: str
    key: str | None
    title: str | None
    metadata: dict[str, Any]
    memory: bool
    status: Literal["open", "ended"]
    message_count: int
    user_turns: int
    extracted_through_seq: int
    created_at: str
    updated_at: str
    ended_at: str | None


class Message(TypedDict, total=False):
    id: str
    conversation_id: str
    seq: int
    role: Role
    content: str | list[dict[str, Any]]
    name: str | None
    tool_calls: list[dict[str, Any]] | None
    tool_call_id: str | None
    metadata: dict[str, Any] | None
    created_at: str


class Fact(TypedDict, total=False):
    id: str
    agent_id: str
    external_ref: str
    fact: str
    tags: list[str]
    score: float | None
    source: Literal["extracted", "manual", "agent", "builtin_fallback"]
    conversation_id: str | None
    superseded_at: str | None
    superseded_by: str | None
    observed_at: str
    valid_until: str | None
    expires_at: str | None
    recall_count: int
    last_recalled_at: str | None
    created_at: str
    updated_at: str


class WorkingMemory(TypedDict):
    """A working memory document: ``content``, its version ``etag`` (unquoted) and ``updated_at``."""

    content: str
    etag: str
    updated_at: str


@dataclass(frozen=True)
class NotModified:
    """What a working memory read with ``if_none_match`` answers while the stored version is
    the one named (the server's 304, no body). Not a model of the spec."""

    etag: str


class _MemoryContext(TypedDict):
    enabled: bool
    facts: list[Fact]
    prompt: str


class MemoryContext(_MemoryContext, total=False):
    working_memory: WorkingMemory | None


class Consent(TypedDict, total=False):
    external_ref: str
    ai_consent: bool
    updated_at: str | None


class AgentConfig(TypedDict, total=False):
    agent_id: str
    memory_enabled: bool
    min_user_turns: int
    max_injected_facts: int
    min_confidence: float
    extraction_instructions: str | None
    extract_every_user_turns: int | None
    summarize_after_messages: int | None
    summary_window: int
    forget_extracted_after_days: int
    forget_unrecalled_after_days: int
    keep_best_facts: int
    forget_curated_facts: bool
    max_messages_per_conversation: int
    delete_conversations_after_days: int
    created_at: str
    updated_at: str


class Job(TypedDict, total=False):
    id: str
    kind: str
    status: str
    attempts: int
    agent_id: str
    external_ref: str
    conversation_id: str
    from_seq: int
    through_seq: int
    facts_added: int | None
    last_error: str | None
    run_at: str
    created_at: str
    updated_at: str


class Erasure(TypedDict):
    external_ref: str
    deleted: dict[str, int]
    receipt_id: str
    completed_at: str
    # None while the database's files may still hold the erased rows' old versions.
    purged_at: NotRequired[str | None]


class ErrorDetail(TypedDict, total=False):
    code: str
    message: str
    request_id: str
    last_seq: int


SCHEMAS: dict[str, type] = {
    "Conversation": Conversation,
    "Message": Message,
    "Fact": Fact,
    "MemoryContext": MemoryContext,
    "WorkingMemory": WorkingMemory,
    "Consent": Consent,
    "AgentConfig": AgentConfig,
    "Job": Job,
    "Erasure": Erasure,
    "ErrorDetail": ErrorDetail,
}
