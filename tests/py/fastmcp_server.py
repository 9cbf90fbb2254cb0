"""A small FastMCP 4.1.6 server for the mcpgate test suite (stdio): third-party server software
behind the gateway, with a typed tool, a structured-output tool, a prompt and a resource."""

from __future__ import annotations

from fastmcp import FastMCP

mcp = FastMCP("fastmcp-upstream", instructions="A FastMCP server used by the mcpgate tests.")


@mcp.tool
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@mcp.tool
def shout(text: str) -> str:
    """Upper-cases the text."""
    return text.upper()


@mcp.prompt
def greeting(name: str) -> str:
    """A greeting for name."""
    return f"Say hello to {name}."


@mcp.resource("memo://fastmcp/note")
def note() -> str:
    """A fixed note."""
    return "remember the milk"


if __name__ == "__main__":
    mcp.run(transport="stdio", show_banner=False)
