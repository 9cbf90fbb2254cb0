"""Upstream MCP test server for the mcpgate test suite, built on the official Python SDK (mcp==2.3.0).

It uses the SDK's low-level `mcp.server.Server`, so the tool schemas below reach clients exactly as
written. The SDK is dual-era: the same process serves protocol 2026-07-28 (modern: no initialize,
`_meta` on every request, header validation) and the legacy 2024-11-05 … 2025-11-25 handshake eras.
Over stdio the first request a client sends picks the era. Over HTTP the era is chosen per request
by the `MCP-Protocol-Version` header.

Usage (run it with the venv that scripts/install-test-deps.sh creates):
    .work/venv/bin/python tests/py/upstream_server.py --transport stdio [--label NAME]
    .work/venv/bin/python tests/py/upstream_server.py --transport http [--port N] [--label NAME]
        [--json-response] [--no-param-validation] [--legacy-only]

HTTP binds only to 127.0.0.1. The endpoint is /mcp, and `--port 0` (the default) picks a free port.
Once the server is ready it prints `LISTENING <port>` on stdout, as a single flushed line. Over
stdio, stdout carries nothing but protocol messages, and logs go to stderr.

Tools: echo, whoami, big, fail, structured, schema_zoo, execute_sql, meta, calls, headers, slow, progress, and for the
supervision tests: noise (writes a non-UTF-8 line, a `size`-byte line and binary stderr straight to the file
descriptors), env (the names of its environment variables), pid, crash (exits at once) (see TOOLS).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from serving import serve_mcp_app
from mcp.shared.exceptions import MCPError

# ---------------------------------------------------------------------------------------------
# Tool definitions. The schemas are plain dicts, and the SDK sends them unchanged.
# ---------------------------------------------------------------------------------------------
SCHEMA_ZOO_INPUT: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "$defs": {
        "point": {
            "$anchor": "pt",
            "type": "object",
            "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
        }
    },
    "properties": {"p": {"$ref": "#/$defs/point"}, "q": {"$ref": "#pt"}},
}

TOOLS: list[types.Tool] = [
    types.Tool(
        name="echo",
        description="Returns its text argument unchanged.",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    ),
    types.Tool(
        name="whoami",
        description="Returns this server's --label.",
        input_schema={"type": "object", "additionalProperties": False},
    ),
    types.Tool(
        name="big",
        description="Returns `size` ASCII characters.",
        input_schema={"type": "object", "properties": {"size": {"type": "integer"}}, "required": ["size"]},
    ),
    types.Tool(
        name="fail",
        description="Always returns isError: true.",
        input_schema={"type": "object", "additionalProperties": False},
    ),
    types.Tool(
        name="structured",
        description="Adds a and b and returns structuredContent {sum}.",
        input_schema={
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
        output_schema={"type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"]},
    ),
    types.Tool(
        name="schema_zoo",
        description="Has a draft-07 inputSchema with $defs/$anchor/$ref; returns ok.",
        input_schema=SCHEMA_ZOO_INPUT,
    ),
    types.Tool(
        name="execute_sql",
        description="Echoes the region argument and the Mcp-Param-Region header it received.",
        input_schema={
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "query": {"type": "string"},
            },
            "required": ["region", "query"],
        },
    ),
    types.Tool(
        name="slow",
        description="Sleeps `seconds`, then returns done.",
        input_schema={"type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]},
    ),
    types.Tool(
        name="meta",
        description="Returns the request's _meta as this server received it, as JSON.",
        input_schema={"type": "object", "additionalProperties": False},
    ),
    types.Tool(
        name="calls",
        description="Returns how many tool calls this server has run before this one.",
        input_schema={"type": "object", "additionalProperties": False},
    ),
    types.Tool(
        name="headers",
        description="Returns every HTTP request header this server received for the call, as JSON (empty over stdio).",
        input_schema={"type": "object", "additionalProperties": False},
    ),
    types.Tool(
        name="progress",
        description="Emits `steps` progress notifications (when a progressToken was sent), then returns done.",
        input_schema={"type": "object", "properties": {"steps": {"type": "integer"}}, "required": ["steps"]},
    ),
]
TOOLS += [
    types.Tool(
        name="noise",
        description="Writes garbage to stdout (a non-UTF-8 line, then a line of `size` bytes) and binary stderr, then returns ok.",
        input_schema={"type": "object", "properties": {"size": {"type": "integer"}}},
    ),
    types.Tool(name="env", description="Returns the names of its environment variables, as JSON.", input_schema={"type": "object"}),
    types.Tool(name="pid", description="Returns its process id.", input_schema={"type": "object"}),
    types.Tool(name="crash", description="Exits the process at once.", input_schema={"type": "object"}),
]
TOOL_SCHEMAS = {t.name: t.input_schema for t in TOOLS}


def _text(text: str, *, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)


def _header(ctx: ServerRequestContext[Any, Any], name: str) -> str | None:
    """A request header as received (raw, still base64-sentinel-encoded), or None (stdio, or not sent)."""
    request = ctx.request
    headers = getattr(request, "headers", None)
    if headers is None:
        return None
    return headers.get(name)


def build_server(label: str, *, param_validation: bool = True) -> Server[Any]:
    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    served = {"calls": 0}

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        args: dict[str, Any] = dict(params.arguments or {})
        name = params.name
        served["calls"] += 1
        if name == "calls":
            return _text(str(served["calls"] - 1))
        if name == "noise":
            # Over stdio the SDK moves the protocol stream off fd 1 (which then goes to stderr):
            # write where the protocol goes, as a buggy server would.
            import mcp.server.stdio as sdk_stdio

            claim = sdk_stdio._claims.get(1)  # noqa: SLF001 - test-only: find the wire's real descriptor
            wire = claim.private_fd if claim is not None and claim.private_fd is not None else 1
            os.write(wire, b"\xff\xfe\x00 not UTF-8\n" + b"x" * int(args.get("size", 2 * 1024 * 1024)) + b"\n")
            os.write(2, b"\x00\xff\xfe binary stderr\n" * 3)
            return _text("ok")
        if name == "env":
            return _text(json.dumps(sorted(os.environ)))
        if name == "pid":
            return _text(str(os.getpid()))
        if name == "crash":
            os._exit(3)
        if name == "echo":
            return _text(str(args.get("text", "")))
        if name == "whoami":
            return _text(label)
        if name == "big":
            return _text("x" * int(args.get("size", 0)))
        if name == "fail":
            return _text("deliberate failure", is_error=True)
        if name == "structured":
            out = {"sum": int(args["a"]) + int(args["b"])}
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=json.dumps(out))], structured_content=out
            )
        if name == "schema_zoo":
            return _text("ok")
        if name == "execute_sql":
            header = _header(ctx, "mcp-param-region")
            return _text(f"region={args.get('region')} header={header if header is not None else 'none'} at={label}")
        if name == "meta":
            raw = params.meta if params.meta is not None else {}
            meta = raw if isinstance(raw, dict) else raw.model_dump(by_alias=True, exclude_none=True, mode="json")
            return _text(json.dumps(meta, sort_keys=True))
        if name == "headers":
            raw = getattr(ctx.request, "headers", None)
            seen = {k.lower(): v for k, v in raw.items()} if raw is not None else {}
            return _text(json.dumps(seen, sort_keys=True))
        if name == "slow":
            await anyio.sleep(float(args.get("seconds", 0)))
            return _text("done")
        if name == "progress":
            steps = int(args.get("steps", 0))
            for i in range(1, steps + 1):
                # No-op unless the request carried _meta.progressToken.
                await ctx.session.report_progress(i, steps, f"step {i}/{steps}")
                await anyio.sleep(0.01)
            return _text("done")
        raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {name}")

    return Server(
        "mcpgate-upstream",
        version="1.0.0",
        title=f"mcpgate test upstream ({label})",
        instructions=f"Test upstream labelled {label}.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        # Returning None from this lookup switches off the SDK's Mcp-Param-* header validation.
        get_tool_input_schema=None if param_validation else (lambda _name: None),
    )


async def serve_stdio(server: Server[Any]) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def serve_http(server: Server[Any], port: int, json_response: bool, legacy: bool = False) -> None:
    app = server.streamable_http_app(streamable_http_path="/mcp", json_response=json_response, host="127.0.0.1")
    await serve_mcp_app(app, port, "upstream_server", legacy=legacy)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--transport", choices=["stdio", "http"], required=True)
    ap.add_argument("--port", type=int, default=0, help="HTTP port on 127.0.0.1 (0 = ephemeral)")
    ap.add_argument("--label", default="upstream", help="what the whoami tool returns")
    ap.add_argument("--json-response", action="store_true", help="HTTP: never answer with SSE")
    ap.add_argument("--legacy-only", action="store_true", help="HTTP: refuse the 2026-07-28 era, like a pre-2026 server")
    ap.add_argument(
        "--no-param-validation",
        action="store_true",
        help="HTTP: switch off the SDK's Mcp-Param-* header/body check (the tool then reports what arrived)",
    )
    args = ap.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    server = build_server(args.label, param_validation=not args.no_param_validation)
    try:
        if args.transport == "stdio":
            anyio.run(serve_stdio, server)
        else:
            anyio.run(serve_http, server, args.port, args.json_response, args.legacy_only)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
