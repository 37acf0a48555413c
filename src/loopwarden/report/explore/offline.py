"""The offline explorer: a deterministic `Model` that explores like a careful analyst, so the
report agent runs on a fresh machine with no endpoint and no key.

It proposes tool calls in batches (one batch = one tool round): list the folder; read every
document, following "truncated ... continue with offset=N" in segments; profile every table;
read every image; draw a figure per numeric table (when figures are on); then it calls
finish_exploration with findings computed from the tables the tools read. Everything it
produces is labelled offline.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from functools import partial
from itertools import count
from typing import Any

from ...models.base import ModelReply, ModelRequest, ToolCall, Usage
from ..folder.groups import sampled_paths
from ..readers import TABLE_EXTS
from ..readers.descriptions import first_sentence, folder_title, main_description
from ..record import TableProfile
from .findings import cross_table_findings, group_findings, independent_column, section, table_findings
from .loop import STEP_BUDGET, descriptions
from .statistics import class_column, numeric_columns, table_kind, time_column
from .tools import ExplorationContext

OFFLINE_LABEL = "offline explorer (deterministic, no language model)"
FIGURE_ROWS = 100_000
"""Rows a figure draws at most: a bigger table is drawn from every Nth row."""
MAX_SEGMENTS = 6
"""Segments read per long document before moving on (the step budget is shared)."""
_CONTINUE = re.compile(r'Continue with read_file\(path="([^"]+)", offset=(\d+)')
_REFERENCE_HINTS = ("report", "example", "sample", "reference", "template")


class OfflineExplorer:
    offline = True

    def __init__(self) -> None:
        self.name = "offline-explorer"
        self._ctx: ExplorationContext | None = None
        self._batches: list[list[tuple[str, dict[str, Any]]]] = []
        self._segments: dict[str, int] = {}
        self._ids = count(1)
        self._figures_done = False
        self.requests: list[ModelRequest] = []
        self._issued: dict[str, tuple[str, dict[str, Any]]] = {}
        self.denied: list[str] = []
        """Calls a person denied (approve_code), as the model read them: told in the record."""

    def bind(self, ctx: ExplorationContext) -> None:
        self._ctx = ctx
        self._batches = self._plan(ctx)

    @property
    def calls(self) -> int:
        return len(self.requests)

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        self._note_denials(request)
        offered = {t["function"]["name"] for t in request.tools}
        if not offered:
            return self._reply(text=self._summary())
        forced = request.tool_choice
        if isinstance(forced, dict) or "finish_exploration" not in offered:
            return self._finish()
        rounds = sum(1 for m in request.messages if m.get("role") == "assistant" and m.get("tool_calls"))
        if rounds >= STEP_BUDGET - 1:
            return self._finish()  # finish inside the budget; the ledger shows what stayed unread
        batch = self._continuations(request) or self._next_batch(offered)
        if not batch:
            return self._finish()
        return self._reply(calls=batch)

    # -- planning --------------------------------------------------------------------------------

    def _plan(self, ctx: ExplorationContext) -> list[list[tuple[str, dict[str, Any]]]]:
        scan = ctx.scan
        sampled = set(sampled_paths(ctx.groups))  # a group of similar files is read through samples
        files = [f for f in scan.files if f.path in sampled]
        folders = sorted({f.path.rsplit("/", 1)[0] for f in files if "/" in f.path})
        documents = [f.path for f in files if f.kind == "documents" or (f.kind == "other" and f.size < 1 << 20)]
        tables = [f.path for f in files if f.ext in TABLE_EXTS]
        other_data = [f.path for f in files if f.kind == "data" and f.ext not in TABLE_EXTS]
        images = [f.path for f in files if f.kind == "images"]
        batches: list[list[tuple[str, dict[str, Any]]]] = [
            [("list_dir", {"path": "."})] + [("list_dir", {"path": d}) for d in folders[:7]]
        ]
        reads = [("read_file", {"path": p}) for p in documents + other_data]
        # Big folders get bigger batches so every file fits in the step budget (the executor
        # still runs at most a few at a time).
        size = max(8, math.ceil((len(reads) + len(tables)) / 8))
        batches += _chunks(reads, size)
        batches += _chunks([("read_file", {"path": p}) for p in tables], size)
        question = "What does this image show? Give any text, numbers, axis labels and units."
        batches += _chunks([("read_image", {"path": p, "question": question}) for p in images], 4)
        return batches

    def _next_batch(self, offered: set[str]) -> list[tuple[str, dict[str, Any]]]:
        while self._batches:
            batch = [c for c in self._batches.pop(0) if c[0] in offered]
            if batch:
                return batch
        if "make_figure" in offered and not self._figures_done:
            self._figures_done = True
            return self._figure_calls()
        return []

    def _continuations(self, request: ModelRequest) -> list[tuple[str, dict[str, Any]]]:
        """Follow the closing line of truncated reads from the last tool round."""
        calls = []
        for message in _last_tool_messages(request.messages):
            match = _CONTINUE.search(_result_text(message.get("content")))
            if not match:
                continue
            path, offset = match.group(1), int(match.group(2))
            self._segments[path] = self._segments.get(path, 1) + 1
            if self._segments[path] <= MAX_SEGMENTS:
                calls.append(("read_file", {"path": path, "offset": offset}))
        return calls

    def _figure_calls(self) -> list[tuple[str, dict[str, Any]]]:
        assert self._ctx is not None
        calls = []
        for path, frame in self._frames().items():
            try:
                dates = time_column(frame, years=False)
                x = dates or independent_column(frame)
                ys = [c for c in numeric_columns(frame) if c != x][:4]
                label = class_column(frame) if table_kind(frame) == "categorical" else None
            except Exception:  # a hostile table (its statistics failure is reported): no figure
                continue
            profile = self._ctx.tables.get(path)
            if label is not None and "#" not in path:
                classes = [c for c in numeric_columns(frame) if c != label][:4]
                if classes:
                    setup = [f"groups = sorted(df[{label!r}].dropna().unique().tolist(), key=str)"]
                    calls.append(_panel_figure(path, profile, classes, setup=setup, xlabel=label, sharex=False,
                        draw=partial(_box, label),
                        after="set_xticks(range(1, len(groups) + 1), [str(g) for g in groups])",
                        said=f"{', '.join(classes)} by {label} in {path}: one box per class"))  # fmt: skip
                continue
            if x is None or not ys or "#" in path:
                continue
            # Against time or a monotonic setting: lines; against another measurement: points only.
            along = dates is not None or frame[x].dropna().is_monotonic_increasing
            style = "marker='o', markersize=3" if along else "marker='o', markersize=3, linestyle='none'"
            xs = f"pd.to_datetime(df[{x!r}], errors='coerce')" if dates else f"df[{x!r}]"
            calls.append(_panel_figure(path, profile, ys, setup=[], xlabel=x, sharex=True,
                                       draw=partial(_line, xs, style),
                                       said=f"{', '.join(ys)} against {x} in {path}"))  # fmt: skip
        return calls[:8]

    def _note_denials(self, request: ModelRequest) -> None:
        """Read the last round's results for denied calls: they are not retried, only reported."""
        for message in _last_tool_messages(request.messages):
            issued = self._issued.get(str(message.get("tool_call_id")))
            if issued is None or _error_type(message.get("content")) != "denied":
                continue
            name, args = issued
            label = f"{name} {args['filename']}" if "filename" in args else name
            if label not in self.denied:
                self.denied.append(label)

    # -- finishing -------------------------------------------------------------------------------

    def _frames(self) -> dict[str, Any]:
        assert self._ctx is not None
        return self._ctx.frames()

    def finish_arguments(self) -> dict[str, Any]:
        assert self._ctx is not None
        ctx = self._ctx
        frames = self._frames()
        # Documents only (not image readings, not text addressing an AI), in path order.
        images = {f.path for f in ctx.scan.files if f.kind == "images"}
        flagged = {i.path for i in ctx.injections}
        texts = {p: ctx.texts[p] for p in sorted(ctx.texts) if p not in frames and p not in images | flagged}
        described = descriptions(ctx)
        main = main_description(described)
        experiment = folder_title(described) or "A data folder with no description file"
        goal = "Not stated in the files (no description file was found)."
        if main is not None:
            said = main.goal or first_sentence(main.summary)
            goal = f"{said} (as stated in {main.path})" if said.strip(" .") else goal
        findings = [f"Offline exploration by the {OFFLINE_LABEL}: findings computed directly from the data."]
        findings += [f for path, frame in frames.items() for f in table_findings(path, frame, ctx.tables.get(path))]
        findings += cross_table_findings(frames)
        findings += group_findings(ctx.group_records(), frames)
        # Sections are looked up per document, so one file's section never runs into the next file.
        requirements = [line for t in texts.values() for line in section(t, "assignment", "task", "requirement")]
        method = [line for t in texts.values() for line in section(t, "method", "procedure", "setup", "apparatus")]
        params = [p for p in texts if p.endswith((".yaml", ".yml", ".json", ".toml", ".ini", ".cfg"))]
        methodology = " ".join(method)
        if params:
            methodology += f" Parameters recorded in {', '.join(params)}."
        if self.denied:
            methodology += f" Not run because the user denied the call: {', '.join(self.denied)}."
        reference = next(
            (
                f.path
                for f in ctx.scan.files
                if f.kind == "documents"
                and f.path not in flagged
                and any(h in f.path.lower() for h in _REFERENCE_HINTS)
            ),
            None,
        )
        arguments: dict[str, Any] = {
            "experiment": experiment,
            "goal": goal,
            "key_findings": findings,
            "assignment_requirements": requirements,
            "methodology_notes": methodology.strip() or None,
        }
        if reference is not None:
            arguments["reference_report"] = reference
        return arguments

    def _finish(self) -> ModelReply:
        if self._ctx is None:
            raise RuntimeError("OfflineExplorer.bind(ctx) must be called before exploring")
        return self._reply(calls=[("finish_exploration", self.finish_arguments())])

    def _summary(self) -> str:
        if self._ctx is None:
            return f"[{OFFLINE_LABEL}] nothing was explored."
        args = self.finish_arguments()
        return f"[{OFFLINE_LABEL}] {args['experiment']}\n" + "\n".join(args["key_findings"])

    def _reply(self, *, calls: list[tuple[str, dict[str, Any]]] | None = None, text: str | None = None) -> ModelReply:
        tool_calls = [
            ToolCall(id=f"offline_{next(self._ids)}", name=name, arguments=json.dumps(args))
            for name, args in calls or []
        ]
        self._issued.update({c.id: (c.name, args) for c, (_, args) in zip(tool_calls, calls or [], strict=True)})
        return ModelReply(
            text=text,
            tool_calls=tool_calls,
            usage=Usage(),
            finish_reason="tool_calls" if tool_calls else "stop",
            model=self.name,
        )


def _box(label: str, y: str) -> str:
    return f"boxplot([df.loc[df[{label!r}] == g, {y!r}].dropna() for g in groups])"


def _line(xs: str, style: str, y: str) -> str:
    return f"plot({xs}, df[{y!r}], {style})"


def _panel_figure(
    path: str,
    profile: TableProfile | None,
    ys: list[str],
    *,
    setup: list[str],
    draw: Callable[[str], str],
    xlabel: str,
    said: str,
    sharex: bool,
    after: str = "",
) -> tuple[str, dict[str, Any]]:
    """One panel per measured column (their units differ, so they never share an axis). A big
    table is drawn from an even sample of its rows, read streaming by the sandbox."""
    every = math.ceil(profile.rows / FIGURE_ROWS) if profile is not None and profile.rows > FIGURE_ROWS else 1
    lines = [
        f"df = load({path!r}, every={every})" if every > 1 else f"df = load({path!r})",
        *setup,
        f"fig, axes = plt.subplots({len(ys)}, 1, figsize=(6, {2 + 1.6 * len(ys):.1f}), sharex={sharex}, squeeze=False)",
    ]
    for i, y in enumerate(ys):
        lines += [f"axes[{i}, 0].{draw(y)}", *([f"axes[{i}, 0].{after}"] if after else [])]
        lines += [f"axes[{i}, 0].set_ylabel({y!r})", f"axes[{i}, 0].grid(True, alpha=0.3)"]
    lines += [f"axes[-1, 0].set_xlabel({xlabel!r})", f"axes[0, 0].set_title({path!r})", "fig.tight_layout()"]
    stem = re.sub(r"[^A-Za-z0-9]+", "_", path.rsplit(".", 1)[0]).strip("_")
    caption = f"{said} (drawn by the offline explorer)."
    if every > 1:
        caption += f" One row in {every} of {profile.rows if profile else 0:,} is drawn."
    return "make_figure", {"code": "\n".join(lines), "filename": stem, "caption": caption}


def _chunks(items: list[tuple[str, dict[str, Any]]], size: int) -> list[list[tuple[str, dict[str, Any]]]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _result_text(content: Any) -> str:
    """The data of a tool message (JSON of a ToolResult), or the raw content."""
    try:
        payload = json.loads(str(content))
    except json.JSONDecodeError:
        return str(content)
    return str(payload.get("data", "")) if isinstance(payload, dict) else str(content)


def _error_type(content: Any) -> str | None:
    try:
        payload = json.loads(str(content))
    except json.JSONDecodeError:
        return None
    return str(payload.get("error_type")) if isinstance(payload, dict) and payload.get("error_type") else None


def _last_tool_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    tail = []
    for message in reversed(messages):
        if message.get("role") == "tool":
            tail.append(message)
        elif tail or message.get("role") == "assistant":
            break
    return list(reversed(tail))


__all__ = ["OFFLINE_LABEL", "OfflineExplorer"]
