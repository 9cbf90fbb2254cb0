"""2025-11-25 client input with the everyday legacy helpers: `ctx.elicit`, `ctx.session.create_message`
and `ctx.session.list_roots`. Each one is a real server-to-client request. At 2026-07-28 the SDK
refuses them with "no back-channel" (JSON-RPC error -32600, HTTP 400); only a gateway that relays
them makes these tools usable for 2026 clients. Also the logging/setLevel handler."""

import json
from typing import Annotated, Any, Literal

from mcp_types import EmptyResult, SamplingMessage, SetLevelRequestParams, TextContent
from pydantic import BaseModel, Field

from mcp.server import ServerRequestContext
from mcp.server.mcpserver import Context

from sdk_fixture.server import mcp


def summary(outcome: Any) -> str:
    content = outcome.data.model_dump(mode="json") if outcome.action == "accept" else {}
    return f"action={outcome.action}, content={json.dumps(content, sort_keys=True)}"


class UserInfo(BaseModel):
    username: str = Field(description="User's response")
    email: str = Field(description="User's email address")


class FormDefaults(BaseModel):
    """SEP-1034: a default for every primitive type."""

    name: str = Field("John Doe", description="User name")
    age: int = Field(30, description="User age")
    score: float = Field(95.5, description="User score")
    status: Literal["active", "inactive", "pending"] = Field("active", description="User status")
    verified: bool = Field(True, description="Verification status")


TITLED = [("value1", "First"), ("value2", "Second"), ("value3", "Third")]


class EnumVariants(BaseModel):
    """SEP-1330: all five enum shapes, spelled with pydantic `Field(json_schema_extra=...)`."""

    untitledSingle: Literal["option1", "option2", "option3"] | None = Field(None, description="Untitled single-select")
    titledSingle: str | None = Field(
        None,
        description="Titled single-select",
        json_schema_extra={"oneOf": [{"const": v, "title": f"{t} Option"} for v, t in TITLED]},
    )
    legacyEnum: Literal["opt1", "opt2", "opt3"] | None = Field(
        None,
        description="Legacy titled enum",
        json_schema_extra={"enumNames": ["Option One", "Option Two", "Option Three"]},
    )
    untitledMulti: list[Literal["option1", "option2", "option3"]] | None = Field(
        None, description="Untitled multi-select"
    )
    titledMulti: list[str] | None = Field(
        None,
        description="Titled multi-select",
        json_schema_extra={"items": {"anyOf": [{"const": v, "title": f"{t} Choice"} for v, t in TITLED]}},
    )


@mcp.tool()
async def test_sampling(
    prompt: Annotated[str, Field(description="The prompt to send to the LLM")], ctx: Context
) -> str:
    """Asks the client's LLM for a completion (sampling/createMessage; 2025-11-25 sessions only)."""
    result = await ctx.session.create_message(
        [SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
        max_tokens=100,
        related_request_id=ctx.request_id,  # on the calling POST's stream
    )
    text = result.content.text if isinstance(result.content, TextContent) else str(result.content)
    return f"LLM response: {text}"


@mcp.tool()
async def test_elicitation(
    message: Annotated[str, Field(description="The message to show the user")], ctx: Context
) -> str:
    """Asks the user for input (elicitation/create; 2025-11-25 sessions only)."""
    return f"User response: {summary(await ctx.elicit(message, UserInfo))}"


@mcp.tool()
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Elicitation whose schema has defaults for every primitive type (2025-11-25 sessions only)."""
    outcome = await ctx.elicit("Please review and update the form fields with defaults", FormDefaults)
    return f"Elicitation completed: {summary(outcome)}"


@mcp.tool()
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Elicitation whose schema has all 5 enum variants (2025-11-25 sessions only)."""
    outcome = await ctx.elicit("Please select options from the enum fields", EnumVariants)
    return f"Elicitation completed: {summary(outcome)}"


@mcp.tool()
async def test_list_roots(ctx: Context) -> str:
    """Lists the client's roots with roots/list (2025-11-25 sessions only; the suite does not call it).

    `ctx.session.list_roots()` takes no related request id, so over HTTP the request goes out on the
    session's standalone GET stream (the call waits until one is open), not on the calling POST's stream.
    """
    result = await ctx.session.list_roots()
    return f"Client roots: {', '.join(str(r.uri) for r in result.roots) or '(none)'}"


@mcp.tool()
async def test_whoami(ctx: Context) -> str:
    """Who this server thinks is calling, for the gateway's era-affinity tests (the suite does not call it):
    the clientInfo name of the session, its Mcp-Session-Id (HTTP), and the protocol version in use."""
    params = ctx.session.client_params
    name = params.client_info.name if params is not None else "-"
    session = (ctx.headers or {}).get("mcp-session-id", "-")
    return f"client={name} session={session} version={ctx.protocol_version}"


# MCPServer has no decorator for logging/setLevel, so the handler is registered on the SDK's low-level
# server (which also makes the handshake advertise `logging`). At 2026-07-28 the SDK refuses the
# method by itself (404, -32601).


async def set_logging_level(ctx: ServerRequestContext[Any, Any], params: SetLevelRequestParams) -> EmptyResult:
    # Accepted only: at 2025-11-25 the SDK sends every log level whatever the session asked for.
    return EmptyResult()


mcp._lowlevel_server.add_request_handler("logging/setLevel", SetLevelRequestParams, set_logging_level)  # noqa: SLF001
