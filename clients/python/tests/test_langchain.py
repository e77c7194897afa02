"""LangChain's BaseChatMessageHistory over an Engram conversation, with a real chain."""

from __future__ import annotations

from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory
import pytest

from engram_service_client import AsyncEngram, Engram, EngramError
from engram_service_client.langchain import EngramChatMessageHistory


def test_a_chain_with_engram_history_remembers_the_first_turn(engram: Engram, agent_id: str) -> None:
    prompts: list = []

    def record(prompt):  # type: ignore[no-untyped-def]
        prompts.append(prompt.to_messages())
        return prompt

    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("human", "{input}")])
    chain = prompt | RunnableLambda(record) | FakeListChatModel(responses=["Hello Alice!", "You are Alice."])
    with_history = RunnableWithMessageHistory(
        chain,
        lambda session_id: EngramChatMessageHistory.for_key(engram, agent_id, "alice", session_id),
        input_messages_key="input",
        history_messages_key="history",
    )
    config = {"configurable": {"session_id": "lc-thread-1"}}
    assert with_history.invoke({"input": "My name is Alice."}, config).content == "Hello Alice!"
    assert with_history.invoke({"input": "What is my name?"}, config).content == "You are Alice."
    assert [(m.type, m.content) for m in prompts[1]] == [
        ("human", "My name is Alice."),
        ("ai", "Hello Alice!"),
        ("human", "What is my name?"),
    ]
    conversation = engram.list_conversations(agent_id=agent_id, key="lc-thread-1")["items"][0]
    assert [m["content"] for m in engram.iterate("messages", conversation["id"])] == [
        "My name is Alice.",
        "Hello Alice!",
        "What is my name?",
        "You are Alice.",
    ]


async def test_tool_turns_round_trip_async_and_clear(aengram: AsyncEngram, engram: Engram, agent_id: str) -> None:
    conversation = engram.create_conversation(agent_id, "bob")["id"]
    history = EngramChatMessageHistory(engram, conversation, aengram)
    call = {"id": "call-1", "name": "weather", "args": {"city": "Lyon"}, "type": "tool_call"}
    await history.aadd_messages(
        [
            SystemMessage("Be brief."),
            HumanMessage("Weather?"),
            AIMessage("", tool_calls=[call]),
            ToolMessage("sunny", tool_call_id="call-1"),
            AIMessage("Sunny."),
        ]
    )
    read = await history.aget_messages()
    assert [type(m).__name__ for m in read] == ["SystemMessage", "HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]
    assert read[2].tool_calls[0]["args"] == {"city": "Lyon"}
    assert read[3].tool_call_id == "call-1"
    await history.aclear()
    assert history.messages == []


def test_errors_reach_the_caller(engram: Engram) -> None:
    history = EngramChatMessageHistory(engram, "0193a1b2-0000-7000-8000-000000000000")
    with pytest.raises(EngramError) as missing:
        history.add_messages([HumanMessage("hi")])
    assert (missing.value.status, missing.value.code) == (404, "not_found")


def test_for_key_fails_before_any_model_call_on_another_persons_key(engram: Engram, agent_id: str) -> None:
    alice = EngramChatMessageHistory.for_key(engram, agent_id, "alice", "chat-1")
    assert EngramChatMessageHistory.for_key(engram, agent_id, "alice", "chat-1").conversation_id == alice.conversation_id
    with pytest.raises(EngramError) as clash:
        EngramChatMessageHistory.for_key(engram, agent_id, "bob", "chat-1")
    assert clash.value.code == "conflict" and "unique per agent" in clash.value.message
