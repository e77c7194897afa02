"""The sync (:class:`Engram`) and async (:class:`AsyncEngram`) clients over httpx."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Literal, TypeVar, cast, overload

import httpx

from ._base import AsyncSender, Call, Operations, Settings, SyncSender, retry_delay
from .errors import EngramError, error_from_response
from .models import AgentConfig, Conversation, Event, Fact, Job, Message

T = TypeVar("T")

# Job statuses after which nothing more happens to a job (``failed`` is retried later).
SETTLED = frozenset({"succeeded", "dead", "cancelled"})
# Seconds each read of the change feed waits for an event (the server allows 30).
FEED_WAIT = 20

LISTS = {
    "conversations": "list_conversations",
    "messages": "list_messages",
    "facts": "list_facts",
    "jobs": "list_jobs",
    "configs": "list_configs",
}


def _answer(response: httpx.Response, call: Call[Any]) -> Any:
    if response.is_success or response.status_code in call.answers:
        if response.status_code in (204, 304):
            body = None
        else:
            body = response.json() if "json" in response.headers.get("content-type", "") else response.text
        return call.shape(response.status_code, response.headers, body) if call.shape else body
    raise error_from_response(response)


def _failure(error: httpx.HTTPError) -> EngramError:
    """The failure with where it happened and its root cause (``[Errno 111] Connection refused``)."""
    try:
        url = error.request.url
        where = f" at {url.scheme}://{url.netloc.decode()}"
    except RuntimeError:  # no request attached
        where = ""
    if isinstance(error, httpx.TimeoutException):
        return EngramError(0, "timeout", f"no answer in time from Engram{where}: {error!r}")
    return EngramError(0, "network", f"could not reach Engram{where}: {error}")


def _unsettled(id: str, job: Job, timeout: float) -> EngramError:
    return EngramError(0, "timeout", f"job {id} is still {job['status']} after {timeout} s")


def _deadline(call: Call[Any], settings: Settings) -> float:
    """Seconds the call may take in all: the client's deadline, or the call's own when shorter."""
    return settings.deadline if call.deadline is None else min(call.deadline, settings.deadline)


def _settle(
    outcome: httpx.Response | httpx.HTTPError, call: Call[Any], attempt: int, settings: Settings, started: float
) -> tuple[bool, Any]:
    """``(True, answer)``, or ``(False, seconds)`` to retry after; raises the final error."""
    try:
        if isinstance(outcome, httpx.HTTPError):
            raise _failure(outcome)
        return True, _answer(outcome, call)
    except EngramError as error:
        delay = retry_delay(error, call, attempt, settings)
        if delay is None or time.monotonic() - started + delay >= _deadline(call, settings):
            raise
        return False, delay


class _Settings:
    def __init__(self, base_url: str, token: str | Callable[[], str], settings: Settings) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.settings = settings

    def request(self, call: Call[Any], started: float) -> dict[str, Any]:
        """The request's arguments. A call with a deadline of its own waits for an answer no
        longer than what is left of it; others keep the HTTP client's timeouts."""
        token = self.token() if callable(self.token) else self.token
        timeout: dict[str, Any] = {}
        if call.deadline is not None:
            left = _deadline(call, self.settings) - (time.monotonic() - started)
            timeout["timeout"] = max(0.001, min(self.settings.timeout, left))
        return {
            **timeout,
            "method": call.method,
            "url": self.base_url + call.path,
            "params": call.params(),
            "json": call.body,
            "content": call.content,
            "headers": {"authorization": f"Bearer {token}", "accept": "application/json", **call.headers},
        }


class Engram(SyncSender, Operations):
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

    def _send(self, call: Call[T]) -> T:
        started = time.monotonic()
        attempt = 0
        while True:
            try:
                outcome: httpx.Response | httpx.HTTPError = self._http.request(**self._config.request(call, started))
            except httpx.HTTPError as error:
                outcome = error
            done, value = _settle(outcome, call, attempt, self._config.settings, started)
            if done:
                return cast(T, value)
            attempt += 1
            time.sleep(value)

    @overload
    def iterate(self, name: Literal["conversations"], *args: Any, **query: Any) -> Iterator[Conversation]: ...
    @overload
    def iterate(self, name: Literal["messages"], *args: Any, **query: Any) -> Iterator[Message]: ...
    @overload
    def iterate(self, name: Literal["facts"], *args: Any, **query: Any) -> Iterator[Fact]: ...
    @overload
    def iterate(self, name: Literal["jobs"], *args: Any, **query: Any) -> Iterator[Job]: ...
    @overload
    def iterate(self, name: Literal["configs"], *args: Any, **query: Any) -> Iterator[AgentConfig]: ...
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

    def wait_for_job(self, id: str, *, timeout: float = 60.0, interval: float = 0.2) -> Job:
        """Reads job ``id`` until it has settled (succeeded, dead or cancelled) and returns it;
        raises EngramError ``timeout`` when ``timeout`` seconds pass first."""
        deadline = time.monotonic() + timeout
        while (job := self.get_job(id))["status"] not in SETTLED:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _unsettled(id, job, timeout)
            time.sleep(min(interval, left))
        return job

    def follow_events(self, *, after: int | None = None, types: str | None = None) -> Iterator[Event]:
        """The change feed from ``after`` on, endlessly: each read long-polls for what comes next."""
        while True:
            page = self.list_events(after=after, types=types, wait=FEED_WAIT)
            yield from page["items"]
            after = page["next_cursor"]

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Engram:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncEngram(AsyncSender, Operations):
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

    async def _send(self, call: Call[T]) -> T:
        started = time.monotonic()
        attempt = 0
        while True:
            try:
                outcome: httpx.Response | httpx.HTTPError = await self._http.request(**self._config.request(call, started))
            except httpx.HTTPError as error:
                outcome = error
            done, value = _settle(outcome, call, attempt, self._config.settings, started)
            if done:
                return cast(T, value)
            attempt += 1
            await asyncio.sleep(value)

    @overload
    def iterate(self, name: Literal["conversations"], *args: Any, **query: Any) -> AsyncIterator[Conversation]: ...
    @overload
    def iterate(self, name: Literal["messages"], *args: Any, **query: Any) -> AsyncIterator[Message]: ...
    @overload
    def iterate(self, name: Literal["facts"], *args: Any, **query: Any) -> AsyncIterator[Fact]: ...
    @overload
    def iterate(self, name: Literal["jobs"], *args: Any, **query: Any) -> AsyncIterator[Job]: ...
    @overload
    def iterate(self, name: Literal["configs"], *args: Any, **query: Any) -> AsyncIterator[AgentConfig]: ...
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

    async def wait_for_job(self, id: str, *, timeout: float = 60.0, interval: float = 0.2) -> Job:
        deadline = time.monotonic() + timeout
        while (job := await self.get_job(id))["status"] not in SETTLED:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _unsettled(id, job, timeout)
            await asyncio.sleep(min(interval, left))
        return job

    async def follow_events(self, *, after: int | None = None, types: str | None = None) -> AsyncIterator[Event]:
        while True:
            page = await self.list_events(after=after, types=types, wait=FEED_WAIT)
            for event in page["items"]:
                yield event
            after = page["next_cursor"]

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncEngram:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
