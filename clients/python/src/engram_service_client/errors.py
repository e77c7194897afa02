"""One error for every failure of a call to Engram."""

from __future__ import annotations

import email.utils
import time
from typing import Any

import httpx


class EngramError(Exception):
    """The API's ``code``, ``message`` and ``request_id`` when the server answered; ``status``
    0 and code ``network`` / ``timeout`` when it did not. ``retry_after`` is the server's
    ``Retry-After`` in seconds (429 and 503)."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        request_id: str | None = None,
        retry_after: float | None = None,
        body: Any = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.request_id = request_id
        self.retry_after = retry_after
        self.body = body

    @classmethod
    def unsupported(cls, what: str) -> EngramError:
        return cls(0, "unsupported", f"Engram does not support {what}")


def parse_retry_after(value: str | None) -> float | None:
    """``Retry-After`` (seconds or an HTTP date) in seconds."""
    if value is None or not value.strip():
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def error_from_response(response: httpx.Response) -> EngramError:
    try:
        body = response.json()
    except ValueError:
        body = None
    detail = body.get("error") if isinstance(body, dict) else None
    detail = detail if isinstance(detail, dict) else {}
    code, message = detail.get("code"), detail.get("message")
    request_id = detail.get("request_id") or response.headers.get("x-request-id")
    return EngramError(
        response.status_code,
        code if isinstance(code, str) else f"http_{response.status_code}",
        message if isinstance(message, str) else response.text[:500],
        request_id,
        parse_retry_after(response.headers.get("retry-after")),
        body,
    )
