"""A Server Card client for the mcpgate tests: domain-level discovery as docs/discovery.md of the
`experimental-ext-server-card` extension describes it, then a connection with the official Python
SDK (mcp==2.3.0).

No released SDK carries a server-card client yet (python-sdk PR #2951, "Add experimental Server
Cards support (SEP-2127)", is a draft), so this follows the flow that PR implements:

1. GET <base>/.well-known/ai-catalog.json; the answer must be `application/ai-catalog+json` with a
   `specVersion` and `entries`;
2. keep the entries whose `type` is `application/mcp-server-card+json` (an entry carries its card
   by `url` or inline as `data`);
3. GET each `url` with `Accept: application/mcp-server-card+json`; the answer must carry that media
   type; the card must name the v1 `$schema` (a card that omits it is read as v1) and have a
   `name`, a `version` and a `description`;
4. connect to the card's `streamable-http` remote with the SDK's streamable HTTP client (`mode
   auto`: it probes `server/discover`), filling the `Authorization` header the card declares from
   --bearer when it declares one, and list the tools; then compare the card's `title` and
   `version` with the live `serverInfo` (the runtime values win where they disagree, so the client
   reports any difference).

Usage (run it with .work/venv/bin/python):
    server_card_client.py BASE_URL [--bearer TOKEN]

Output: one JSON object per card on stdout: {"identifier", "cardUrl", "contentType", "card",
"remote", "tools": [names], "serverInfo": {...}, "disagreements": [...]}. Exit status 0 on
success, 1 on any failure (a message on stderr).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

CARD_TYPE = "application/mcp-server-card+json"
CATALOG_TYPE = "application/ai-catalog+json"
CARD_SCHEMA = "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json"


def fail(message: str) -> None:
    raise SystemExit(f"server_card_client: {message}")


def media_type(response: httpx2.Response) -> str:
    return response.headers.get("content-type", "").split(";")[0].strip().lower()


async def fetch_catalog(http: httpx2.AsyncClient, base: str) -> list[dict[str, Any]]:
    url = base.rstrip("/") + "/.well-known/ai-catalog.json"
    r = await http.get(url, headers={"Accept": f"{CATALOG_TYPE}, application/json"})
    if r.status_code != 200:
        fail(f"{url}: HTTP {r.status_code}")
    if media_type(r) not in (CATALOG_TYPE, "application/json"):
        fail(f"{url}: media type {media_type(r)!r}, not {CATALOG_TYPE}")
    catalog = r.json()
    if not isinstance(catalog, dict) or not isinstance(catalog.get("specVersion"), str) or not isinstance(catalog.get("entries"), list):
        fail(f"{url}: not an AI Catalog: {catalog!r}")
    return [e for e in catalog["entries"] if isinstance(e, dict) and e.get("type") == CARD_TYPE]


async def fetch_card(http: httpx2.AsyncClient, entry: dict[str, Any]) -> tuple[dict[str, Any], str | None, str]:
    if "data" in entry:
        card, url, ctype = entry["data"], None, CARD_TYPE
    else:
        url = entry.get("url")
        if not isinstance(url, str):
            fail(f"entry {entry.get('identifier')!r} has neither url nor data")
        r = await http.get(url, headers={"Accept": CARD_TYPE})
        if r.status_code != 200:
            fail(f"{url}: HTTP {r.status_code}")
        ctype = media_type(r)
        if ctype != CARD_TYPE:
            fail(f"{url}: media type {ctype!r}, not {CARD_TYPE}")
        card = r.json()
    if not isinstance(card, dict):
        fail(f"{url}: a card is a JSON object")
    card.setdefault("$schema", CARD_SCHEMA)
    if card["$schema"] != CARD_SCHEMA:
        fail(f"{url}: $schema {card['$schema']!r} is not the v1 Server Card schema")
    for key in ("name", "version", "description"):
        if not isinstance(card.get(key), str):
            fail(f"{url}: the card has no {key}")
    return card, url, ctype


def header_value(declared: dict[str, Any], bearer: str | None) -> str | None:
    """The value of a header the card declares, its `{variables}` filled from --bearer."""
    value = declared.get("value")
    if not isinstance(value, str):
        return None
    for name in declared.get("variables") or {}:
        if bearer is None:
            return None
        value = value.replace("{" + name + "}", bearer)
    return value


async def connect(card: dict[str, Any], bearer: str | None) -> dict[str, Any]:
    remotes = [r for r in card.get("remotes") or [] if r.get("type") == "streamable-http"]
    if not remotes:
        fail(f"{card['name']}: no streamable-http remote")
    remote = remotes[0]
    headers: dict[str, str] = {}
    for declared in remote.get("headers") or []:
        value = header_value(declared, bearer)
        if value is not None:
            headers[declared["name"]] = value
        elif declared.get("isRequired"):
            fail(f"{card['name']}: the remote needs header {declared['name']} (pass --bearer)")
    http = create_mcp_http_client(headers=headers)
    async with Client(streamable_http_client(remote["url"], http_client=http), mode="auto") as client:
        tools = [t.name for t in (await client.list_tools()).tools]
        info = client.server_info
        server_info = info.model_dump(mode="json", by_alias=True, exclude_none=True) if info is not None else {}
    disagreements = [
        f"{key}: card {card.get(key)!r}, serverInfo {server_info.get(key)!r}"
        for key in ("title", "version")
        if key in card and card.get(key) != server_info.get(key)
    ]
    return {"remote": remote["url"], "tools": tools, "serverInfo": server_info, "disagreements": disagreements}


async def run(opts: argparse.Namespace) -> None:
    async with httpx2.AsyncClient(timeout=30) as http:
        entries = await fetch_catalog(http, opts.base)
        if not entries:
            fail("the catalog lists no MCP Server Card")
        for entry in entries:
            card, url, ctype = await fetch_card(http, entry)
            out = {"identifier": entry.get("identifier"), "cardUrl": url, "contentType": ctype, "card": card}
            out.update(await connect(card, opts.bearer))
            sys.stdout.write(json.dumps(out, ensure_ascii=False, separators=(",", ":")) + "\n")
            sys.stdout.flush()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base", help="the domain's base URL, e.g. http://127.0.0.1:8811")
    ap.add_argument("--bearer", metavar="TOKEN", help="the credential a card's Authorization header asks for")
    opts = ap.parse_args()
    try:
        anyio.run(run, opts)
    except SystemExit:
        raise
    except Exception as e:  # noqa: BLE001 - the exit status and message are the contract
        sys.stderr.write(f"server_card_client: {type(e).__name__}: {e}\n")
        sys.exit(1)


if __name__ == "__main__":
    main()
