"""A guard written as an MCP tool with the official Python SDK (mcp==2.3.0, `MCPServer`): mcpgate
calls `check` with the guard contract's request as its arguments (docs/guards.md) and reads the
verdict from its structured result.

  "tool-banned" in what it is sent -> deny; "tool-mask" in a request -> modify; else allow.

Usage: tool_guard.py [--transport http|stdio] [--port N]
"""

from __future__ import annotations

import json
from typing import Any

from mcp.server.mcpserver import MCPServer
from serving import run_server, serve_mcp_app

mcp = MCPServer("guard")


@mcp.tool()
def check(version: str, guard: str, point: str, caller: str, method: str, item: dict[str, Any], content: Any) -> dict[str, Any]:
    """Decides on what mcpgate sends through it (the guard contract)."""
    text = json.dumps(content)
    if "tool-banned" in text:
        return {"verdict": "deny", "reason": f"{guard} saw a banned word at {point}"}
    if point == "request" and "tool-mask" in text:
        return {"verdict": "modify", "content": json.loads(text.replace("tool-mask", "[masked by tool]"))}
    return {"verdict": "allow"}


async def serve_http(port: int) -> None:
    app = mcp.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    await serve_mcp_app(app, port, "tool_guard")


def main() -> None:
    run_server(__doc__, mcp.run_stdio_async, serve_http, default_transport="http")


if __name__ == "__main__":
    main()
