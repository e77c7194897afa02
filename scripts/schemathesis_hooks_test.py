"""Replays, without a server, the failure schemathesis raised when a thread's messages were
read after clearing them, and checks that the hook drops it and nothing else.

Run by scripts/schemathesis with its virtualenv, before the contract test. The failures are
built as the `use_after_free` check builds them (schemathesis 4.32.5), from the chain
of issue #31: POST /api/conversations, DELETE …/messages, GET …/{id}, GET …/messages.
"""

import sys

from schemathesis.openapi.checks import UseAfterFree

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


def kept(f):
    return hooks.filter_failure(None, f, None, None)


def main():
    # The chain of the report: the read after the clear is dropped.
    assert not kept(failure(f"DELETE {CONVERSATION}/messages", f"GET {CONVERSATION}/messages"))
    # Everything else the heuristic finds is kept: a read of a deleted conversation or of
    # its messages, another conversation's messages, and any other check's failure.
    assert kept(failure(f"DELETE {CONVERSATION}", f"GET {CONVERSATION}"))
    assert kept(failure(f"DELETE {CONVERSATION}", f"GET {CONVERSATION}/messages"))
    assert kept(failure(f"DELETE {OTHER}/messages", f"GET {CONVERSATION}/messages"))
    assert kept(failure("DELETE /api/agents-config/bot", "GET /api/agents-config/bot"))
    assert hooks.filter_failure(None, AssertionError("another check"), None, None)
    print("schemathesis hooks: 6 passed, 0 failed")


if __name__ == "__main__":
    sys.exit(main())
