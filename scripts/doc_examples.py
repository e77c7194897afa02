#!/usr/bin/env python3
"""Runs every TypeScript and Python code block of README.md and docs/clients.md, unchanged,
as a newcomer would: from a project outside this repository into which the built client
packages were installed (scripts/test-clients makes it).

    doc_examples.py write PROJECT        # the blocks as PROJECT/ts/example_N.ts and PROJECT/py/example_N.py
    doc_examples.py run PROJECT          # runs each against ENGRAM_URL, a fresh tenant each

A block that does not compile or type-check (`tsc --strict`, `mypy --strict`, both run by
scripts/test-clients between the two steps), exits non-zero or outlasts its time limit is
a failure; no block is skipped. Each block gets ENGRAM_URL, ENGRAM_TOKEN (an admin token of
a tenant of its own) and ENGRAM_USER_TOKEN (that tenant's token bound to agent `concierge`
and user `alice`, as `engram token --agent-id concierge --external-ref alice` makes), signed
with ENGRAM_JWT_SECRET.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOCUMENTS = ["README.md", "docs/clients.md"]
LANGUAGES = {"ts": "ts", "typescript": "ts", "python": "py"}
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[A-Za-z]+)[ \t]*$")
LIMIT_SECONDS = 120


def blocks() -> list[tuple[str, int, str, str]]:
    """(document, line, language, code) of every TypeScript and Python block, in order."""
    found = []
    for document in DOCUMENTS:
        lines = (REPO / document).read_text().splitlines()
        i = 0
        while i < len(lines):
            fence = FENCE.match(lines[i])
            i += 1
            if not fence:
                continue
            indent, start, body = fence["indent"], i, []
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i].lstrip())
                i += 1
            i += 1
            language = LANGUAGES.get(fence["lang"].lower())
            if language:
                found.append((document, start, language, "\n".join(body) + "\n"))
    return found


def write(project: Path) -> None:
    manifest = []
    for n, (document, line, language, code) in enumerate(blocks()):
        path = project / language / f"example_{n}.{language}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code)
        manifest.append({"document": document, "line": line, "language": language, "file": str(path)})
    (project / "examples.json").write_text(json.dumps(manifest, indent=1))
    counts = {lang: sum(1 for m in manifest if m["language"] == lang) for lang in ("ts", "py")}
    print(f"{counts['ts']} TypeScript and {counts['py']} Python blocks from {', '.join(DOCUMENTS)}")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def token(secret: str, **claims: object) -> str:
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = _b64(json.dumps({"exp": int(time.time()) + 3600, **claims}).encode())
    signature = hmac.new(secret.encode(), f"{header}.{body}".encode(), hashlib.sha256).digest()
    return f"{header}.{body}.{_b64(signature)}"


def run(project: Path) -> int:
    secret = os.environ["ENGRAM_JWT_SECRET"]
    failed = []
    for example in json.loads((project / "examples.json").read_text()):
        tenant = f"doc-{uuid.uuid4()}"
        env = {
            **os.environ,
            "ENGRAM_TOKEN": token(secret, tenant=tenant, scope="admin rgpd"),
            "ENGRAM_USER_TOKEN": token(
                secret,
                tenant=tenant,
                scope="memory:read memory:write",
                agent_id="concierge",
                external_ref="alice",
            ),
            "NODE_ENV": "production",  # keeps VoltAgent from fetching its model registry
        }
        file = Path(example["file"])
        if example["language"] == "ts":
            command = ["node", str(project / "build" / f"{file.stem}.js")]
        else:
            command = [str(project / "venv" / "bin" / "python"), str(file)]
        where = f"{example['document']}:{example['line']} ({example['language']})"
        started = time.monotonic()
        try:
            done = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=LIMIT_SECONDS)
            ok, output = done.returncode == 0, done.stdout + done.stderr
        except subprocess.TimeoutExpired as expired:
            ok, output = False, f"still running after {LIMIT_SECONDS} s\n{expired.stdout or ''}{expired.stderr or ''}"
        print(f"{'ok  ' if ok else 'FAIL'} {where} {time.monotonic() - started:.1f} s")
        if not ok:
            failed.append(where)
            print("    " + "\n    ".join(str(output).strip().splitlines()[-30:]))
    if failed:
        print(f"examples failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in {"write", "run"}:
        sys.exit(__doc__)
    target = Path(sys.argv[2]).resolve()
    if sys.argv[1] == "write":
        write(target)
    else:
        sys.exit(run(target))
