"""The tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`) the way an `MCPServer` serves an extension.

Neither SDK in the venv serves tasks itself: `mcp` 2.3.0 ships the extension interface
(`mcp.server.extension.Extension`, SEP-2133) but no tasks extension, and FastMCP 4.1.6 leaves it to
the separate `fastmcp-tasks` package. So this module is what an everyday server author writes on
`mcp` 2.3.0: one `Extension` subclass passed to `MCPServer(extensions=[...])`. It contributes the
tools the suite's `tasks-*` scenarios call (plain functions: their synchronous behaviour), the
`tasks/get`, `tasks/update` and `tasks/cancel` methods (`MethodBinding`, 2026-07-28 only), and one
`tools/call` interceptor that turns a call of a task-supporting tool into a task when the request
declared the extension. The SDK advertises the extension under `capabilities.extensions` (discover
and initialize). The task model and store are the low-level fixture's (tests/py/fixture/tasks.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
import mcp_types as types
from mcp_types import CallToolRequestParams
from pydantic import ConfigDict

from mcp.server import ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.server.extension import Extension, MethodBinding, ToolBinding
from mcp.server.mcpserver.exceptions import ToolError

from fixture.catalogue import NAME_SCHEMA
from fixture.common import TASKS_EXTENSION, declared, is_modern, missing_capability
from fixture.input_required import elicit_request
from fixture.tasks import TaskStore, task_body, tasks_cancel, tasks_get, tasks_update

MODERN = frozenset({"2026-07-28"})

# How each task-supporting tool may run (`execution.taskSupport`); greet is sync-only.
TASK_SUPPORT = {
    "slow_compute": "optional",
    "failing_job": "required",
    "protocol_error_job": "optional",
    "confirm_delete": "optional",
    "multi_input": "optional",
    "test_tool_with_task": "optional",
}


class _Spawner:
    """Starts task bodies on the running event loop (an MCPServer gives extensions no task group)."""

    def __init__(self) -> None:
        self.running: set[asyncio.Task[None]] = set()

    def start_soon(self, fn: Callable[[], Awaitable[None]]) -> None:
        job = asyncio.get_running_loop().create_task(fn())
        self.running.add(job)
        job.add_done_callback(self.running.discard)


class TaskParams(types.RequestParams):
    """Params of the tasks methods; the handlers read the raw params (`taskId`, `inputResponses`)."""

    model_config = ConfigDict(extra="allow")


# The tools, as a client that did not declare the extension gets them (synchronously).


def greet(name: str = "World") -> str:
    """Sync-only: returns Hello, {name}!"""
    return f"Hello, {name}!"


async def slow_compute(seconds: float = 0, label: str = "") -> str:
    """Task-supporting: sleeps `seconds`, then returns a result."""
    await anyio.sleep(float(seconds or 0))
    return f"slow_compute done ({label})"


async def failing_job() -> str:
    """Task-required: returns a tool execution error after ~1s."""
    raise ToolError("failing_job failed deliberately")


async def protocol_error_job() -> str:
    """Task-supporting: fails with a protocol error."""
    raise ToolError("protocol_error_job: simulated protocol error")


def confirm_delete(filename: str) -> str:
    """Task-supporting: asks for one confirmation (elicitation/create), then completes."""
    raise ToolError(f"confirm_delete needs the {TASKS_EXTENSION} extension to ask for input")


def multi_input() -> str:
    """Task-supporting: asks for two elicitations at once."""
    raise ToolError(f"multi_input needs the {TASKS_EXTENSION} extension to ask for input")


def test_tool_with_task() -> str:
    """MRTR round gathers a name, then escalates to a task."""
    return "Hello, anonymous! (no task)"


class TasksExtension(Extension):
    identifier = TASKS_EXTENSION

    def __init__(self) -> None:
        self.store = TaskStore()
        self.store.task_group = _Spawner()  # type: ignore[assignment]

    def tools(self) -> Sequence[ToolBinding]:
        fns = [greet, slow_compute, failing_job, protocol_error_job, confirm_delete, multi_input, test_tool_with_task]
        return [ToolBinding(fn) for fn in fns]

    def methods(self) -> Sequence[MethodBinding]:
        store = self.store

        def bind(method: str, handler: Any) -> MethodBinding:
            async def serve(ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
                return await handler(store, ctx, params)

            return MethodBinding(method, TaskParams, serve, protocol_versions=MODERN)

        return [bind("tasks/get", tasks_get), bind("tasks/update", tasks_update), bind("tasks/cancel", tasks_cancel)]

    async def intercept_tool_call(
        self, params: CallToolRequestParams, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        mode = TASK_SUPPORT.get(params.name)
        if mode is None:
            return await call_next(ctx)
        args = dict(params.arguments or {})
        gathered: dict[str, Any] = {}
        if params.name == "test_tool_with_task" and is_modern(ctx):
            # Round 1 asks for the name (SEP-2322); round 2 has it and escalates to a task.
            answer = (params.input_responses or {}).get("user_name")
            answer = answer.model_dump(by_alias=True, mode="json", exclude_none=True) if hasattr(answer, "model_dump") else answer
            if not isinstance(answer, dict) or answer.get("action") not in ("accept", "decline", "cancel"):
                ask = {"user_name": elicit_request("What is your name?", NAME_SCHEMA)}
                return types.InputRequiredResult(input_requests=ask, request_state="task")
            gathered = {"user_name": answer}
        if not (is_modern(ctx) and declared(ctx, TASKS_EXTENSION)):
            if mode == "required":
                raise missing_capability(TASKS_EXTENSION, f"{params.name} can only run as a task")
            return await call_next(ctx)
        name = params.name
        task = self.store.start(name, lambda t: task_body(t, name, args, gathered))
        return {"resultType": "task", **task.envelope()}
