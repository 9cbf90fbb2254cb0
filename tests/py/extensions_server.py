"""An upstream that declares extensions the gateway does and does not relay, for mcpgate's tests
(mcp==2.3.0, `MCPServer`, both eras on one endpoint).

It declares `com.example/unknown` (an extension no gateway knows, through the SDK's extension
interface), the tasks extension (tests/py/sdk_fixture/tasks.py) and MCP Apps
(`io.modelcontextprotocol/ui`, settings only). Its tool `client_extensions` answers with the
`capabilities.extensions` the server was told for the request (the 2026-07-28 request's `_meta`, or
the 2025-11-25 session's `initialize`), as JSON text, so a test sees what a gateway declares on a
client's behalf.

Usage: extensions_server.py --transport http [--port N]   (prints `LISTENING <port>`)
"""

import argparse
import json
import logging
import sys
from typing import Any

import anyio

from mcp.server.extension import Extension
from mcp.server.mcpserver import Context, MCPServer

from sdk_fixture.tasks import TasksExtension
from serving import serve_asgi

UNKNOWN = "com.example/unknown"


class Unknown(Extension):
    identifier = UNKNOWN

    def settings(self) -> dict[str, Any]:
        return {"promise": "something only this server and its own clients understand"}


class Apps(Extension):
    identifier = "io.modelcontextprotocol/ui"


mcp = MCPServer("extensions-server", version="1.0.0", extensions=[Unknown(), TasksExtension(), Apps()])


@mcp.tool()
def client_extensions(ctx: Context) -> str:
    """The client capability extensions this request (or its session) declared to the server."""
    caps = ctx.client_capabilities
    declared = (caps.extensions or {}) if caps is not None else {}
    return json.dumps(declared, sort_keys=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--transport", choices=["http"], required=True)
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    app = mcp.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    anyio.run(serve_asgi, app, args.port, "extensions_server")


if __name__ == "__main__":
    main()
