"""A server whose lists change at runtime, for the mcpgate change-notification tests, built on the
official Python SDK's high-level `MCPServer` (mcp==2.3.0).

Tools:
  base            returns "base" (always there)
  add_tool(name)  adds a tool `name` (returning its name), then announces tools/list_changed
  add_many(n)     adds n tools one by one, announcing each (a burst of n announcements)
  touch(uri)      announces notifications/resources/updated for `uri`
  redescribe(name, description)
                  gives the tool `name` a new description (as a server changes a definition under
                  a running client: the "rug pull" of the pinning tests), then announces the change
  confirm(question) asks the client (elicitation) for a name and returns it
Resource: memo://changing/doc (clients may subscribe to it).

Announcements reach 2026-07-28 clients on their `subscriptions/listen` streams; for a legacy
(2025-11-25) client they go on its session's standalone GET stream (HTTP) or stdout (stdio), as
legacy servers do. `--legacy-only` (HTTP) refuses the 2026-07-28 era like a pre-2026 server.
`--start-delay S` sleeps before serving, like a slow-starting server.

Usage: changing_server.py --transport stdio|http [--port N] [--legacy-only] [--start-delay S]
HTTP binds 127.0.0.1 only and prints `LISTENING <port>` once ready.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from typing import Any

import anyio
from mcp.server.lowlevel import NotificationOptions
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel
from serving import serve_mcp_app

mcp = MCPServer("changing", instructions="A server whose tool list changes at runtime.")

# Legacy clients learn from the handshake that this server announces list changes.
_lowlevel = mcp._lowlevel_server  # noqa: SLF001 - the SDK offers no public hook for this option
_plain_options = _lowlevel.create_initialization_options


def _options(notification_options: Any = None, *args: Any, **kwargs: Any) -> Any:
    notification_options = notification_options or NotificationOptions(tools_changed=True, resources_changed=True, prompts_changed=True)
    return _plain_options(notification_options, *args, **kwargs)


_lowlevel.create_initialization_options = _options  # type: ignore[method-assign]


def _is_legacy(ctx: Context) -> bool:
    version = ctx.protocol_version
    return version is not None and version < "2026"


async def _announce_tools(ctx: Context) -> None:
    await ctx.notify_tools_changed()
    if _is_legacy(ctx):
        await ctx.request_context.session.send_tool_list_changed()


def _add(name: str) -> None:
    def added() -> str:
        return name

    mcp.add_tool(added, name=name, description=f"{name}: added at runtime")


@mcp.tool()
def base() -> str:
    """Always there."""
    return "base"


# The functions of the tools `redescribe` may give a new description.
_functions = {"base": base}


@mcp.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Adds a tool called `name`, then announces the change."""
    _add(name)
    await _announce_tools(ctx)
    return f"added {name}"


@mcp.tool()
async def add_many(n: int, ctx: Context) -> str:
    """Adds n tools, announcing each addition."""
    for i in range(n):
        _add(f"burst_{i}")
        await _announce_tools(ctx)
    return f"added {n}"


@mcp.tool()
async def redescribe(name: str, description: str, ctx: Context) -> str:
    """Gives the tool `name` a new description, then announces the change."""
    tool = next((t for t in await mcp.list_tools() if t.name == name), None)
    if tool is None:
        return f"no tool {name}"
    fn = _functions.get(name)
    if fn is None:
        return f"{name} cannot be redescribed"
    mcp.remove_tool(name)
    mcp.add_tool(fn, name=name, description=description)
    await _announce_tools(ctx)
    return f"redescribed {name}"


@mcp.tool()
async def touch(uri: str, ctx: Context) -> str:
    """Announces that the resource `uri` was updated."""
    await ctx.notify_resource_updated(uri)
    if _is_legacy(ctx):
        await ctx.request_context.session.send_resource_updated(uri)
    return f"touched {uri}"


class Answer(BaseModel):
    name: str


@mcp.tool()
async def confirm(question: str, ctx: Context) -> str:
    """Asks the client for a name (elicitation) and returns what it said."""
    result = await ctx.elicit(question, schema=Answer)
    if result.action != "accept":
        return f"no answer ({result.action})"
    return f"answered: {result.data.name}"


@mcp.resource("memo://changing/doc")
def doc() -> str:
    """A document clients may follow."""
    return "the document"


async def serve_http(port: int, legacy: bool) -> None:
    app = mcp.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    await serve_mcp_app(app, port, "changing_server", legacy=legacy)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--transport", choices=["stdio", "http"], required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--legacy-only", action="store_true")
    ap.add_argument("--start-delay", type=float, default=0.0)
    args = ap.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    time.sleep(args.start_delay)
    try:
        if args.transport == "stdio":
            anyio.run(mcp.run_stdio_async)
        else:
            anyio.run(serve_http, args.port, args.legacy_only)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
