"""The client covers the spec: every operation has a method, every model its fields."""

from __future__ import annotations

import json
import typing
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


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_models_have_the_spec_fields(name: str) -> None:
    spec_fields = set(SPEC["components"]["schemas"][name]["properties"])
    assert set(typing.get_type_hints(SCHEMAS[name])) == spec_fields


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
