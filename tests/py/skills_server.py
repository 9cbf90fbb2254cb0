"""A FastMCP 4.1.6 server publishing Agent Skills (SEP-2640) the everyday way, for the mcpgate
test suite: `SkillsDirectoryProvider` over the skill folders under `--root` (each folder holding a
SKILL.md with YAML frontmatter, and any supporting files), exposed through `SkillsExtension`.
With `--directory-read`, the extension also declares `directoryRead: true` and serves
`resources/directory/read` (FastMCP 4.1.6 does not yet: a small subclass does, over the same
folders: the direct children of a skill directory, subdirectories as `inode/directory`).
stdio by default; `--transport http --port 0` serves Streamable HTTP and prints `LISTENING <port>`."""

from __future__ import annotations

import argparse
import mimetypes
import socket
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import mcp_types
from mcp.shared.exceptions import MCPError
from mcp.shared.path_security import PathEscapeError, safe_join
from mcp_types import INVALID_PARAMS

from fastmcp import FastMCP
from fastmcp.server.extensions import MethodBinding
from fastmcp.server.providers.skills import SkillsDirectoryProvider
from fastmcp.skills.extension import SkillsExtension

SCHEME = "skill://"


class DirectoryReadParams(mcp_types.RequestParams):
    uri: str
    cursor: str | None = None


class DirectorySkillsExtension(SkillsExtension):
    """`SkillsExtension` with `resources/directory/read` over the skill folders under `root`."""

    def __init__(self, *, providers: list, root: Path) -> None:
        super().__init__(providers=providers)
        self._root = root

    def settings(self) -> dict[str, Any]:
        return {"directoryRead": True}

    def methods(self):
        read = MethodBinding(method="resources/directory/read", params_type=DirectoryReadParams, handler=self._read_directory)
        return (*super().methods(), read)

    async def _read_directory(self, context: Any, params: DirectoryReadParams) -> dict[str, Any]:
        if not params.uri.startswith(SCHEME):
            raise MCPError(code=INVALID_PARAMS, message=f"Not a skill directory: {params.uri}")
        rel = unquote(params.uri[len(SCHEME) :]).strip("/")
        try:
            path = safe_join(self._root, rel)
        except (PathEscapeError, OSError, ValueError):
            raise MCPError(code=INVALID_PARAMS, message=f"Not a skill directory: {params.uri}") from None
        if not rel or not path.is_dir() or path.is_symlink():
            raise MCPError(code=INVALID_PARAMS, message=f"Not a directory: {params.uri}")
        children = []
        for child in sorted(path.iterdir()):
            uri = f"{SCHEME}{quote(rel, safe='/')}/{quote(child.name)}"
            mime = "inode/directory" if child.is_dir() else mimetypes.guess_type(child.name)[0] or "application/octet-stream"
            children.append({"uri": uri, "name": child.name, "mimeType": mime})
        return {"resources": children, "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}


def build(root: str, name: str, directory_read: bool = False) -> FastMCP:
    mcp = FastMCP(name)
    provider = SkillsDirectoryProvider(roots=root, supporting_files="resources", experimental_skills=True)
    mcp.add_provider(provider)
    if directory_read:
        mcp.add_extension(DirectorySkillsExtension(providers=[provider], root=Path(root).absolute()))
    else:
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
    parser.add_argument("--directory-read", action="store_true")
    args = parser.parse_args()
    mcp = build(args.root, args.name, args.directory_read)
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
