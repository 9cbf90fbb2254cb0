"""The one `MCPServer` every module decorates, the tools it is built with, and small shared helpers."""

import base64
import json
from typing import Any

from mcp_types import EmbeddedResource, TextResourceContents
from mcp_types.version import is_version_at_least

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.tools import Tool

SERVER_NAME = "mcpgate-sdk-fixture"

# 1x1 red PNG and a minimal (empty) WAV, as in the suite's reference fixture.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
WAV = base64.b64decode("UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=")


def is_legacy(ctx: Context) -> bool:
    """True for a 2025-11-25 (handshake-era) request, which has a back-channel to the client."""
    version = ctx.protocol_version
    return version is None or not is_version_at_least(version, "2026-07-28")


def embedded(uri: str, text: str, mime_type: str = "text/plain") -> EmbeddedResource:
    return EmbeddedResource(type="resource", resource=TextResourceContents(uri=uri, mime_type=mime_type, text=text))


# These two tools are built first and passed to `MCPServer(tools=...)`. json_schema_2020_12_tool needs
# a hand-written JSON Schema 2020-12 document ($schema, $defs.address with $anchor, allOf/anyOf,
# if/then/else, additionalProperties: false). The high-level API always derives inputSchema from the
# function signature, so this tool is built with `Tool.from_function` and its `parameters` replaced.
# Tools passed this way are listed before the decorated ones. test_simple_text is listed first,
# because http-header-validation calls the first listed tool with `{}`.

# The suite checks this schema reaches clients unchanged; it is the same document the low-level
# fixture serves, so it is taken from there.
from fixture.catalogue import JSON_SCHEMA_2020_12  # noqa: E402
from sdk_fixture.tasks import TasksExtension  # noqa: E402


def test_simple_text() -> str:
    """Returns a simple text content block."""
    return "This is a simple text response for testing."


def json_schema_2020_12_tool(
    name: str | None = None,
    address: dict[str, str] | None = None,
    contactMethod: str | None = None,
    phone: str | None = None,
    email: str | None = None,
) -> str:
    """Tool with JSON Schema 2020-12 features ($defs/$anchor, allOf/anyOf, if/then/else)."""
    given = {"name": name, "address": address, "contactMethod": contactMethod, "phone": phone, "email": email}
    received = json.dumps({k: v for k, v in given.items() if v is not None}, sort_keys=True)
    return f"json_schema_2020_12_tool received {received}"


mcp = MCPServer(
    SERVER_NAME,
    title="mcpgate everyday-SDK conformance fixture",
    instructions="Everyday MCPServer fixture for the MCP conformance suite (2025-11-25 and 2026-07-28).",
    version="1.0.0",
    log_level="WARNING",
    tools=[
        Tool.from_function(test_simple_text),
        Tool.from_function(json_schema_2020_12_tool).model_copy(update={"parameters": JSON_SCHEMA_2020_12}),
    ],
    # The tasks extension (SEP-2663), through the SDK's extension interface: see sdk_fixture/tasks.py.
    extensions=[TasksExtension()],
)
