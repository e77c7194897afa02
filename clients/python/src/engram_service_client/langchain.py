"""Engram as a LangChain ``BaseChatMessageHistory``: the messages of one Engram conversation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ._sansio import FailOpen, FailOpenOptions, Steps, calls, every
from .client import AsyncEngram, Engram
from .errors import EngramError
from .models import Message

if TYPE_CHECKING:
    from typing_extensions import Unpack

ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


def to_engram(message: BaseMessage) -> dict[str, Any]:
    role = ROLES.get(message.type)
    if role is None:
        raise EngramError.unsupported(f"LangChain messages of type {message.type!r}")
    stored: dict[str, Any] = {"role": role, "content": message.content}
    if message.name:
        stored["name"] = message.name
    if isinstance(message, AIMessage) and message.tool_calls:
        stored["tool_calls"] = [{"id": c["id"], "name": c["name"], "arguments": c["args"]} for c in message.tool_calls]
    if isinstance(message, ToolMessage):
        stored["tool_call_id"] = message.tool_call_id
    return stored


def from_engram(stored: Message) -> BaseMessage:
    common: dict[str, Any] = {"content": stored["content"], "id": stored["id"]}
    if stored.get("name"):
        common["name"] = stored["name"]
    role = stored["role"]
    if role == "user":
        return HumanMessage(**common)
    if role == "system":
        return SystemMessage(**common)
    if role == "tool":
        return ToolMessage(tool_call_id=stored.get("tool_call_id") or "", **common)
    tool_calls = [{"id": c["id"], "name": c["name"], "args": c["arguments"]} for c in stored.get("tool_calls") or []]
    return AIMessage(tool_calls=tool_calls, **common)


def _resolve(agent_id: str, external_ref: str, key: str) -> Steps[str]:
    """The id of the agent's conversation called ``key``, created when there is none; a key
    naming another person's conversation is a ``conflict``."""
    found = (yield calls.list_conversations(agent_id=agent_id, key=key, limit=1))["items"]
    if not found:
        try:
            found = [(yield calls.create_conversation(agent_id, external_ref, key=key))]
        except EngramError as error:
            if error.status != 409:
                raise
            found = (yield calls.list_conversations(agent_id=agent_id, key=key, limit=1))["items"]
    if not found or found[0]["external_ref"] != external_ref:
        message = (
            "the key names another person's conversation of this agent (keys are unique per agent): "
            "make the key unique per person, e.g. prefix it with the person's id"
        )
        raise EngramError(409, "conflict", message)
    conversation_id: str = found[0]["id"]
    return conversation_id


class EngramChatMessageHistory(BaseChatMessageHistory):
    """The history of the Engram conversation ``conversation_id`` (for ``RunnableWithMessageHistory``
    and the like). ``aclient`` serves the async methods; without it they run the sync client.

    Reading the history (what comes before the model call) gets ``memory_timeout`` seconds
    (default 2) in all. ``on_engram_error="continue"`` lets the model answer without memory
    when Engram is down, slow or overloaded: the history reads as empty, the turn is not
    stored, and the failure goes to ``on_error`` (default: a warning on the
    ``engram_service_client`` logger); ``"raise"`` (the default) raises the EngramError."""

    def __init__(
        self,
        client: Engram,
        conversation_id: str | None,
        aclient: AsyncEngram | None = None,
        **fail_open: Unpack[FailOpenOptions],
    ) -> None:
        self.client = client
        self.aclient = aclient
        # None: the conversation could not be found for an outage passed over (``for_key``).
        self.conversation_id = conversation_id
        self.fail_open = FailOpen(**fail_open)

    @classmethod
    def for_key(
        cls,
        client: Engram,
        agent_id: str,
        external_ref: str,
        key: str,
        **fail_open: Unpack[FailOpenOptions],
    ) -> EngramChatMessageHistory:
        """The history of the conversation the client calls ``key``, created on first use.
        Keys are unique per agent: one naming another person's conversation raises ``conflict``
        here, before any model is called, whatever ``on_engram_error`` says."""
        conversation_id = FailOpen(**fail_open).run(client, _resolve(agent_id, external_ref, key), None, read=True)
        return cls(client, conversation_id, **fail_open)

    def _read(self) -> Steps[list[BaseMessage]]:
        if self.conversation_id is None:
            return []
        stored = yield from every(calls.list_messages(self.conversation_id, limit=1000))
        return [from_engram(m) for m in stored]

    def _append(self, messages: Sequence[BaseMessage]) -> Steps[None]:
        if self.conversation_id is None:
            return
        batch = [to_engram(m) for m in messages]
        for start in range(0, len(batch), 100):
            yield calls.append_messages(self.conversation_id, batch[start : start + 100])

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        return self.fail_open.run(self.client, self._read(), [], read=True)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        self.fail_open.run(self.client, self._append(messages), None, read=False)

    def clear(self) -> None:
        if self.conversation_id is not None:
            self.client.clear_messages(self.conversation_id)

    async def aget_messages(self) -> list[BaseMessage]:
        if self.aclient is None:
            return await super().aget_messages()
        return await self.fail_open.arun(self.aclient, self._read(), [], read=True)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        if self.aclient is None:
            return await super().aadd_messages(messages)
        await self.fail_open.arun(self.aclient, self._append(messages), None, read=False)

    async def aclear(self) -> None:
        if self.aclient is None:
            return await super().aclear()
        if self.conversation_id is not None:
            await self.aclient.clear_messages(self.conversation_id)
