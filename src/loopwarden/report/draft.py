"""Drafting: the main-tier model writes the LaTeX report from the skeleton and the facts, with no
tools offered. A draft is accepted only if it has `\\documentclass`, carries no tool-call markup
and (where xelatex exists) compiles; otherwise the model is told so and asked again, up to a bound.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..events import Event, EventStamper, ModelCalled, ModelFailed, Totals
from ..guard.budget import Price
from ..models.base import Message, Model, ModelError, ModelRequest
from ..models.markup import has_markup
from ..verify import Verifier, first_failure
from .compile import check_compiles
from .events import DraftFailed, DraftRejected
from .offline_writer import WriterInput, skeleton
from .plan import Toolchain

MAX_ATTEMPTS = 3
REINFORCEMENT = "You have no tools now; output the complete LaTeX source, from \\documentclass to \\end{document}."
_FENCE = re.compile(r"```(?:latex|tex)?\s*\n(?P<body>.*?)```", re.DOTALL)
_TOOL_MARKUP = re.compile(
    r"</?\s*(?:tool_call|tool_calls|function_call|function_calls|invoke)\b[^>]*>"
    r"|\"tool_calls\"\s*:|\"function\"\s*:\s*\{\s*\"name\"|<\|(?:tool|python_tag)",
    re.IGNORECASE,
)

SYSTEM = (
    "You write scientific reports in LaTeX for xelatex. You are given the facts established by an "
    "exploration of a data folder and a LaTeX skeleton. Write the complete report: fill every section "
    "from the facts only, never invent data, numbers or references. Include every listed figure with "
    "\\includegraphics{path} and its caption. State every listed gap explicitly in the report. Cite "
    "only the listed source keys with \\cite{key}. Keep the skeleton's preamble and add no packages (the "
    "installed LaTeX may lack them). You have no tools: answer with the LaTeX source only."
)


def leak_problem(text: str) -> str | None:
    """Tool-call markup (DSML, <tool_call>, tool_calls JSON) in what should be a document."""
    if has_markup(text) or _TOOL_MARKUP.search(text):
        return "the output contains tool-call markup instead of a LaTeX document"
    return None


def documentclass_problem(text: str) -> str | None:
    if "\\documentclass" not in text:
        return "the output has no \\documentclass: it is not a complete LaTeX document"
    if "\\end{document}" not in text:
        return "the output has no \\end{document}: the document is incomplete"
    return None


DRAFT_VERIFIERS: list[Verifier] = [leak_problem, documentclass_problem]


def extract_latex(text: str | None) -> str:
    """The LaTeX in a reply: unfenced, without chatter before \\documentclass or after \\end{document}."""
    text = text or ""
    fenced = [m.group("body") for m in _FENCE.finditer(text) if "\\documentclass" in m.group("body")]
    if fenced:
        text = fenced[0]
    start = text.find("\\documentclass")
    end = text.rfind("\\end{document}")
    if start > 0 and not has_markup(text[:start]) and not _TOOL_MARKUP.search(text[:start]):
        text = text[start:]
        end = text.rfind("\\end{document}")
    if end != -1:
        text = text[: end + len("\\end{document}")] + "\n"
    return text


@dataclass
class Session:
    """One model conversation of the writing phase; counts what it spends into `totals`."""

    model: Model
    stamp: EventStamper
    totals: Totals
    tools: Toolchain
    workdir: Path
    compile_timeout: float = 120.0
    turn: int = 0
    prices: dict[str, Price] = field(default_factory=dict)
    """Known prices by model name, for the run's cost total."""

    async def ask(self, messages: list[Message]) -> tuple[str | None, list[Event]]:
        """(text or None on a model error, events)."""
        self.turn += 1
        began = time.perf_counter()
        try:
            reply = await self.model.complete(ModelRequest(messages=messages))
        except ModelError as error:
            failed = self.stamp(
                ModelFailed, turn=self.turn, kind=error.kind, message=error.message, retryable=error.retryable
            )
            return None, [failed]
        self.totals.model_calls += 1
        self.totals.add_usage(reply.usage)
        price = self.prices.get(reply.model or self.model.name) or self.prices.get(self.model.name)
        self.totals.cost += price.cost(reply.usage) if price else 0.0
        called = self.stamp(
            ModelCalled,
            turn=self.turn,
            model=reply.model or self.model.name,
            tools_offered=[],
            n_tools_offered=0,
            usage=reply.usage,
            text=(reply.text or "")[:2000],
            n_tool_calls=len(reply.tool_calls),
            duration_ms=(time.perf_counter() - began) * 1000,
        )
        if reply.tool_calls and not reply.text:
            return "<tool_call>" + json.dumps([c.name for c in reply.tool_calls]) + "</tool_call>", [called]
        return reply.text, [called]

    async def problem_with(self, tex: str) -> str | None:
        problem = first_failure(DRAFT_VERIFIERS, tex)
        if problem is None and self.tools.can_compile:
            error = await check_compiles(tex, self.workdir, self.tools, timeout=self.compile_timeout)
            if error is not None:
                problem = f"it does not compile: {error.describe()}"
        return problem


@dataclass
class Outcome:
    tex: str | None = None
    problems: list[str] = field(default_factory=list)
    model_failed: bool = False


async def latex_with_retries(
    session: Session, stage: str, messages: list[Message], outcome: Outcome, *, max_attempts: int = MAX_ATTEMPTS
) -> AsyncIterator[Event]:
    """Ask until a reply is acceptable LaTeX; `outcome.tex` is None after `max_attempts` failures."""
    messages = list(messages)
    for attempt in range(1, max_attempts + 1):
        text, events = await session.ask(messages)
        for event in events:
            yield event
        if text is None:
            outcome.model_failed = True
            outcome.problems.append("the model call failed")
            return
        tex = extract_latex(text)
        problem = await session.problem_with(tex)
        if problem is None:
            outcome.tex = tex
            return
        outcome.problems.append(problem)
        yield session.stamp(DraftRejected, stage=stage, attempt=attempt, max_attempts=max_attempts, problem=problem)
        messages += [
            {"role": "assistant", "content": text},
            {"role": "user", "content": f"That was not accepted: {problem}. {REINFORCEMENT}"},
        ]


def failure_event(session: Session, stage: str, outcome: Outcome, fallback: str) -> Event:
    attempts = len(outcome.problems)
    return session.stamp(
        DraftFailed,
        stage=stage,
        attempts=attempts,
        problems=outcome.problems,
        fallback=fallback,
        message=f"no acceptable {stage} after {attempts} attempt(s); {fallback}",
    )


def draft_messages(inp: WriterInput, source_keys: list[dict[str, Any]]) -> list[Message]:
    facts = facts_for_model(inp, source_keys)
    user = (
        "Facts from the exploration (JSON):\n"
        f"{json.dumps(facts, ensure_ascii=False, indent=1)}\n\n"
        f"Language of the report: {'Chinese' if inp.lang == 'zh' else 'English'}.\n"
        "LaTeX skeleton (keep its preamble; fill every section):\n"
        f"{skeleton(inp)}\n"
        "Output the complete LaTeX source only."
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def facts_for_model(inp: WriterInput, source_keys: list[dict[str, Any]]) -> dict[str, Any]:
    r = inp.record
    return {
        "experiment": r.experiment,
        "goal": r.goal,
        "key_findings": r.key_findings,
        "methodology_notes": r.methodology_notes,
        "assignment_requirements": r.assignment_requirements,
        "tables": [
            {
                "path": t.path,
                "rows": t.rows,
                "columns": t.columns[:60],
                "numeric_summary": dict(list(t.numeric_summary.items())[:30]),
            }
            for t in r.tables[:10]
        ],
        "figures": [{"path": f.path, "caption": f.caption} for f in r.figures] if inp.figures_on else [],
        "gaps": [g.message for g in inp.gaps],
        "sources": source_keys,
        "files": {"count": len(inp.scan.files), "by_kind": inp.scan.counts},
        "coverage": [e.model_dump() for e in r.coverage.files[:40]],
        "exploration_cut_off": r.stop_reason if r.degraded else None,
    }
