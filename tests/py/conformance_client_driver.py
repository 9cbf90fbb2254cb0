"""The client half of the official conformance suite, with mcpgate as the client under test.

`conformance client --command "<this script>" --scenario S` starts a mock MCP server and runs this
script with its URL. mcpgate is the client of its upstreams, so the script makes that URL an
upstream of a fresh gateway (`prefix = ""`, the mcpgate binary named by MCPGATE_BIN), waits until
the gateway has probed it, and then drives the gateway as an everyday client would, with the
official Python SDK (mcp==2.3.0): lists the tools, then makes the calls the scenario's context
names (`toolCalls`), else calls each tool with arguments made from its input schema; it echoes a
tool's schema where the scenario asks for that (`json_schema_echo`), and accepts elicitations with
the requested schema's defaults. What the mock server checks is what the gateway sent it.

Usage: conformance_client_driver.py SERVER_URL     (MCP_CONFORMANCE_SCENARIO names the scenario)
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from typing import Any

import json

import anyio
import mcp_types as types
from mcp import Client


def value_for(schema: dict[str, Any]) -> Any:
    kind = schema.get("type")
    if "default" in schema:
        return schema["default"]
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    if kind in ("number", "integer"):
        return 2
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return arguments_for(schema)
    return "test"


def arguments_for(schema: dict[str, Any]) -> dict[str, Any]:
    props = schema.get("properties") or {}
    return {name: value_for(prop if isinstance(prop, dict) else {}) for name, prop in props.items()}


def start_gateway(server_url: str) -> tuple[subprocess.Popen[str], str]:
    binary = os.environ.get("MCPGATE_BIN") or "mcpgate"
    folder = tempfile.mkdtemp(prefix="mcpgate-client-conformance-")
    config = os.path.join(folder, "gateway.toml")
    with open(config, "w") as f:
        f.write(f'[server]\nlisten = "127.0.0.1:0"\n\n[[upstream]]\nid = "mock"\nurl = "{server_url}"\nprefix = ""\ntimeout = "10s"\n')
    gw = subprocess.Popen([binary, "run", "-c", config, "--listen", "127.0.0.1:0"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    assert gw.stderr is not None
    url = ""
    deadline = time.time() + 20
    for line in gw.stderr:
        sys.stderr.write(line)
        if "listening on http" in line:
            url = line[line.index("listening on ") + len("listening on ") :].strip()
            break
        if time.time() > deadline:
            break
    if not url:
        gw.kill()
        sys.exit("the gateway did not start")
    # Keep reading the gateway's log, so it never waits on a full pipe; MCPGATE_DRIVER_LOG keeps it.
    threading.Thread(target=drain, args=(gw.stderr, os.environ.get("MCPGATE_DRIVER_LOG")), daemon=True).start()
    base = url.rsplit("/mcp", 1)[0]
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/readyz", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        time.sleep(0.05)
    return gw, url


def drain(stream: Any, path: str | None) -> None:
    sink = open(path, "a") if path else None
    for line in stream:
        if sink:
            sink.write(line)
            sink.flush()


async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    """Accepts with the values the requested schema gives as defaults (else plain ones)."""
    schema = getattr(params, "requested_schema", None) or {}
    if hasattr(schema, "model_dump"):
        schema = schema.model_dump(by_alias=True, exclude_none=True)
    return types.ElicitResult(action="accept", content=arguments_for(schema if isinstance(schema, dict) else {}))


def planned_calls(tools: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    if context.get("toolCalls"):
        return [(c["name"], c.get("arguments") or {}) for c in context["toolCalls"]]
    names = {t.name for t in tools}
    calls = []
    for tool in tools:
        if tool.name == "json_schema_echo":
            continue
        calls.append((tool.name, arguments_for(tool.input_schema or {})))
    if "json_schema_echo" in names:
        focal = next((t for t in tools if t.name != "json_schema_echo"), None)
        if focal is not None:
            calls.append(("json_schema_echo", {"schema": focal.input_schema}))
    return calls


async def drive(url: str) -> None:
    async with Client(url, mode="2026-07-28", read_timeout_seconds=20, elicitation_callback=on_elicit) as client:
        tools = (await client.list_tools()).tools
        for name, arguments in planned_calls(tools):
            try:
                await client.call_tool(name, arguments)
            except Exception as exc:  # noqa: BLE001 - a refused call is the mock's to judge
                sys.stderr.write(f"call {name}: {exc}\n")


def main() -> int:
    gw, url = start_gateway(sys.argv[1])
    try:
        anyio.run(drive, url)
    finally:
        gw.terminate()
        try:
            gw.wait(timeout=5)
        except subprocess.TimeoutExpired:
            gw.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
