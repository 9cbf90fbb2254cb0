"""A FastMCP 4.1.6 server publishing Agent Skills (SEP-2640) the everyday way, for the mcpgate
test suite: `SkillsDirectoryProvider` over the skill folders under `--root` (each folder holding a
SKILL.md with YAML frontmatter, and any supporting files), exposed through `SkillsExtension`.
stdio by default; `--transport http --port 0` serves Streamable HTTP and prints `LISTENING <port>`."""

from __future__ import annotations

import argparse
import socket

from fastmcp import FastMCP
from fastmcp.server.providers.skills import SkillsDirectoryProvider
from fastmcp.skills.extension import SkillsExtension


def build(root: str, name: str) -> FastMCP:
    mcp = FastMCP(name)
    provider = SkillsDirectoryProvider(roots=root, supporting_files="resources", experimental_skills=True)
    mcp.add_provider(provider)
    mcp.add_extension(SkillsExtension(providers=[provider]))

    @mcp.tool
    def ping() -> str:
        """Answers pong."""
        return "pong"

    return mcp


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--name", default="skilled")
    parser.add_argument("--transport", default="stdio")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    mcp = build(args.root, args.name)
    if args.transport == "stdio":
        mcp.run(transport="stdio", show_banner=False)
        return
    port = args.port
    if port == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    print(f"LISTENING {port}", flush=True)
    mcp.run(transport="http", host="127.0.0.1", port=port, path="/mcp", show_banner=False)


if __name__ == "__main__":
    main()
