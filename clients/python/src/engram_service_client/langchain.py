"""Engram as a LangChain ``BaseChatMessageHistory``: the messages of one Engram conversation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ._sansio import Steps, arun, calls, every, run
from .client import AsyncEngram, Engram
from .errors import EngramError
from .models import Message

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


class EngramChatMessageHistory(BaseChatMessageHistory):
    """The history of the Engram conversation ``conversation_id`` (for ``RunnableWithMessageHistory``
    and the like). ``aclient`` serves the async methods; without it they run the sync client."""

    def __init__(self, client: Engram, conversation_id: str, aclient: AsyncEngram | None = None) -> None:
        self.client = client
        self.aclient = aclient
        self.conversation_id = conversation_id

    @classmethod
    def for_key(cls, client: Engram, agent_id: str, external_ref: str, key: str) -> EngramChatMessageHistory:
        """The history of the conversation the client calls ``key``, created on first use.
        Keys are unique per agent: one naming another person's conversation raises ``conflict``
        here, before any model is called."""
        found = client.list_conversations(agent_id=agent_id, key=key, limit=1)["items"]
        if not found:
            try:
                found = [client.create_conversation(agent_id, external_ref, key=key)]
            except EngramError as error:
                if error.status != 409:
                    raise
                found = client.list_conversations(agent_id=agent_id, key=key, limit=1)["items"]
        if not found or found[0]["external_ref"] != external_ref:
            message = (
                "the key names another person's conversation of this agent (keys are unique per agent): "
                "make the key unique per person, e.g. prefix it with the person's id"
            )
            raise EngramError(409, "conflict", message)
        return cls(client, found[0]["id"])

    def _read(self) -> Steps[list[BaseMessage]]:
        stored = yield from every(calls.list_messages(self.conversation_id, limit=1000))
        return [from_engram(m) for m in stored]

    def _append(self, messages: Sequence[BaseMessage]) -> Steps[None]:
        batch = [to_engram(m) for m in messages]
        for start in range(0, len(batch), 100):
            yield calls.append_messages(self.conversation_id, batch[start : start + 100])

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        return run(self.client, self._read())

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        run(self.client, self._append(messages))

    def clear(self) -> None:
        self.client.clear_messages(self.conversation_id)

    async def aget_messages(self) -> list[BaseMessage]:
        if self.aclient is None:
            return await super().aget_messages()
        return await arun(self.aclient, self._read())

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        if self.aclient is None:
            return await super().aadd_messages(messages)
        await arun(self.aclient, self._append(messages))

    async def aclear(self) -> None:
        if self.aclient is None:
            return await super().aclear()
        await self.aclient.clear_messages(self.conversation_id)
