"""Fixture MCP server for the official MCP conformance suite, built on the official Python SDK (mcp==2.3.0).

The server scenarios of `@modelcontextprotocol/conformance@0.2.0-alpha.12` call tools, prompts and
resources by exact name (`test_simple_text`, `test://static-text`, `test_prompt_with_arguments`, ...).
This server implements every name those scenarios use, for both requirement sets:

* `2025-11-25`: the stateful handshake era (initialize, `Mcp-Session-Id`, server-to-client requests
  such as `sampling/createMessage` and `elicitation/create` on the POST's SSE stream, logging/setLevel,
  resources/subscribe, ping);
* `2026-07-28`: the stateless era (server/discover, per-request `_meta`, `InputRequiredResult` with a
  sealed `requestState` instead of server-to-client requests, `subscriptions/listen`, caching hints,
  `Mcp-Method` / `Mcp-Name` / `Mcp-Param-*` header validation).

Like the SDK, one process serves both eras. Over HTTP the era is picked per request by the
`MCP-Protocol-Version` header; over stdio the first request picks it for the whole process.
It uses the SDK's low-level `mcp.server.Server` (the style of tests/py/upstream_server.py), so schemas
reach clients exactly as written here. `tests/conformance/README.md` maps scenarios to fixture items.

Usage (with the venv that scripts/install-test-deps.sh creates):
    .work/venv/bin/python tests/py/conformance_fixture.py --transport stdio
    .work/venv/bin/python tests/py/conformance_fixture.py --transport http [--port N] [--resumable]

HTTP binds only to 127.0.0.1, the endpoint is /mcp, and `--port 0` (the default) picks a free port.
Once the server is ready it prints `LISTENING <port>` on stdout as one flushed line. Over stdio, stdout
carries nothing but protocol messages; logs go to stderr.

`--resumable` adds an in-memory SSE event store (priming events with `id:`/`retry:`, `Last-Event-ID`
replay), which the unscored `server-sse-polling` scenario and its `test_reconnection` tool use.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import sys
import warnings
from collections import deque
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any
from uuid import uuid4

import anyio
import mcp_types as types
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp.server import Server, ServerRequestContext
from serving import serve_asgi
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.message import ServerMessageMetadata

# Logging, sampling and roots are deprecated at 2026-07-28 but are exactly what the 2025-11-25 scenarios
# exercise; the SDK's runtime deprecation warnings are noise here.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

log = logging.getLogger("conformance_fixture")

SERVER_NAME = "mcpgate-conformance-fixture"
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"

# 1x1 red PNG and a minimal (empty) WAV, as in the suite's reference fixture.
PNG_BASE64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV_BASE64 = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

LOG_LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


def _is_modern(ctx: ServerRequestContext[Any, Any]) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def _text(text: str, *, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)


def _session_key(ctx: ServerRequestContext[Any, Any]) -> str:
    """Per-connection key for legacy state: the Mcp-Session-Id over HTTP, one shared key over stdio."""
    headers = getattr(ctx.request, "headers", None)
    if headers is not None:
        sid = headers.get("mcp-session-id")
        if sid:
            return sid
    return "stdio"


def _header(ctx: ServerRequestContext[Any, Any], name: str) -> str | None:
    headers = getattr(ctx.request, "headers", None)
    return None if headers is None else headers.get(name)


def _missing_capability(capability: str, message: str | None = None) -> MCPError:
    """MissingRequiredClientCapabilityError (-32021); the SDK maps it to HTTP 400."""
    required = {capability: {}} if capability != TASKS_EXTENSION else {"extensions": {TASKS_EXTENSION: {}}}
    return MCPError(
        code=types.MISSING_REQUIRED_CLIENT_CAPABILITY,
        message=message or f"Client did not declare the required '{capability}' capability",
        data={"requiredCapabilities": required},
    )


def _declared(ctx: ServerRequestContext[Any, Any], capability: str) -> bool:
    caps = ctx.session.client_capabilities
    if caps is None:
        return False
    if capability == TASKS_EXTENSION:
        return bool(caps.extensions) and TASKS_EXTENSION in (caps.extensions or {})
    return getattr(caps, capability, None) is not None


# ---------------------------------------------------------------------------------------------
# Input requests (2026: embedded in InputRequiredResult; 2025: real server-to-client requests)
# ---------------------------------------------------------------------------------------------
def elicit_request(message: str, schema: dict[str, Any]) -> types.ElicitRequest:
    return types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=schema))


def sampling_request(text: str, max_tokens: int) -> types.CreateMessageRequest:
    return types.CreateMessageRequest(
        params=types.CreateMessageRequestParams(
            messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text=text))],
            max_tokens=max_tokens,
        )
    )


def roots_request() -> types.ListRootsRequest:
    return types.ListRootsRequest()


_CAPABILITY_FOR_METHOD = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}
_RESULT_TYPE_FOR_METHOD: dict[str, type[types.Result]] = {
    "elicitation/create": types.ElicitResult,
    "sampling/createMessage": types.CreateMessageResult,
    "roots/list": types.ListRootsResult,
}


def _response_ok(method: str, response: Any) -> bool:
    """Shape check of one inputResponses entry (the SDK already validated it against the union)."""
    if not isinstance(response, Mapping):
        return False
    if method == "elicitation/create":
        return response.get("action") in ("accept", "decline", "cancel")
    if method == "sampling/createMessage":
        return "content" in response and "role" in response
    if method == "roots/list":
        return isinstance(response.get("roots"), list)
    return True


class NeedInput(Exception):
    """Raised by `gather` on 2026-07-28 when the handler must answer with an InputRequiredResult."""

    def __init__(self, result: types.InputRequiredResult) -> None:
        super().__init__("input required")
        self.result = result


async def gather(
    ctx: ServerRequestContext[Any, Any],
    requests: Mapping[str, types.ElicitRequest | types.CreateMessageRequest | types.ListRootsRequest],
    *,
    state: str | None = None,
) -> dict[str, dict[str, Any]]:
    """Obtain the client's answers to `requests`, keyed like `requests`.

    2026-07-28: answers come from the retried request's `inputResponses`; if any key is missing or
    malformed, raise `NeedInput` carrying an InputRequiredResult that (re-)requests them all, with
    `state` as the (SDK-sealed) `requestState`. Extra keys are ignored. A request for a capability
    the client did not declare in `_meta` is refused with -32021 before anything is sent.

    2025-11-25: each request is sent to the client for real, on the calling POST's SSE stream.
    """
    for request in requests.values():
        capability = _CAPABILITY_FOR_METHOD[request.method]
        if not _declared(ctx, capability):
            raise _missing_capability(capability)
    if _is_modern(ctx):
        raw = (ctx.params or {}).get("inputResponses")
        responses: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        answers: dict[str, dict[str, Any]] = {}
        for key, request in requests.items():
            response = responses.get(key)
            if not _response_ok(request.method, response):
                raise NeedInput(types.InputRequiredResult(input_requests=dict(requests), request_state=state))
            answers[key] = dict(response)
        return answers
    answers = {}
    for key, request in requests.items():
        result = await ctx.session.send_request(
            request,
            _RESULT_TYPE_FOR_METHOD[request.method],
            metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
        )
        answers[key] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return answers


def _sampling_text(answer: Mapping[str, Any]) -> str:
    content = answer.get("content")
    if isinstance(content, Mapping):
        return str(content.get("text", ""))
    if isinstance(content, list) and content and isinstance(content[0], Mapping):
        return str(content[0].get("text", ""))
    return ""


def _elicit_summary(answer: Mapping[str, Any]) -> str:
    return f"action={answer.get('action')}, content={json.dumps(answer.get('content') or {}, sort_keys=True)}"


def _current_state(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The plaintext requestState (the SDK's RequestStateBoundary has already verified and unsealed it)."""
    state = (ctx.params or {}).get("requestState")
    return state if isinstance(state, str) else None


# ---------------------------------------------------------------------------------------------
# Tool catalogue. Order matters: http-header-validation calls the FIRST tool with `arguments: {}`,
# so it must take no required arguments and carry no x-mcp-header.
# ---------------------------------------------------------------------------------------------
NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}

JSON_SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}

SEP1034_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {
            "type": "string",
            "description": "User status",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
    "required": [],
}

SEP1330_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "untitledSingle": {
            "type": "string",
            "description": "Untitled single-select",
            "enum": ["option1", "option2", "option3"],
        },
        "titledSingle": {
            "type": "string",
            "description": "Titled single-select",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "description": "Legacy titled enum",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "description": "Untitled multi-select",
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "description": "Titled multi-select",
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
    "required": [],
}

NAME_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def _tool(name: str, description: str, schema: dict[str, Any] | None = None, **extra: Any) -> types.Tool:
    return types.Tool(name=name, description=description, input_schema=schema or NO_ARGS, **extra)


def _task_support(mode: str) -> types.ToolExecution:
    return types.ToolExecution(task_support=mode)


TOOLS: list[types.Tool] = [
    _tool("test_simple_text", "Returns a simple text content block."),
    _tool("test_image_content", "Returns an image content block (1x1 PNG)."),
    _tool("test_audio_content", "Returns an audio content block (audio/wav)."),
    _tool("test_embedded_resource", "Returns an embedded text resource."),
    _tool("test_multiple_content_types", "Returns text, image and embedded resource content."),
    _tool(
        "test_tool_with_logging",
        "Sends 3 info log notifications while running (2026-07-28: only when _meta logLevel asks for them).",
    ),
    _tool("test_logging_tool", "Alias of test_tool_with_logging (used by server-stateless)."),
    _tool("test_tool_with_progress", "Reports progress 0/100, 50/100, 100/100 when a progressToken is sent."),
    _tool("test_error_handling", "Always returns isError: true."),
    _tool(
        "test_sampling",
        "Asks the client for an LLM completion (2025: sampling/createMessage; 2026: InputRequiredResult).",
        {
            "type": "object",
            "properties": {"prompt": {"type": "string", "description": "The prompt to send to the LLM"}},
            "required": ["prompt"],
        },
    ),
    _tool(
        "test_elicitation",
        "Asks the user for input (2025: elicitation/create; 2026: InputRequiredResult).",
        {
            "type": "object",
            "properties": {"message": {"type": "string", "description": "The message to show the user"}},
            "required": ["message"],
        },
    ),
    _tool("test_elicitation_sep1034_defaults", "Elicitation whose schema has defaults for every primitive type."),
    _tool("test_elicitation_sep1330_enums", "Elicitation whose schema has all 5 enum variants."),
    _tool("test_streaming_elicitation", "Needs an elicitation (2026: InputRequiredResult, never a request)."),
    _tool("test_missing_capability", "Needs the client's sampling capability; -32021 when it was not declared."),
    _tool("test_trigger_tool_change", "Announces notifications/tools/list_changed."),
    _tool("test_trigger_prompt_change", "Announces notifications/prompts/list_changed."),
    _tool("test_trigger_resource_change", "Announces notifications/resources/list_changed."),
    _tool(
        "test_trigger_resource_update",
        "Announces notifications/resources/updated for a URI (default test://watched-resource).",
        {"type": "object", "properties": {"uri": {"type": "string"}}},
    ),
    _tool("test_reconnection", "2025 + --resumable: closes its SSE stream mid-call, answers after the reconnect."),
    _tool("test_input_required_result_elicitation", "MRTR: one elicitation (key user_name)."),
    _tool("test_input_required_result_sampling", "MRTR: one sampling request (key capital_question)."),
    _tool("test_input_required_result_list_roots", "MRTR: one roots/list request (key client_roots)."),
    _tool("test_input_required_result_request_state", "MRTR: elicitation plus requestState; answers state-ok."),
    _tool("test_input_required_result_multiple_inputs", "MRTR: elicitation + sampling + roots/list at once."),
    _tool("test_input_required_result_multi_round", "MRTR: two rounds of elicitation with evolving requestState."),
    _tool("test_input_required_result_tampered_state", "MRTR: sealed requestState; a tampered one is rejected."),
    _tool("test_input_required_result_capabilities", "MRTR: only asks for what the client's capabilities allow."),
    _tool(
        "test_x_mcp_header",
        "Echoes its x-mcp-header argument `region` and the Mcp-Param-Region header it received.",
        {
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "query": {"type": "string"},
            },
            "required": ["region"],
        },
    ),
    _tool(
        "json_schema_2020_12_tool",
        "Tool with JSON Schema 2020-12 features ($defs/$anchor, allOf/anyOf, if/then/else).",
        JSON_SCHEMA_2020_12,
    ),
    # Tasks extension (SEP-2663) fixtures.
    _tool(
        "greet",
        "Sync-only: returns Hello, {name}!",
        {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    ),
    _tool(
        "slow_compute",
        "Task-supporting: sleeps `seconds`, then returns a result.",
        {
            "type": "object",
            "properties": {"seconds": {"type": "number"}, "label": {"type": "string"}},
            "required": ["seconds"],
        },
        execution=_task_support("optional"),
    ),
    _tool("failing_job", "Task-required: returns a tool execution error after ~1s.", execution=_task_support("required")),
    _tool("protocol_error_job", "Task-supporting: fails with a protocol error.", execution=_task_support("optional")),
    _tool(
        "confirm_delete",
        "Task-supporting: asks for one confirmation (elicitation/create), then completes.",
        {"type": "object", "properties": {"filename": {"type": "string"}}, "required": ["filename"]},
        execution=_task_support("optional"),
    ),
    _tool("multi_input", "Task-supporting: asks for two elicitations at once.", execution=_task_support("optional")),
    _tool("test_tool_with_task", "MRTR round gathers a name, then escalates to a task.", execution=_task_support("optional")),
]
TOOL_SCHEMAS = {t.name: t.input_schema for t in TOOLS}
TASK_TOOLS = {t.name for t in TOOLS if t.execution is not None} | {"greet"}

# ---------------------------------------------------------------------------------------------
# Resources and prompts
# ---------------------------------------------------------------------------------------------
RESOURCES: list[types.Resource] = [
    types.Resource(
        uri="test://static-text",
        name="static-text",
        description="A static text resource.",
        mime_type="text/plain",
    ),
    types.Resource(
        uri="test://static-binary",
        name="static-binary",
        description="A static binary resource (1x1 PNG).",
        mime_type="image/png",
    ),
    types.Resource(
        uri="test://watched-resource",
        name="watched-resource",
        description="A resource clients can subscribe to.",
        mime_type="text/plain",
    ),
]
RESOURCE_TEMPLATES: list[types.ResourceTemplate] = [
    types.ResourceTemplate(
        uri_template="test://template/{id}/data",
        name="template-data",
        description="Data for an id, substituted from the URI.",
        mime_type="application/json",
    )
]
TEMPLATE_PREFIX, TEMPLATE_SUFFIX = "test://template/", "/data"

PROMPTS: list[types.Prompt] = [
    types.Prompt(name="test_simple_prompt", description="A simple prompt without arguments."),
    types.Prompt(
        name="test_prompt_with_arguments",
        description="A prompt with two required arguments.",
        arguments=[
            types.PromptArgument(name="arg1", description="First test argument", required=True),
            types.PromptArgument(name="arg2", description="Second test argument", required=True),
        ],
    ),
    types.Prompt(
        name="test_prompt_with_embedded_resource",
        description="A prompt embedding a resource.",
        arguments=[types.PromptArgument(name="resourceUri", description="URI of the resource to embed", required=True)],
    ),
    types.Prompt(name="test_prompt_with_image", description="A prompt with image content."),
    types.Prompt(
        name="test_input_required_result_prompt",
        description="Needs user context first (2026: InputRequiredResult; 2025: elicitation/create).",
    ),
]

COMPLETIONS: dict[tuple[str, str], list[str]] = {
    ("test_prompt_with_arguments", "arg1"): ["paris", "park", "party", "test", "testValue1"],
    ("test_prompt_with_arguments", "arg2"): ["world", "wonder", "testValue2"],
    ("test_prompt_with_embedded_resource", "resourceUri"): ["test://static-text", "test://example-resource"],
    ("test://template/{id}/data", "id"): ["1", "2", "3", "123"],
}


# ---------------------------------------------------------------------------------------------
# SSE event store for --resumable (SEP-1699 polling/resume)
# ---------------------------------------------------------------------------------------------
class MemoryEventStore(EventStore):
    """Bounded in-memory event store: event ids are `<stream>::<seq>`, replay is per stream."""

    def __init__(self, max_events: int = 10_000) -> None:
        self._events: deque[tuple[str, str, int, Any]] = deque(maxlen=max_events)
        self._seq = itertools.count(1)

    async def store_event(self, stream_id: str, message: Any) -> str:
        seq = next(self._seq)
        event_id = f"{stream_id}::{seq}"
        self._events.append((event_id, stream_id, seq, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        stream_id, _, seq_text = last_event_id.rpartition("::")
        try:
            last_seq = int(seq_text)
        except ValueError:
            return None
        if not stream_id:
            return None
        for event_id, sid, seq, message in list(self._events):
            if sid == stream_id and seq > last_seq and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream_id


# ---------------------------------------------------------------------------------------------
# Tasks extension (SEP-2663), served on 2026-07-28 when the request declares the extension
# ---------------------------------------------------------------------------------------------
def _now() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


class Task:
    def __init__(self, tool: str) -> None:
        self.task_id = uuid4().hex
        self.tool = tool
        self.status = "working"
        self.created_at = self.last_updated_at = _now()
        self.ttl_ms = 300_000
        self.poll_interval_ms = 200
        self.result: dict[str, Any] | None = None
        self.error: dict[str, Any] | None = None
        self.input_requests: dict[str, dict[str, Any]] = {}
        self.input_responses: dict[str, Any] = {}
        self.input_event = anyio.Event()
        self.cancel_scope: anyio.CancelScope | None = None

    def touch(self, status: str | None = None) -> None:
        if status is not None:
            self.status = status
        self.last_updated_at = _now()

    def envelope(self) -> dict[str, Any]:
        return {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": self.created_at,
            "lastUpdatedAt": self.last_updated_at,
            "ttlMs": self.ttl_ms,
            "pollIntervalMs": self.poll_interval_ms,
        }

    def detailed(self) -> dict[str, Any]:
        out = self.envelope()
        if self.status == "completed" and self.result is not None:
            out["result"] = self.result
        if self.status == "failed" and self.error is not None:
            out["error"] = self.error
        if self.status == "input_required":
            out["inputRequests"] = dict(self.input_requests)
        return out


class TaskStore:
    def __init__(self) -> None:
        self.tasks: dict[str, Task] = {}
        self.task_group: anyio.abc.TaskGroup | None = None

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            self.task_group = tg
            await anyio.sleep_forever()

    def get(self, task_id: Any) -> Task:
        task = self.tasks.get(task_id) if isinstance(task_id, str) else None
        if task is None:
            raise MCPError(code=types.INVALID_PARAMS, message="Unknown taskId", data={"taskId": task_id})
        return task

    def start(self, tool: str, body: Any) -> Task:
        assert self.task_group is not None, "task store not running"
        task = Task(tool)
        self.tasks[task.task_id] = task

        async def runner() -> None:
            with anyio.CancelScope() as scope:
                task.cancel_scope = scope
                try:
                    result = await body(task)
                except MCPError as exc:
                    task.error = {"code": exc.error.code, "message": exc.error.message}
                    task.touch("failed")
                    return
                except Exception as exc:  # a protocol-level failure of the task body
                    task.error = {"code": types.INTERNAL_ERROR, "message": f"Internal error: {exc}"}
                    task.touch("failed")
                    return
                task.result = {"resultType": "complete", **result}
                task.touch("completed")
            if scope.cancelled_caught and task.status not in ("completed", "failed"):
                task.touch("cancelled")

        self.task_group.start_soon(runner)
        return task


async def _await_inputs(task: Task, requests: dict[str, types.ElicitRequest]) -> dict[str, Any]:
    """Park `task` in input_required until every request has an answer (tasks/update may answer a subset)."""
    task.input_requests = {k: r.model_dump(by_alias=True, mode="json", exclude_none=True) for k, r in requests.items()}
    task.input_responses = {}
    task.touch("input_required")
    answers: dict[str, Any] = {}
    while task.input_requests:
        task.input_event = anyio.Event()
        await task.input_event.wait()
        for key in list(task.input_requests):
            if key in task.input_responses:
                answers[key] = task.input_responses.pop(key)
                del task.input_requests[key]
        task.touch("input_required" if task.input_requests else "working")
    return answers


# ---------------------------------------------------------------------------------------------
# The server
# ---------------------------------------------------------------------------------------------
class FixtureServer(Server[Any]):
    """Advertises listChanged on the handshake era too (the fixture can announce list changes)."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        if notification_options is None:
            notification_options = NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)
        return super().create_initialization_options(notification_options, experimental_capabilities, extensions)


def build_server(tasks: TaskStore) -> FixtureServer:
    bus = InMemorySubscriptionBus()
    # Legacy (2025-11-25) per-session state: logging level and resource subscriptions.
    log_levels: dict[str, str] = {}
    subscriptions: dict[str, set[str]] = {}
    legacy_connections: dict[str, Any] = {}

    # ----- tools ---------------------------------------------------------------------------
    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    async def send_log(ctx: ServerRequestContext[Any, Any], level: str, message: str) -> None:
        if not _is_modern(ctx):
            threshold = log_levels.get(_session_key(ctx), "debug")
            if LOG_LEVELS.index(level) < LOG_LEVELS.index(threshold):
                return
        # 2026-07-28: the SDK drops this unless the request's _meta carried io.modelcontextprotocol/logLevel.
        await ctx.session.send_log_message(level, message, logger=SERVER_NAME, related_request_id=ctx.request_id)

    async def announce(ctx: ServerRequestContext[Any, Any], event: Any, legacy: Any) -> None:
        await bus.publish(event)  # 2026-07-28 subscriptions/listen streams
        if not _is_modern(ctx):  # 2025-11-25: the caller's standalone (GET) stream, when it has one
            try:
                await ctx.session.send_notification(legacy)
            except Exception:
                log.debug("no standalone stream for %s", legacy.method, exc_info=True)

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
        try:
            return await dispatch_tool(ctx, params)
        except NeedInput as need:
            return need.result

    async def dispatch_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
        name = params.name
        args: dict[str, Any] = dict(params.arguments or {})
        if name == "test_simple_text":
            return _text("This is a simple text response for testing.")
        if name == "test_image_content":
            return types.CallToolResult(
                content=[types.ImageContent(type="image", data=PNG_BASE64, mime_type="image/png")]
            )
        if name == "test_audio_content":
            return types.CallToolResult(
                content=[types.AudioContent(type="audio", data=WAV_BASE64, mime_type="audio/wav")]
            )
        if name == "test_embedded_resource":
            return types.CallToolResult(
                content=[
                    types.EmbeddedResource(
                        type="resource",
                        resource=types.TextResourceContents(
                            uri="test://embedded-resource",
                            mime_type="text/plain",
                            text="This is an embedded resource content.",
                        ),
                    )
                ]
            )
        if name == "test_multiple_content_types":
            return types.CallToolResult(
                content=[
                    types.TextContent(type="text", text="Multiple content types test:"),
                    types.ImageContent(type="image", data=PNG_BASE64, mime_type="image/png"),
                    types.EmbeddedResource(
                        type="resource",
                        resource=types.TextResourceContents(
                            uri="test://mixed-content-resource",
                            mime_type="application/json",
                            text=json.dumps({"test": "data", "value": 123}),
                        ),
                    ),
                ]
            )
        if name in ("test_tool_with_logging", "test_logging_tool"):
            await send_log(ctx, "info", "Tool execution started")
            await anyio.sleep(0.05)
            await send_log(ctx, "info", "Tool processing data")
            await anyio.sleep(0.05)
            await send_log(ctx, "info", "Tool execution completed")
            return _text("Tool with logging executed successfully")
        if name == "test_tool_with_progress":
            for step in (0, 50, 100):
                # A no-op unless the request carried _meta.progressToken.
                await ctx.session.report_progress(step, 100, f"Completed step {step} of 100")
                if step != 100:
                    await anyio.sleep(0.05)
            meta = (ctx.params or {}).get("_meta")
            token = meta.get("progressToken") if isinstance(meta, Mapping) else None
            return _text(f"Progress tool completed (progressToken {json.dumps(token)})")
        if name == "test_error_handling":
            return _text("This tool intentionally returns an error for testing", is_error=True)
        if name == "test_sampling":
            answer = (await gather(ctx, {"sampling": sampling_request(str(args.get("prompt", "")), 100)}))["sampling"]
            return _text(f"LLM response: {_sampling_text(answer)}")
        if name == "test_elicitation":
            schema = {
                "type": "object",
                "properties": {
                    "username": {"type": "string", "description": "User's response"},
                    "email": {"type": "string", "description": "User's email address"},
                },
                "required": ["username", "email"],
            }
            answer = (await gather(ctx, {"elicitation": elicit_request(str(args.get("message", "")), schema)}))[
                "elicitation"
            ]
            return _text(f"User response: {_elicit_summary(answer)}")
        if name == "test_elicitation_sep1034_defaults":
            request = elicit_request("Please review and update the form fields with defaults", SEP1034_SCHEMA)
            answer = (await gather(ctx, {"elicitation": request}))["elicitation"]
            return _text(f"Elicitation completed: {_elicit_summary(answer)}")
        if name == "test_elicitation_sep1330_enums":
            request = elicit_request("Please select options from the enum fields", SEP1330_SCHEMA)
            answer = (await gather(ctx, {"elicitation": request}))["elicitation"]
            return _text(f"Elicitation completed: {_elicit_summary(answer)}")
        if name == "test_streaming_elicitation":
            schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
            answer = (await gather(ctx, {"confirm": elicit_request("Please confirm", schema)}))["confirm"]
            return _text(f"Streaming elicitation completed: {_elicit_summary(answer)}")
        if name == "test_missing_capability":
            if not _declared(ctx, "sampling"):
                raise _missing_capability("sampling", "test_missing_capability requires the client's sampling capability")
            answer = (await gather(ctx, {"sampling": sampling_request("Say hello", 20)}))["sampling"]
            return _text(f"Sampling capability present: {_sampling_text(answer)}")
        if name == "test_trigger_tool_change":
            await announce(ctx, ToolsListChanged(), types.ToolListChangedNotification())
            return _text("tools/list_changed announced")
        if name == "test_trigger_prompt_change":
            await announce(ctx, PromptsListChanged(), types.PromptListChangedNotification())
            return _text("prompts/list_changed announced")
        if name == "test_trigger_resource_change":
            await announce(ctx, ResourcesListChanged(), types.ResourceListChangedNotification())
            return _text("resources/list_changed announced")
        if name == "test_trigger_resource_update":
            uri = str(args.get("uri") or "test://watched-resource")
            await bus.publish(ResourceUpdated(uri=uri))
            sent = 0
            for key, uris in list(subscriptions.items()):
                connection = legacy_connections.get(key)
                if uri in uris and connection is not None:
                    try:
                        await connection.send_resource_updated(uri)
                        sent += 1
                    except Exception:
                        log.debug("resources/updated not delivered to %s", key, exc_info=True)
            return _text(f"resources/updated announced for {uri} ({sent} legacy subscriber(s))")
        if name == "test_reconnection":
            if ctx.close_sse_stream is not None:
                await ctx.close_sse_stream()
            await anyio.sleep(0.1)
            return _text(
                "Reconnection test completed successfully. If you received this, the client properly "
                "reconnected after stream closure."
            )
        if name == "test_x_mcp_header":
            header = _header(ctx, "mcp-param-region")
            return _text(f"region={args.get('region')} header={header if header is not None else 'none'}")
        if name == "json_schema_2020_12_tool":
            return _text(f"json_schema_2020_12_tool received {json.dumps(args, sort_keys=True)}")
        if name.startswith("test_input_required_result_"):
            return await input_required_tool(ctx, name)
        if name in TASK_TOOLS:
            return await task_tool(ctx, name, args)
        raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {name}")

    async def input_required_tool(ctx: ServerRequestContext[Any, Any], name: str) -> types.CallToolResult:
        ask_name = elicit_request("What is your name?", NAME_SCHEMA)
        if name == "test_input_required_result_elicitation":
            answer = (await gather(ctx, {"user_name": ask_name}))["user_name"]
            who = (answer.get("content") or {}).get("name", "anonymous")
            return _text(f"Hello, {who}!")
        if name == "test_input_required_result_sampling":
            request = sampling_request("What is the capital of France?", 100)
            answer = (await gather(ctx, {"capital_question": request}))["capital_question"]
            return _text(f"The model said: {_sampling_text(answer)}")
        if name == "test_input_required_result_list_roots":
            answer = (await gather(ctx, {"client_roots": roots_request()}))["client_roots"]
            uris = [str(r.get("uri")) for r in answer.get("roots", []) if isinstance(r, Mapping)]
            return _text(f"Client roots: {', '.join(uris) or '(none)'}")
        if name == "test_input_required_result_request_state":
            schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
            expected = "request-state:round-1"
            state = _current_state(ctx)
            if state is not None and state != expected:
                raise MCPError(code=types.INVALID_PARAMS, message="Unexpected requestState")
            answer = (await gather(ctx, {"confirm": elicit_request("Please confirm", schema)}, state=expected))[
                "confirm"
            ]
            verdict = "state-ok" if (state == expected or not _is_modern(ctx)) else "state-missing"
            return _text(f"{verdict}: confirmed={(answer.get('content') or {}).get('ok')}")
        if name == "test_input_required_result_multiple_inputs":
            requests = {
                "user_name": ask_name,
                "greeting": sampling_request("Generate a greeting", 50),
                "client_roots": roots_request(),
            }
            answers = await gather(ctx, requests, state="multiple-inputs:round-1")
            who = (answers["user_name"].get("content") or {}).get("name", "anonymous")
            return _text(
                f"name={who} greeting={_sampling_text(answers['greeting'])} roots={len(answers['client_roots'].get('roots', []))}"
            )
        if name == "test_input_required_result_multi_round":
            step1 = elicit_request("Step 1: What is your name?", NAME_SCHEMA)
            step2 = elicit_request(
                "Step 2: What is your favorite color?",
                {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]},
            )
            if not _is_modern(ctx):
                first = (await gather(ctx, {"step1": step1}))["step1"]
                second = (await gather(ctx, {"step2": step2}))["step2"]
                return _text(
                    f"name={(first.get('content') or {}).get('name')} color={(second.get('content') or {}).get('color')}"
                )
            state = _current_state(ctx)
            round_two: dict[str, Any] | None = None
            if state is not None:
                try:
                    decoded = json.loads(state)
                except ValueError:
                    decoded = None
                if isinstance(decoded, dict) and decoded.get("round") == 2:
                    round_two = decoded
            if round_two is None:
                first = (await gather(ctx, {"step1": step1}, state=json.dumps({"round": 1})))["step1"]
                name_given = (first.get("content") or {}).get("name", "anonymous")
                raise NeedInput(
                    types.InputRequiredResult(
                        input_requests={"step2": step2}, request_state=json.dumps({"round": 2, "name": name_given})
                    )
                )
            second = (await gather(ctx, {"step2": step2}, state=state))["step2"]
            return _text(f"name={round_two.get('name')} color={(second.get('content') or {}).get('color')}")
        if name == "test_input_required_result_tampered_state":
            schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
            answer = (await gather(ctx, {"confirm": elicit_request("Please confirm", schema)}, state="tamper-check"))[
                "confirm"
            ]
            return _text(f"state verified: {_elicit_summary(answer)}")
        if name == "test_input_required_result_capabilities":
            # Only ask for what the client declared; -32021 when it declared none of them.
            requests: dict[str, Any] = {}
            if _declared(ctx, "sampling"):
                requests["sampling_input"] = sampling_request("Give me a number", 10)
            if _declared(ctx, "elicitation"):
                requests["elicitation_input"] = elicit_request("What is your name?", NAME_SCHEMA)
            if not requests:
                raise _missing_capability("sampling")
            answers = await gather(ctx, requests)
            return _text(f"Answered inputs: {', '.join(sorted(answers))}")
        raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {name}")

    # ----- tasks extension ------------------------------------------------------------------
    async def task_body(task: Task, name: str, args: dict[str, Any], gathered: dict[str, Any]) -> dict[str, Any]:
        if name == "slow_compute":
            await anyio.sleep(float(args.get("seconds", 0) or 0))
            return {"content": [{"type": "text", "text": f"slow_compute done ({args.get('label', '')})"}]}
        if name == "failing_job":
            await anyio.sleep(1.0)
            return {"content": [{"type": "text", "text": "failing_job failed deliberately"}], "isError": True}
        if name == "protocol_error_job":
            await anyio.sleep(0.1)
            raise MCPError(code=types.INTERNAL_ERROR, message="protocol_error_job: simulated protocol error")
        if name == "confirm_delete":
            schema = {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}
            answers = await _await_inputs(
                task, {"confirm": elicit_request(f"Delete {args.get('filename')}?", schema)}
            )
            return {"content": [{"type": "text", "text": f"confirm_delete: {json.dumps(answers, sort_keys=True)}"}]}
        if name == "multi_input":
            schema = {
                "type": "object",
                "properties": {"name": {"type": "string"}, "confirm": {"type": "boolean"}},
            }
            answers = await _await_inputs(
                task,
                {"first": elicit_request("First input", schema), "second": elicit_request("Second input", schema)},
            )
            return {"content": [{"type": "text", "text": f"multi_input: {json.dumps(answers, sort_keys=True)}"}]}
        if name == "test_tool_with_task":
            who = (gathered.get("user_name", {}).get("content") or {}).get("name", "anonymous")
            await anyio.sleep(0.2)
            return {"content": [{"type": "text", "text": f"Hello, {who}! (from a task)"}]}
        raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {name}")

    async def run_sync(name: str, args: dict[str, Any], gathered: dict[str, Any]) -> types.CallToolResult:
        if name == "greet":
            return _text(f"Hello, {args.get('name', 'World')}!")
        if name in ("confirm_delete", "multi_input"):
            return _text(f"{name} needs the {TASKS_EXTENSION} extension to ask for input", is_error=True)
        result = await task_body(Task(name), name, args, gathered)
        return types.CallToolResult.model_validate(result)

    async def task_tool(ctx: ServerRequestContext[Any, Any], name: str, args: dict[str, Any]) -> Any:
        gathered: dict[str, Any] = {}
        if name == "test_tool_with_task":
            gathered = await gather(ctx, {"user_name": elicit_request("What is your name?", NAME_SCHEMA)}, state="task")
        mode = next((t.execution.task_support for t in TOOLS if t.name == name and t.execution), None)
        wants_task = _is_modern(ctx) and _declared(ctx, TASKS_EXTENSION)
        if mode is None or not wants_task:
            if mode == "required":
                raise _missing_capability(TASKS_EXTENSION, f"{name} can only run as a task")
            return await run_sync(name, args, gathered)
        task = tasks.start(name, lambda t: task_body(t, name, args, gathered))
        return {"resultType": "task", **task.envelope()}

    def require_tasks(ctx: ServerRequestContext[Any, Any], params: Mapping[str, Any]) -> Task:
        if not _declared(ctx, TASKS_EXTENSION):
            raise _missing_capability(TASKS_EXTENSION)
        name_header = _header(ctx, "mcp-name")
        if name_header is not None and name_header.strip() != params.get("taskId"):
            raise MCPError(
                code=types.HEADER_MISMATCH, message="mcp-name header does not match the request body's 'taskId'"
            )
        return tasks.get(params.get("taskId"))

    async def tasks_get(ctx: ServerRequestContext[Any, Any], params: types.RequestParams) -> dict[str, Any]:
        task = require_tasks(ctx, ctx.params or {})
        return {"resultType": "complete", **task.detailed()}

    async def tasks_update(ctx: ServerRequestContext[Any, Any], params: types.RequestParams) -> dict[str, Any]:
        raw = ctx.params or {}
        task = require_tasks(ctx, raw)
        responses = raw.get("inputResponses")
        if not isinstance(responses, Mapping):
            raise MCPError(code=types.INVALID_PARAMS, message="inputResponses must be an object")
        for key, value in responses.items():
            if key in task.input_requests:
                task.input_responses[key] = value
        task.input_event.set()
        return {"resultType": "complete"}

    async def tasks_cancel(ctx: ServerRequestContext[Any, Any], params: types.RequestParams) -> dict[str, Any]:
        task = require_tasks(ctx, ctx.params or {})
        if task.status not in ("completed", "failed", "cancelled"):
            task.touch("cancelled")
            if task.cancel_scope is not None:
                task.cancel_scope.cancel()
        return {"resultType": "complete"}

    # ----- resources -------------------------------------------------------------------------
    async def list_resources(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=RESOURCES)

    async def list_resource_templates(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=RESOURCE_TEMPLATES)

    async def read_resource(
        ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri == "test://static-text":
            contents: list[Any] = [
                types.TextResourceContents(
                    uri=uri, mime_type="text/plain", text="This is the content of the static text resource."
                )
            ]
        elif uri == "test://static-binary":
            contents = [types.BlobResourceContents(uri=uri, mime_type="image/png", blob=PNG_BASE64)]
        elif uri == "test://watched-resource":
            contents = [types.TextResourceContents(uri=uri, mime_type="text/plain", text="Watched resource content")]
        elif (
            uri.startswith(TEMPLATE_PREFIX)
            and uri.endswith(TEMPLATE_SUFFIX)
            and len(uri) > len(TEMPLATE_PREFIX + TEMPLATE_SUFFIX)
        ):
            ident = uri[len(TEMPLATE_PREFIX) : -len(TEMPLATE_SUFFIX)]
            body = {"id": ident, "templateTest": True, "data": f"Data for ID: {ident}"}
            contents = [types.TextResourceContents(uri=uri, mime_type="application/json", text=json.dumps(body))]
        else:
            # SEP-2164: never an empty contents array; -32602 with the URI in data.
            raise MCPError(code=types.INVALID_PARAMS, message="Resource not found", data={"uri": uri})
        return types.ReadResourceResult(contents=contents)

    async def subscribe(ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams) -> types.EmptyResult:
        key = _session_key(ctx)
        subscriptions.setdefault(key, set()).add(str(params.uri))
        legacy_connections[key] = ctx.session._connection  # noqa: SLF001 - to notify the session later
        return types.EmptyResult()

    async def unsubscribe(
        ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        subscriptions.get(_session_key(ctx), set()).discard(str(params.uri))
        return types.EmptyResult()

    # ----- prompts ---------------------------------------------------------------------------
    async def list_prompts(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=PROMPTS)

    async def get_prompt(
        ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        name = params.name
        args = dict(params.arguments or {})

        def user(content: Any) -> types.PromptMessage:
            return types.PromptMessage(role="user", content=content)

        if name == "test_simple_prompt":
            return types.GetPromptResult(
                description="A simple prompt",
                messages=[user(types.TextContent(type="text", text="This is a simple prompt for testing."))],
            )
        if name == "test_prompt_with_arguments":
            if "arg1" not in args or "arg2" not in args:
                raise MCPError(code=types.INVALID_PARAMS, message="arg1 and arg2 are required")
            text = f"Prompt with arguments: arg1='{args['arg1']}', arg2='{args['arg2']}'"
            return types.GetPromptResult(messages=[user(types.TextContent(type="text", text=text))])
        if name == "test_prompt_with_embedded_resource":
            uri = args.get("resourceUri")
            if not uri:
                raise MCPError(code=types.INVALID_PARAMS, message="resourceUri is required")
            return types.GetPromptResult(
                messages=[
                    user(
                        types.EmbeddedResource(
                            type="resource",
                            resource=types.TextResourceContents(
                                uri=uri, mime_type="text/plain", text="Embedded resource content for testing."
                            ),
                        )
                    ),
                    user(types.TextContent(type="text", text="Please process the embedded resource above.")),
                ]
            )
        if name == "test_prompt_with_image":
            return types.GetPromptResult(
                messages=[
                    user(types.ImageContent(type="image", data=PNG_BASE64, mime_type="image/png")),
                    user(types.TextContent(type="text", text="Please analyze the image above.")),
                ]
            )
        if name == "test_input_required_result_prompt":
            request = elicit_request(
                "What context should the prompt use?",
                {"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]},
            )
            try:
                answer = (await gather(ctx, {"user_context": request}))["user_context"]
            except NeedInput as need:
                return need.result
            context = (answer.get("content") or {}).get("context", "(none)")
            return types.GetPromptResult(
                messages=[user(types.TextContent(type="text", text=f"Use this context: {context}"))]
            )
        raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown prompt: {name}")

    # ----- completion / logging -------------------------------------------------------------
    async def complete(
        ctx: ServerRequestContext[Any, Any], params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        ref = params.ref
        target = getattr(ref, "name", None) or getattr(ref, "uri", None) or ""
        candidates = COMPLETIONS.get((str(target), params.argument.name), [])
        values = [v for v in candidates if v.startswith(params.argument.value)]
        return types.CompleteResult(completion=types.Completion(values=values, total=len(values), has_more=False))

    async def set_logging_level(
        ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        log_levels[_session_key(ctx)] = params.level
        return types.EmptyResult()

    server = FixtureServer(
        SERVER_NAME,
        version="1.0.0",
        title="mcpgate conformance fixture",
        instructions="Fixture server for the MCP conformance suite (both 2025-11-25 and 2026-07-28).",
        get_tool_input_schema=TOOL_SCHEMAS.get,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_resource_templates,
        on_read_resource=read_resource,
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe,
        on_subscriptions_listen=ListenHandler(bus),
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_completion=complete,
        on_set_logging_level=set_logging_level,
    )
    server.add_request_handler("tasks/get", types.RequestParams, tasks_get)
    server.add_request_handler("tasks/update", types.RequestParams, tasks_update)
    server.add_request_handler("tasks/cancel", types.RequestParams, tasks_cancel)
    server.extensions = {TASKS_EXTENSION: {}}
    # Seal/verify requestState (AES-GCM under a per-process key): tampered state answers -32602.
    server.middleware.append(
        RequestStateBoundary(RequestStateSecurity.ephemeral(), default_audience=SERVER_NAME)
    )
    return server



async def serve_stdio(server: Server[Any], tasks: TaskStore) -> None:
    from mcp.server.stdio import stdio_server

    async with anyio.create_task_group() as tg:
        tg.start_soon(tasks.run)
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
        tg.cancel_scope.cancel()


async def serve_http(server: Server[Any], tasks: TaskStore, port: int, resumable: bool) -> None:
    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        host="127.0.0.1",
        event_store=MemoryEventStore() if resumable else None,
        retry_interval=500 if resumable else None,
    )
    await serve_asgi(app, port, "conformance_fixture", tasks.run)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--transport", choices=["stdio", "http"], required=True)
    ap.add_argument("--port", type=int, default=0, help="HTTP port on 127.0.0.1 (0 = ephemeral)")
    ap.add_argument(
        "--resumable",
        action="store_true",
        help="HTTP: keep an in-memory SSE event store (priming events, Last-Event-ID replay, test_reconnection)",
    )
    args = ap.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    tasks = TaskStore()
    server = build_server(tasks)
    try:
        if args.transport == "stdio":
            anyio.run(serve_stdio, server, tasks)
        else:
            anyio.run(serve_http, server, tasks, args.port, args.resumable)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
