"""Fixture MCP server for the official MCP conformance suite, built on the official Python SDK (mcp==2.3.0).

The server scenarios of `@modelcontextprotocol/conformance@0.2.0-alpha.12` call tools, prompts and
resources by exact name (`test_simple_text`, `test://static-text`, `test_prompt_with_arguments`, ...).
This server implements every name those scenarios use, for both requirement sets:

* `2025-11-25`: the stateful handshake era (initialize, `Mcp-Session-Id`, server-to-client requests
  such as `sampling/createMessage` and `elicitation/create` on the POST's SSE stream, logging/setLevel,
  resources/subscribe, ping);
* `2026-07-28`: the stateless era (server/discover, per-request `_meta`, `InputRequiredResult` with a
  sealed `requestState` instead of server-to-client requests, `subscriptions/listen`, caching hints,
  `Mcp-Method` / `Mcp-Name` / `Mcp-Param-*` header validation).

Like the SDK, one process serves both eras. Over HTTP the era is picked per request by the
`MCP-Protocol-Version` header; over stdio the first request picks it for the whole process.
It uses the SDK's low-level `mcp.server.Server` (the style of tests/py/upstream_server.py), so schemas
reach clients exactly as written here. `tests/conformance/README.md` maps scenarios to fixture items.

Usage (with the venv that scripts/install-test-deps.sh creates):
    .work/venv/bin/python tests/py/conformance_fixture.py --transport stdio
    .work/venv/bin/python tests/py/conformance_fixture.py --transport http [--port N] [--resumable]

HTTP binds only to 127.0.0.1, the endpoint is /mcp, and `--port 0` (the default) picks a free port.
Once the server is ready it prints `LISTENING <port>` on stdout as one flushed line. Over stdio, stdout
carries nothing but protocol messages; logs go to stderr.

`--resumable` adds an in-memory SSE event store (priming events with `id:`/`retry:`, `Last-Event-ID`
replay), which the unscored `server-sse-polling` scenario and its `test_reconnection` tool use.

The parts live in the `fixture` package next to this file (see fixture/__init__.py); this module owns
only the command line and the choice of transport.
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
from typing import Any

import anyio

from mcp.server import Server
from mcp.shared.exceptions import MCPDeprecationWarning
from serving import serve_asgi

from fixture.events import MemoryEventStore
from fixture.server import build_server
from fixture.tasks import TaskStore

# Logging, sampling and roots are deprecated at 2026-07-28 but are exactly what the 2025-11-25 scenarios
# exercise; the SDK's runtime deprecation warnings are noise here.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning)


async def serve_stdio(server: Server[Any], tasks: TaskStore) -> None:
    from mcp.server.stdio import stdio_server

    async with anyio.create_task_group() as tg:
        tg.start_soon(tasks.run)
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
        tg.cancel_scope.cancel()


async def serve_http(server: Server[Any], tasks: TaskStore, port: int, resumable: bool) -> None:
    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        host="127.0.0.1",
        event_store=MemoryEventStore() if resumable else None,
        retry_interval=500 if resumable else None,
    )
    await serve_asgi(app, port, "conformance_fixture", tasks.run)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--transport", choices=["stdio", "http"], required=True)
    ap.add_argument("--port", type=int, default=0, help="HTTP port on 127.0.0.1 (0 = ephemeral)")
    ap.add_argument(
        "--resumable",
        action="store_true",
        help="HTTP: keep an in-memory SSE event store (priming events, Last-Event-ID replay, test_reconnection)",
    )
    args = ap.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    tasks = TaskStore()
    server = build_server(tasks)
    try:
        if args.transport == "stdio":
            anyio.run(serve_stdio, server, tasks)
        else:
            anyio.run(serve_http, server, tasks, args.port, args.resumable)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
