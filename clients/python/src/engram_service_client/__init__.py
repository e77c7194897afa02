"""Engram's Python client: :class:`Engram` (sync) and :class:`AsyncEngram` (async) over httpx,
the spec's models as TypedDicts, and adapters for LangGraph (``engram_service_client.langgraph``)
and LangChain (``engram_service_client.langchain``)."""

from ._base import Settings
from .client import AsyncEngram, Engram
from .errors import EngramError
from .models import NotModified

__all__ = ["AsyncEngram", "Engram", "EngramError", "NotModified", "Settings"]
