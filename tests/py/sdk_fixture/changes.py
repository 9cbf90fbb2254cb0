"""List changes and resource updates. A trigger really changes its list before it announces the change.
`ctx.notify_*` reaches 2026-07-28 `subscriptions/listen` streams. 2025-11-25 sessions are told with the
session's own notification methods, which over HTTP use the standalone GET stream (when there is none,
the SDK drops the notification). Also the 2025-11-25 resources/(un)subscribe handlers."""

from typing import Any

from mcp_types import EmptyResult, SubscribeRequestParams, UnsubscribeRequestParams

from mcp.server import ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.prompts import Prompt
from mcp.server.mcpserver.resources import TextResource
from mcp.server.session import ServerSession

from sdk_fixture.server import is_legacy, mcp

CHANGES = {"tools": 0, "prompts": 0, "resources": 0}


def dynamic_tool() -> str:
    """Appears and disappears with each test_trigger_tool_change."""
    return "dynamic tool"


def dynamic_prompt() -> str:
    """Appears and disappears with each test_trigger_prompt_change."""
    return "dynamic prompt"


@mcp.tool()
async def test_trigger_tool_change(ctx: Context) -> str:
    """Changes the tool list (toggles test_dynamic_tool) and announces it."""
    CHANGES["tools"] += 1
    if CHANGES["tools"] % 2:
        mcp.add_tool(dynamic_tool, name="test_dynamic_tool")
    else:
        mcp.remove_tool("test_dynamic_tool")
    await ctx.notify_tools_changed()
    if is_legacy(ctx):
        await ctx.session.send_tool_list_changed()
    return "tools/list_changed announced"


@mcp.tool()
async def test_trigger_prompt_change(ctx: Context) -> str:
    """Changes the prompt list (toggles test_dynamic_prompt) and announces it."""
    CHANGES["prompts"] += 1
    if CHANGES["prompts"] % 2:
        mcp.add_prompt(Prompt.from_function(dynamic_prompt, name="test_dynamic_prompt"))
    else:
        mcp.remove_prompt("test_dynamic_prompt")
    await ctx.notify_prompts_changed()
    if is_legacy(ctx):
        await ctx.session.send_prompt_list_changed()
    return "prompts/list_changed announced"


@mcp.tool()
async def test_trigger_resource_change(ctx: Context) -> str:
    """Adds a resource test://dynamic/<n> (MCPServer cannot remove one) and announces it."""
    CHANGES["resources"] += 1
    n = CHANGES["resources"]
    mcp.add_resource(TextResource(uri=f"test://dynamic/{n}", name=f"dynamic-{n}", text=f"dynamic resource {n}"))
    await ctx.notify_resources_changed()
    if is_legacy(ctx):
        await ctx.session.send_resource_list_changed()
    return "resources/list_changed announced"


# 2025-11-25 resource subscriptions: session key -> (session, subscribed URIs).
SUBSCRIBERS: dict[str, tuple[ServerSession, set[str]]] = {}


@mcp.tool()
async def test_trigger_resource_update(ctx: Context, uri: str = "test://watched-resource") -> str:
    """Announces notifications/resources/updated for a URI (default test://watched-resource)."""
    await ctx.notify_resource_updated(uri)
    sent = 0
    for session, uris in list(SUBSCRIBERS.values()):
        if uri in uris:
            await session.send_resource_updated(uri)
            sent += 1
    return f"resources/updated announced for {uri} ({sent} legacy subscriber(s))"


# MCPServer has no decorator for resources/subscribe and resources/unsubscribe, so these handlers are
# registered on the SDK's low-level server. That also makes the handshake advertise
# `resources.subscribe`. At 2026-07-28 the SDK refuses both methods by itself (404, -32601).


def session_key(ctx: ServerRequestContext[Any, Any]) -> str:
    headers = getattr(ctx.request, "headers", None)
    return (headers.get("mcp-session-id") if headers is not None else None) or "stdio"


async def subscribe(ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams) -> EmptyResult:
    key = session_key(ctx)
    _, uris = SUBSCRIBERS.get(key, (ctx.session, set()))
    uris.add(str(params.uri))
    SUBSCRIBERS[key] = (ctx.session, uris)
    return EmptyResult()


async def unsubscribe(ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams) -> EmptyResult:
    entry = SUBSCRIBERS.get(session_key(ctx))
    if entry is not None:
        entry[1].discard(str(params.uri))
    return EmptyResult()


mcp._lowlevel_server.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)  # noqa: SLF001
mcp._lowlevel_server.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)  # noqa: SLF001
