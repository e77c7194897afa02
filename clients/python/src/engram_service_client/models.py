"""The spec's objects as TypedDicts (what the clients' methods answer), written by hand and
checked against ``openapi/openapi.json`` by ``tests/test_spec.py``: a field the spec adds,
drops or makes optional fails that test, and so does a method whose answer is another
schema than the one its operation answers. A field the spec may leave out is ``NotRequired``."""


from dataclasses import dataclass
from typing import Any, Generic, Literal, NotRequired, TypedDict, TypeVar

Role = Literal["system", "user", "assistant", "tool"]
T = TypeVar("T")


class Page(TypedDict, Generic[T]):
    """One page of a list; ``next_cursor`` (absent or None on the last page) asks for the next."""

    items: list[T]
    next_cursor: NotRequired[str | None]


class Conversation(TypedDict):
    id: str
    agent_id: str
    external_ref: str
    key: NotRequired[str | None]
    title: NotRequired[str | None]
    metadata: dict[str, Any]
    memory: bool
    status: Literal["open", "ended"]
    message_count: int
    user_turns: int
    extracted_through_seq: int
    created_at: str
    updated_at: str
    ended_at: NotRequired[str | None]


class ToolCall(TypedDict):
    id: str
    name: str
    arguments: dict[str, Any]


class Message(TypedDict):
    id: str
    conversation_id: str
    seq: int
    role: Role
    content: str | list[dict[str, Any]]
    name: NotRequired[str | None]
    tool_calls: NotRequired[list[ToolCall] | None]
    tool_call_id: NotRequired[str | None]
    metadata: NotRequired[dict[str, Any] | None]
    created_at: str


class SourceMessage(TypedDict):
    """A message a fact was drawn from: its conversation and its ``seq`` there."""

    conversation_id: str
    seq: int


class Fact(TypedDict):
    id: str
    agent_id: str
    external_ref: str
    fact: str
    tags: list[str]
    score: NotRequired[float | None]
    source: Literal["extracted", "manual", "agent", "builtin_fallback"]
    conversation_id: NotRequired[str | None]
    source_messages: list[SourceMessage]
    superseded_at: NotRequired[str | None]
    superseded_by: NotRequired[str | None]
    observed_at: str
    valid_until: NotRequired[str | None]
    expires_at: NotRequired[str | None]
    recall_count: int
    last_recalled_at: NotRequired[str | None]
    created_at: str
    updated_at: str


class ScoredFact(Fact):
    """A fact found by a search, with how well it answers the query (in [0, 1])."""

    relevance: float


class SearchResults(TypedDict):
    items: list[ScoredFact]


class WorkingMemory(TypedDict):
    """A working memory document: ``content``, its version ``etag`` (unquoted) and ``updated_at``."""

    content: str
    etag: str
    updated_at: str


class AgentWorkingMemory(WorkingMemory):
    agent_id: str


@dataclass(frozen=True)
class NotModified:
    """What a working memory read with ``if_none_match`` answers while the stored version is
    the one named (the server's 304, no body). Not a model of the spec."""

    etag: str


class MemoryContext(TypedDict):
    enabled: bool
    facts: list[Fact]
    prompt: str
    working_memory: NotRequired[WorkingMemory | None]


class ThreadContext(TypedDict):
    messages: list[Message]
    prompt: str
    summary: NotRequired[str | None]
    summary_through_seq: int


class Consent(TypedDict):
    external_ref: str
    ai_consent: bool
    updated_at: NotRequired[str | None]


class AgentConfig(TypedDict):
    agent_id: str
    memory_enabled: bool
    min_user_turns: int
    max_injected_facts: int
    min_confidence: float
    extraction_instructions: NotRequired[str | None]
    extract_every_user_turns: NotRequired[int | None]
    summarize_after_messages: int | None
    summary_window: int
    forget_extracted_after_days: int
    forget_unrecalled_after_days: int
    keep_best_facts: int
    forget_curated_facts: bool
    max_messages_per_conversation: int
    delete_conversations_after_days: int
    delete_facts_with_conversation: bool
    reads_facts_of: list[str]
    created_at: str
    updated_at: str


class Job(TypedDict):
    id: str
    kind: str
    status: str
    attempts: int
    agent_id: str
    external_ref: str
    conversation_id: str
    from_seq: int
    through_seq: int
    facts_added: NotRequired[int | None]
    input_tokens: int
    output_tokens: int
    over_budget: NotRequired[Literal["waited", "builtin"] | None]
    last_error: NotRequired[str | None]
    run_at: str
    created_at: str
    updated_at: str


class AgentUsage(TypedDict):
    agent_id: str
    input_tokens: int
    output_tokens: int
    jobs: int
    over_budget_jobs: int


class Budget(TypedDict):
    daily_tokens: NotRequired[int | None]
    spent_today: int
    over_budget: Literal["waited", "builtin"]


class TokenUsage(TypedDict):
    days: int
    since: str
    agents: list[AgentUsage]
    budget: Budget


class Appended(TypedDict):
    conversation: Conversation
    messages: list[Message]


class Cleared(TypedDict):
    deleted: int


class Deleted(TypedDict):
    deleted: int


class Extraction(TypedDict):
    queued: bool
    job_id: NotRequired[str | None]
    reason: NotRequired[str | None]


class Ended(TypedDict):
    conversation: Conversation
    extraction: Extraction


class Problem(TypedDict):
    index: int
    code: str
    seq: NotRequired[int | None]
    tool_call_id: NotRequired[str | None]


class Validation(TypedDict):
    valid: bool
    problems: list[Problem]


class ActorView(TypedDict):
    kind: str
    job_id: NotRequired[str | None]


class FactVersion(TypedDict):
    version: int
    change: str
    actor: ActorView
    fact: Fact
    created_at: str


class History(TypedDict):
    items: list[FactVersion]


class Event(TypedDict):
    id: int
    type: str
    actor: ActorView
    agent_id: NotRequired[str | None]
    external_ref: NotRequired[str | None]
    data: Any
    created_at: str


class EventPage(TypedDict):
    """Events after the cursor; ``next_cursor`` is the ``after`` of the next read."""

    items: list[Event]
    next_cursor: int


class LineError(TypedDict):
    code: str
    message: str


class LineReport(LineError):
    line: int


class Progress(TypedDict):
    lines_read: int
    added: int
    duplicates: int
    failed: int
    queued_for_extraction: int
    errors: list[LineReport]


class ImportJob(Progress):
    id: str
    status: str
    created_at: str
    updated_at: str
    finished_at: NotRequired[str | None]


class ErasedCounts(TypedDict):
    conversations: int
    messages: int
    facts: int
    jobs: int
    events: NotRequired[int]
    working_memories: NotRequired[int]


class Erasure(TypedDict):
    external_ref: str
    deleted: ErasedCounts
    receipt_id: str
    completed_at: str
    # None while the database's files may still hold the erased rows' old versions.
    purged_at: NotRequired[str | None]


class Receipt(TypedDict):
    receipt_id: str
    subject_hash: str
    deleted: ErasedCounts
    completed_at: str
    purged_at: NotRequired[str | None]


class ExportedConversation(Conversation):
    messages: list[Message]
    summary: NotRequired[str | None]
    summary_through_seq: int
    working_memory: NotRequired[WorkingMemory | None]


class ExportedVersion(FactVersion):
    fact_id: str


class ExportedDelivery(TypedDict):
    subscription_id: str
    event_id: int
    status: str
    attempts: int
    delivered_at: NotRequired[str | None]
    last_error: NotRequired[str | None]


class ImportedId(TypedDict):
    kind: str
    client_id: str
    record_id: NotRequired[str | None]
    created_at: str


class Export(TypedDict):
    """Everything Engram holds about one person (the GDPR export)."""

    external_ref: str
    consent: Consent
    conversations: list[ExportedConversation]
    facts: list[Fact]
    fact_versions: list[ExportedVersion]
    events: list[Event]
    imported_ids: list[ImportedId]
    webhook_deliveries: list[ExportedDelivery]
    working_memories: list[AgentWorkingMemory]


class ToolDefinitions(TypedDict):
    """The memory tools in a model vendor's format (OpenAI's or Anthropic's)."""

    tools: list[dict[str, Any]]


class Subscription(TypedDict):
    id: str
    url: str
    event_types: list[str]
    enabled: bool
    disabled_reason: NotRequired[str | None]
    failing_since: NotRequired[str | None]
    created_at: str
    updated_at: str


class WithSecret(Subscription):
    """A subscription as created or re-keyed: its ``secret`` is shown only then."""

    secret: str


class Subscriptions(TypedDict):
    items: list[Subscription]


class Delivery(TypedDict):
    event_id: int
    event_type: str
    status: str
    attempts: int
    created_at: str
    delivered_at: NotRequired[str | None]
    last_error: NotRequired[str | None]
    next_attempt_at: NotRequired[str | None]


class Attempt(TypedDict):
    attempt: int
    attempted_at: str
    duration_ms: int
    status_code: NotRequired[int | None]
    error: NotRequired[str | None]


class DeliveryDetail(Delivery):
    attempt_log: list[Attempt]


class DeliveryPage(TypedDict):
    """Deliveries, newest first; ``next_before`` (absent or None at the end) asks for older ones."""

    items: list[Delivery]
    next_before: NotRequired[int | None]


class ErrorDetail(TypedDict):
    code: str
    message: str
    request_id: str
    last_seq: NotRequired[int]


# Every schema above, by its name in the spec (the spec's pages are ``Page_<Item>``).
SCHEMAS: dict[str, type] = {
    "Conversation": Conversation,
    "ToolCall": ToolCall,
    "Message": Message,
    "SourceMessage": SourceMessage,
    "Fact": Fact,
    "ScoredFact": ScoredFact,
    "SearchResults": SearchResults,
    "WorkingMemory": WorkingMemory,
    "AgentWorkingMemory": AgentWorkingMemory,
    "MemoryContext": MemoryContext,
    "ThreadContext": ThreadContext,
    "Consent": Consent,
    "AgentConfig": AgentConfig,
    "Job": Job,
    "TokenUsage": TokenUsage,
    "AgentUsage": AgentUsage,
    "Budget": Budget,
    "Appended": Appended,
    "Cleared": Cleared,
    "Deleted": Deleted,
    "Extraction": Extraction,
    "Ended": Ended,
    "Problem": Problem,
    "Validation": Validation,
    "ActorView": ActorView,
    "FactVersion": FactVersion,
    "History": History,
    "Event": Event,
    "EventPage": EventPage,
    "LineError": LineError,
    "LineReport": LineReport,
    "Progress": Progress,
    "ImportJob": ImportJob,
    "ErasedCounts": ErasedCounts,
    "Erasure": Erasure,
    "Receipt": Receipt,
    "ExportedConversation": ExportedConversation,
    "ExportedVersion": ExportedVersion,
    "ExportedDelivery": ExportedDelivery,
    "ImportedId": ImportedId,
    "Export": Export,
    "ToolDefinitions": ToolDefinitions,
    "Subscription": Subscription,
    "WithSecret": WithSecret,
    "Subscriptions": Subscriptions,
    "Delivery": Delivery,
    "Attempt": Attempt,
    "DeliveryDetail": DeliveryDetail,
    "DeliveryPage": DeliveryPage,
    "ErrorDetail": ErrorDetail,
}
