"""Engram's webhook deliveries, verified by an independent implementation of the Standard
Webhooks scheme: the `standardwebhooks` package from PyPI (the reference library), against
a receiver on loopback (the test server allows private receivers)."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from .conftest import ENGRAM_URL


class Receiver:
    """Records every POST; answers 500 to the first `failures` of them, then 204."""

    def __init__(self, failures: int) -> None:
        self.requests: list[tuple[dict[str, str], bytes, int]] = []
        self.failures = failures
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                status = 500 if len(receiver.requests) < receiver.failures else 204
                receiver.requests.append(({k.lower(): v for k, v in self.headers.items()}, body, status))
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/engram"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def delivered(self, count: int, timeout: float = 30) -> list[tuple[dict[str, str], bytes, int]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if sum(1 for _, _, status in self.requests if status == 204) >= count:
                return self.requests
            time.sleep(0.05)
        raise AssertionError(f"not delivered: {self.requests}")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    receiver = Receiver(failures=1)
    yield receiver
    receiver.server.shutdown()


def test_deliveries_verify_with_the_standard_webhooks_library(token: str, receiver: Receiver) -> None:
    headers = {"authorization": f"Bearer {token}"}
    with httpx.Client(base_url=ENGRAM_URL, headers=headers, timeout=10) as api:
        created = api.post("/api/webhooks", json={"url": receiver.url, "event_types": ["fact.added"]})
        assert created.status_code == 201, created.text
        secret = created.json()["secret"]
        api.post("/api/agents/concierge/users/ann/facts", json={"fact": "Likes green tea"}).raise_for_status()

        requests = receiver.delivered(1)
        assert [status for _, _, status in requests] == [500, 204], "retried after the 500"
        for request_headers, body, _ in requests:
            payload = Webhook(secret).verify(body, request_headers)
            assert payload["type"] == "fact.added"
            assert payload["data"]["data"]["fact"]["fact"] == "Likes green tea"
            assert payload["data"]["external_ref"] == "ann"
        assert requests[0][0]["webhook-id"] == requests[1][0]["webhook-id"], "a retry is the same message"

        # A body changed on the way, or another key, does not verify.
        request_headers, body, _ = requests[1]
        with pytest.raises(WebhookVerificationError):
            Webhook(secret).verify(body.replace(b"green", b"black"), request_headers)
        with pytest.raises(WebhookVerificationError):
            Webhook("whsec_" + "QUJD" * 8).verify(body, request_headers)

        # After a rotation, deliveries are signed with the new secret only.
        subscription = created.json()["id"]
        rotated = api.post(f"/api/webhooks/{subscription}/rotate-secret").json()["secret"]
        api.post("/api/agents/concierge/users/ann/facts", json={"fact": "Plays the cello"}).raise_for_status()
        request_headers, body, _ = receiver.delivered(2)[-1]
        assert Webhook(rotated).verify(body, request_headers)["data"]["data"]["fact"]["fact"] == "Plays the cello"
        with pytest.raises(WebhookVerificationError):
            Webhook(secret).verify(body, request_headers)
