"""An MCP server that takes personal API keys, the way many hosted servers do: every request must
carry one of the keys it was given in the `X-Api-Key` header, else it answers 401. Written on the
official Python SDK's `MCPServer` (`@mcp.tool()`), with the key check as ASGI middleware in front
of its Streamable HTTP app.

With `--card FILE`, `GET /mcp/server-card` answers that file (a Server Card, read at each request;
404 while it does not exist) without a key, as a server publishing its card does.

The tool `whoami` says which key the call came with (its owner's name and the key's SHA-256; the
key itself never), so a test can tell callers apart. Every request's key (SHA-256, or `null`)
is appended to `--log` as one JSON line.

Usage: api_key_server.py --keys alice=KEY1,bob=KEY2 [--log FILE] [--card FILE] [--port N]
Binds 127.0.0.1 only (port 0 = ephemeral); prints `LISTENING <port>` once ready.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from serving import bind_loopback, serve_asgi


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def build(owners: dict[str, str]) -> MCPServer:
    mcp = MCPServer("api-key-server", version="1.0.0")

    @mcp.tool()
    def whoami(ctx: Context) -> str:
        """Says whose API key this call came with."""
        key = (ctx.headers or {}).get("x-api-key")
        return json.dumps({"owner": owners.get(key or ""), "key_sha256": digest(key) if key else None})

    return mcp


def require_key(app: Any, owners: dict[str, str], log: str | None, card: str | None = None) -> Any:
    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        if card and scope["method"] == "GET" and scope["path"] == "/mcp/server-card":
            try:
                with open(card, "rb") as f:
                    status, body, kind = 200, f.read(), b"application/mcp-server-card+json"
            except OSError:
                status, body, kind = 404, b"{}", b"application/json"
            await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", kind)]})
            await send({"type": "http.response.body", "body": body})
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        key = headers.get("x-api-key")
        if log:
            with open(log, "a") as f:
                f.write(json.dumps({"key_sha256": digest(key) if key else None, "authorization": "authorization" in headers}) + "\n")
        if key not in owners:
            body = json.dumps({"error": "a valid X-Api-Key is required"}).encode()
            await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    return wrapped


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--keys", required=True, help="owner=key pairs, comma-separated")
    ap.add_argument("--log", help="append each request's key digest here (JSON lines)")
    ap.add_argument("--card", help="serve this file as the server's card at GET /mcp/server-card")
    args = ap.parse_args()
    owners = {}
    for pair in args.keys.split(","):
        owner, _, key = pair.partition("=")
        owners[key] = owner
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    sock = bind_loopback(args.port, "api_key_server")
    app = build(owners).streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    try:
        anyio.run(lambda: serve_asgi(require_key(app, owners, args.log, args.card), 0, "api_key_server", sock=sock))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
