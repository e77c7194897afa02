"""Replays, without a server, the failures schemathesis raised when a collection was read
after a DELETE emptied it, and checks that the hook drops those and nothing else.

Run by scripts/schemathesis with its virtualenv, before the contract test. The failures are
built as the `use_after_free` check builds them (schemathesis 4.32.5), from the chains
that failed: POST /api/conversations, DELETE …/messages, GET …/{id}, GET …/messages,
and GET /api/agents-config, DELETE …/facts, GET …/facts (seed 302); the
valid request refused whose path held a link's null (`…/conversations/None/…`). Also the
fact times positive cases keep (`_times_hold`).
"""

import sys

from schemathesis.openapi.checks import RejectedPositiveData, UseAfterFree

import schemathesis_hooks as hooks

CONVERSATION = "/api/conversations/0199a2b4-8d3c-7f00-9b1e-3c5d6e7f8a90"
OTHER = "/api/conversations/0199a2b4-8d3c-7f00-9b1e-3c5d6e7f8a91"


def failure(free, usage):
    return UseAfterFree(
        operation=f"DELETE {free.split(' ', 1)[1]}",
        message="The API did not return a `HTTP 404 Not Found` response",
        free=free,
        usage=usage,
    )


class Case:
    """What the hook reads of a test case: its path parameters."""

    def __init__(self, path_parameters):
        self.path_parameters = path_parameters


def kept(f):
    return hooks.filter_failure(None, f, None, None)


FACTS = "/api/agents/support-bot/users/%C3%82%C4%9D%F0%A5%B3%A0%C2%B2%C2%BF%60/facts"
PERSON = "/api/rgpd/users/whatsapp%3A%2B33612345678/ai-data"


class Body:
    """What `_names_agents` reads of a test case: its path template and body."""

    def __init__(self, path, body):
        self.path = path
        self.body = body


def main():
    # A case naming agents to read is dropped; an empty list, another field or another
    # path is kept.
    config = "/api/agents-config/{agent_id}"
    assert hooks._names_agents(Body(config, {"reads_facts_of": ["support-bot"]}))
    for case in [Body(config, {"reads_facts_of": []}), Body(config, {"memory_enabled": True}),
                 Body("/api/webhooks", {"reads_facts_of": ["x"]}), Body(config, None)]:
        assert not hooks._names_agents(case), (case.path, case.body)
    # The chains of the reports: a read after a clear is dropped.
    dropped = [
        (f"DELETE {CONVERSATION}/messages", f"GET {CONVERSATION}/messages"),
        (f"DELETE {FACTS}", f"GET {FACTS}"),
        (f"DELETE {FACTS}", f"GET {FACTS}/search"),
        (f"DELETE {PERSON}", f"GET {PERSON}"),
    ]
    for free, usage in dropped:
        assert not kept(failure(free, usage)), (free, usage)
    # Everything else the heuristic finds is kept: a read of a deleted conversation or of
    # its messages, another conversation's messages, another user's facts, a write after
    # a clear, other resources, and any other check's failure.
    other_facts = FACTS.replace("/users/", "/users/x")
    kept_pairs = [
        (f"DELETE {CONVERSATION}", f"GET {CONVERSATION}"),
        (f"DELETE {CONVERSATION}", f"GET {CONVERSATION}/messages"),
        (f"DELETE {OTHER}/messages", f"GET {CONVERSATION}/messages"),
        (f"DELETE {FACTS}", f"GET {other_facts}"),
        (f"DELETE {FACTS}", f"PATCH {FACTS}/0199a2b4-8d3c-7f00-9b1e-3c5d6e7f8a92"),
        ("DELETE /api/agents-config/bot", "GET /api/agents-config/bot"),
    ]
    for free, usage in kept_pairs:
        assert kept(failure(free, usage)), (free, usage)
    assert hooks.filter_failure(None, AssertionError("another check"), None, None)
    # A valid request refused is kept, unless a link's null put None in its path (the
    # chain of the report: a fact's history, then GET /api/conversations/None/working-memory).
    refused_valid = RejectedPositiveData(
        operation="GET /api/conversations/{id}/working-memory",
        message="Valid data should have been accepted",
        status_code=400,
        allowed_statuses=["2xx", "3xx", "401", "403", "404", "409", "412", "429", "5xx"],
    )
    null_path = [{"id": None}, {"agent_id": "bot", "external_ref": None}]
    real_path = [{"id": "0199a2b4-8d3c-7f00-9b1e-3c5d6e7f8a90"}, {}, {"id": "None"}]
    for parameters in null_path:
        assert not hooks.filter_failure(None, refused_valid, Case(parameters), None), parameters
    for parameters in real_path:
        assert hooks.filter_failure(None, refused_valid, Case(parameters), None), parameters
    assert hooks.filter_failure(None, failure(f"DELETE {CONVERSATION}", f"GET {OTHER}"), Case({"id": None}), None)
    # Fact times a positive case keeps: those the server accepts now (docs/api.md, "Expiry").
    accepted = [
        {},
        {"expires_at": "2999-01-01T00:00:00Z"},
        {"ttl_seconds": 60, "expires_at": None},
        {"observed_at": "2001-02-03T04:05:06+02:00"},
    ]
    refused = [
        {"expires_at": "2999-01-01T00:00:00Z", "ttl_seconds": 60},
        {"expires_at": "2001-01-01T00:00:00Z"},
        {"observed_at": "2999-01-01T00:00:00Z"},
        {"observed_at": "not a time"},
    ]
    for body in accepted:
        assert hooks._times_hold(body), body
    for body in refused:
        assert not hooks._times_hold(body), body
    total = len(dropped) + len(kept_pairs) + 1 + len(null_path) + len(real_path) + 1 + len(accepted) + len(refused)
    print(f"schemathesis hooks: {total} passed, 0 failed")


if __name__ == "__main__":
    sys.exit(main())
