"""AI nodes: the LLM agent whose ``tools`` port turns wired nodes into
functions it can call.

Importing this module loads no SDK: providers import theirs when a run
first needs them, so the designer's palette stays fast."""

from __future__ import annotations

import json
import os
import re
from typing import Any

from runtime.credentials import DEFAULT_KEY_ENV, default_key
from runtime.message import CONVERSATION_ID, HOOK_ID, Message
from runtime.node import (
    CUSTOM,
    DROP,
    MESSAGE,
    Node,
    NodeConfigError,
    Output,
    Param,
    Tool,
    node,
    register_secret,
)

PROVIDERS = ["openai", "anthropic", "scripted"]
#: What the connection params mean anything for: every provider but scripted.
_LLM = {"provider": ["openai", "anthropic"]}
DEFAULT_MODEL = {"openai": "gpt-4o-mini", "anthropic": "claude-sonnet-4-5", "scripted": "scripted"}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Sent when a local OpenAI-compatible server (Ollama, llama.cpp, ...) needs no
# key: the SDKs insist on some value.
NO_KEY = "no-key"


#: The lifecycle hook ports (runtime.agent.hooks) and their canvas labels.
HOOKS = (("on_start", "start"), ("on_turn", "turn"), ("on_tool", "tool"), ("on_end", "end"))
_HOOK_HELP = {
    "on_start": "before the first LLM request; its AI Hook Result may replace the prompt or "
                "stop the agent",
    "on_turn": "after each LLM message, before its tool calls; its AI Hook Result may "
               "replace the message, veto the calls or stop the agent",
    "on_tool": "before each tool call (off: after it, with its result); its AI Hook Result "
               "may veto the call (the AI reads why) or stop the agent",
    "on_end": "with the answer; its AI Hook Result may replace it or stop the agent",
}


def _block_param(port: str) -> Param:
    return Param(bool, f"Wait for the flow wired to {port}, at most hook_timeout_seconds: "
                 f"{_HOOK_HELP[port]}", default=False, allow=CUSTOM, group="hooks",
                 label=f"Wait for {port}")


@node("ai.agent", name="AI Agent", category="AI", icon="sparkles", color="#9b59b6",
      tools_port=True, hooks=HOOKS,
      tool=Tool("delegate", "Give a task to another agent, which works on it with its own "
                "tools and answers with the result"))
class Agent(Node):
    """Asks an LLM and lets it call the nodes wired to its ``tools`` port.
    Sends the final answer as ``payload`` and what happened as ``agent``
    (turns, tool calls, token usage). Its hook ports (start, turn, tool,
    end, along the bottom) send what the agent does to ordinary flows:
    docs/hooks.md."""

    provider = Param(str, "openai (also any OpenAI-compatible server via base URL), anthropic, "
                     "or scripted (plays the turns in 'script'; offline, no key)",
                     choices=PROVIDERS, default="openai", allow=CUSTOM)
    model = Param(str, "Model name; empty: the provider's usual default", default="",
                  allow=CUSTOM | MESSAGE, visible_if=_LLM)
    instructions = Param(str, "System instructions", default="", multiline=True,
                         allow=CUSTOM | MESSAGE)
    prompt = Param(str, "What to ask", default="", scope=MESSAGE, path="payload",
                   multiline=True, allow=CUSTOM | MESSAGE)
    script = Param("json", 'scripted provider: the turns to play, e.g. [{"tool_calls": [{"name": '
                   '"send_email", "arguments": {...}}]}, {"text": "Done"}]', default=[],
                   allow=CUSTOM, visible_if={"provider": ["scripted"]})
    base_url = Param(str, "API base URL, e.g. http://127.0.0.1:11434/v1 for Ollama; empty: the "
                     "provider's own", default="", allow=CUSTOM, group="connection",
                     visible_if=_LLM)
    api_key = Param("secret", "A stored credential holding the API key (Run > Credentials…); "
                    "empty: the environment variable below, else a credential named like it "
                    "(OPENAI_API_KEY) or like the provider (openai)", optional=True,
                    label="API key", group="connection", visible_if=_LLM)
    api_key_env = Param(str, "Name of the environment variable holding the API key (never the "
                        "key itself); empty: OPENAI_API_KEY or ANTHROPIC_API_KEY", default="",
                        allow=CUSTOM, label="API key variable", group="connection",
                        visible_if=_LLM)
    max_turns = Param(int, "Most LLM requests for one message", default=10, allow=CUSTOM,
                      group="advanced")
    temperature = Param(float, "Sampling temperature; empty: the model's default", optional=True,
                        allow=CUSTOM, group="advanced", visible_if=_LLM)
    max_tokens = Param(int, "Most tokens per answer", default=1024, allow=CUSTOM,
                       group="advanced", visible_if=_LLM)
    tool_timeout_seconds = Param(float, "Time limit of one tool call; 0: none", default=60.0,
                                 allow=CUSTOM, group="advanced")
    max_tool_calls_per_run = Param(int, "Most tool calls for one message, all turns together; "
                                   "past it a call is refused with a reason the model reads",
                                   default=100, allow=CUSTOM, group="advanced")
    max_seconds = Param(float, "Longest an agent works on one message (LLM requests and tool "
                        "calls); 0: no limit", default=0.0, allow=CUSTOM, group="advanced")
    max_tool_calls_per_turn = Param(int, "Most tool calls run from one LLM answer; the calls "
                                    "past it are refused (the model may make them next turn)",
                                    default=16, allow=CUSTOM, group="advanced")
    retries = Param(int, "Retries of an LLM request after HTTP 429/5xx or a dropped connection",
                    default=3, allow=CUSTOM, group="advanced", visible_if=_LLM)
    max_retry_wait_seconds = Param(float, "Longest wait a server may ask for (Retry-After) "
                                   "before a retry; asked for more, the request fails at once",
                                   default=60.0, allow=CUSTOM, group="advanced", visible_if=_LLM)
    request_timeout_seconds = Param(float, "Time limit of one LLM request", default=120.0,
                                    allow=CUSTOM, group="advanced", visible_if=_LLM)
    budget_usd = Param(float, "Most USD this agent spends on LLM requests in a run (all its "
                       "messages); past it, no more LLM turns. 0: no budget. Needs the model's "
                       "price (prices.json)", default=0.0, allow=CUSTOM, group="advanced",
                       label="Budget (USD)")
    budget_tokens = Param(int, "Most tokens (input + output) this agent spends in a run; past "
                          "it, no more LLM turns. 0: no budget", default=0, allow=CUSTOM,
                          group="advanced", label="Budget (tokens)")
    wake_on_background = Param(bool, "When a background tool call ends, wake the agent with "
                               "a new turn that reports it (the message waits for its tasks); "
                               "off: the agent learns of it on its next turn", default=False,
                               allow=CUSTOM, group="advanced")
    max_background_tasks = Param(int, "Most background tool calls going at once; past it a "
                                 "call is refused", default=4, allow=CUSTOM, group="advanced")
    block_on_start = _block_param("on_start")
    block_on_turn = _block_param("on_turn")
    block_on_tool = _block_param("on_tool")
    block_on_end = _block_param("on_end")
    hook_timeout_seconds = Param(float, "Longest the agent waits for a blocking hook's AI Hook "
                                 "Result; then it goes on as if told to continue (a log line "
                                 "says so)", default=30.0, allow=CUSTOM, group="hooks")

    answer = Output(str, "The final answer", path="payload")
    agent = Output("json", "{turns, tool_calls: [{tool, args, status, data|error, ms}], "
                   "usage: {input_tokens, output_tokens}}", path="agent")

    @classmethod
    def check(cls, params):
        problems = []
        env = params.get("api_key_env")
        if env is not None and isinstance(env.value, str) and env.value \
                and not _ENV_NAME.match(env.value):
            problems.append(("api_key_env", "must be the name of an environment variable "
                             "(letters, digits, _), never the key itself"))
        script = params.get("script")
        if script is not None and script.value is not None:
            from runtime.agent.scripted import script_problems

            problems += [("script", p) for p in script_problems(script.value)]
        for name, low in (("max_turns", 1), ("max_tokens", 1), ("retries", 0),
                          ("tool_timeout_seconds", 0), ("max_tool_calls_per_turn", 1),
                          ("max_retry_wait_seconds", 0), ("budget_usd", 0), ("budget_tokens", 0)):
            p = params.get(name)
            if p is not None and isinstance(p.value, (int, float)) and p.value < low:
                problems.append((name, f"{name} must be at least {low}"))
        for name in ("request_timeout_seconds", "hook_timeout_seconds"):
            p = params.get(name)
            if p is not None and isinstance(p.value, (int, float)) and p.value <= 0:
                problems.append((name, f"{name} must be more than 0"))
        return problems

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self._provider = None
        self._bridge = None
        self._hooks: Any = _UNSET  # AgentHooks, or None when nothing is wired
        self._conversations: Any = None  # runtime.agent.hooks.Conversations

    def _make_provider(self):
        from runtime.agent import make_provider

        kind = self.provider.get() or "openai"
        if kind == "scripted":
            return make_provider("scripted", script=self.script.get())

        def real():
            base_url = self.base_url.get() or None
            key = self._api_key(kind, base_url)
            return make_provider(kind, api_key=key, base_url=base_url,
                                 retries=max(0, int(self.retries.get())),
                                 request_timeout=float(self.request_timeout_seconds.get()),
                                 max_retry_wait=max(0.0, float(self.max_retry_wait_seconds.get())))

        # A flow test's run records or replays the LLM's answers (runtime.testing.cassette).
        tape = self._rt.engine.resource("testing.cassette", lambda: None) \
            if self._rt is not None else None
        return real() if tape is None else tape.provider(real)

    def _api_key(self, kind: str, base_url: str | None) -> str:
        """The key, first found of: the credential the node names, the
        environment variable it names, the provider's usual variable or a
        credential named like it; none at all is fine for a local server."""
        if self.api_key.value is not None:
            return self.api_key.get()  # resolved (and registered for redaction) by the param
        env = self.api_key_env.get()
        if env:
            key = os.environ.get(env)
            if not key:
                raise NodeConfigError(f"api_key_env: environment variable {env} is not set; set "
                                      f"it to your {kind} API key, or choose a stored credential "
                                      "as API key")
            return register_secret(key) or key
        found = default_key(kind)
        if found is not None:
            return register_secret(found[0]) or found[0]
        if base_url:
            return NO_KEY
        env = DEFAULT_KEY_ENV.get(kind, "")
        raise NodeConfigError(
            f"api_key: no {kind} API key: environment variable {env} is not set and no "
            f"credential is named {env} or {kind}; choose a stored credential as API key (Run > "
            "Credentials…), or give the base URL of a local server that needs none")

    def _get_bridge(self):
        if self._bridge is None and self._rt is not None:
            from runtime.tools import ToolBridge

            self._bridge = ToolBridge(self._rt.engine, self.id)
            self._bridge.answer_early = self._answer_early
        return self._bridge

    def _answer_early(self, msg: Message, text: str) -> None:
        """An answer given while background tasks go on (wake_on_background):
        sent out at once, as its own message, marked ``agent.interim``; the
        answer that reports the tasks follows when they end."""
        out = msg.clone()
        self.answer.set(out, text)
        going = self._bridge.pending() if self._bridge is not None else []
        self.agent.set(out, {"interim": True,
                             "background_tasks": [job.tracking_id for job in going]})
        self.send(out)

    def _get_hooks(self):
        """The agent's hooks in this run (worked out once), or None when
        nothing is wired to them."""
        if self._hooks is _UNSET:
            self._hooks = None
            engine = self._rt.engine if self._rt is not None else None
            if engine is not None and hasattr(engine, "flow"):
                from runtime.agent.hooks import AgentHooks, Conversations

                blocking = {port for port, _ in HOOKS if self.param(f"block_{port}").get()}
                self._hooks = AgentHooks.of(engine, self.id, blocking,
                                            float(self.hook_timeout_seconds.get() or 0))
                if self._hooks is not None:
                    self._conversations = Conversations()
        return self._hooks

    def _hook_run(self, msg: Message, prompt: str, parent: str):
        """The hooks and the conversation this message belongs to; DROP when
        it joins work still going on (a hook flow sent it back in: the
        work's answer answers it)."""
        agent_hooks = self._get_hooks()
        if agent_hooks is None:
            return None
        from runtime.agent.hooks import HookRun

        conv = None if parent else self._conversations.get(msg.get(CONVERSATION_ID))
        if conv is None:
            conv = self._conversations.new()
        else:
            self._conversations.add_turn(conv, prompt)
            if conv.running:
                conv.inbox.append(prompt)
                return DROP
        msg.pop(HOOK_ID, None)  # it came from a hook flow: no longer a hook's message
        return HookRun(agent_hooks, conv, parent)

    async def on_message(self, msg: Message) -> Any:
        from runtime.agent.loop import run_agent
        from runtime.events import EventBus

        as_tool = msg.get("__message_type__") == "tool_request"
        if as_tool:
            # Another agent's tool call: the task is the call's argument.
            args = msg.get("__parameters__") or {}
            prompt = args.get("task")
            documents = args.get("documents") or []
        else:
            prompt = self.prompt.get(msg)
            documents = []
        if prompt is None or prompt == "":
            raise NodeConfigError("prompt: nothing to ask (empty prompt)")
        if not isinstance(prompt, str):
            prompt = json.dumps(prompt, ensure_ascii=False, default=str)
        if self._provider is None:
            self._provider = self._make_provider()
        kind = self.provider.get() or "openai"
        model = self.model.get(msg) or DEFAULT_MODEL.get(kind, "")
        timeout = self.tool_timeout_seconds.get()
        bus = self._rt.engine.bus if self._rt is not None else EventBus()
        self.show_status("thinking", "blue", "running")
        engine = self._rt.engine if self._rt is not None else None
        if documents:
            from runtime.workspace import workspace_of

            prompt += workspace_of(engine).attach(documents)
        # The tool call this work is part of: another agent's call of this
        # one, or a call of a subflow this agent is inside (its events nest
        # under that call; runtime.engine.subflow_tool).
        parent = str(msg.get("__tool_caller_id__", "")) if as_tool else \
            str(msg.get("__subflow_call__") or "")
        hook_run = self._hook_run(msg, prompt, parent)
        if hook_run is DROP:
            self.show_status("message joined the conversation going on", "blue", "running")
            return DROP
        seconds = float(self.max_seconds.get() or 0)
        result = await run_agent(
            agent_id=self.id, provider=self._provider, bridge=self._get_bridge(), bus=bus,
            base_msg=msg, prompt=prompt, instructions=self.instructions.get(msg) or "",
            model=model, temperature=self.temperature.get(), max_tokens=self.max_tokens.get(),
            max_turns=self.max_turns.get(), tool_timeout=float(timeout) if timeout else None,
            max_tool_calls_per_turn=max(1, int(self.max_tool_calls_per_turn.get())),
            max_tool_calls=max(1, int(self.max_tool_calls_per_run.get())),
            max_seconds=seconds or None,
            parent=parent, engine=engine, budget_usd=float(self.budget_usd.get() or 0) or None,
            budget_tokens=int(self.budget_tokens.get() or 0) or None, hooks=hook_run)
        if as_tool:
            data: dict[str, Any] = {"result": result.text}
            if result.documents:
                from runtime.workspace import workspace_of

                data["documents"] = workspace_of(engine).deliver(result.documents)
            msg["__tool_data__"] = data
        else:
            self.answer.set(msg, result.text)
            self.agent.set(msg, result.info())
            if hook_run is not None:
                # A flow may send the answer's message back in: the same
                # conversation goes on.
                msg[CONVERSATION_ID] = hook_run.conv.id
        n = len(result.outcomes)
        self.show_status(f"{result.turns} turns, {n} tool call{'s' if n != 1 else ''}", "green", "done")

    async def close(self) -> None:
        provider, self._provider = self._provider, None
        if provider is not None:
            try:
                await provider.aclose()
            except Exception:  # closing a client must not fail a finished run
                pass


_UNSET = object()

# Declared with the package: the tools that are no functions (ask a person,
# think), and the nodes of hook flows (AI Hook Result, Trigger Agent).
from . import hooks as hook_nodes  # noqa: E402,F401
from . import human  # noqa: E402,F401
