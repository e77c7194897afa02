"""The sync (:class:`Engram`) and async (:class:`AsyncEngram`) clients over httpx."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx

from ._base import Call, Operations, Settings, retry_delay
from .errors import EngramError, error_from_response

LISTS = {
    "conversations": "list_conversations",
    "messages": "list_messages",
    "facts": "list_facts",
    "jobs": "list_jobs",
    "configs": "list_configs",
}


def _answer(response: httpx.Response, call: Call) -> Any:
    if response.is_success or response.status_code in call.answers:
        if response.status_code in (204, 304):
            body = None
        else:
            body = response.json() if "json" in response.headers.get("content-type", "") else response.text
        return call.shape(response.status_code, response.headers, body) if call.shape else body
    raise error_from_response(response)


def _failure(error: Exception) -> EngramError:
    if isinstance(error, httpx.TimeoutException):
        return EngramError(0, "timeout", f"no answer in time: {error}")
    return EngramError(0, "network", f"could not reach Engram: {error}")


def _settle(outcome: httpx.Response | httpx.HTTPError, call: Call, attempt: int, settings: Settings) -> tuple[bool, Any]:
    """``(True, answer)``, or ``(False, seconds)`` to retry after; raises the final error."""
    try:
        if isinstance(outcome, httpx.HTTPError):
            raise _failure(outcome)
        return True, _answer(outcome, call)
    except EngramError as error:
        delay = retry_delay(error, call, attempt, settings)
        if delay is None:
            raise
        return False, delay


class _Settings:
    def __init__(self, base_url: str, token: str | Callable[[], str], settings: Settings) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.settings = settings

    def request(self, call: Call) -> dict[str, Any]:
        token = self.token() if callable(self.token) else self.token
        return {
            "method": call.method,
            "url": self.base_url + call.path,
            "params": call.params(),
            "json": call.body,
            "content": call.content,
            "headers": {"authorization": f"Bearer {token}", "accept": "application/json", **call.headers},
        }


class Engram(Operations):
    """The synchronous client. Errors are raised as :class:`EngramError`; 429 and 503 are
    retried as :class:`Settings` says. ``iterate(name, ...)`` walks a list's pages."""

    def __init__(
        self,
        base_url: str,
        token: str | Callable[[], str],
        *,
        settings: Settings | None = None,
        http: httpx.Client | None = None,
    ) -> None:
        self._config = _Settings(base_url, token, settings or Settings())
        self._http = http or httpx.Client(timeout=self._config.settings.timeout)

    def _send(self, call: Call) -> Any:
        for attempt in itertools.count():
            try:
                outcome: httpx.Response | httpx.HTTPError = self._http.request(**self._config.request(call))
            except httpx.HTTPError as error:
                outcome = error
            done, value = _settle(outcome, call, attempt, self._config.settings)
            if done:
                return value
            time.sleep(value)

    def iterate(self, name: str, *args: Any, **query: Any) -> Iterator[Any]:
        """Every item of a list (``conversations``, ``messages``, ``facts``, ``jobs``, ``configs``), page by page."""
        method = getattr(self, LISTS[name])
        cursor = None
        while True:
            page = method(*args, **query, cursor=cursor)
            yield from page["items"]
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Engram:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncEngram(Operations):
    """The asynchronous client: the same methods, awaited; ``iterate`` is an async iterator."""

    def __init__(
        self,
        base_url: str,
        token: str | Callable[[], str],
        *,
        settings: Settings | None = None,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self._config = _Settings(base_url, token, settings or Settings())
        self._http = http or httpx.AsyncClient(timeout=self._config.settings.timeout)

    async def _send(self, call: Call) -> Any:
        for attempt in itertools.count():
            try:
                outcome: httpx.Response | httpx.HTTPError = await self._http.request(**self._config.request(call))
            except httpx.HTTPError as error:
                outcome = error
            done, value = _settle(outcome, call, attempt, self._config.settings)
            if done:
                return value
            await asyncio.sleep(value)

    async def iterate(self, name: str, *args: Any, **query: Any) -> AsyncIterator[Any]:
        method = getattr(self, LISTS[name])
        cursor = None
        while True:
            page = await method(*args, **query, cursor=cursor)
            for item in page["items"]:
                yield item
            cursor = page.get("next_cursor")
            if not cursor:
                return

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncEngram:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
