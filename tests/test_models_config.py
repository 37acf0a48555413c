"""Endpoint configuration: flags over environment over TOML file, presets, tiers, secrets."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwarden.guard.budget import Price
from loopwarden.models.config import CONFIG_FIELDS, ConfigError, EndpointConfig, default_prices, load_endpoint_config

KEY = "sk-secret-abcdef0123456789"


def test_nothing_configured_means_offline(tmp_path: Path) -> None:
    assert load_endpoint_config(env={}) is None
    assert load_endpoint_config(env={"HOME": str(tmp_path)}) is None  # no config file there


def test_deepseek_key_alone_selects_the_deepseek_preset() -> None:
    config = load_endpoint_config(env={"DEEPSEEK_API_KEY": KEY})
    assert config is not None
    assert config.preset == "deepseek"
    assert config.base_url == "https://api.deepseek.com"
    assert (config.model_for("cheap"), config.model_for("main")) == ("deepseek-flash", "deepseek-v4-pro")
    assert config.api_key is not None and config.api_key.get_secret_value() == KEY
    assert config.echoes_reasoning


def test_openai_key_alone_selects_openai_and_does_not_echo_reasoning() -> None:
    config = load_endpoint_config(env={"OPENAI_API_KEY": KEY})
    assert config is not None and config.preset == "openai"
    assert not config.echoes_reasoning


def test_a_hosted_preset_without_a_key_says_which_variable_to_set() -> None:
    with pytest.raises(ConfigError, match="DEEPSEEK_API_KEY"):
        load_endpoint_config(preset="deepseek", env={})
    proxied = load_endpoint_config(preset="deepseek", base_url="http://127.0.0.1:9/v1", env={})
    assert proxied is not None and proxied.api_key is None  # a local proxy may need none


def test_local_presets_need_no_key() -> None:
    assert load_endpoint_config(preset="lmstudio", env={}) is not None
    config = load_endpoint_config(preset="ollama", env={})
    assert config is not None
    assert config.base_url == "http://127.0.0.1:11434/v1"
    assert config.api_key is None


def test_flags_beat_environment_beat_file(tmp_path: Path) -> None:
    file = tmp_path / "loopwarden.toml"
    file.write_text(
        '[endpoint]\nbase_url = "http://file:1/v1"\ncheap_model = "file-cheap"\nmain_model = "file-main"\ntimeout = 9\n'
    )
    env = {"LOOPWARDEN_BASE_URL": "http://env:2/v1", "LOOPWARDEN_MAIN_MODEL": "env-main"}
    config = load_endpoint_config(config_file=file, env=env, cheap_model="flag-cheap")
    assert config is not None
    assert config.base_url == "http://env:2/v1"
    assert (config.cheap_model, config.main_model) == ("flag-cheap", "env-main")
    assert config.timeout == 9
    flagged = load_endpoint_config(config_file=file, env=env, base_url="http://flag:3/v1")
    assert flagged is not None and flagged.base_url == "http://flag:3/v1"


def test_default_config_file_is_read_from_xdg_config_home(tmp_path: Path) -> None:
    folder = tmp_path / "loopwarden"
    folder.mkdir()
    (folder / "config.toml").write_text('preset = "vllm"\nmodel = "qwen"\n')
    config = load_endpoint_config(env={"XDG_CONFIG_HOME": str(tmp_path)})
    assert config is not None
    assert (config.base_url, config.cheap_model, config.main_model) == ("http://127.0.0.1:8000/v1", "qwen", "qwen")


def test_one_model_flag_sets_both_tiers_over_a_preset() -> None:
    config = load_endpoint_config(preset="deepseek", model="deepseek-v4-pro", env={"DEEPSEEK_API_KEY": KEY})
    assert config is not None
    assert config.cheap_model == config.main_model == "deepseek-v4-pro"


def test_loopwarden_api_key_wins_over_the_provider_key() -> None:
    config = load_endpoint_config(
        preset="deepseek", env={"DEEPSEEK_API_KEY": "sk-provider-000000", "LOOPWARDEN_API_KEY": KEY}
    )
    assert config is not None and config.api_key is not None
    assert config.api_key.get_secret_value() == KEY


def test_env_values_are_converted_and_checked() -> None:
    config = load_endpoint_config(
        env={
            "LOOPWARDEN_BASE_URL": "http://x/v1",
            "LOOPWARDEN_MODEL": "m",
            "LOOPWARDEN_TIMEOUT": "2.5",
            "LOOPWARDEN_MAX_RETRIES": "1",
            "LOOPWARDEN_STREAM": "true",
        }
    )
    assert config is not None and (config.timeout, config.max_retries, config.stream) == (2.5, 1, True)
    with pytest.raises(ConfigError, match="timeout"):
        load_endpoint_config(
            env={"LOOPWARDEN_BASE_URL": "http://x/v1", "LOOPWARDEN_MODEL": "m", "LOOPWARDEN_TIMEOUT": "-1"}
        )


def test_errors_a_user_can_act_on(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown preset 'nope'.*deepseek"):
        load_endpoint_config(preset="nope", env={})
    with pytest.raises(ConfigError, match="no model name"):
        load_endpoint_config(base_url="http://x/v1", env={})
    with pytest.raises(ConfigError, match="does not exist"):
        load_endpoint_config(config_file=tmp_path / "missing.toml", env={})
    bad = tmp_path / "bad.toml"
    bad.write_text("base_url = [")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_endpoint_config(config_file=bad, env={})


def test_the_key_never_shows_in_repr_dump_or_description() -> None:
    config = load_endpoint_config(env={"DEEPSEEK_API_KEY": KEY})
    assert config is not None
    for shown in (repr(config), str(config), config.model_dump_json(), config.describe(), str(config.model_dump())):
        assert KEY not in shown


def test_vision_tier_falls_back_to_the_cheap_model() -> None:
    config = EndpointConfig(base_url="http://x/v1", cheap_model="c", main_model="m")
    assert config.model_for("vision") == "c"


def test_default_prices_cover_the_deepseek_models_and_cost_cached_tokens_less() -> None:
    config = load_endpoint_config(env={"DEEPSEEK_API_KEY": KEY})
    assert config is not None
    prices = default_prices(config)
    assert set(prices) == {"deepseek-flash", "deepseek-v4-pro"}
    assert all(isinstance(p, Price) for p in prices.values())
    from loopwarden.models.base import Usage

    fresh = prices["deepseek-flash"].cost(Usage(prompt_tokens=1_000_000, completion_tokens=0))
    cached = prices["deepseek-flash"].cost(Usage(prompt_tokens=1_000_000, completion_tokens=0, cached_tokens=1_000_000))
    assert cached < fresh


def test_extra_body_from_the_environment_is_json() -> None:
    env = {"LOOPWARDEN_BASE_URL": "http://x/v1", "LOOPWARDEN_MODEL": "m"}
    config = load_endpoint_config(env=env | {"LOOPWARDEN_EXTRA_BODY": '{"thinking": {"type": "disabled"}}'})
    assert config is not None and config.extra_body == {"thinking": {"type": "disabled"}}
    with pytest.raises(ConfigError, match="LOOPWARDEN_EXTRA_BODY"):
        load_endpoint_config(env=env | {"LOOPWARDEN_EXTRA_BODY": "[1]"})


@given(st.booleans(), st.booleans(), st.booleans())
def test_the_highest_source_that_sets_a_value_wins(in_file: bool, in_env: bool, as_flag: bool) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        file = Path(folder) / "c.toml"
        file.write_text('model = "m"\n' + ('base_url = "http://file/v1"\n' if in_file else ""))
        env = {"LOOPWARDEN_BASE_URL": "http://env/v1"} if in_env else {}
        flags: dict[str, Any] = {"base_url": "http://flag/v1"} if as_flag else {}
        config = load_endpoint_config(config_file=file, env=env, **flags)
    expected = "http://flag/v1" if as_flag else "http://env/v1" if in_env else "http://file/v1" if in_file else None
    assert (config.base_url if config else None) == expected


# -- precedence, field by field ------------------------------------------------------------------

LAYERS = ("file", "env", "flag")


def _value(name: str, layer: str) -> Any:
    """A distinct valid value of setting `name` as `layer` gives it."""
    rank = LAYERS.index(layer)
    if name == "preset":
        return ("vllm", "ollama", "llamacpp")[rank]
    if name in ("timeout", "retry_base_delay", "retry_max_delay"):
        return float(rank + 2)
    if name in ("max_retries", "context_window"):
        return rank + 1
    if name == "tool_call_content":
        return ("empty", "omit", "null")[rank]
    if name == "record_dir":
        return f"/{layer}-records"
    if name in ("stream", "reasoning_echo"):
        return rank % 2 == 1
    if name == "extra_body":
        return {"from": layer}
    if name == "base_url":
        return f"http://{layer}:1/v1"
    return f"{layer}-{name}"


def _toml(value: Any) -> str:
    return "{ from = " + json.dumps(value["from"]) + " }" if isinstance(value, dict) else json.dumps(value)


def _env_text(value: Any) -> str:
    return json.dumps(value) if isinstance(value, dict | bool) else str(value)


def _sources(by_layer: dict[str, dict[str, Any]], folder: Path) -> dict[str, Any]:
    """load_endpoint_config arguments giving each layer's settings through its own channel."""
    file = folder / "c.toml"
    file.write_text("".join(f"{k} = {_toml(v)}\n" for k, v in by_layer["file"].items()))
    env = {f"LOOPWARDEN_{k.upper()}": _env_text(v) for k, v in by_layer["env"].items()}
    return {"config_file": file, "env": env, **by_layer["flag"]}


def _resolved(config: EndpointConfig, name: str) -> Any:
    value = getattr(config, name)
    if name == "record_dir" and value is not None:
        return str(value)
    return value.get_secret_value() if name == "api_key" and value is not None else value


FIELDS = [f for f in CONFIG_FIELDS if f != "model"]


@settings(deadline=None, max_examples=60)
@given(
    st.sampled_from(FIELDS),
    st.sets(st.sampled_from(LAYERS)),
)
def test_every_setting_comes_from_the_highest_source_that_sets_it(name: str, layers: set[str]) -> None:
    settings_by_layer: dict[str, dict[str, Any]] = {layer: {} for layer in LAYERS}
    settings_by_layer["file"].update(base_url="http://base:1/v1", model="m")  # an endpoint, whatever else is set
    for layer in layers:
        settings_by_layer[layer][name] = _value(name, layer)
    with tempfile.TemporaryDirectory() as folder:
        config = load_endpoint_config(**_sources(settings_by_layer, Path(folder)))
    assert config is not None
    top = next((layer for layer in reversed(LAYERS) if layer in layers), None)
    if top is None:
        return
    expected = _value(name, top)
    assert _resolved(config, name) == expected


@settings(deadline=None, max_examples=80)
@given(st.dictionaries(st.sampled_from(LAYERS), st.sets(st.sampled_from(["model", "cheap_model", "main_model"]))))
def test_a_sources_model_beats_a_lower_sources_tier_and_yields_to_its_own(said: dict[str, set[str]]) -> None:
    settings_by_layer: dict[str, dict[str, Any]] = {layer: {} for layer in LAYERS}
    settings_by_layer["file"]["base_url"] = "http://base:1/v1"
    settings_by_layer["file"]["model"] = "file-fallback"
    for layer, names in said.items():
        for n in names:
            settings_by_layer[layer][n] = f"{layer}-{n}"
    with tempfile.TemporaryDirectory() as folder:
        config = load_endpoint_config(**_sources(settings_by_layer, Path(folder)))
    assert config is not None
    for tier in ("cheap_model", "main_model"):
        top = next(layer for layer in reversed(LAYERS) if {"model", tier} & set(settings_by_layer[layer]))
        expected = settings_by_layer[top].get(tier, settings_by_layer[top].get("model"))
        assert getattr(config, tier) == expected, (tier, settings_by_layer)


def test_the_cases_the_issue_names() -> None:
    env = {"LOOPWARDEN_BASE_URL": "http://x/v1", "LOOPWARDEN_CHEAP_MODEL": "env-cheap"}
    config = load_endpoint_config(model="flag-model", env=env)
    assert config is not None and config.cheap_model == config.main_model == "flag-model"
    with tempfile.TemporaryDirectory() as folder:
        file = Path(folder) / "c.toml"
        file.write_text('base_url = "http://x/v1"\ncheap_model = "file-cheap"\n')
        config = load_endpoint_config(config_file=file, env={"LOOPWARDEN_MODEL": "env-model"})
    assert config is not None and config.cheap_model == "env-model"


def test_the_providers_key_variable_beats_a_key_in_the_file(tmp_path: Path) -> None:
    file = tmp_path / "c.toml"
    file.write_text('preset = "deepseek"\napi_key = "sk-from-the-file-0000"\n')
    config = load_endpoint_config(config_file=file, env={"DEEPSEEK_API_KEY": KEY})
    assert config is not None and config.api_key is not None and config.api_key.get_secret_value() == KEY


def test_an_unknown_flag_is_an_error_not_ignored() -> None:
    with pytest.raises(ConfigError, match="cheap_modle"):
        load_endpoint_config(base_url="http://x/v1", model="m", cheap_modle="typo", env={})
