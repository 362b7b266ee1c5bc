"""visible_if: a param that the designer's choice makes meaningless."""

from __future__ import annotations

import pytest

from runtime.flow import parse_flow
from runtime.node import AI, CUSTOM, Node, Param, Tool, node
from runtime.registry import Registry
from runtime.spec import ParamValue, Scope
from runtime.tools import agent_tool_specs


@node("vis.mail", name="Vis mail", category="Test", tool=Tool("vis_mail", "Send"))
class VisMail(Node):
    delivery = Param(str, "How", choices=["smtp", "outbox"], default="smtp", allow=CUSTOM)
    host = Param(str, "SMTP host", default="", allow=AI | CUSTOM,
                 visible_if={"delivery": ["smtp"]})
    to = Param(str, "Recipient", scope=AI, allow=AI | CUSTOM)


def settings(**kw):
    return {k: ParamValue(scope=Scope.CUSTOM, value=v) for k, v in kw.items()}


def test_visible_if_follows_the_fixed_value_or_the_default():
    spec = VisMail.spec
    assert spec.param("host").visible_if == {"delivery": ["smtp"]}
    assert spec.param_visible("host", {})  # the default, smtp
    assert spec.param_visible("host", settings(delivery="smtp"))
    assert not spec.param_visible("host", settings(delivery="outbox"))
    assert spec.param_visible("to", settings(delivery="outbox"))  # no condition
    # Chosen at run time from the message: cannot be known, so shown.
    assert spec.param_visible("host", {"delivery": ParamValue(scope=Scope.MESSAGE, path="d")})


def test_a_hidden_param_is_not_in_the_tools_schema():
    def flow(delivery):
        return parse_flow({"format": "switchboard.flow/1", "name": "t", "nodes": [
            {"id": "agent", "type": "ai.agent", "params": {
                "provider": {"scope": "custom", "value": "scripted"}}},
            {"id": "m", "type": "vis.mail", "params": {
                "delivery": {"scope": "custom", "value": delivery},
                "host": {"scope": "ai"}}}],
            "wires": [{"from": ["agent", "tools"], "to": ["m", "in"]}]})

    from nodes.ai import Agent

    reg = Registry([Agent, VisMail])

    def props(delivery):
        [tool] = agent_tool_specs(flow(delivery), reg)["agent"]
        return set(tool["function"]["parameters"]["properties"])

    assert props("smtp") == {"host", "to"}
    assert props("outbox") == {"to"}


def test_visible_if_must_name_another_param():
    with pytest.raises(TypeError, match="visible_if 'nope', which is not another param"):
        @node("vis.bad", name="Bad", category="Test")
        class Bad(Node):
            a = Param(str, "A", default="", visible_if={"nope": [1]})


def test_a_hidden_params_problem_is_not_reported():
    """Send Mail with outbox delivery: a bad SMTP port means nothing then."""
    from runtime.flow import validate_flow

    def problems(delivery):
        flow = parse_flow({"format": "switchboard.flow/1", "name": "t", "nodes": [
            {"id": "m", "type": "mail.send", "params": {
                "delivery": {"scope": "custom", "value": delivery},
                "smtp_port": {"scope": "custom", "value": 99999}}}], "wires": []})
        return [p.message for p in validate_flow(flow, Registry.default())
                if p.severity == "error"]

    assert "smtp_port must be 1-65535" in problems("smtp")
    assert problems("outbox") == []
