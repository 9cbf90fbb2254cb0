"""Everyday-SDK fixture server for the official MCP conformance suite (mcp==2.3.0, high-level `MCPServer`).

This is the counterpart of tests/py/conformance_fixture.py. That fixture is written on the SDK's
low-level `Server` and builds every wire shape by hand so that it passes the suite in both protocol
eras. This one is written the way everyday servers are written: `@mcp.tool()`, `@mcp.resource(...)`,
`@mcp.prompt()`, `@mcp.completion()` and `Context`. It implements the same tool, resource, prompt
and completion names that the suite's server scenarios use, for both requirement sets, and the tasks
extension (SEP-2663) through the SDK's extension interface (sdk_fixture/tasks.py, 2026-07-28 only).
It exists to prove era affinity through the gateway:

* the 2025-11-25 input tools use the legacy helpers (`ctx.elicit`, `ctx.session.create_message`,
  `ctx.session.list_roots`). They only work in a 2025-11-25 session; at 2026-07-28 the SDK refuses
  them with "no back-channel";
* the 2026-07-28 `test_input_required_result_*` tools use the SDK's dual-era `Resolve(...)` markers,
  which send standalone requests at 2025 and batch into an InputRequiredResult at 2026.

Behind mcpgate, clients of both eras should be able to use every tool.

Like any MCPServer, one process serves both eras. Over HTTP the era is picked per request: 2025-11-25
sessions and 2026-07-28 stateless requests share the one endpoint. Over stdio the first request picks
it for the whole process.

Usage (with the venv that scripts/install-test-deps.sh creates):
    .work/venv/bin/python tests/py/sdk_conformance_fixture.py --transport stdio
    .work/venv/bin/python tests/py/sdk_conformance_fixture.py --transport http [--port N]

HTTP binds only to 127.0.0.1, the endpoint is /mcp, and `--port 0` (the default) picks a free port.
Once the server is ready it prints `LISTENING <port>` on stdout as one flushed line. Over stdio, stdout
carries nothing but protocol messages; logs go to stderr.

The server itself is the `sdk_fixture` package next to this file (see sdk_fixture/__init__.py); this
module owns only the command line and the
choice of transport. Where the high-level API cannot express something, the package drops to the
SDK's lower layers, and a comment there says so.
"""

import warnings


from mcp.shared.exceptions import MCPDeprecationWarning
from serving import run_server, serve_asgi

# Logging, sampling and roots are deprecated at 2026-07-28 but are exactly what the 2025-11-25
# scenarios exercise; the SDK's runtime deprecation warnings are noise here.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

from sdk_fixture import mcp  # noqa: E402


async def serve_http(port: int) -> None:
    # MCPServer's own Streamable HTTP app; host 127.0.0.1 turns on its DNS-rebinding protection.
    app = mcp.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    await serve_asgi(app, port, "sdk_fixture")


def main() -> None:
    run_server(__doc__, mcp.run_stdio_async, serve_http, default_transport=None)


if __name__ == "__main__":
    main()
