"""The proxy's options, checked before anything listens: one clear line for each mistake."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlparse

from ..config import LoopConfig, check_config
from ..errors import ConfigError
from ..guard import DEFAULT_DETECTORS
from ..guard.budget import Budgets, Price
from ..guard.ladder import Ladder
from .app import ProxySettings
from .conversation import ConversationLimits
from .replay import WirePolicy
from .resume import DEFAULT_ENTRIES

OFF = 10**9
"""A rung set to 0 on the command line never fires."""


class ProxyOptionError(ValueError):
    pass


def build_settings(
    *,
    upstream: str,
    host: str = "127.0.0.1",
    terminal: Sequence[str] = (),
    repeatable: Sequence[str] = (),
    writes: Sequence[str] = (),
    rungs: tuple[int, int, int] = (3, 4, 5),
    disabled: Sequence[str] = (),
    max_model_calls: int | None = None,
    max_tokens: int | None = None,
    max_tool_rounds: int | None = None,
    max_cost: float | None = None,
    conversation: ConversationLimits | None = None,
    price: tuple[float, float] | None = None,
    db: Path | None = None,
    resume_entries: int = DEFAULT_ENTRIES,
) -> ProxySettings:
    parsed = urlparse(upstream)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ProxyOptionError(
            f"--upstream must be an http(s) URL such as https://api.deepseek.com/v1, not {upstream!r}"
        )
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        raise ProxyOptionError(f"the proxy listens on loopback only (127.0.0.1 or ::1), not {host!r}")
    nudge, narrow, stop = (value if value > 0 else OFF for value in rungs)
    if not nudge <= narrow <= stop and OFF not in (nudge, narrow, stop):
        raise ProxyOptionError(f"rungs must rise: nudge {nudge} <= narrow {narrow} <= stop {stop}")
    unknown = set(disabled) - set(DEFAULT_DETECTORS)
    if unknown:
        raise ProxyOptionError(f"unknown detector {sorted(unknown)}; known: {sorted(DEFAULT_DETECTORS)}")
    if max_cost is not None and price is None:
        raise ProxyOptionError("--max-cost needs --price INPUT OUTPUT (per million tokens) to count the cost by")
    conversation = conversation or ConversationLimits()
    if conversation.max_cost is not None and price is None:
        raise ProxyOptionError("--conversation-max-cost needs --price INPUT OUTPUT (per million tokens)")
    for name, value in vars(conversation).items():
        if value is not None and value <= 0:
            raise ProxyOptionError(f"--conversation-{name.replace('_', '-')} must be above 0, not {value}")
    if price is not None and min(price) < 0:
        raise ProxyOptionError(f"--price is two amounts per million tokens, input then output, not {price}")
    asked = {"max_model_calls": max_model_calls, "max_tokens": max_tokens, "max_tool_rounds": max_tool_rounds}
    for name, value in {**asked, "max_cost": max_cost}.items():
        if value is not None and not value >= 0:
            raise ProxyOptionError(f"--{name.replace('_', '-')} must be 0 or more, not {value}")
    # A coding agent's task may take hundreds of tool rounds: only the budgets asked for hold here.
    budgets = Budgets(
        max_tool_rounds=max_tool_rounds, max_model_calls=max_model_calls, max_tokens=max_tokens, max_cost=max_cost
    )
    config = LoopConfig(
        ladder=Ladder(nudge_at=nudge, narrow_at=narrow, stop_at=stop),
        budgets=budgets,
        disabled_detectors=frozenset(disabled),
        tool_timeout=None,
    )
    try:
        check_config(config)
    except ConfigError as error:  # every option above is checked by name; this keeps the rest honest
        raise ProxyOptionError(str(error)) from error
    wire_price = Price(input=price[0], output=price[1]) if price is not None else None
    policy = WirePolicy(
        config, frozenset(terminal), frozenset(repeatable), frozenset(writes), wire_price, conversation=conversation
    )
    if resume_entries < 0:
        raise ProxyOptionError(f"--resume-cache is a number of paused runs (0 = off), not {resume_entries}")
    return ProxySettings(upstream=upstream, policy=policy, store_path=db, resume_entries=resume_entries)
