"""Tools that need no client input (content types, errors, logging, progress, header echo, stream
close), plus the resources, prompts and completion."""

import json
from typing import Annotated

import anyio
from mcp_types import (
    Completion,
    CompletionArgument,
    CompletionContext,
    EmbeddedResource,
    PromptReference,
    ResourceTemplateReference,
    TextContent,
)
from pydantic import Field

from mcp.server.mcpserver import Audio, Context, Image, UserMessage
from mcp.server.mcpserver.exceptions import ToolError

from sdk_fixture.server import PNG, SERVER_NAME, WAV, embedded, mcp


@mcp.tool()
def test_image_content() -> Image:
    """Returns an image content block (1x1 PNG)."""
    return Image(data=PNG, format="png")


@mcp.tool()
def test_audio_content() -> Audio:
    """Returns an audio content block (audio/wav)."""
    return Audio(data=WAV, format="wav")


@mcp.tool()
def test_embedded_resource() -> EmbeddedResource:
    """Returns an embedded text resource."""
    return embedded("test://embedded-resource", "This is an embedded resource content.")


@mcp.tool()
def test_multiple_content_types() -> list[TextContent | Image | EmbeddedResource]:
    """Returns text, image and embedded resource content."""
    return [
        TextContent(type="text", text="Multiple content types test:"),
        Image(data=PNG, format="png"),
        embedded("test://mixed-content-resource", json.dumps({"test": "data", "value": 123}), "application/json"),
    ]


@mcp.tool()
def test_error_handling() -> str:
    """Always fails: the SDK turns the ToolError into isError: true."""
    raise ToolError("This tool intentionally returns an error for testing")


async def log_three(ctx: Context) -> str:
    # At 2026-07-28 the SDK drops these unless the request's _meta set io.modelcontextprotocol/logLevel.
    # At 2025-11-25 it sends every level, whatever logging/setLevel asked for.
    await ctx.info("Tool execution started", logger_name=SERVER_NAME)
    await anyio.sleep(0.05)
    await ctx.info("Tool processing data", logger_name=SERVER_NAME)
    await anyio.sleep(0.05)
    await ctx.info("Tool execution completed", logger_name=SERVER_NAME)
    return "Tool with logging executed successfully"


mcp.add_tool(log_three, name="test_tool_with_logging", description="Sends 3 info log notifications while running.")
mcp.add_tool(log_three, name="test_logging_tool", description="Same as test_tool_with_logging (server-stateless).")


@mcp.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0/100, 50/100, 100/100 when a progressToken is sent."""
    for step in (0, 50, 100):
        await ctx.report_progress(step, 100, f"Completed step {step} of 100")
        if step != 100:
            await anyio.sleep(0.05)
    return "Progress tool completed"


@mcp.tool()
async def test_x_mcp_header(
    region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})],
    ctx: Context,
    query: str | None = None,
) -> str:
    """Echoes its x-mcp-header argument `region` and the Mcp-Param-Region header it received."""
    header = (ctx.headers or {}).get("mcp-param-region")
    return f"region={region} header={header if header is not None else 'none'}"


@mcp.tool()
async def test_reconnection(ctx: Context) -> str:
    """2025: closes its SSE stream mid-call (a no-op without an event store), then answers."""
    await ctx.close_sse_stream()
    await anyio.sleep(0.1)
    return "Reconnection test completed successfully."


# Resources ------------------------------------------------------------------------------------


@mcp.resource("test://static-text", name="static-text", description="A static text resource.", mime_type="text/plain")
def static_text() -> str:
    return "This is the content of the static text resource."


@mcp.resource("test://static-binary", name="static-binary", description="A 1x1 PNG.", mime_type="image/png")
def static_binary() -> bytes:
    return PNG


@mcp.resource("test://watched-resource", name="watched-resource", description="Subscribable.", mime_type="text/plain")
def watched_resource() -> str:
    return "Watched resource content"


@mcp.resource(
    "test://template/{id}/data", name="template-data", description="Data for an id.", mime_type="application/json"
)
def template_data(id: str) -> str:
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


# Prompts and completion -----------------------------------------------------------------------


@mcp.prompt()
def test_simple_prompt() -> str:
    """A simple prompt without arguments."""
    return "This is a simple prompt for testing."


@mcp.prompt()
def test_prompt_with_arguments(
    arg1: Annotated[str, Field(description="First test argument")],
    arg2: Annotated[str, Field(description="Second test argument")],
) -> str:
    """A prompt with two required arguments."""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@mcp.prompt()
def test_prompt_with_embedded_resource(
    resourceUri: Annotated[str, Field(description="URI of the resource to embed")],
) -> list[UserMessage]:
    """A prompt embedding a resource."""
    return [
        UserMessage(embedded(resourceUri, "Embedded resource content for testing.")),
        UserMessage("Please process the embedded resource above."),
    ]


@mcp.prompt()
def test_prompt_with_image() -> list[UserMessage]:
    """A prompt with image content."""
    return [UserMessage(Image(data=PNG, format="png")), UserMessage("Please analyze the image above.")]


COMPLETIONS: dict[tuple[str, str], list[str]] = {
    ("test_prompt_with_arguments", "arg1"): ["paris", "park", "party", "test", "testValue1"],
    ("test_prompt_with_arguments", "arg2"): ["world", "wonder", "testValue2"],
    ("test_prompt_with_embedded_resource", "resourceUri"): ["test://static-text", "test://example-resource"],
    ("test://template/{id}/data", "id"): ["1", "2", "3", "123"],
}


@mcp.completion()
async def complete(
    ref: PromptReference | ResourceTemplateReference, argument: CompletionArgument, context: CompletionContext | None
) -> Completion:
    target = ref.name if isinstance(ref, PromptReference) else ref.uri
    values = [v for v in COMPLETIONS.get((target, argument.name), []) if v.startswith(argument.value)]
    return Completion(values=values, total=len(values), has_more=False)
