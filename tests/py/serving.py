"""Shared HTTP serving for the test servers: binds 127.0.0.1 only (port 0 = ephemeral), runs an
ASGI app under uvicorn, and prints one flushed `LISTENING <port>` line on stdout once ready."""

from __future__ import annotations

import socket
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio


async def serve_asgi(app: Any, port: int, prog: str, background: Callable[[], Awaitable[None]] | None = None) -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sys.exit(f"{prog}: cannot bind 127.0.0.1:{port}: {exc}")
    sock.listen(128)
    sock.setblocking(False)
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
