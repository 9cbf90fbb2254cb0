"""FastMCP 4.1.6's client with `SkillsClientExtension`, as a host loads skills (mcpgate tests):
lists every skill, gets each one, and reads each listed file with `resources/read`, printing one
JSON object: the skills, and per file URI its SHA-256 digest and size as read (or the error).
Usage: skills_client.py URL [BEARER]."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import sys

from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from fastmcp.skills import SkillsClientExtension


def _bytes(content) -> bytes:
    text = getattr(content, "text", None)
    if text is not None:
        return text.encode("utf-8")
    return base64.b64decode(getattr(content, "blob", "") or "")


async def main(url: str, bearer: str | None) -> None:
    headers = {"Authorization": f"Bearer {bearer}"} if bearer else None
    transport = StreamableHttpTransport(url, headers=headers)
    out: dict = {"skills": [], "got": {}, "files": {}}
    try:
        async with Client(transport, extensions=[SkillsClientExtension()]) as client:
            skills = await client.list_skills()
            out["skills"] = [s.model_dump(by_alias=True, exclude_none=True) for s in skills]
            for s in skills:
                got = await client.get_skill(s.uri)
                out["got"][s.uri] = got.model_dump(by_alias=True, exclude_none=True)
                for r in s.resources if isinstance(s.resources, list) else []:
                    try:
                        contents = await client.read_resource(r.uri)
                        data = b"".join(_bytes(c) for c in contents)
                        out["files"][r.uri] = {"digest": "sha256:" + hashlib.sha256(data).hexdigest(), "size": len(data)}
                    except Exception as e:  # noqa: BLE001 - reported to the test
                        out["files"][r.uri] = {"error": str(e)}
    except Exception as e:  # noqa: BLE001 - reported to the test
        out["error"] = f"{type(e).__name__}: {e}"
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
