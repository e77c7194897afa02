"""Adapters written once for the sync and async clients: an adapter's logic is a generator
that yields the calls it needs (built by :data:`calls`) and receives their answers; a sync
or an async driver sends them."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, TypeVar

from ._base import Call, CallBuilder, Operations
from .client import AsyncEngram, Engram
from .models import Page

T = TypeVar("T")
Steps = Generator[Call[Any], Any, T]


class _Calls(CallBuilder, Operations):
    """Every client method, returning the request it would send instead of sending it."""


calls = _Calls()


def run(client: Engram, steps: Steps[T]) -> T:
    try:
        call = next(steps)
        while True:
            call = steps.send(client._send(call))
    except StopIteration as done:
        value: T = done.value
        return value


async def arun(client: AsyncEngram, steps: Steps[T]) -> T:
    try:
        call = next(steps)
        while True:
            call = steps.send(await client._send(call))
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
