"""LangGraph's BaseStore over Engram facts, in a real graph and operation by operation."""

from __future__ import annotations

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.config import get_store
from langgraph.graph import START, MessagesState, StateGraph
import pytest

from engram_service_client import AsyncEngram, Engram, EngramError
from engram_service_client.langgraph import EngramStore


def test_a_graph_recalls_and_writes_memories_through_the_store(engram: Engram, agent_id: str) -> None:
    store = EngramStore(engram)
    namespace = (agent_id, "alice")
    store.put(namespace, "drink", {"content": "Prefers tea over coffee"})
    store.put(namespace, "city", {"content": "Lives in Lyon"})
    model = GenericFakeChatModel(messages=iter([AIMessage("Tea, then.")]))
    prompts: list[list] = []

    def answer(state: MessagesState) -> dict:
        memories = get_store().search(namespace, query=str(state["messages"][-1].content), limit=1)
        prompt = [SystemMessage("\n".join(m.value["content"] for m in memories)), *state["messages"]]
        prompts.append(prompt)
        get_store().put(namespace, "last-request", {"topic": "drinks", "turn": 1})
        return {"messages": [model.invoke(prompt)]}

    graph = StateGraph(MessagesState).add_node(answer).add_edge(START, "answer").compile(store=store)
    result = graph.invoke({"messages": [HumanMessage("Coffee or tea?")]})
    assert result["messages"][-1].content == "Tea, then."
    assert prompts[0][0].content == "Prefers tea over coffee", "recall found the memory by the user's words"
    facts = {f["fact"] for f in engram.iterate("facts", agent_id, "alice")}
    assert '{"topic": "drinks", "turn": 1}' in facts, "the node's write is an Engram fact"


def test_put_get_search_delete_and_list_namespaces(engram: Engram, agent_id: str) -> None:
    store = EngramStore(engram)
    namespace = (agent_id, "bob")
    store.put(namespace, "prefs", {"theme": "dark", "lang": "fr"})
    item = store.get(namespace, "prefs")
    assert item is not None and item.value == {"theme": "dark", "lang": "fr"} and item.key == "prefs"
    store.put(namespace, "prefs", {"theme": "light"})
    assert store.get(namespace, "prefs").value == {"theme": "light"}, "a put replaces the key's value"
    assert len(list(engram.iterate("facts", agent_id, "bob"))) == 1
    store.put(namespace, "other", {"theme": "dark"})
    assert [i.key for i in store.search(namespace, filter={"theme": "dark"})] == ["other"]
    store.delete(namespace, "prefs")
    assert store.get(namespace, "prefs") is None

    engram.create_conversation(agent_id, "bob")
    assert (agent_id, "bob") in store.list_namespaces(prefix=(agent_id,))
    assert store.list_namespaces(prefix=("no-such-agent",)) == []


async def test_async_store_and_errors(aengram: AsyncEngram, engram: Engram, agent_id: str) -> None:
    store = EngramStore(engram, aengram)
    namespace = (agent_id, "carol")
    await store.aput(namespace, "note", {"content": "Allergic to peanuts"})
    found = await store.asearch(namespace, query="peanuts")
    assert [(i.key, i.value["content"]) for i in found] == [("note", "Allergic to peanuts")]
    assert found[0].score is not None
    with pytest.raises(EngramError) as wrong:
        await store.aget(("just-one",), "k")
    assert wrong.value.code == "invalid_request"
    with pytest.raises(EngramError) as too_long:
        await store.aput(namespace, "k" * 100, {"content": "x"})
    assert (too_long.value.status, too_long.value.code) == (400, "invalid_request")


@pytest.mark.parametrize(
    "first, second, listed",
    [
        ("Likes jazz", "Likes jazz", ["a", "b"]),  # equal: Engram stores the fact once
        ("Likes jazz", "likes jazz.", ["a", "b"]),  # near-equal: the same fact to Engram
        ("Lives in Lyon", "Lives in Paris", ["b"]),  # the newer supersedes the older in recall
    ],
)
def test_two_keys_never_share_or_delete_each_others_item(
    engram: Engram, agent_id: str, first: str, second: str, listed: list[str]
) -> None:
    store = EngramStore(engram)
    namespace = (agent_id, "dave")
    store.put(namespace, "a", {"content": first})
    store.put(namespace, "b", {"content": second})
    a, b = store.get(namespace, "a"), store.get(namespace, "b")
    assert a is not None and a.key == "a" and a.value["content"].lower() == first.lower()
    assert b is not None and b.key == "b" and b.value["content"].lower().rstrip(".") == second.lower().rstrip(".")
    assert sorted(i.key for i in store.search(namespace)) == listed

    store.delete(namespace, "a")
    assert store.get(namespace, "a") is None
    kept = store.get(namespace, "b")
    assert kept is not None and kept.key == "b", "deleting a leaves b"
    store.put(namespace, "b", {"content": "Likes blues"})
    assert store.get(namespace, "b").value == {"content": "Likes blues"}
    assert store.get(namespace, "a") is None, "replacing b brings no a back"
