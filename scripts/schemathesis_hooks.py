"""Schemathesis hooks for Engram's contract test (loaded by scripts/schemathesis).

Two rules of the API that OpenAPI cannot state are stated in the spec's descriptions;
here, schema-valid (positive) test cases that break them are dropped, so that the
"schema-valid request rejected" check only fires on real disagreements. Negative cases
are kept as generated.

- `cursor` is opaque: only a `next_cursor` the server returned is valid. Any other
  value, however well-formed, is a 400 `invalid_request`.
- `last` cannot be combined with `limit` or `cursor` (GET .../messages): a 400.
- `external_ref` is at most 256 bytes of UTF-8; JSON Schema's `maxLength` (256) counts
  characters, so a long value of multi-byte characters passes the schema, not the server.
- A webhook's `url` must be an absolute http(s) URL with a host and no credentials (the
  spec states `^https?://` and the length); which of the strings after `://` the URL
  standard accepts as a host is not something a pattern states, so positive cases keep
  only plain host names.
- `wait` on the event feeds holds a request up to 30 s when no event comes: a valid wait
  is sent as 0 (the API tests cover waiting), so the run does not spend its time waiting;
  an invalid one is sent as generated.
- A fact's times are judged against the server's clock (docs/api.md, "Expiry"):
  `expires_at` must be in the future, `observed_at` not more than 60 s ahead, and
  `expires_at` and `ttl_seconds` are not sent together; `as_of` does not combine with
  `include_superseded=true`. Positive cases that break these are dropped, and so are
  Examples-phase cases (which `filter_case` does not see: schemathesis fills a body's
  other properties with format defaults such as a 2000-01-01 `expires_at`).
- `POST /api/tools/call` runs a tool only while the agent's memory is on and the user
  consents (else 409, documented), on facts that exist (else 404) and with opaque cursors:
  its answer to a schema-valid call depends on state, not on the body.
- An agent's `reads_facts_of` (`PUT /api/agents-config/{agent_id}`) may name only other
  agents configured in the tenant, each once (else 400, documented): which names are valid
  depends on the tenant's state and the path, so positive cases (and examples) that name
  any agent are dropped; the API tests cover sharing.

Reads after a clear are not reads of a deleted resource. Three DELETE routes empty a
collection and keep its owner (docs/api.md): `DELETE /api/conversations/{id}/messages`
clears a thread, `DELETE /api/agents/{agent_id}/users/{external_ref}/facts` forgets every
fact of a user, `DELETE /api/rgpd/users/{external_ref}/ai-data` erases a person. Reading the
same collection afterwards (the thread's messages, the user's facts or their search, the
person's export) answers 200 with nothing in it. Schemathesis's use-after-free heuristic
takes any DELETE followed by a read of the same path, or of one below it, for a deleted
resource still served. A per-operation exemption in the configuration did not hold in every
stateful chain (the contract test failed about one run in six), and covered only the first
of the three. The `filter_failure` hook runs on every failure of every check wherever it is
raised, and drops exactly these: a GET of a cleared collection's path, or below it, after
its clear. The heuristic stays on for every other read, including a deleted conversation
and the messages of a deleted conversation. `scripts/schemathesis_hooks_test.py` replays
the failures the check raised.

A link's null is not schema-valid data. In the stateful phase schemathesis 4.32.5 fills a
path parameter from a field of every item of a list and picks one of the values without
leaving out a null, then sends the null as `None` and takes the 400 for a valid request
refused (seen once: `GET /api/conversations/None/working-memory` after a fact's history).
`filter_failure` drops that check's failures whose path parameters hold None, and no
other.
"""

import json
import re
from datetime import datetime, timedelta, timezone

import schemathesis
from schemathesis import GenerationMode
from schemathesis.openapi.checks import RejectedPositiveData, UseAfterFree


def _is_positive(case):
    meta = getattr(case, "meta", None)
    generation = getattr(meta, "generation", None)
    return getattr(generation, "mode", None) == GenerationMode.POSITIVE


def _external_refs(case):
    for part in (case.path_parameters, case.query, case.body):
        if isinstance(part, dict) and isinstance(part.get("external_ref"), str):
            yield part["external_ref"]


@schemathesis.serializer("application/x-ndjson")
def ndjson(ctx, value):
    """The import's body (`POST /api/import`): the spec gives it as a string of lines;
    anything else generated is sent as its JSON, one line."""
    text = value if isinstance(value, str) else json.dumps(value)
    return text.encode("utf-8", "surrogatepass")


@schemathesis.hook
def filter_case(context, case):
    if not _is_positive(case):
        return True
    if getattr(case, "path", None) == "/api/tools/call":
        return False
    if _names_agents(case):
        return False
    if any(len(ref.encode("utf-8", "surrogatepass")) > 256 for ref in _external_refs(case)):
        return False
    body = case.body if isinstance(case.body, dict) else {}
    if getattr(case, "path", None) in ("/api/webhooks", "/api/webhooks/{id}") and "url" in body:
        if not isinstance(body["url"], str) or PLAIN_URL.match(body["url"]) is None:
            return False
    if not _times_fit(case):
        return False
    query = case.query or {}
    if "cursor" in query:
        return False
    if "last" in query and ("limit" in query or "cursor" in query):
        return False
    return True


def _time(value):
    """An RFC 3339 time as the server reads it, or None."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("z", "Z").replace("t", "T"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def _times_hold(body):
    """Whether a body's fact times are ones the server accepts now (see the module docs)."""
    if "expires_at" in body and body.get("ttl_seconds") is not None and body["expires_at"] is not None:
        return False
    now = datetime.now(timezone.utc)
    if body.get("expires_at") is not None:
        expires = _time(body["expires_at"])
        if expires is None or expires <= now + timedelta(minutes=1):
            return False
    if body.get("observed_at") is not None:
        observed = _time(body["observed_at"])
        if observed is None or observed > now:
            return False
    return True


def _times_fit(case):
    """Whether a case's fact times and `as_of` are ones the server accepts now."""
    body = case.body if isinstance(case.body, dict) else {}
    query = case.query if isinstance(case.query, dict) else {}
    if "as_of" in query and query.get("include_superseded") in (True, "true"):
        return False
    return _times_hold(body)


@schemathesis.hook
def before_add_examples(context, examples):
    examples[:] = [case for case in examples if _times_fit(case) and not _names_agents(case)]


def _names_agents(case):
    """Whether a case sets an agent's `reads_facts_of` to a list naming any agent."""
    body = case.body if isinstance(case.body, dict) else {}
    return getattr(case, "path", None) == "/api/agents-config/{agent_id}" and bool(body.get("reads_facts_of"))


# Receiver URLs a positive case keeps (see the module docs).
PLAIN_URL = re.compile(r"^https?://[a-z][a-z0-9-]*(\.[a-z][a-z0-9-]*)*(:[1-9][0-9]{0,3})?(/[A-Za-z0-9._~-]*)*$")


@schemathesis.hook
def map_query(context, query):
    wait = query.get("wait") if isinstance(query, dict) else None
    if isinstance(wait, int) and not isinstance(wait, bool) and 0 < wait <= 30:
        query["wait"] = 0
    return query


# The collections a DELETE empties (each keeps its owner), as rendered paths.
CLEARED = re.compile(r"^/api/(conversations/[^/]+/messages|agents/[^/]+/users/[^/]+/facts|rgpd/users/[^/]+/ai-data)$")


def is_read_after_clear(failure):
    """A use-after-free whose "free" emptied a collection the GET then read, or read below."""
    if not isinstance(failure, UseAfterFree):
        return False
    free_method, _, cleared = failure.free.partition(" ")
    method, _, path = failure.usage.partition(" ")
    return (
        free_method == "DELETE"
        and CLEARED.match(cleared) is not None
        and method == "GET"
        and (path == cleared or path.startswith(cleared + "/"))
    )


def is_null_from_a_link(failure, case):
    """A "schema-valid request rejected" whose path carries None: a link's value that was
    null. An inferred link reads a field of every item of a list (a fact's
    `conversation_id` in a history, null for a fact nobody's conversation stated), skips
    it when the field is null, but not when it is one of several, and the pick sends
    `.../conversations/None/...`, which no schema allows."""
    if not isinstance(failure, RejectedPositiveData):
        return False
    parameters = getattr(case, "path_parameters", None) or {}
    return any(value is None for value in parameters.values())


@schemathesis.hook
def filter_failure(context, failure, case, response):
    return not is_read_after_clear(failure) and not is_null_from_a_link(failure, case)
