"""A server that lists its tools, prompts and resources in a new random order on every request,
built on the official Python SDK's low-level `Server` (mcp==2.3.0), for mcpgate's test that a re-listed
list with the same items keeps the order the catalogue already had.

Tools: t0 … t11 (each answers its own name), and `lists` (how many tools/list requests it has
answered). Prompts: p0 … p5. Resources: mem://r0 … mem://r5. `ttlMs: 0` on every list, so a
gateway re-lists on its own schedule.

Usage: shuffled_server.py [--port N]
HTTP only; binds 127.0.0.1 and prints `LISTENING <port>` once ready.
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from serving import run_lowlevel

TOOLS = [types.Tool(name=f"t{i}", description=f"Tool {i}.", input_schema={"type": "object"}) for i in range(12)]
TOOLS.append(types.Tool(name="lists", description="How many tools/list requests were answered.", input_schema={"type": "object"}))
LISTED = {"tools": 0}
PROMPTS = [types.Prompt(name=f"p{i}", description=f"Prompt {i}.") for i in range(6)]
RESOURCES = [types.Resource(uri=f"mem://r{i}", name=f"r{i}", mime_type="text/plain") for i in range(6)]


def shuffled(items: list[Any]) -> list[Any]:
    out = list(items)
    random.shuffle(out)
    return out


def build() -> Server[Any]:
    async def list_tools(ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        LISTED["tools"] += 1
        return types.ListToolsResult(tools=shuffled(TOOLS), ttl_ms=0)

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        text = str(LISTED["tools"]) if params.name == "lists" else params.name
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    async def list_prompts(ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=shuffled(PROMPTS), ttl_ms=0)

    async def list_resources(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=shuffled(RESOURCES), ttl_ms=0)

    return Server(
        "shuffled",
        version="1.0.0",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_prompts=list_prompts,
        on_list_resources=list_resources,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--transport", choices=["http"], default="http")
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    run_lowlevel(build(), args.port, "shuffled_server")


if __name__ == "__main__":
    main()
