from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Literal

import pytest

from loopwarden import tools as tools_module
from loopwarden.errors import LoopwardenError, ToolDefinitionError
from loopwarden.tools import (
    Tool,
    ToolRegistry,
    ToolResult,
    business_failure,
    failure_parsers,
    http_status_failure,
    status_failure,
    tool,
)


def test_schema_from_type_hints_and_docstring() -> None:
    @tool(namespace="fs")
    def read_file(path: str, offset: int = 0, mode: Literal["text", "bytes"] = "text") -> str:
        """Read part of a file.

        Args:
            path: file path relative to the root
            offset: first line to read
        """
        return path

    schema = read_file.openai_schema()
    fn = schema["function"]
    assert fn["name"] == "fs__read_file"
    assert read_file.qualified_name == "fs.read_file"
    assert fn["description"] == "Read part of a file."
    params = fn["parameters"]
    assert params["required"] == ["path"]
    assert params["properties"]["path"] == {"type": "string", "description": "file path relative to the root"}
    assert params["properties"]["offset"]["default"] == 0
    assert params["properties"]["mode"]["enum"] == ["text", "bytes"]
    assert params["additionalProperties"] is False


def test_async_tool_is_detected_and_called() -> None:
    @tool
    async def ping(host: str) -> dict[str, str]:
        """Ping a host."""
        await asyncio.sleep(0)
        return {"host": host}

    assert ping.is_async
    args = ping.args_model(host="h")
    assert asyncio.run(ping.call(args)) == {"host": "h"}


def test_registry_renders_tools_and_resolves_both_name_forms() -> None:
    @tool(namespace="fs")
    def list_dir(path: str) -> list[str]:
        """List a folder."""
        return []

    def plain(x: int) -> int:
        """Double x."""
        return 2 * x

    registry = ToolRegistry([list_dir, plain])
    assert registry.names() == ["fs.list_dir", "plain"]
    assert registry.get("fs__list_dir") is registry.get("fs.list_dir")
    assert "plain" in registry and "missing" not in registry
    rendered = registry.openai_tools(["plain"])
    assert [t["function"]["name"] for t in rendered] == ["plain"]
    with pytest.raises(ValueError, match="already registered"):
        registry.add(plain)


def test_var_args_are_refused_at_declaration() -> None:
    def bad(*paths: str) -> None:
        """Many paths."""

    with pytest.raises(ToolDefinitionError, match=r"\*args") as caught:
        tool(bad)
    assert isinstance(caught.value, LoopwardenError) and isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    ("data", "error_type"),
    [
        ({"success": False, "code": "E42", "message": "quota"}, "E42"),
        ({"ok": False, "error": "nope"}, "nope"),
    ],
)
def test_explicit_business_failures_in_data_become_failures(data: dict[str, object], error_type: str) -> None:
    result = business_failure(data)
    assert result is not None and not result.ok and result.error_type == error_type and not result.retryable


@pytest.mark.parametrize(
    "data",
    [
        {"success": True},
        {"status": "ok"},
        [1, 2],
        "text",
        None,
        {"status_code": 200},
        {"job": "nightly-backup", "status": "failed"},  # a job's state is data, not this call failing
        {"status": "error", "message": "bad"},
        {"status_code": 404, "path": "/missing"},  # e.g. an access-log record
    ],
)
def test_anything_else_passes_the_default_parser(data: object) -> None:
    assert business_failure(data) is None


@pytest.mark.parametrize(
    ("data", "error_type", "retryable"),
    [
        ({"status": "error", "message": "bad"}, "business_error", False),
        ({"status": "FAILED"}, "business_error", False),
        ({"status_code": 503, "error": "down"}, "http_503", True),
        ({"status_code": 404}, "http_404", False),
        ({"success": False, "code": "E1"}, "E1", False),
    ],
)
def test_status_shapes_are_failures_when_a_tool_opts_in(
    data: dict[str, object], error_type: str, retryable: bool
) -> None:
    @tool(result_parser=failure_parsers(business_failure, status_failure, http_status_failure))
    def job_api(job: str) -> dict[str, object]:
        """Ask the job API."""
        return data

    result = job_api.to_result(data)
    assert not result.ok and result.error_type == error_type and result.retryable is retryable
    assert job_api.to_result({"status": "running"}).ok


def test_argument_help_keeps_continuation_lines_in_every_docstring_style() -> None:
    def google(path: str, limit: int = 10) -> str:
        """Read a file.

        Longer text about reading.

        Args:
            path: where the file is, relative
                to the project root
            limit (int): how many lines
        """
        return path

    def numpy_style(path: str) -> str:
        """Read a file.

        Parameters
        ----------
        path : str
            where the file is, relative
            to the project root
        """
        return path

    def rest(path: str) -> str:
        """Read a file.

        :param path: where the file is, relative
            to the project root
        """
        return path

    for fn in (google, numpy_style, rest):
        params = tool(fn).parameters["properties"]
        assert params["path"]["description"] == "where the file is, relative to the project root", fn.__name__
    described = tool(google)
    assert described.description == "Read a file.\n\nLonger text about reading."
    assert described.parameters["properties"]["limit"]["description"] == "how many lines"


def test_custom_result_parser_and_to_result() -> None:
    def parser(raw: object) -> ToolResult | None:
        return ToolResult.failure("empty", "nothing found") if raw == [] else None

    @tool(result_parser=parser)
    def search(q: str) -> list[str]:
        """Search."""
        return []

    assert isinstance(search, Tool)
    assert search.to_result([]).error_type == "empty"
    assert search.to_result(["x"]).ok


def test_tool_result_model_content_is_compact_json() -> None:
    content = json.loads(ToolResult.failure("timeout", "slow", retryable=True).to_model_content())
    assert content == {"ok": False, "error_type": "timeout", "retryable": True, "message": "slow"}
    assert json.loads(ToolResult.success({"a": 1}).to_model_content()) == {"ok": True, "data": {"a": 1}}


# -- where sync tools run: inline once found quick, in a worker thread when they block -------------


def _thread_of_each_call(declared: Tool, calls: int) -> list[bool]:
    """For each call through the executor: did it run on the event loop's thread?"""
    from loopwarden.executor import Executor

    async def run() -> list[bool]:
        loop_thread, on_loop = threading.get_ident(), []
        for _ in range(calls):
            execution = await Executor().run(declared, declared.args_model())
            assert execution.result.ok, execution.result
            on_loop.append(execution.result.data == loop_thread)
        return on_loop

    return asyncio.run(run())


def test_a_quick_sync_tool_runs_inline_after_its_first_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tools_module, "INLINE_LIMIT_S", 60.0)  # "quick" whatever the machine's load

    @tool
    def where() -> int:
        """The thread it ran on."""
        return threading.get_ident()

    assert (
        _thread_of_each_call(where, tools_module.INLINE_AFTER + 2) == [False] * tools_module.INLINE_AFTER + [True] * 2
    )


def test_a_sync_tool_that_took_long_goes_back_to_a_thread_for_good(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tools_module, "INLINE_LIMIT_S", 0.01)
    slow = [True, False, False]

    @tool
    def where() -> int:
        """Slow once, on its first inline call: it waits."""
        if slow.pop(0):
            time.sleep(0.05)  # sleeps at least this long: over the limit on any machine
        return threading.get_ident()

    where.pace.calls = tools_module.INLINE_AFTER  # as if its first calls had been quick
    assert _thread_of_each_call(where, 3) == [True, False, False]
    assert where.pace.blocks


def test_a_call_slowed_by_a_busy_machine_is_not_a_wait() -> None:
    pace = tools_module.ToolPace()
    pace.note(1.0, waited=False)  # preempted: the thread never gave up the CPU of its own
    assert not pace.blocks
    pace.note(1.0, waited=True)
    assert pace.blocks


def test_a_sync_tool_slow_from_its_first_call_never_runs_inline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tools_module, "INLINE_LIMIT_S", 0.01)

    @tool
    def waits() -> int:
        """Slow every time."""
        time.sleep(0.02)
        return threading.get_ident()

    assert _thread_of_each_call(waits, tools_module.INLINE_AFTER + 1) == [False] * (tools_module.INLINE_AFTER + 1)


def test_declared_blocking_and_timed_tools_always_run_in_a_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tools_module, "INLINE_LIMIT_S", 60.0)

    @tool(blocking=True)
    def declared() -> int:
        """Waits on I/O."""
        return threading.get_ident()

    @tool(timeout=5)
    def timed() -> int:
        """Has a timeout of its own."""
        return threading.get_ident()

    @tool(blocking=False)
    def quick() -> int:
        """Declared quick."""
        return threading.get_ident()

    calls = tools_module.INLINE_AFTER + 2
    assert _thread_of_each_call(declared, calls) == [False] * calls
    assert _thread_of_each_call(timed, calls) == [False] * calls
    assert _thread_of_each_call(quick, calls) == [True] * calls


def test_schemas_are_built_once_per_tool_and_offers_once_per_set(monkeypatch: pytest.MonkeyPatch) -> None:
    built = []

    @tool
    def a(x: int) -> int:
        """A."""
        return x

    @tool
    def b(y: str) -> str:
        """B."""
        return y

    original = a.args_model.model_json_schema

    def counting(*args: object, **kwargs: object) -> dict[str, object]:
        built.append(1)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(a.args_model, "model_json_schema", counting)
    registry = ToolRegistry([a, b])
    first = registry.openai_tools(["a", "b"])
    again = registry.openai_tools(["a", "b"])
    assert first == again and first is not again  # a new list: callers may append to it
    assert registry.openai_tools(["b", "a"]) == [first[1], first[0]]
    assert len(built) == 1
    assert a.parameters == first[0]["function"]["parameters"]
    registry.add(tool(lambda z: z, name="c"))
    assert [t["function"]["name"] for t in registry.openai_tools()] == ["a", "b", "c"]


def test_idempotent_is_declared_on_function_and_schema_tools_and_decides_automatic_retry() -> None:
    from loopwarden.tools.schema import tool_from_schema

    @tool(side_effect="write", idempotent=True)
    def set_level(level: int) -> int:
        """Set the level."""
        return level

    @tool(side_effect="write")
    def append_line(line: str) -> str:
        """Append a line."""
        return line

    put = tool_from_schema("put", {"type": "object"}, lambda **kw: kw, side_effect="write", idempotent=True)
    assert set_level.idempotent and put.idempotent and not append_line.idempotent
    assert set_level.retried_automatically and put.retried_automatically
    assert not append_line.retried_automatically
    assert tool_from_schema("get", None, lambda: 1).retried_automatically  # a read


def test_tools_declared_afresh_from_one_function_shape_share_their_argument_model() -> None:
    def declare(default: object) -> Tool:
        def read(path: str, offset: int = default) -> str:  # type: ignore[assignment]
            """Read.

            Args:
                path: the file
            """
            return path

        return tool(read)

    first, again = declare(0), declare(0)
    assert first.args_model is again.args_model  # built once per shape, not once per declaration
    assert first.openai_schema() == again.openai_schema()
    # 0 == False == 0.0, yet each is another default: another model, with its own default
    others = [declare(False), declare(0.0), declare(-0.0), declare(1)]
    assert len({id(t.args_model) for t in [first, *others]}) == 5
    assert [t.args_model.model_fields["offset"].default for t in others] == [False, 0.0, -0.0, 1]
    assert repr(others[2].parameters["properties"]["offset"]["default"]) == "-0.0"
    # a default that is not a plain scalar is never shared: its model is built each time
    assert declare([1]).args_model is not declare([1]).args_model
    first.parameters["properties"].clear()  # a caller's copy: the shared schema is untouched
    assert "path" in again.openai_schema()["function"]["parameters"]["properties"]


def test_a_tool_declared_afresh_from_one_function_keeps_its_pace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tools_module, "INLINE_LIMIT_S", 60.0)  # "quick" whatever the machine's load

    def declare(name: str | None = None) -> Tool:
        def where() -> int:
            """The thread it ran on."""
            return threading.get_ident()

        return tool(where) if name is None else tool(name=name)(where)

    first = declare()
    assert _thread_of_each_call(first, tools_module.INLINE_AFTER) == [False] * tools_module.INLINE_AFTER
    assert _thread_of_each_call(declare(), 2) == [True, True]  # learned by the first declaration
    assert _thread_of_each_call(declare("elsewhere"), 1) == [False]  # another name: another tool
    first.pace.blocks = True  # one declaration found it waits: every one goes back to a thread
    assert _thread_of_each_call(declare(), 1) == [False]
