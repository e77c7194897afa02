"""Adapters written once for the sync and async clients: an adapter's logic is a generator
that yields the calls it needs (built by :data:`calls`) and receives their answers; a sync
or an async driver sends them."""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator
from dataclasses import dataclass, replace
from typing import Any, Literal, TypedDict, TypeVar

from ._base import Call, CallBuilder, Operations
from .client import AsyncEngram, Engram
from .errors import EngramError
from .models import Page

T = TypeVar("T")
Steps = Generator[Call[Any], Any, T]


class _Calls(CallBuilder, Operations):
    """Every client method, returning the request it would send instead of sending it."""


calls = _Calls()


def run(client: Engram, steps: Steps[T], deadline: float | None = None) -> T:
    """Sends each call of ``steps`` (each within ``deadline`` seconds, when given); an
    EngramError is raised inside ``steps``, where the call was yielded."""
    try:
        call = next(steps)
        while True:
            try:
                answer = client._send(replace(call, deadline=deadline) if deadline else call)
            except EngramError as error:
                call = steps.throw(error)
                continue
            call = steps.send(answer)
    except StopIteration as done:
        value: T = done.value
        return value


async def arun(client: AsyncEngram, steps: Steps[T], deadline: float | None = None) -> T:
    try:
        call = next(steps)
        while True:
            try:
                answer = await client._send(replace(call, deadline=deadline) if deadline else call)
            except EngramError as error:
                call = steps.throw(error)
                continue
            call = steps.send(answer)
    except StopIteration as done:
        value: T = done.value
        return value


def every(query: Call[Page[T]]) -> Steps[list[T]]:
    """All items of a list call, following its cursors."""
    items: list[T] = []
    cursor = None
    while True:
        page: Page[T] = yield Call(query.method, query.path, {**(query.query or {}), "cursor": cursor})
        items.extend(page["items"])
        cursor = page.get("next_cursor")
        if not cursor:
            return items


OnEngramError = Literal["raise", "continue"]
LOG = logging.getLogger("engram_service_client")


def _warn(error: EngramError) -> None:
    # The code only: an error's message may quote what the person said.
    LOG.warning("engram: answering without memory (%s)", error.code)


class FailOpenOptions(TypedDict, total=False):
    """The keyword arguments each adapter takes for its :class:`FailOpen`, whose defaults
    apply to those left out."""

    on_engram_error: OnEngramError
    memory_timeout: float
    on_error: Callable[[EngramError], None] | None


@dataclass(frozen=True)
class FailOpen:
    """What an adapter does when Engram is down, slow or overloaded, the same in each.

    Its memory reads (those made before the model is called) get ``memory_timeout`` seconds
    in all, retries included, apart from the client's own timeouts, which its writes keep.
    With ``on_engram_error="raise"`` (the default) the failure is raised as an
    :class:`EngramError`; with ``"continue"`` an outage (no answer, a timeout, 429 or 5xx)
    is passed to ``on_error`` (default: a warning on the ``engram_service_client`` logger
    with the error's code) and the read answers as if there were no memory yet, a write is
    skipped. Engram's other 4xx answers (a bad id, a key naming another person's
    conversation) are raised either way."""

    on_engram_error: OnEngramError = "raise"
    memory_timeout: float = 2.0
    on_error: Callable[[EngramError], None] | None = None

    def passes_over(self, error: EngramError) -> bool:
        """Reports ``error`` and answers True when it is an outage to go on without."""
        # No answer, a timeout, 429 or 5xx; the adapters' own refusals (``invalid_request``,
        # ``unsupported``) have status 0 too, and are not outages.
        outage = error.code in ("network", "timeout") if error.status == 0 else error.status == 429 or error.status >= 500
        if self.on_engram_error != "continue" or not outage:
            return False
        (self.on_error or _warn)(error)
        return True

    def run(self, client: Engram, steps: Steps[T], fallback: T, *, read: bool) -> T:
        try:
            return run(client, steps, self.memory_timeout if read else None)
        except EngramError as error:
            if not self.passes_over(error):
                raise
            return fallback

    async def arun(self, client: AsyncEngram, steps: Steps[T], fallback: T, *, read: bool) -> T:
        try:
            return await arun(client, steps, self.memory_timeout if read else None)
        except EngramError as error:
            if not self.passes_over(error):
                raise
            return fallback
