"""A hostile upstream for the bounded-schema-check tests (Part 31), on the official Python SDK's
low-level server (mcp==2.3.0), so its tool schemas reach the gateway exactly as written.

Tools:
  deep    its inputSchema nests `anyOf` over `$ref` LEVELS deep (two references to the next level
          at each): checking a value that fails them all applies 2^LEVELS subschemas
  forked  a small recursive schema whose two branches both recurse into member `c`: checking
          arguments nested N deep applies it 2^N times
  calls   how many tool calls this server has run before this one

Usage: hostile_schema_server.py --transport http [--port N] [--levels 22]
HTTP binds 127.0.0.1 only and prints `LISTENING <port>` once ready.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from serving import serve_mcp_app


def deep_schema(levels: int) -> dict[str, Any]:
    defs: dict[str, Any] = {f"l{i}": {"anyOf": [{"$ref": f"#/$defs/l{i + 1}"}] * 2} for i in range(levels)}
    defs[f"l{levels}"] = {"type": "string"}
    return {"type": "object", "properties": {"x": {"$ref": "#/$defs/l0"}}, "$defs": defs}


FORKED = {
    "type": "object",
    "properties": {"x": {"$ref": "#/$defs/node"}},
    "$defs": {
        "node": {
            "anyOf": [
                {"type": "object", "properties": {"c": {"$ref": "#/$defs/node"}}},
                {"type": "object", "properties": {"c": {"$ref": "#/$defs/node"}}},
                {"type": "integer"},
            ]
        }
    },
}


def build_server(levels: int) -> Server[Any]:
    tools = [
        types.Tool(name="deep", description="A schema that expands exponentially.", input_schema=deep_schema(levels)),
        types.Tool(name="forked", description="A recursive schema with two recursing branches.", input_schema=FORKED),
        types.Tool(name="calls", description="How many calls ran before this one.", input_schema={"type": "object"}),
    ]
    served = {"calls": 0}

    async def list_tools(ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        served["calls"] += 1
        text = str(served["calls"] - 1) if params.name == "calls" else "ran"
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    return Server("hostile-schema", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_http(server: Server[Any], port: int) -> None:
    app = server.streamable_http_app(streamable_http_path="/mcp", json_response=True, host="127.0.0.1")
    await serve_mcp_app(app, port, "hostile_schema_server")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--transport", choices=["http"], required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--levels", type=int, default=22)
    args = ap.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    anyio.run(serve_http, build_server(args.levels), args.port)


if __name__ == "__main__":
    main()
