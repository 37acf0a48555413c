"""`loopwarden doctor`: is the configured endpoint usable, and if not, what to fix.

Checks in order — configuration, endpoint reachable (and the key accepted, when there is one),
each tier's model exists, a chat reply, a full tool round trip — and stops at the first failure
the later checks depend on. The round trip sends exactly what the loop sends: a call, the
assistant turn that made it (`ModelReply.assistant_message`), the tool's result message, and
asks for a second reply, once per shape of the tool-call turn's empty `content`, and says which
shapes the endpoint accepts.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from .arguments import parse_arguments
from .base import Message, ModelError, ModelReply, ModelRequest, ToolCall
from .config import TOOL_CALL_CONTENT_SHAPES, ConfigError, EndpointConfig, ToolCallContent, load_endpoint_config

if TYPE_CHECKING:
    from .openai_compat import OpenAICompatModel

Outcome = Literal["ok", "warn", "fail"]

PING_TOOL = {
    "type": "function",
    "function": {
        "name": "report_number",
        "description": "Report a number to the user.",
        "parameters": {
            "type": "object",
            "properties": {"number": {"type": "integer", "description": "the number to report"}},
            "required": ["number"],
        },
    },
}
TOOL_PROMPT = "Call the report_number tool with number 7. Do not answer in text."
TOOL_SYSTEM = "You are an assistant that uses the functions offered to you."
"""Some servers' templates (llama-cpp-python's chatml-function-calling) describe the tools only
inside a system message: without one the model never sees them."""
TOOL_SERVER_HINT = (
    "the server may need tool calling switched on (vLLM: --enable-auto-tool-choice --tool-call-parser <name>; "
    "llama.cpp: --jinja; llama-cpp-python: --chat_format chatml-function-calling; Ollama: a model whose "
    "template supports tools), or pick a model that supports tools"
)
PROBE_MAX_TOKENS = 96
"""Doctor's replies need only be short."""


@dataclass(frozen=True)
class Check:
    name: str
    outcome: Outcome
    detail: str
    fix: str = ""


async def diagnose(config: EndpointConfig) -> list[Check]:
    """Run the checks against the endpoint; never raises for endpoint trouble."""
    from .openai_compat import OpenAICompatModel  # the SDK is only needed once there is an endpoint

    checks = [Check("configuration", "ok", config.describe())]
    quick = config.model_copy(update={"max_retries": min(config.max_retries, 1), "stream": False})
    cheap = OpenAICompatModel(quick, "cheap")
    try:
        listed, listing = await _listing(cheap)
        checks.append(listing)
        if listing.outcome == "fail":
            return checks
        for tier in ("cheap", "main"):
            checks.append(_model_check(tier, config.model_for(tier), listed, config.any_model_name))
        checks += await _chat_checks(cheap, quick)
        if config.main_model != config.cheap_model:
            checks.append(await _main_chat_check(OpenAICompatModel(quick, "main")))
    finally:
        await cheap.aclose()
    return checks


async def _main_chat_check(model: OpenAICompatModel) -> Check:
    try:
        reply = await model.complete(ModelRequest(messages=[{"role": "user", "content": "Reply with the word: ready"}]))
    except ModelError as error:
        return Check("main chat", "fail", error.message, _model_fix("main") if error.kind == "model_not_found" else "")
    finally:
        await model.aclose()
    return Check("main chat", "ok", f"{model.name!r} answered ({reply.usage.total_tokens} tokens)")


async def _listing(model: OpenAICompatModel) -> tuple[list[str] | None, Check]:
    try:
        names = await model.list_models()
    except ModelError as error:
        if error.kind == "model_not_found" or error.status in (405, 501):
            return None, Check("endpoint", "warn", "reachable, but it does not list its models (GET /models)")
        fix = {
            "auth": "set a valid key: LOOPWARDEN_API_KEY, DEEPSEEK_API_KEY or OPENAI_API_KEY, or --api-key",
            "connection": "check --base-url (often it ends in /v1) and that the server is running",
            "timeout": "the server is slow or stuck: try again, or raise --timeout",
        }.get(error.kind, "see the message above")
        name = "API key" if error.kind == "auth" else "endpoint"
        return None, Check(name, "fail", error.message, fix)
    key = "key accepted" if model.config.api_key else "no key sent"
    return names, Check("endpoint", "ok", f"reachable, {key}, {len(names)} model(s) listed")


def _model_check(tier: str, name: str, listed: list[str] | None, any_name: bool = False) -> Check:
    label = f"{tier} model"
    if any_name and listed is not None and name not in listed:
        serves = ", ".join(n.rsplit("/", 1)[-1] for n in listed[:3]) or "its loaded model"
        return Check(label, "ok", f"{name!r}: this server answers any model name with {serves}")
    if listed is None:
        return Check(label, "warn", f"{name!r}: cannot be checked against a list; the chat check below will tell")
    if name in listed:
        return Check(label, "ok", f"{name!r} is offered")
    if tier == "cheap" and listed == [] and name == "default":
        return Check(label, "warn", "the server lists no models; 'default' may still work")
    shown = ", ".join(listed[:8]) + (" ..." if len(listed) > 8 else "")
    return Check(label, "fail", f"{name!r} is not offered; the endpoint offers: {shown or 'nothing'}", _model_fix(tier))


def _model_fix(tier: str) -> str:
    return f"set LOOPWARDEN_{tier.upper()}_MODEL (or --model) to one of the offered models"


async def _chat_checks(model: OpenAICompatModel, config: EndpointConfig) -> list[Check]:
    try:
        plain = await model.complete(_ask([{"role": "user", "content": "Reply with the word: ready"}]))
    except ModelError as error:
        return [Check("chat", "fail", error.message, _fix_for(error))]
    checks = [Check("chat", "ok", f"{model.name!r} answered ({plain.usage.total_tokens} tokens)")]
    first = [{"role": "system", "content": TOOL_SYSTEM}, {"role": "user", "content": TOOL_PROMPT}]
    try:
        reply = await model.complete(_ask(first, tools=True))
    except ModelError as error:
        return [*checks, Check("tool calling", "fail", error.message, TOOL_SERVER_HINT)]
    call = next((c for c in reply.tool_calls if c.name == "report_number"), None)
    if call is None:
        said = (reply.text or "")[:120]
        return [*checks, Check("tool calling", "fail", f"no tool call came back (text: {said!r})", TOOL_SERVER_HINT)]
    parsed = parse_arguments(call.arguments)
    if parsed.error is not None:
        return [*checks, Check("tool calling", "warn", f"tool called with unreadable arguments {call.arguments!r}")]
    repaired = f" (arguments repaired: {parsed.repair})" if parsed.repair else ""
    checks.append(Check("tool calling", "ok", f"report_number called with {parsed.value}{repaired}"))
    return [*checks, await _round_trip(config, first, reply, call)]


def _ask(messages: list[Message], *, tools: bool = False) -> ModelRequest:
    return ModelRequest(
        messages=messages,
        tools=[PING_TOOL] if tools else [],
        tool_choice="auto" if tools else None,
        max_tokens=PROBE_MAX_TOKENS,
    )


async def _round_trip(config: EndpointConfig, first: list[Message], reply: ModelReply, call: ToolCall) -> Check:
    """The second turn of a tool loop, in each content shape: which ones does the server take?"""
    from ..tools import ToolResult  # the loop's own result message, not a look-alike
    from .openai_compat import OpenAICompatModel

    result = {"role": "tool", "tool_call_id": call.id, "content": ToolResult(ok=True, data=7).to_model_content()}
    history = [*first, reply.assistant_message(), result]
    accepted: list[ToolCallContent] = []
    rejected: dict[str, str] = {}
    second: ModelReply | None = None
    for shape in (config.tool_call_content, *(s for s in TOOL_CALL_CONTENT_SHAPES if s != config.tool_call_content)):
        probe = OpenAICompatModel(config.model_copy(update={"tool_call_content": shape}), "cheap", adapt=False)
        try:
            second = await probe.complete(_ask(history, tools=True))
            accepted.append(shape)
        except ModelError as error:
            rejected[shape] = f"{error.field or error.kind}" if error.kind == "invalid_request" else error.kind
        finally:
            await probe.aclose()
    told = ", ".join(f"{shape} rejected ({why})" for shape, why in rejected.items())
    if not accepted:
        return Check("tool round trip", "fail", f"no second reply after a tool result: {told}", TOOL_SERVER_HINT)
    said = f"second reply: {_said(second)}; tool-call turns accepted with content {', '.join(accepted)}"
    said += f"; {told}" if told else ""
    if config.tool_call_content not in accepted:
        fix = f"set tool_call_content = {accepted[0]!r} (LOOPWARDEN_TOOL_CALL_CONTENT={accepted[0]})"
        return Check("tool round trip", "warn", said + " (the client switches on its own after one refusal)", fix)
    return Check("tool round trip", "ok", said)


def _said(reply: ModelReply | None) -> str:
    if reply is None:
        return "-"
    if reply.tool_calls:
        return "another call, " + ", ".join(c.name for c in reply.tool_calls)
    return repr((reply.text or "")[:60])


def _fix_for(error: ModelError) -> str:
    return {
        "model_not_found": _model_fix("cheap"),
        "auth": "set a valid key (LOOPWARDEN_API_KEY or the provider's variable)",
        "context_length": "unexpected for a tiny prompt: check the server's context setting",
    }.get(error.kind, "")


MARKS = {"ok": "[green]✓[/green]", "warn": "[yellow]![/yellow]", "fail": "[red]✗[/red]"}


def register(app: typer.Typer) -> None:
    @app.command()
    def doctor(
        preset: Annotated[str | None, typer.Option(help="deepseek, openai, ollama, vllm, llamacpp or lmstudio")] = None,
        base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible base URL, e.g. http://host/v1")] = None,
        api_key: Annotated[str | None, typer.Option(help="API key (better: LOOPWARDEN_API_KEY)")] = None,
        model: Annotated[str | None, typer.Option(help="one model name for both tiers")] = None,
        config: Annotated[Path | None, typer.Option(help="TOML file with the endpoint settings")] = None,
        timeout: Annotated[float | None, typer.Option(help="seconds per request")] = None,
    ) -> None:
        """Check the configured model endpoint (reachable, key accepted, model exists, tool calling)."""
        from rich.console import Console
        from rich.markup import escape

        console = Console(highlight=False)
        try:
            endpoint = load_endpoint_config(
                preset=preset, base_url=base_url, api_key=api_key, model=model, config_file=config, timeout=timeout
            )
        except ConfigError as error:
            console.print(f"{MARKS['fail']} configuration: {escape(str(error))}")
            raise typer.Exit(2) from None
        if endpoint is None:
            console.print(
                f"{MARKS['fail']} configuration: no model endpoint is configured (loopwarden runs offline).\n"
                "  fix: set DEEPSEEK_API_KEY (or OPENAI_API_KEY), or pass --preset ollama / --base-url URL --model NAME"
            )
            raise typer.Exit(1)
        checks = asyncio.run(diagnose(endpoint))
        for check in checks:
            console.print(f"{MARKS[check.outcome]} {check.name}: {escape(check.detail)}")
            if check.fix:
                console.print(f"  fix: {escape(check.fix)}")
        failed = any(c.outcome == "fail" for c in checks)
        console.print("[red]not ready[/red]" if failed else "[green]ready[/green]")
        raise typer.Exit(1 if failed else 0)
