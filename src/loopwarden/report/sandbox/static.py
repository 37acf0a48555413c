"""The first layer of the figure sandbox: a static check of the model's matplotlib code, with
messages that say what to do instead. It is a guide for an honest model, not the boundary:
numpy, pandas and matplotlib reach `os`, `subprocess` and `ctypes` themselves, so the child
process's OS isolation (see child.py) is what actually contains the code."""

from __future__ import annotations

import ast

ALLOWED_MODULES = frozenset({"matplotlib", "numpy", "pandas", "math", "statistics"})
FORBIDDEN_NAMES = frozenset(
    {"open", "eval", "exec", "compile", "__import__", "globals", "locals", "vars", "getattr", "setattr", "delattr"}
    | {"input", "breakpoint", "memoryview", "help", "exit", "quit"}
)
MAX_CODE_CHARS = 20_000


def check_code(code: str) -> list[str]:
    """Problems found, each a sentence the model can act on; [] = the code may run."""
    if len(code) > MAX_CODE_CHARS:
        return [f"the code is {len(code)} characters long; keep figure code under {MAX_CODE_CHARS}"]
    try:
        tree = ast.parse(code, mode="exec")
    except SyntaxError as error:
        return [f"syntax error on line {error.lineno}: {error.msg}"]
    problems: list[str] = []
    for node in ast.walk(tree):
        problems.extend(_node_problems(node))
    return list(dict.fromkeys(problems))


def _node_problems(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [_import_problem(alias.name) for alias in node.names if not _allowed(alias.name)]
    if isinstance(node, ast.ImportFrom):
        if node.level or not node.module or not _allowed(node.module):
            return [_import_problem(node.module or "." * node.level)]
        return []
    if isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
        return [f"`{node.id}` is not allowed; read data only with load(path) and draw with matplotlib"]
    if isinstance(node, ast.Name) and node.id.startswith("__"):
        return [f"double-underscore names such as `{node.id}` are not allowed"]
    if isinstance(node, ast.Attribute) and node.attr.startswith("__"):
        return [f"double-underscore attributes such as `.{node.attr}` are not allowed"]
    if isinstance(node, ast.Attribute) and node.attr in {"system", "popen", "spawn", "fork", "Popen", "run_path"}:
        return [f"`.{node.attr}` is not allowed: figure code may not start processes"]
    if isinstance(node, ast.Call) and _is_savefig(node):
        return ["do not save the figure yourself: the runtime saves the current figure under the filename given"]
    return []


def _is_savefig(node: ast.Call) -> bool:
    return isinstance(node.func, ast.Attribute) and node.func.attr in {"savefig", "imsave"}


def _allowed(module: str) -> bool:
    return module.split(".")[0] in ALLOWED_MODULES


def _import_problem(module: str) -> str:
    allowed = ", ".join(sorted(ALLOWED_MODULES))
    return f"import of `{module}` is not allowed; allowed imports: {allowed} (data comes from load(path))"
