"""Permissions: principal roles against tool roles, and the offered set, checked before any run."""

from __future__ import annotations

from loopwarden import Agent, ScriptedModel, ToolRegistry, call, tool
from loopwarden.events import GuardVerdict, ToolCallFinished
from loopwarden.policy.permissions import Principal, permits, refusal
from loopwarden.policy.router import Intent, RuleRouter


def registry(ran: list[str]) -> ToolRegistry:
    @tool(namespace="accounts", roles={"admin"}, side_effect="write")
    def delete_user(user: str) -> str:
        """Delete a user account."""
        ran.append(f"delete {user}")
        return "deleted"

    @tool(namespace="accounts")
    def get_user(user: str) -> dict[str, str]:
        """Look a user up."""
        ran.append(f"get {user}")
        return {"user": user}

    @tool(roles={"admin", "support"})
    def reset_password(user: str) -> str:
        """Send a password reset."""
        ran.append(f"reset {user}")
        return "sent"

    return ToolRegistry([delete_user, get_user, reset_password])


def test_permits_and_refusal() -> None:
    tools = registry([])
    delete, get = tools.get("accounts.delete_user"), tools.get("accounts__get_user")
    assert delete is not None and get is not None
    assert permits(get, None) and permits(get, frozenset())
    assert not permits(delete, None) and not permits(delete, frozenset({"viewer"}))
    assert permits(delete, frozenset({"viewer", "admin"}))
    offered = {"accounts__delete_user", "accounts.get_user"}  # wire or qualified names both count
    assert refusal(get, offered, None) is None
    role_refusal = refusal(delete, offered, frozenset({"viewer"}))
    assert (
        role_refusal is not None
        and role_refusal.error_type == "not_allowed"
        and "admin" in (role_refusal.message or "")
    )
    not_offered = refusal(get, {"reset_password"}, None)
    assert not_offered is not None and not_offered.error_type == "not_allowed"


async def test_a_call_outside_the_principals_roles_is_refused_before_running() -> None:
    ran: list[str] = []
    model = ScriptedModel([call("accounts__delete_user", {"user": "bob"}), "I cannot do that."])
    agent = Agent(model, registry(ran), principal=Principal.of("alice", ["support"]))
    result = await agent.run("delete bob")
    refused = next(e for e in result.events if isinstance(e, ToolCallFinished))
    assert refused.error_type == "not_allowed" and not refused.executed
    verdict = next(e for e in result.events if isinstance(e, GuardVerdict) and e.call_id == refused.call_id)
    assert verdict.detector == "permission" and verdict.action == "refused"
    assert ran == [] and result.status == "completed"


async def test_the_principal_with_the_role_may_call_it() -> None:
    ran: list[str] = []
    model = ScriptedModel([call("reset_password", {"user": "bob"}), "Reset sent."])
    await Agent(model, registry(ran), principal=Principal.of("sam", ["support"])).run("reset bob")
    assert ran == ["reset bob"]


async def test_a_call_outside_the_intents_tool_set_is_refused() -> None:
    ran: list[str] = []
    lookup = Intent("lookup", tools=("accounts.get_user",), keywords=("who",))
    model = ScriptedModel(
        [[call("accounts__get_user", {"user": "bob"}), call("reset_password", {"user": "bob"})], "ok"]
    )
    admin = Principal.of("root", ["admin"])
    result = await Agent(model, registry(ran), router=RuleRouter([lookup]), principal=admin).run("who is bob")
    results = {e.tool: e for e in result.events if isinstance(e, ToolCallFinished)}
    assert results["accounts__get_user"].ok
    assert results["reset_password"].error_type == "not_allowed"
    assert "not available" in (results["reset_password"].message or "")
    assert ran == ["get bob"]
