"""loopwarden's guard inside other frameworks' agent loops: one module per framework, each an
optional extra imported only when used (the runtime never imports this package).

- `loopwarden.adapters.langchain`: a LangChain v1 `create_agent` middleware (`pip install 'loopwarden[langchain]'`)
- `loopwarden.adapters.openai_agents`: the OpenAI Agents SDK, a wrapping `Model` and tool guardrails
  (`pip install 'loopwarden[agents]'`)
- `loopwarden.adapters.pydantic_ai`: PydanticAI, a capability wrapping the run's model and toolset
  (`pip install 'loopwarden[pydantic-ai]'`)

Each drives a `loopwarden.session.GuardSession` from the framework's own model and tool calls.
"""
