"""The client covers the spec: every operation has a method, every model its fields."""

from __future__ import annotations

import json
import re
import typing
from typing import Any
from pathlib import Path

import mypy.api
import pytest

from engram_service_client import AsyncEngram, Engram
from engram_service_client.models import SCHEMAS

SPEC = json.loads((Path(__file__).parents[3] / "openapi" / "openapi.json").read_text())
OPERATIONS = [
    (method.upper(), path, operation["operationId"])
    for path, item in SPEC["paths"].items()
    for method, operation in item.items()
    if method in {"get", "put", "post", "patch", "delete"}
]


def test_the_spec_was_read() -> None:
    assert len(OPERATIONS) > 30


@pytest.mark.parametrize("client", [Engram, AsyncEngram])
def test_every_operation_has_a_method(client: type) -> None:
    missing = [f"{m} {p} ({op})" for m, p, op in OPERATIONS if not callable(getattr(client, op, None))]
    assert missing == []


def _fields(name: str) -> tuple[set[str], set[str]]:
    """A schema's fields and its required ones, through ``allOf``."""
    schema = SPEC["components"]["schemas"][name]
    fields: set[str] = set()
    required: set[str] = set()
    for part in schema.get("allOf", [schema]):
        if "$ref" in part:
            more, needed = _fields(part["$ref"].rsplit("/", 1)[1])
        else:
            more, needed = set(part.get("properties", {})), set(part.get("required", []))
        fields |= more
        required |= needed
    return fields, required


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_models_have_the_spec_fields(name: str) -> None:
    fields, required = _fields(name)
    model = SCHEMAS[name]
    assert set(typing.get_type_hints(model)) == fields
    assert set(getattr(model, "__required_keys__")) == required, "a field the spec may leave out is NotRequired"


def _answer_schema(operation: dict[str, Any]) -> str | None:
    """What a 2xx answer of the operation is, spelt as the client's return type is."""
    for status, response in sorted(operation["responses"].items()):
        if not status.startswith("2"):
            continue
        schema = response.get("content", {}).get("application/json", {}).get("schema")
        if schema is None:
            return "str" if "text/plain" in response.get("content", {}) else None
        if "$ref" in schema:
            name = schema["$ref"].rsplit("/", 1)[1]
            return f"Page[{name.removeprefix('Page_')}]" if name.startswith("Page_") else name
        if schema.get("type") == "array":
            return f"list[{schema['items']['$ref'].rsplit('/', 1)[1]}]"
        return "dict[str, Any]"
    return None


def _spelt(annotation: Any) -> str:
    spelt: str = typing._type_repr(annotation)
    for noise, plain in (("engram_service_client.models.", ""), ("typing.", ""), ("NoneType", "None")):
        spelt = spelt.replace(noise, plain)
    return spelt


@pytest.mark.parametrize(("method", "path", "operation_id"), OPERATIONS)
def test_every_method_answers_the_spec_schema(method: str, path: str, operation_id: str) -> None:
    """The method's declared answer is the schema of its operation's 2xx answer (``None``
    for a 204); a working memory read may also answer None (404) or NotModified (304)."""
    build = getattr(Engram, operation_id)
    answer = _spelt(typing.get_type_hints(build)["return"].__args__[0])
    expected = _answer_schema(SPEC["paths"][path][method.lower()])
    if operation_id in {"get_user_document", "get_conversation_document"}:
        expected = f"{expected} | NotModified | None"
    assert answer == (expected or "None")


def test_every_answer_model_is_checked() -> None:
    """Each schema a method answers is one of the models compared field by field above."""
    answers = {_answer_schema(SPEC["paths"][path][method.lower()]) for method, path, _ in OPERATIONS}
    names = {re.sub(r"^(?:Page|list)\[(.*)\]$", r"\1", a) for a in answers if a}
    assert names - {"str", "dict[str, Any]"} <= set(SCHEMAS)


def _mypy(tmp_path: Path, name: str, source: str) -> tuple[int, list[str]]:
    """mypy --strict's exit status on ``source`` and its error lines."""
    script = tmp_path / f"{name}.py"
    script.write_text(source)
    report, _, status = mypy.api.run(["--strict", "--cache-dir", str(tmp_path / "cache"), str(script)])
    return status, [line for line in report.splitlines() if ": error:" in line]


ASYNC_MAIN = """import asyncio
from engram_service_client import AsyncEngram


async def main() -> str:
    async with AsyncEngram("http://127.0.0.1:1", "t") as engram:
{}


asyncio.run(main())
"""


@pytest.mark.parametrize(
    ("name", "body", "error"),
    [
        ("forgotten_await", 'prompt: str = engram.memory_context("agent", "alice")["prompt"]', "is not indexable  [index]"),
        ("unawaited_call", 'engram.memory_context("agent", "alice")', "must be used  [unused-coroutine]"),
        ("typo", 'prompt: str = (await engram.memory_context("agent", "alice", quer="tea"))["prompt"]', 'argument "quer"'),
        ("wrong_field", 'prompt: str = (await engram.memory_context("agent", "alice"))["block"]', '"block" is not a valid'),
        ("listed_field", 'prompt: str = [m["text"] async for m in engram.iterate("messages", "c")][0]', 'has no key "text"'),
        ("right", 'prompt: str = (await engram.memory_context("agent", "alice", query="tea"))["prompt"]', None),
    ],
)
def test_mypy_flags_a_forgotten_await_a_typo_and_a_wrong_field(tmp_path: Path, name: str, body: str, error: str | None) -> None:
    source = ASYNC_MAIN.format(f"        {body}\n        return prompt" if "prompt:" in body else f"        {body}\n        return ''")
    status, errors = _mypy(tmp_path, name, source)
    if error is None:
        assert (status, errors) == (0, [])
    else:
        assert status == 1 and len(errors) == 1 and error in errors[0], errors


def test_a_misspelt_keyword_is_a_type_error_and_a_runtime_error(tmp_path: Path) -> None:
    script = tmp_path / "typo.py"
    script.write_text(
        "from engram_service_client import Engram\n"
        'engram = Engram("http://127.0.0.1:1", "t")\n'
        'engram.memory_context("agent", "alice", quer="tea")\n'
        'engram.memory_context("agent", "alice", query="tea")\n'
    )
    report, _, status = mypy.api.run(["--strict", "--no-incremental", "--cache-dir", str(tmp_path / "cache"), str(script)])
    assert status == 1 and report.count("error:") == 1, report
    assert 'Unexpected keyword argument "quer"' in report and "typo.py:3:" in report, report
    with pytest.raises(TypeError):
        Engram("http://127.0.0.1:1", "t").memory_context("agent", "alice", quer="tea")  # type: ignore[call-arg]
