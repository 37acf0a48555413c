"""The eval case format: one YAML file describes one badcase — the input, the tools with canned
results, how the model behaves, and what must hold at the end. See the README ("Eval cases").

    name: git-status-collapse
    intent: repo_status
    input: What changed in the repository?
    tools:
      - name: git_status
        results: [{ok: true, data: "nothing to commit"}]
    model:
      repeat_forever: {call: git_status}
    expect:
      expected_stop_reason: repeated_call
      max_model_calls: 7
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..errors import CaseError as CaseError  # its home is loopwarden.errors
from ..events import StopPolicy


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CannedResult(_Strict):
    """What a tool returns for one call: data (success) or a structured failure."""

    ok: bool = True
    data: Any = None
    error_type: str | None = None
    message: str | None = None
    retryable: bool = False


class ArgsResult(_Strict):
    """A result for calls whose arguments contain `args` (a subset match)."""

    args: dict[str, Any]
    result: CannedResult | None = None
    results: list[CannedResult] = Field(default_factory=list)
    """Per matching call, in order; the last one repeats."""


class ToolSpec(_Strict):
    """A tool of the case. Results come from `script`, else the first matching `by_args`,
    else `results` (per call, the last repeats), else `{ok: true, data: "ok"}`."""

    name: str
    description: str = ""
    parameters: dict[str, Any] | None = None
    """JSON Schema of the arguments; by default any object is accepted."""
    results: list[CannedResult] = Field(default_factory=list)
    by_args: list[ArgsResult] = Field(default_factory=list)
    script: str | None = None
    """Python source defining `run(args: dict, n: int) -> Any` (n = 1-based call count of this
    tool); its return value is the tool's raw result, so business failures as data work."""
    terminal: bool = False
    repeatable: bool = False
    side_effect: Literal["read", "write"] = "read"
    raw: bool = True
    """Return `data` as the tool's raw value, so the business-failure parser reads it (an HTTP 200
    with `{"success": false}` becomes the failure it is); `false` hands `data` over as a plain
    success the parser never sees (an API whose `success: false` is legitimately data)."""


class Step(_Strict):
    """One model reply: a call, several parallel calls, text, or a failure."""

    call: str | None = None
    args: dict[str, Any] | str = Field(default_factory=dict)
    calls: list[Step] = Field(default_factory=list)
    text: str | None = None
    error: str | None = None
    """A model failure of this kind (e.g. `rate_limited`, `timeout`, `malformed_output`)."""

    @model_validator(mode="after")
    def _one_kind(self) -> Step:
        kinds = [self.call is not None, bool(self.calls), self.error is not None]
        if sum(kinds) > 1:
            raise ValueError("a step is one of: call, calls, error (text may accompany a call)")
        if sum(kinds) == 0 and self.text is None:
            raise ValueError("a step needs call, calls, text or error")
        return self


class ModelSpec(_Strict):
    """How the scripted model behaves. Exactly one of `script`, `repeat_forever`, `cycle`,
    `cassette`; `on_nudge` switches script when the runtime steers the model."""

    script: list[Step] = Field(default_factory=list)
    then: Literal["repeat_last", "cycle", "answer", "exhausted"] = "answer"
    """What the model does once `script` is used up."""
    repeat_forever: Step | None = None
    cycle: list[Step] = Field(default_factory=list)
    cassette: str | None = None
    """A recorded cassette (path relative to the case file), replayed reply by reply."""
    on_nudge: list[Step] | None = None
    """Obeys a nudge: after the first one it follows this script (then `then`)."""
    final: str = "Here is my answer from what I gathered."
    """The reply when no tools are offered (wrap-up, final answer requests)."""
    tool_choice: Literal["ignore", "obey"] = "ignore"
    """How the model treats a forced `tool_choice`. `obey`: a named function is called (with
    `forced_args`), `"none"` gets the `final` answer, `"required"` a call (the script's next one,
    else the first tool offered). `ignore`: it goes on with its script whatever is forced."""
    forced_args: dict[str, Any] = Field(default_factory=dict)
    """The arguments an obeying model passes to the function it is forced to call."""
    never_answers: bool = False
    """Asked for an answer (no tools offered, or `tool_choice="none"`), it still replies with tool
    calls only (its script's next call, else the last call it made), never with text."""
    name: str = "scripted"
    prompt_tokens: int = 100
    completion_tokens: int = 20

    @model_validator(mode="after")
    def _one_behaviour(self) -> ModelSpec:
        given = [bool(self.script), self.repeat_forever is not None, bool(self.cycle), self.cassette is not None]
        if sum(given) != 1:
            raise ValueError("model needs exactly one of: script, repeat_forever, cycle, cassette")
        return self


class ChecklistSpec(_Strict):
    name: str
    tool: str
    when_args: dict[str, Any] = Field(default_factory=dict)
    """Done only by a call whose arguments contain these."""
    required: bool = True


class ConfigSpec(_Strict):
    """Loop settings for the case; anything unset keeps the runtime default."""

    max_tool_rounds: int | None = None
    max_model_calls: int | None = None
    max_tokens: int | None = None
    nudge_at: int | None = None
    narrow_at: int | None = None
    stop_at: int | None = None
    policy: StopPolicy | None = None
    wrap_up: bool | None = None
    disable: list[str] = Field(default_factory=list)
    """Detectors switched off for this case."""


class Expectations(_Strict):
    expected_tools: list[str] = Field(default_factory=list)
    """Each of these tools must have been executed (run, not just proposed) at least once."""
    forbidden_repeats: list[str] | bool = False
    """No identical call (same tool, same arguments) of these tools — or of any tool when
    true — may be *executed* twice; repeats answered from the cache are fine."""
    expected_stop_reason: str | list[str] | None = None
    expected_status: str | list[str] | None = None
    max_model_calls: int | None = None
    must_complete: list[str] | bool = False
    """These checklist items — or all required ones when true — must be done."""
    no_guard_trip: bool = False
    """No detector cached, nudged, narrowed or stopped anything."""
    expected_detectors: list[str] = Field(default_factory=list)
    """Each of these detectors must have stepped in (cached, nudged, narrowed or stopped)."""
    output_contains: list[str] = Field(default_factory=list)
    # -- turn level: a turn is one model call, numbered from 1 ----------------------------------
    first_intervention_by: int | None = None
    """The guard first steps in (see `no_intervention`) at or before this turn."""
    stop_by: int | None = None
    """The tool phase is stopped (a guard or budget stop) at or before this turn."""
    no_intervention: bool = False
    """No guard verdict other than `allowed` (cached answers aside; refusals of a malformed call
    too: an unknown tool, arguments that break the schema, a tool not offered) and no stop."""
    detectors_any: list[str] = Field(default_factory=list)
    """At least one of these detectors stepped in (`expected_detectors`: each of them)."""
    max_phase_model_calls: int | None = None
    """Model calls of the tool phase, up to the stop; the wrap-up calls after it are not counted."""
    max_wrap_up_calls: int | None = None
    """Model calls after the phase ended (asking for the answer with no tools)."""
    expected_rescued: bool | None = None
    """Whether the run was rescued: completed by a terminal tool the runtime forced."""


CaseKind = Literal["loop", "healthy"]


class Case(_Strict):
    name: str
    intent: str = "default"
    description: str = ""
    source: str | None = None
    """Where the shape comes from (e.g. a public issue tracker thread)."""
    kind: CaseKind | None = None
    """`healthy`: any intervention on it is a false intervention (counted per suite; the eval fails);
    `loop`: it must be stopped or steered."""
    pair: str | None = None
    """The name of its counterpart: a loop case's healthy near-miss, or the loop it nearly is."""
    input: str
    system: str | None = None
    tools: list[ToolSpec] = Field(default_factory=list)
    model: ModelSpec
    checklist: list[ChecklistSpec] = Field(default_factory=list)
    verifiers: list[str] = Field(default_factory=list)
    """Named output checks: `no_markup`, `nonempty`."""
    config: ConfigSpec = Field(default_factory=ConfigSpec)
    expect: Expectations = Field(default_factory=Expectations)
    path: Path | None = Field(default=None, exclude=True)


YAML_LOADER: type[yaml.CSafeLoader] | type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""PyYAML's safe loader in C (libyaml, in PyYAML's wheels) where it was built, else in Python:
the same documents, about ten times faster (a suite of cases is loaded at every `eval`)."""


def load_case(path: Path) -> Case:
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=YAML_LOADER)
    except (OSError, yaml.YAMLError) as error:
        raise CaseError(f"{path}: {error}") from None
    if not isinstance(data, dict):
        raise CaseError(f"{path}: a case file holds one YAML mapping")
    data.setdefault("name", path.stem)
    try:
        case = Case.model_validate(data)
    except ValidationError as error:
        raise CaseError(f"{path}: {error}") from None
    case.path = path
    return case


def collect_case_files(paths: list[Path]) -> list[Path]:
    """Case files under the given files and folders (`*.yaml`, `*.yml`), sorted, no duplicates."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found += sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
        else:
            found.append(path)
    unique = dict.fromkeys(p.resolve() for p in found)
    return list(unique)
