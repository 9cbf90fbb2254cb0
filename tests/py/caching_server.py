"""A server with cache hints, for the mcpgate catalogue-caching tests, built on the official Python
SDK's low-level `Server` (mcp==2.3.0). It announces no list changes, so a gateway re-lists it on the
schedule its `ttlMs` sets.

Its lists and reads say `ttlMs: <--ttl-ms>` and `cacheScope: "public"`.
Tools:
  lists         how many tools/list requests it has answered
  break_lists   from now on, tools/list fails (a JSON-RPC error); calls keep working
Resource: mem://note (public, `ttlMs` as above).

Usage: caching_server.py --ttl-ms N [--port N]
HTTP only; binds 127.0.0.1 and prints `LISTENING <port>` once ready.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError
from serving import run_lowlevel

TOOLS = [
    types.Tool(name="lists", description="How many tools/list requests were answered.", input_schema={"type": "object"}),
    types.Tool(name="break_lists", description="Makes tools/list fail from now on.", input_schema={"type": "object"}),
]


def build(ttl_ms: int) -> Server[Any]:
    state = {"lists": 0, "broken": False}

    async def list_tools(ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        if state["broken"]:
            raise MCPError(code=types.INTERNAL_ERROR, message="the tool list is unavailable")
        state["lists"] += 1
        return types.ListToolsResult(tools=TOOLS, ttl_ms=ttl_ms, cache_scope="public")

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name == "lists":
            text = str(state["lists"])
        elif params.name == "break_lists":
            state["broken"] = True
            text = "broken"
        else:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    async def list_resources(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        note = types.Resource(uri="mem://note", name="note", mime_type="text/plain")
        return types.ListResourcesResult(resources=[note], ttl_ms=ttl_ms, cache_scope="public")

    async def read_resource(ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        if str(params.uri) != "mem://note":
            raise MCPError(code=types.INVALID_PARAMS, message="Resource not found", data={"uri": str(params.uri)})
        contents = [types.TextResourceContents(uri="mem://note", mime_type="text/plain", text="a public note")]
        return types.ReadResourceResult(contents=contents, ttl_ms=ttl_ms, cache_scope="public")

    return Server(
        "caching",
        version="1.0.0",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--transport", choices=["http"], default="http")
    ap.add_argument("--ttl-ms", type=int, required=True)
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    run_lowlevel(build(args.ttl_ms), args.port, "caching_server")


if __name__ == "__main__":
    main()
