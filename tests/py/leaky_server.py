"""A hostile upstream for the secret-redaction tests (tests/e2e/secrets_paths.rs), built on the
official Python SDK's high-level `MCPServer` (mcp==2.3.0) and its usual helpers: it puts a fake AWS
access key and a fake GitHub token in every place an upstream can put text a client or its model
will see, other than a plain text result.

Tools:
  progress      reports progress whose message carries the keys (`ctx.report_progress`)
  log           sends log messages whose data carries them (`ctx.info`, `ctx.log` with a dict)
  fail          raises an MCPError whose message and data carry them (a JSON-RPC error)
  ask           asks the client (the SDK's `Elicit` resolver: input_required at 2026-07-28,
                elicitation/create before) a question whose message and schema carry them
  link          returns resource links whose name, title and description carry them
  deep          returns structured content nested `depth` levels deep, the key at the bottom
Completions: every completion value carries the keys.

Usage: leaky_server.py [--transport http|stdio] [--port N]
HTTP binds 127.0.0.1 only and prints `LISTENING <port>` once ready.
"""

from __future__ import annotations

import warnings
from typing import Annotated, Any

import mcp_types as types
from mcp.server.mcpserver import Context, Elicit, MCPServer, Resolve
from mcp.shared.exceptions import MCPError
from mcp_types import Completion
from pydantic import BaseModel, Field
from serving import run_server, serve_mcp_app

AWS = "AKIAIOSFODNN7EXAMPLE"
GITHUB = "ghp_0123456789abcdefghijABCDEFGHIJ012345"

mcp = MCPServer("leaky", instructions="Leaks credentials everywhere but in text results.")


@mcp.tool()
async def progress(ctx: Context) -> str:
    """Reports progress whose messages carry credentials."""
    await ctx.report_progress(1, 2, message=f"copied {AWS}")
    await ctx.report_progress(2, 2, message=f"copied {GITHUB}")
    return "progress done"


@mcp.tool()
async def log(ctx: Context) -> str:
    """Sends log messages that carry credentials."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        await ctx.info(f"read key {AWS}")
        await ctx.log("warning", {"config": {"token": GITHUB}, "note": "loaded"})
    return "log done"


@mcp.tool()
async def fail() -> str:
    """Fails with a JSON-RPC error that carries credentials."""
    raise MCPError(code=-32000, message=f"cannot use key {AWS}", data={"token": GITHUB, "hint": [f"try {AWS}"]})


class Paste(BaseModel):
    value: str = Field(description=f"Something like {GITHUB}")


def ask_paste() -> Elicit[Paste]:
    return Elicit(f"Is {AWS} still yours?", Paste)


@mcp.tool()
async def ask(answer: Annotated[Paste, Resolve(ask_paste)]) -> str:
    """Asks the client (the SDK's dual-era resolver) a question that carries credentials."""
    return "asked: accept"


@mcp.tool()
def link() -> list[types.ResourceLink]:
    """Returns resource links whose names and descriptions carry credentials."""
    return [
        types.ResourceLink(
            type="resource_link",
            uri="file:///creds/aws",
            name=f"aws-{AWS}",
            title=f"Key {AWS}",
            description=f"The token {GITHUB}",
        )
    ]


@mcp.tool()
def deep(depth: int) -> types.CallToolResult:
    """Returns structured content nested `depth` levels deep with a key at the bottom."""
    value: Any = {"key": AWS}
    for _ in range(depth):
        value = {"next": value}
    return types.CallToolResult(content=[types.TextContent(type="text", text="deep")], structured_content=value)


@mcp.resource("leak://{name}")
def leak(name: str) -> str:
    """A template clients complete."""
    return f"leak {name}"


@mcp.completion()
async def complete(ref: Any, argument: Any, context: Any) -> Completion | None:
    return Completion(values=[f"{AWS}", f"token-{GITHUB}"])


async def serve_http(port: int) -> None:
    app = mcp.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    await serve_mcp_app(app, port, "leaky_server")


def main() -> None:
    run_server(__doc__, mcp.run_stdio_async, serve_http, default_transport="http")


if __name__ == "__main__":
    main()
