"""The nodes of an agent's hook flows (runtime.agent.hooks): AI Hook Result
ends a blocking hook's flow with what the waiting agent should do, and
Trigger Agent sends a new user turn into the conversation the hook came
from. Neither sends anything on."""

from __future__ import annotations

from typing import Any

from runtime.agent.hooks import ACTIONS, MAX_HOOK_TEXT, MAX_REASON, HookDecision, answer_hook
from runtime.message import CONVERSATION_ID, HOOK_ID, Message, set_path
from runtime.node import CUSTOM, DROP, MESSAGE, Node, NodeConfigError, Param, node
from runtime.spec import Scope

_ACTION_HELP = ("continue: the agent goes on as it would have; replace: the text the hook "
                "gave (prompt, LLM message or answer) becomes 'text'; veto: the tool call "
                "(on_tool), or every call of the message (on_turn), is refused and the AI "
                "reads 'reason'; stop: the agent stops, its error says 'reason'")


@node("ai.hook_result", name="AI Hook Result", category="AI", icon="shield",
      color="#9b59b6", outputs=())
class HookResult(Node):
    """Ends a blocking hook's flow: tells the agent that waits for it what to
    do. Only a hook with "Wait for …" on (or a blocking flow hook) waits;
    each of its flows answers once, and the first answer of a flow counts."""

    action = Param(str, _ACTION_HELP, choices=list(ACTIONS), default="continue",
                   allow=CUSTOM | MESSAGE)
    text = Param(str, "replace: the new text (of an on_start hook: the prompt; on_turn: the "
                 "LLM's message; on_end: the answer)", scope=MESSAGE, path="payload",
                 multiline=True, allow=CUSTOM | MESSAGE, visible_if={"action": ["replace"]})
    reason = Param(str, "veto: why (the AI reads it as the tool's error); stop: why (the "
                   "agent's error says it)", default="", multiline=True, allow=CUSTOM | MESSAGE,
                   visible_if={"action": ["veto", "stop"]})

    def on_message(self, msg: Message) -> Any:
        action = self.action.get(msg) or "continue"
        if action not in ACTIONS:
            raise NodeConfigError(f"action: '{str(action)[:40]}' is not one of "
                                  f"{', '.join(ACTIONS)}")
        text = self.text.get(msg) if action == "replace" else None
        if text is not None and not isinstance(text, str):
            raise NodeConfigError(f"text: the replacement must be text, got "
                                  f"{type(text).__name__}")
        if text is not None and len(text) > MAX_HOOK_TEXT:
            raise NodeConfigError(f"text: over {MAX_HOOK_TEXT:,} characters")
        reason = str(self.reason.get(msg) or "")[:MAX_REASON]
        decision = HookDecision(action=action, text=text, reason=reason, node=self.id)
        engine = getattr(self._rt, "engine", None)
        if answer_hook(engine, msg, decision):
            self.show_status(action, "green", "done")
        elif HOOK_ID not in msg:
            self.log("this message comes from no blocking hook, so no agent waits for its "
                     "result: turn on 'Wait for …' on the agent's hook (or make the flow hook "
                     "blocking)", "warning")
            self.show_status("no agent waits", "yellow", "idle")
        else:
            self.log("the agent no longer waits for this hook (it timed out or ended)",
                     "warning")
            self.show_status("too late", "yellow", "idle")
        return DROP


@node("ai.trigger_agent", name="Trigger Agent", category="AI", icon="chat",
      color="#9b59b6", outputs=())
class TriggerAgent(Node):
    """Sends a new user turn into the conversation a hook message came from:
    while the agent still works on it, the turn joins that work; once it
    has answered, the conversation goes on and a new answer comes out. The
    same as wiring the hook flow back into the agent's input, but it finds
    the agent itself (a flow hook serves many agents)."""

    text = Param(str, "The new user turn", scope=MESSAGE, path="payload", multiline=True,
                 allow=CUSTOM | MESSAGE)
    agent = Param(str, "The agent's node id; empty: the agent whose hook sent this message "
                  "(msg.hook.agent)", default="", allow=CUSTOM | MESSAGE)

    def on_message(self, msg: Message) -> Any:
        text = self.text.get(msg)
        if not isinstance(text, str) or not text.strip():
            raise NodeConfigError("text: nothing to send (empty text)")
        hook = msg.get("hook") if isinstance(msg.get("hook"), dict) else {}
        agent_id = self.agent.get(msg) or hook.get("agent")
        conv = msg.get(CONVERSATION_ID)
        if not isinstance(conv, str):
            raise NodeConfigError("this message comes from no agent's hook (it has no "
                                  "conversation); put Trigger Agent in a hook flow")
        engine = getattr(self._rt, "engine", None)
        nodes = getattr(engine, "nodes", {})
        target = nodes.get(agent_id) if isinstance(agent_id, str) else None
        if target is None or not any(p.kind == "hook" for p in target.spec.outputs):
            raise NodeConfigError(f"agent: no agent '{str(agent_id)[:100]}' in this flow")
        out = Message.new()
        out[CONVERSATION_ID] = conv
        set_path(out, _prompt_path(target.node), text)
        engine.inject(agent_id, out)
        self.show_status("sent", "green", "done")
        return DROP


def _prompt_path(agent: Any) -> str:
    """Where the agent reads its prompt in a message (payload unless the
    designer chose another path)."""
    bound = getattr(agent, "__dict__", {}).get("prompt")
    if bound is not None and getattr(bound, "scope", None) is Scope.MESSAGE and bound.path:
        return bound.path
    return "payload"
