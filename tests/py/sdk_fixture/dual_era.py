"""Client input that works in both eras. Most tools use the SDK's resolvers: each `Resolve(fn)`
parameter is filled before the body runs. At 2026-07-28 the pending questions are batched into one
InputRequiredResult with a `requestState` that the SDK seals (AES-GCM, per-process key); at 2025-11-25
each question is sent as its own request on the calling POST's stream. The SDK picks a question's
wire key: the resolver's `module:qualname`, e.g. `sdk_fixture.dual_era:ask_capital`.

Two items cannot use resolvers, and are written with the SDK's hand-rolled flow instead: at 2026 the
handler returns an InputRequiredResult and reads `ctx.input_responses` on the retry; at 2025 it calls
`ctx.elicit`. test_input_required_result_elicitation needs this because the suite requires the literal
key `user_name`. The prompt needs it because prompts cannot take `Resolve` parameters, and the suite
requires the key `user_context` there too."""

from typing import Annotated, Any

from mcp_types import (
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    ListRootsResult,
    SamplingMessage,
    TextContent,
)
from pydantic import BaseModel, ValidationError

from mcp.server.elicitation import render_elicitation_schema
from mcp.server.mcpserver import Context, Elicit, ListRoots, Resolve, Sample

from sdk_fixture.server import is_legacy, mcp


class Name(BaseModel):
    name: str


class Color(BaseModel):
    color: str


class Confirm(BaseModel):
    ok: bool


class PromptContext(BaseModel):
    context: str


def user_text(text: str) -> list[SamplingMessage]:
    return [SamplingMessage(role="user", content=TextContent(type="text", text=text))]


def sampled_text(result: CreateMessageResult | None) -> str:
    return result.content.text if result is not None and isinstance(result.content, TextContent) else ""


# Resolvers --------------------------------------------------------------------------------------


def ask_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


def ask_confirm() -> Elicit[Confirm]:
    return Elicit("Please confirm", Confirm)


def ask_capital() -> Sample:
    return Sample(user_text("What is the capital of France?"), max_tokens=100)


def ask_greeting() -> Sample:
    return Sample(user_text("Generate a greeting"), max_tokens=50)


def ask_hello() -> Sample:
    return Sample(user_text("Say hello"), max_tokens=20)


def client_roots() -> ListRoots:
    return ListRoots()


def step1_name() -> Elicit[Name]:
    return Elicit("Step 1: What is your name?", Name)


def step2_color(first: Annotated[Name, Resolve(step1_name)]) -> Elicit[Color]:
    # Depends on step 1, so at 2026 it is asked in a second round, once the name is known.
    return Elicit(f"Step 2: What is your favorite color, {first.name}?", Color)


def number_if_sampling(ctx: Context) -> Sample | None:
    caps = ctx.client_capabilities
    return Sample(user_text("Give me a number"), max_tokens=10) if caps and caps.sampling is not None else None


def name_if_elicitation(ctx: Context) -> Elicit[Name] | None:
    caps = ctx.client_capabilities
    return Elicit("What is your name?", Name) if caps and caps.elicitation is not None else None


# Tools ------------------------------------------------------------------------------------------


@mcp.tool()
async def test_input_required_result_sampling(answer: Annotated[CreateMessageResult, Resolve(ask_capital)]) -> str:
    """MRTR: one sampling request."""
    return f"The model said: {sampled_text(answer)}"


@mcp.tool()
async def test_input_required_result_list_roots(roots: Annotated[ListRootsResult, Resolve(client_roots)]) -> str:
    """MRTR: one roots/list request."""
    return f"Client roots: {', '.join(str(r.uri) for r in roots.roots) or '(none)'}"


@mcp.tool()
async def test_input_required_result_request_state(confirm: Annotated[Confirm, Resolve(ask_confirm)]) -> str:
    """MRTR: one elicitation. The SDK seals requestState and verifies it when the request is retried."""
    return f"state-ok: confirmed={confirm.ok}"


@mcp.tool()
async def test_input_required_result_multiple_inputs(
    who: Annotated[Name, Resolve(ask_name)],
    greeting: Annotated[CreateMessageResult, Resolve(ask_greeting)],
    roots: Annotated[ListRootsResult, Resolve(client_roots)],
) -> str:
    """MRTR: elicitation + sampling + roots/list in one round."""
    return f"name={who.name} greeting={sampled_text(greeting)} roots={len(roots.roots)}"


@mcp.tool()
async def test_input_required_result_multi_round(
    first: Annotated[Name, Resolve(step1_name)], color: Annotated[Color, Resolve(step2_color)]
) -> str:
    """MRTR: two rounds of elicitation (the second question depends on the first answer)."""
    return f"name={first.name} color={color.color}"


@mcp.tool()
async def test_input_required_result_tampered_state(confirm: Annotated[Confirm, Resolve(ask_confirm)]) -> str:
    """MRTR: sealed requestState; the SDK rejects a tampered one (-32602)."""
    return f"state verified: ok={confirm.ok}"


@mcp.tool()
async def test_input_required_result_capabilities(
    number: Annotated[CreateMessageResult | None, Resolve(number_if_sampling)],
    who: Annotated[Name | None, Resolve(name_if_elicitation)],
) -> str:
    """MRTR: asks only for what the client's capabilities allow."""
    asked = [k for k, v in (("sampling_input", number), ("elicitation_input", who)) if v is not None]
    return f"Answered inputs: {', '.join(asked) or '(none: client declared neither sampling nor elicitation)'}"


@mcp.tool()
async def test_streaming_elicitation(confirm: Annotated[Confirm, Resolve(ask_confirm)]) -> str:
    """Needs an elicitation (2026: InputRequiredResult, never a request on the stream)."""
    return f"Streaming elicitation completed: ok={confirm.ok}"


@mcp.tool()
async def test_missing_capability(hello: Annotated[CreateMessageResult, Resolve(ask_hello)]) -> str:
    """Needs the client's sampling capability; the SDK answers -32021 when it was not declared."""
    return f"Sampling capability present: {sampled_text(hello)}"


# Hand-rolled (fixed input keys) -----------------------------------------------------------------


def form_request(message: str, schema: type[BaseModel]) -> ElicitRequest:
    params = ElicitRequestFormParams(message=message, requested_schema=render_elicitation_schema(schema))
    return ElicitRequest(params=params)


def accepted(ctx: Context, key: str, schema: type[BaseModel]) -> Any:
    """The validated content of an accepted answer under `key`; None if missing, declined or malformed."""
    answer = (ctx.input_responses or {}).get(key)
    if not isinstance(answer, ElicitResult) or answer.action != "accept":
        return None
    try:
        return schema.model_validate(answer.content or {})
    except ValidationError:
        return None


@mcp.tool()
async def test_input_required_result_elicitation(ctx: Context) -> str | InputRequiredResult:
    """MRTR: one elicitation under the key `user_name`."""
    question = "What is your name?"
    if is_legacy(ctx):
        outcome = await ctx.elicit(question, Name)
        return f"Hello, {outcome.data.name if outcome.action == 'accept' else 'anonymous'}!"
    name = accepted(ctx, "user_name", Name)
    if name is None:  # first round, or a missing, wrong or invalid answer: ask (again)
        return InputRequiredResult(input_requests={"user_name": form_request(question, Name)})
    return f"Hello, {name.name}!"


@mcp.prompt()
async def test_input_required_result_prompt(ctx: Context) -> str | InputRequiredResult:
    """Needs user context first (2026: InputRequiredResult; 2025: elicitation/create)."""
    question = "What context should the prompt use?"
    if is_legacy(ctx):
        outcome = await ctx.elicit(question, PromptContext)
        context = outcome.data.context if outcome.action == "accept" else "(none)"
    else:
        answer = accepted(ctx, "user_context", PromptContext)
        if answer is None:
            return InputRequiredResult(input_requests={"user_context": form_request(question, PromptContext)})
        context = answer.context
    return f"Use this context: {context}"
