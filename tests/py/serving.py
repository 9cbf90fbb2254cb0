"""Shared HTTP serving for the test servers: binds 127.0.0.1 only (port 0 = ephemeral), runs an
ASGI app under uvicorn, and prints one flushed `LISTENING <port>` line on stdout once ready.
`serve_mcp_app` can make an SDK app answer like a server that predates 2026-07-28."""

from __future__ import annotations

import socket
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import json

import anyio


def bind_loopback(port: int, prog: str) -> socket.socket:
    """A listening socket on 127.0.0.1:`port` (0 = ephemeral), for apps that must know their port
    before they are built (pass it to `serve_asgi` as `sock`)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sys.exit(f"{prog}: cannot bind 127.0.0.1:{port}: {exc}")
    sock.listen(128)
    sock.setblocking(False)
    return sock


async def serve_asgi(
    app: Any,
    port: int,
    prog: str,
    background: Callable[[], Awaitable[None]] | None = None,
    *,
    sock: socket.socket | None = None,
) -> None:
    import uvicorn

    if sock is None:
        sock = bind_loopback(port, prog)
    bound_port = sock.getsockname()[1]
    uv = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False))

    async with anyio.create_task_group() as tg:
        if background is not None:
            tg.start_soon(background)

        async def serve() -> None:
            await uv.serve(sockets=[sock])
            tg.cancel_scope.cancel()

        tg.start_soon(serve)
        while not uv.started:
            if uv.should_exit:
                tg.cancel_scope.cancel()
                return
            await anyio.sleep(0.01)
        sys.stdout.write(f"LISTENING {bound_port}\n")
        sys.stdout.flush()


LEGACY_VERSIONS = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}


def legacy_only(app: Any) -> Any:
    """ASGI wrapper that makes the SDK answer like a server that predates 2026-07-28: any request
    with a modern MCP-Protocol-Version header gets the reply legacy SDKs give a request outside a
    session (400, -32000), so clients must fall back to `initialize`."""

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
            version = headers.get("mcp-protocol-version")
            if version is not None and version not in LEGACY_VERSIONS:
                body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": "Bad Request: Server not initialized"}}).encode()
                await send({"type": "http.response.start", "status": 400, "headers": [(b"content-type", b"application/json")]})
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return wrapped


async def serve_mcp_app(app: Any, port: int, prog: str, *, legacy: bool = False) -> None:
    """Serves an SDK app at /mcp; `legacy` refuses the 2026-07-28 era (see `legacy_only`)."""
    await serve_asgi(legacy_only(app) if legacy else app, port, prog)


def run_lowlevel(server: Any, port: int, prog: str) -> None:
    """Runs a low-level SDK `Server` over Streamable HTTP (JSON answers) at /mcp until interrupted."""

    async def serve() -> None:
        app = server.streamable_http_app(streamable_http_path="/mcp", json_response=True, host="127.0.0.1")
        await serve_mcp_app(app, port, prog)

    try:
        anyio.run(serve)
    except KeyboardInterrupt:
        pass


def run_server(doc: str | None, run_stdio: Callable[[], Awaitable[None]], serve_http: Callable[[int], Awaitable[None]],
               *, default_transport: str | None = "http") -> None:
    """The command line of a fixture server: `--transport stdio|http` (required when
    `default_transport` is None) and `--port` (0 = ephemeral, 127.0.0.1 only); warnings and errors
    go to stderr."""
    import argparse
    import logging

    ap = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    ap.add_argument("--transport", choices=["stdio", "http"], default=default_transport, required=default_transport is None)
    ap.add_argument("--port", type=int, default=0, help="HTTP port on 127.0.0.1 (0 = ephemeral)")
    args = ap.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    try:
        if args.transport == "stdio":
            anyio.run(run_stdio)
        else:
            anyio.run(serve_http, args.port)
    except KeyboardInterrupt:
        pass
