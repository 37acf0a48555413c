"""`loopwarden doctor`: is the configured endpoint usable, and if not, what to fix.

Checks in order — configuration, endpoint reachable, key accepted, each tier's model exists,
a chat reply, tool calling — and stops at the first failure the later checks depend on.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from .base import ModelError, ModelRequest
from .config import ConfigError, EndpointConfig, load_endpoint_config

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
TOOL_SERVER_HINT = (
    "the server may need tool calling switched on (vLLM: --enable-auto-tool-choice --tool-call-parser <name>; "
    "llama.cpp: --jinja; Ollama: a model whose template supports tools), or pick a model that supports tools"
)


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
            checks.append(_model_check(tier, config.model_for(tier), listed))
        checks += await _chat_checks(cheap)
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
    return names, Check("endpoint", "ok", f"reachable, key accepted, {len(names)} model(s) listed")


def _model_check(tier: str, name: str, listed: list[str] | None) -> Check:
    label = f"{tier} model"
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


async def _chat_checks(model: OpenAICompatModel) -> list[Check]:
    try:
        plain = await model.complete(ModelRequest(messages=[{"role": "user", "content": "Reply with the word: ready"}]))
    except ModelError as error:
        return [Check("chat", "fail", error.message, _fix_for(error))]
    checks = [Check("chat", "ok", f"{model.name!r} answered ({plain.usage.total_tokens} tokens)")]
    request = ModelRequest(messages=[{"role": "user", "content": TOOL_PROMPT}], tools=[PING_TOOL], tool_choice="auto")
    try:
        reply = await model.complete(request)
    except ModelError as error:
        return [*checks, Check("tool calling", "fail", error.message, TOOL_SERVER_HINT)]
    call = next((c for c in reply.tool_calls if c.name == "report_number"), None)
    if call is None:
        said = (reply.text or "")[:120]
        return [*checks, Check("tool calling", "fail", f"no tool call came back (text: {said!r})", TOOL_SERVER_HINT)]
    try:
        arguments = json.loads(call.arguments)
    except json.JSONDecodeError:
        return [*checks, Check("tool calling", "warn", f"tool called with unreadable arguments {call.arguments!r}")]
    return [*checks, Check("tool calling", "ok", f"report_number called with {arguments}")]


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
