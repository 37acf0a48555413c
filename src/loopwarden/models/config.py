"""Where the model endpoint comes from: CLI flags, then the environment, then a TOML file,
on top of a preset (deepseek, openai, ollama, vllm, llamacpp, lmstudio) that fills the base URL and the
model names of the two tiers.

`load_endpoint_config()` returns None when nothing is configured: the caller runs offline.
The API key is a `SecretStr` and never leaves this object except to authenticate a request.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from ..errors import ConfigError as ConfigError  # its home is loopwarden.errors
from ..guard.budget import Price

ToolCallContent = Literal["empty", "omit", "null"]
"""How an assistant turn that made tool calls carries its (absent) text: `"content": ""`,
no `content` key, or `"content": null`. OpenAI accepts all three; servers that validate
strictly (llama-cpp-python) reject null with an HTTP 500."""
TOOL_CALL_CONTENT_SHAPES: tuple[ToolCallContent, ...] = ("empty", "omit", "null")

PresetName = Literal["deepseek", "openai", "ollama", "vllm", "llamacpp", "lmstudio"]
Tier = Literal["cheap", "main", "vision"]


class Preset(BaseModel):
    model_config = ConfigDict(frozen=True)

    base_url: str
    cheap_model: str
    main_model: str
    vision_model: str | None = None
    key_env: str | None = None
    """The provider's usual environment variable for its key."""
    needs_key: bool = True
    reasoning_echo: bool = False
    """Whether the provider wants `reasoning_content` sent back on assistant tool-call turns."""
    any_model_name: bool = False
    """The server serves whatever it loaded under any requested name (llama.cpp)."""


PRESETS: dict[str, Preset] = {
    # DeepSeek: `deepseek-flash` is the cheap model (and the one with image input),
    # `deepseek-v4-pro` the strong one. Thinking mode needs reasoning echoed on tool turns.
    "deepseek": Preset(
        base_url="https://api.deepseek.com",
        cheap_model="deepseek-flash",
        main_model="deepseek-v4-pro",
        vision_model="deepseek-flash",
        key_env="DEEPSEEK_API_KEY",
        reasoning_echo=True,
    ),
    "openai": Preset(
        base_url="https://api.openai.com/v1",
        cheap_model="gpt-4.1-mini",
        main_model="gpt-4.1",
        vision_model="gpt-4.1-mini",
        key_env="OPENAI_API_KEY",
    ),
    "ollama": Preset(
        base_url="http://127.0.0.1:11434/v1", cheap_model="qwen3:8b", main_model="qwen3:32b", needs_key=False
    ),
    "vllm": Preset(base_url="http://127.0.0.1:8000/v1", cheap_model="default", main_model="default", needs_key=False),
    "llamacpp": Preset(
        base_url="http://127.0.0.1:8080/v1",
        cheap_model="default",
        main_model="default",
        needs_key=False,
        any_model_name=True,
    ),
    "lmstudio": Preset(
        base_url="http://127.0.0.1:1234/v1", cheap_model="default", main_model="default", needs_key=False
    ),
}

DEFAULT_PRICES: dict[str, Price] = {
    # USD per million tokens at DeepSeek's peak rate (off-peak is half): an upper bound, which
    # is what a cost budget wants. Checked against api-docs.deepseek.com pricing, 2026-11.
    "deepseek-flash": Price(input=0.30, output=1.20, cached_input=0.006),
    "deepseek-v4-pro": Price(input=1.32, output=3.96, cached_input=0.044),
    "gpt-4.1": Price(input=2.00, output=8.00, cached_input=0.50),
    "gpt-4.1-mini": Price(input=0.40, output=1.60, cached_input=0.10),
}
"""Default prices by model name, for `Budgets(prices=...)`. Local presets cost nothing."""

TIER_FIELDS = ("cheap_model", "main_model", "vision_model")
CONFIG_FIELDS = (
    "preset",
    "base_url",
    "api_key",
    "model",
    *TIER_FIELDS,
    "timeout",
    "max_retries",
    "stream",
    "retry_base_delay",
    "retry_max_delay",
    "reasoning_echo",
    "extra_body",
    "context_window",
    "tool_call_content",
    "record_dir",
)
"""Every setting, by the same name in flags (keyword arguments), the environment (LOOPWARDEN_ + upper
case) and the TOML file. `model` names one model for every tier: in each source it fills the tiers
that source does not name itself, so a source's `model` beats a lower source's `cheap_model`."""


class EndpointConfig(BaseModel):
    """One OpenAI-compatible endpoint and the model name of each tier."""

    model_config = ConfigDict(frozen=True)

    preset: str | None = None
    base_url: str
    api_key: SecretStr | None = None
    cheap_model: str
    main_model: str
    vision_model: str | None = None
    timeout: float = Field(default=180.0, gt=0)
    """Seconds per attempt: for the whole reply, or (streaming) the longest silence between chunks."""
    max_retries: int = Field(default=4, ge=0)
    """Retries after the first attempt for 429, 5xx, connection errors and timeouts."""
    stream: bool = False
    retry_base_delay: float = Field(default=1.0, ge=0)
    retry_max_delay: float = Field(default=30.0, ge=0)
    """Cap on one wait between attempts, Retry-After included."""
    reasoning_echo: bool | None = None
    """Send `reasoning_content` back on assistant tool-call turns; None = as the preset says."""
    extra_body: dict[str, Any] = Field(default_factory=dict)
    """Provider-specific request fields, e.g. {"thinking": {"type": "disabled"}} for DeepSeek."""
    context_window: int | None = Field(default=None, gt=0)
    """Tokens the model accepts (prompt + output); None = learned from the server where it says."""
    tool_call_content: ToolCallContent = "empty"
    """The `content` of assistant tool-call turns (`loopwarden doctor` says which one the endpoint needs)."""
    record_dir: Path | None = None
    """Record every exchange with the endpoint as cassettes here (`<tier>-<pid>.cassette.json`),
    for `loopwarden eval-import`."""

    @property
    def any_model_name(self) -> bool:
        preset = PRESETS.get(self.preset or "")
        return bool(preset and preset.any_model_name)

    def model_for(self, tier: Tier) -> str:
        if tier == "vision":
            return self.vision_model or self.cheap_model
        return self.cheap_model if tier == "cheap" else self.main_model

    @property
    def echoes_reasoning(self) -> bool:
        if self.reasoning_echo is not None:
            return self.reasoning_echo
        preset = PRESETS.get(self.preset or "")
        return bool(preset and preset.reasoning_echo) or "deepseek" in self.base_url

    def describe(self) -> str:
        """A one-line, key-free description for messages and logs."""
        key = "key set" if self.api_key else "no key"
        return f"{self.base_url} (cheap={self.cheap_model}, main={self.main_model}, {key})"


def default_config_file(env: Mapping[str, str]) -> Path | None:
    if env.get("LOOPWARDEN_CONFIG"):
        return Path(env["LOOPWARDEN_CONFIG"]).expanduser()
    base = env.get("XDG_CONFIG_HOME") or (str(Path(env["HOME"]) / ".config") if env.get("HOME") else None)
    return Path(base) / "loopwarden" / "config.toml" if base else None


def read_config_file(path: Path) -> dict[str, Any]:
    """The endpoint settings of a TOML file: top level, or under an `[endpoint]` table."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read config file {path}: {error}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"config file {path} is not valid TOML: {error}") from None
    section = data.get("endpoint", data)
    if not isinstance(section, dict):
        raise ConfigError(f"config file {path}: [endpoint] must be a table")
    return dict(section)


def from_environment(env: Mapping[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name in CONFIG_FIELDS:
        value = env.get(f"LOOPWARDEN_{name.upper()}")
        if value:
            values[name] = _json_object(name, value) if name == "extra_body" else value
    return values


def _json_object(name: str, text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(f"LOOPWARDEN_{name.upper()} is not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise ConfigError(f"LOOPWARDEN_{name.upper()} must be a JSON object")
    return value


def load_endpoint_config(
    *,
    preset: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    model: str | None = None,
    config_file: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    **overrides: Any,
) -> EndpointConfig | None:
    """Flags over environment over file, field by field; None when no endpoint is configured.

    `model` names one model for every tier; `overrides` take any other setting in CONFIG_FIELDS
    (cheap_model=..., timeout=...). `env` defaults to os.environ.
    """
    env = os.environ if env is None else env
    unknown = set(overrides) - set(CONFIG_FIELDS)
    if unknown:
        raise ConfigError(f"unknown endpoint settings: {', '.join(sorted(unknown))}; known: {', '.join(CONFIG_FIELDS)}")
    path = Path(config_file).expanduser() if config_file is not None else default_config_file(env)
    if config_file is not None and path is not None and not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    file_values = read_config_file(path) if path is not None and path.is_file() else {}
    flags = {"preset": preset, "base_url": base_url, "api_key": api_key, "model": model, **overrides}
    layers = [file_values, from_environment(env), {k: v for k, v in flags.items() if v is not None}]
    merged: dict[str, Any] = {}
    for layer in layers:  # lowest first: each source replaces what the ones below it said
        merged.update(_tiers_named(layer))
    key_from_file = "api_key" in file_values and not any("api_key" in layer for layer in layers[1:])
    return _resolve(merged, env, key_from_file=key_from_file)


def _tiers_named(layer: Mapping[str, Any]) -> dict[str, Any]:
    """One source's settings with its `model` spelt out for the tiers it does not name itself."""
    values = dict(layer)
    one_model = values.pop("model", None)
    if one_model is not None:
        for tier in TIER_FIELDS:
            values.setdefault(tier, one_model)
    return values


def _resolve(values: dict[str, Any], env: Mapping[str, str], *, key_from_file: bool = False) -> EndpointConfig | None:
    preset_name = values.pop("preset", None) or _preset_from_keys(values, env)
    if preset_name is None and not values.get("base_url"):
        return None
    preset = None
    if preset_name is not None:
        preset = PRESETS.get(str(preset_name).lower())
        if preset is None:
            raise ConfigError(f"unknown preset {preset_name!r}; choose one of: {', '.join(PRESETS)}")
        preset_name = str(preset_name).lower()
    provider_key = env.get(preset.key_env) if preset is not None and preset.key_env else None
    if provider_key and (key_from_file or not values.get("api_key")):
        values["api_key"] = provider_key  # the provider's own variable is still the environment: it beats the file
    for tier in ("cheap_model", "main_model"):
        values.setdefault(tier, getattr(preset, tier) if preset else None)
        if values[tier] is None:
            raise ConfigError(f"no model name for the {tier.split('_')[0]} tier: pass --model or set {tier}")
    if preset is not None:
        values.setdefault("base_url", preset.base_url)
        values.setdefault("vision_model", preset.vision_model)
        if preset.needs_key and not values.get("api_key") and values["base_url"] == preset.base_url:
            raise ConfigError(
                f"the {preset_name} preset needs an API key: set {preset.key_env} or LOOPWARDEN_API_KEY, "
                "or pass --api-key"
            )
    try:
        return EndpointConfig(preset=preset_name, **values)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        raise ConfigError(f"invalid endpoint configuration: {problems}") from None


def _preset_from_keys(values: dict[str, Any], env: Mapping[str, str]) -> str | None:
    """With no preset and no base URL, a provider's own key variable picks its preset."""
    if values.get("base_url"):
        return None
    for name in ("deepseek", "openai"):
        key_env = PRESETS[name].key_env
        if key_env and env.get(key_env):
            return name
    return "deepseek" if values.get("api_key") else None


def default_prices(config: EndpointConfig | None = None) -> dict[str, Price]:
    """Known prices for the configured models (all known prices when no config is given)."""
    if config is None:
        return dict(DEFAULT_PRICES)
    names = {config.cheap_model, config.main_model, config.vision_model}
    return {name: price for name, price in DEFAULT_PRICES.items() if name in names}
