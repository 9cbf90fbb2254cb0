"""A command-line MCP client for the mcpgate tests, built on the official Python SDK (mcp==2.3.0).

By default it speaks protocol 2026-07-28 ("modern") using `mcp.Client(url, mode="2026-07-28")`. It
sends no initialize and no discover probe: every request carries the `_meta` envelope plus the
MCP-Protocol-Version, Mcp-Method, Mcp-Name and Mcp-Param-* headers. `--mode auto` probes
server/discover first and falls back to initialize. `--mode legacy` uses the 2025-11-25 handshake.

Usage (run it with .work/venv/bin/python):
    modern_client.py [OPTIONS] URL ACTION [ARGS...]
    modern_client.py [OPTIONS] --stdio 'CMD ARGS...' ACTION [ARGS...]

Actions (each prints JSON objects, one per line, on stdout):
    list                    {"tools": [names...]}
    tools                   the full tools/list result: {"tools": [...], ...}
    discover                the raw server/discover result, fetched from the wire (modern servers only)
    call NAME [JSON_ARGS]   the CallToolResult as JSON (by_alias, exclude_none). With --progress,
                            one {"progress": p, "total": t, "message": m} line per progress notification
                            comes first.
    script                  reads JSON actions from stdin, one per line, all on one connection:
                            {"action": "list"} | {"action": "call", "name": N, "arguments": {...}}
                            Each prints its own line; a failed call prints {"error": {...}} and the run goes on.

Options: --mode 2026-07-28|auto|legacy, --bearer TOKEN (sent as Authorization: Bearer), --progress, --no-list (`call` skips the tools/list it normally
runs first, so the SDK's HEADER_MISMATCH -> relist -> retry recovery path is exercised), --timeout SECONDS.
Input requests (elicitation, sampling, roots) are answered when asked for: --elicit JSON accepts every
elicitation with that content, --sample TEXT answers every sampling request with that text, --roots URI
(repeatable) lists those roots. Each question prints {"asked": METHOD, "params": {...}} first; the
client declares exactly the capabilities given.

Exit status: 0 on success. 2 when the server answered with a JSON-RPC error: {"error": {code, message,
data}} goes to stdout and a message to stderr. 1 on any other failure (a message goes to stderr).
An isError tool result is a success here (exit 0); check "isError" in the output.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError


def emit(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def error_obj(exc: MCPError) -> dict[str, Any]:
    err: dict[str, Any] = {"code": exc.code, "message": exc.message}
    if exc.data is not None:
        err["data"] = exc.data
    return {"error": err}


async def do_call(client: Client, name: str, arguments: dict[str, Any], progress: bool) -> None:
    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        emit({"progress": p, "total": total, "message": message})

    result = await client.call_tool(name, arguments, progress_callback=on_progress if progress else None)
    emit(dump(result))


def answerers(opts: argparse.Namespace) -> dict[str, Any]:
    """The SDK callbacks for the input requests this run answers."""
    out: dict[str, Any] = {}
    if opts.elicit is not None or opts.decline:
        content = json.loads(opts.elicit) if opts.elicit is not None else None

        async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            emit({"asked": "elicitation/create", "params": dump(params)})
            if content is None:
                return types.ElicitResult(action="decline")
            return types.ElicitResult(action="accept", content=content)

        out["elicitation_callback"] = on_elicit
    if opts.sample is not None:

        async def on_sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
            emit({"asked": "sampling/createMessage", "params": dump(params)})
            return types.CreateMessageResult(
                role="assistant", content=types.TextContent(type="text", text=opts.sample), model="test-model", stop_reason="endTurn"
            )

        out["sampling_callback"] = on_sample
    if opts.roots:

        async def on_roots(context: Any) -> types.ListRootsResult:
            emit({"asked": "roots/list", "params": {}})
            return types.ListRootsResult(roots=[types.Root(uri=u, name=u.rsplit("/", 1)[-1]) for u in opts.roots])

        out["list_roots_callback"] = on_roots
    return out


async def run(opts: argparse.Namespace) -> int:
    if opts.stdio:
        argv = shlex.split(opts.stdio)
        target: Any = StdioServerParameters(command=argv[0], args=argv[1:])
    elif opts.bearer:
        # A caller with a credential: the gateway's API key or a JWT, as `Authorization: Bearer`.
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        http = create_mcp_http_client(headers={"Authorization": f"Bearer {opts.bearer}"})
        target = streamable_http_client(opts.url, http_client=http)
    else:
        target = opts.url
    async with Client(target, mode=opts.mode, read_timeout_seconds=opts.timeout, **answerers(opts)) as client:
        action = opts.action
        if action == "list":
            emit({"tools": [t.name for t in (await client.list_tools()).tools]})
        elif action == "tools":
            emit(dump(await client.list_tools()))
        elif action == "discover":
            # session.discover() would return the DiscoverResult that the version pin synthesised at
            # connect; send_discover() always goes to the wire and returns the raw result dict.
            emit(await client.session.send_discover(client.protocol_version))
        elif action == "call":
            if not opts.args:
                raise SystemExit("modern_client: call needs a tool NAME")
            name = opts.args[0]
            arguments = json.loads(opts.args[1]) if len(opts.args) > 1 else {}
            if not opts.no_list:
                await client.list_tools()
            await do_call(client, name, arguments, opts.progress)
        elif action == "resources":
            emit({"resources": [r.uri for r in (await client.list_resources()).resources]})
        elif action == "read":
            if not opts.args:
                raise SystemExit("modern_client: read needs a resource URI")
            emit(dump(await client.read_resource(opts.args[0])))
        elif action == "prompts":
            emit({"prompts": [p.name for p in (await client.list_prompts()).prompts]})
        elif action == "prompt":
            if not opts.args:
                raise SystemExit("modern_client: prompt needs a prompt NAME")
            arguments = json.loads(opts.args[1]) if len(opts.args) > 1 else None
            emit(dump(await client.get_prompt(opts.args[0], arguments)))
        elif action == "script":
            listed = False
            for line in sys.stdin:
                if not line.strip():
                    continue
                step = json.loads(line)
                try:
                    if step["action"] == "list":
                        emit({"tools": [t.name for t in (await client.list_tools()).tools]})
                        listed = True
                    elif step["action"] == "call":
                        if not listed and not opts.no_list:
                            await client.list_tools()
                            listed = True
                        await do_call(client, step["name"], step.get("arguments") or {}, opts.progress)
                    else:
                        raise ValueError(f"unknown script action {step['action']!r}")
                except MCPError as exc:
                    emit(error_obj(exc))
        else:
            raise SystemExit(f"modern_client: unknown action {action!r}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", default="2026-07-28", help="2026-07-28 (default) | auto | legacy")
    ap.add_argument("--stdio", metavar="CMD", help="launch CMD (shell-quoted string) and talk stdio instead of HTTP")
    ap.add_argument("--bearer", metavar="TOKEN", help="send Authorization: Bearer TOKEN (an API key or a JWT)")
    ap.add_argument("--progress", action="store_true", help="request progress and print progress lines")
    ap.add_argument("--no-list", action="store_true", help="call: do not run tools/list first")
    ap.add_argument("--timeout", type=float, default=60.0, help="per-request read timeout, seconds")
    ap.add_argument("--elicit", metavar="JSON", help="accept every elicitation with this content")
    ap.add_argument("--decline", action="store_true", help="decline every elicitation")
    ap.add_argument("--sample", metavar="TEXT", help="answer every sampling request with this text")
    ap.add_argument("--roots", metavar="URI", action="append", default=[], help="answer roots/list with these roots")
    ap.add_argument("rest", nargs=argparse.REMAINDER, help="[URL] ACTION [ARGS...]")
    opts = ap.parse_args()
    rest = list(opts.rest)
    if not opts.stdio:
        if not rest:
            ap.error("URL is required (or --stdio CMD)")
        opts.url = rest.pop(0)
    if not rest:
        ap.error("ACTION is required (list | tools | discover | call NAME [JSON] | resources | read URI | prompts | prompt NAME [JSON] | script)")
    opts.action, opts.args = rest[0], rest[1:]
    try:
        return anyio.run(run, opts)
    except MCPError as exc:
        emit(error_obj(exc))
        print(f"modern_client: server returned error {exc.code}: {exc.message}", file=sys.stderr)
        return 2
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - a test helper: report anything, exit 1
        # anyio task groups wrap errors in ExceptionGroups; unwrap one level for a readable message.
        inner = exc
        while isinstance(inner, BaseExceptionGroup) and len(inner.exceptions) == 1:
            inner = inner.exceptions[0]
        if isinstance(inner, MCPError):
            emit(error_obj(inner))
            print(f"modern_client: server returned error {inner.code}: {inner.message}", file=sys.stderr)
            return 2
        print(f"modern_client: failed: {type(inner).__name__}: {inner}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
