"""What building an event costs: pydantic validation (what `EventStamper` does), `model_construct`
(no validation) and `EventStamper.trusted` (what the loop does for its per-step events: names
checked, values not re-validated), for two events every step emits, in the same process.

    python bench/bench_events.py [--events 20000] [--repeat 5]

Prints the best of N microseconds per event for each way and the ratio construct / validate
(above 1.0: skipping validation is slower: pydantic's compiled validator beats the Python-level
`model_construct`, which inspects each `default_factory`'s signature on every call).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from loopwarden.events import Event, EventStamper, ModelCalled, ToolCallFinished
from loopwarden.models.base import Usage

FIELDS: dict[type[Event], dict[str, Any]] = {
    ToolCallFinished: {"turn": 1, "call_id": "c1", "tool": "read", "ok": True, "preview": "x" * 100},
    ModelCalled: {
        "turn": 1,
        "model": "m",
        "tools_offered": ["a", "b"],
        "n_tools_offered": 2,
        "usage": Usage(prompt_tokens=10),
        "text": "hi",
        "n_tool_calls": 1,
    },
}


def best_us(build: Callable[[], Event], n: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(n):
            build()
        best = min(best, (time.perf_counter() - start) / n * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    stamp = EventStamper("bench")
    for cls, fields in FIELDS.items():
        validated = best_us(lambda c=cls, f=fields: stamp(c, **f), args.events, args.repeat)
        constructed = best_us(
            lambda c=cls, f=fields: c.model_construct(run_id="bench", seq=1, ts=0.0, **f), args.events, args.repeat
        )
        trusted = best_us(lambda c=cls, f=fields: stamp.trusted(c, **f), args.events, args.repeat)
        print(f"{cls.__name__}: validated {validated:.1f} us, model_construct {constructed:.1f} us, "
              f"trusted {trusted:.1f} us, ratio construct/validate {constructed / validated:.2f}, "
              f"trusted/validate {trusted / validated:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
