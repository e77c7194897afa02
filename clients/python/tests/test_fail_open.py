"""The adapters with Engram down (a closed port) or hanging (a socket that accepts and
never answers): under ``on_engram_error="continue"`` the framework's model is still called,
within the memory timeout, and the failure is reported; under ``"raise"`` the call fails
with an EngramError before the model is called."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

from langchain_core.language_models.fake_chat_models import FakeListChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory
from langgraph.config import get_store
from langgraph.graph import START, MessagesState, StateGraph
import pytest

from engram_service_client import AsyncEngram, Engram, EngramError, Settings
from engram_service_client.langchain import EngramChatMessageHistory
from engram_service_client.langgraph import EngramStore

# The client's own timeouts, which the writes keep: the model must be called well before.
WRITES = Settings(timeout=4.0, deadline=4.0)
MEMORY_TIMEOUT = 0.5
PROMPTLY = 1.5


@pytest.fixture(params=["down", "hanging"])
def unreachable(request: pytest.FixtureRequest) -> Iterator[str]:
    """The address of an Engram that refuses connections, or accepts them and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    address = "http://127.0.0.1:%d" % listener.getsockname()[1]
    if request.param == "down":
        listener.close()
        yield address
        return
    listener.listen(64)  # the kernel completes the handshakes; nothing ever reads or answers
    yield address
    listener.close()


class Clock:
    """When the model was called, counted from the start of the turn."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.calls: list[float] = []

    def called(self, value: Any) -> Any:
        self.calls.append(time.monotonic() - self.start)
        return value


def _graph(store: EngramStore, clock: Clock) -> Any:
    model = GenericFakeChatModel(messages=iter([AIMessage("Tea, then.")]))

    def answer(state: MessagesState) -> dict[str, list[BaseMessage]]:
        memories = get_store().search(("agent", "alice"), query="drinks")
        notes = "; ".join(m.value["content"] for m in memories)
        reply = model.invoke(clock.called([HumanMessage(f"{notes} | {state['messages'][-1].content}")]))
        get_store().put(("agent", "alice"), "last-answer", {"content": str(reply.content)})
        return {"messages": [reply]}

    return StateGraph(MessagesState).add_node(answer).add_edge(START, "answer").compile(store=store)


def test_langgraph_store_continue_lets_the_model_answer(unreachable: str) -> None:
    failures: list[EngramError] = []
    with Engram(unreachable, "t", settings=WRITES) as client:
        store = EngramStore(client, on_engram_error="continue", memory_timeout=MEMORY_TIMEOUT, on_error=failures.append)
        clock = Clock()
        result = _graph(store, clock).invoke({"messages": [HumanMessage("What should I drink?")]})
    assert result["messages"][-1].content == "Tea, then."
    assert len(clock.calls) == 1 and clock.calls[0] < PROMPTLY, clock.calls
    assert failures and all(f.code in {"network", "timeout"} for f in failures), failures
    # The search before the model and the put after it were both passed over.
    assert len(failures) == 2


async def test_langgraph_async_store_continue_answers_nothing_found(unreachable: str) -> None:
    failures: list[EngramError] = []
    async with AsyncEngram(unreachable, "t", settings=WRITES) as aclient:
        store = EngramStore(
            Engram(unreachable, "t"), aclient, on_engram_error="continue", memory_timeout=MEMORY_TIMEOUT, on_error=failures.append
        )
        started = time.monotonic()
        assert await store.asearch(("agent", "alice"), query="drinks") == []
        assert await store.aget(("agent", "alice"), "k") is None
        assert time.monotonic() - started < 2 * PROMPTLY
    assert [f.code in {"network", "timeout"} for f in failures] == [True, True]


def test_langgraph_store_raise_fails_before_the_model(unreachable: str) -> None:
    with Engram(unreachable, "t", settings=WRITES) as client:
        store = EngramStore(client, memory_timeout=MEMORY_TIMEOUT)
        clock = Clock()
        with pytest.raises(EngramError) as raised:
            _graph(store, clock).invoke({"messages": [HumanMessage("What should I drink?")]})
        assert time.monotonic() - clock.start < PROMPTLY
    assert raised.value.code in {"network", "timeout"}
    assert clock.calls == []


def _chain(client: Engram, clock: Clock, **fail_open: Any) -> RunnableWithMessageHistory:
    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("human", "{input}")])
    chain = prompt | RunnableLambda(clock.called) | FakeListChatModel(responses=["Hello Alice!"])
    return RunnableWithMessageHistory(
        chain,  # type: ignore[arg-type]
        lambda session_id: EngramChatMessageHistory.for_key(client, "agent", "alice", session_id, **fail_open),
        input_messages_key="input",
        history_messages_key="history",
    )


def test_langchain_history_continue_lets_the_model_answer(unreachable: str) -> None:
    failures: list[EngramError] = []
    with Engram(unreachable, "t", settings=WRITES) as client:
        clock = Clock()
        chain = _chain(client, clock, on_engram_error="continue", memory_timeout=MEMORY_TIMEOUT, on_error=failures.append)
        answer = chain.invoke({"input": "My name is Alice."}, {"configurable": {"session_id": "thread-1"}})
    assert answer.content == "Hello Alice!"
    assert len(clock.calls) == 1 and clock.calls[0] < PROMPTLY, clock.calls
    assert len(failures) == 1 and failures[0].code in {"network", "timeout"}, failures


def test_langchain_history_of_a_known_conversation_continues_without_it(unreachable: str) -> None:
    failures: list[EngramError] = []
    with Engram(unreachable, "t", settings=WRITES) as client:
        history = EngramChatMessageHistory(
            client, "0f8fad5b-d9cb-469f-a165-70867728950e", on_engram_error="continue", memory_timeout=MEMORY_TIMEOUT, on_error=failures.append
        )
        started = time.monotonic()
        assert history.messages == []
        assert time.monotonic() - started < PROMPTLY
    assert len(failures) == 1 and failures[0].code in {"network", "timeout"}


def test_langchain_history_raise_fails_before_the_model(unreachable: str) -> None:
    with Engram(unreachable, "t", settings=WRITES) as client:
        clock = Clock()
        with pytest.raises(EngramError) as raised:
            _chain(client, clock, memory_timeout=MEMORY_TIMEOUT).invoke(
                {"input": "My name is Alice."}, {"configurable": {"session_id": "thread-1"}}
            )
        assert time.monotonic() - clock.start < PROMPTLY
    assert raised.value.code in {"network", "timeout"}
    assert clock.calls == []


def test_continue_still_raises_what_a_retry_cannot_cure(engram: Engram, agent_id: str) -> None:
    """A key naming another person's conversation is a conflict under "continue" too, and a
    namespace that names no person is a mistake, not an outage."""
    EngramChatMessageHistory.for_key(engram, agent_id, "alice", "shared-key")
    with pytest.raises(EngramError) as raised:
        EngramChatMessageHistory.for_key(engram, agent_id, "bob", "shared-key", on_engram_error="continue")
    assert raised.value.status == 409
    store = EngramStore(engram, on_engram_error="continue", on_error=lambda error: pytest.fail(f"passed over {error}"))
    with pytest.raises(EngramError) as raised:
        store.search((agent_id,), query="tea")
    assert raised.value.code == "invalid_request"
