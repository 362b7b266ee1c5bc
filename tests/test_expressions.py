"""Template expressions, the fourth scope (issue 12, item 11): rendering and
types, the sandbox, the bounds, that the AI never reaches an expression
param, and real runs with msg, flow, env and global."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.expressions import (
    MAX_STEPS,
    MAX_TEMPLATE_CHARS,
    MAX_VALUE,
    MAX_WORK,
    Expression,
    ExpressionContext,
    ExpressionError,
    compile_template,
    hidden_env_names,
    template_env,
)
from runtime.flow import FlowNode, load_flow, parse_flow, save_flow, validate_flow
from runtime.node import CUSTOM, MESSAGE, Node, Param, node
from runtime.registry import Registry
from runtime.spec import ParamSpec, ParamType, ParamValue, Scope
from runtime.tools import ai_params, tool_schema
from tests.runtime_fixtures import N, P, make_flow
from tests.runtime_fixtures import run as run_flow
from tests.servers.flows import EchoTool, agent_flow, fixed, scripted
from tests.servers.flows import registry as tools_registry
from tests.servers.flows import run as run_agent_flow

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "resources" / "examples" / "order-mails.flow.json"


def E(text: str) -> dict:
    return {"scope": "expression", "value": text}


def spec(type_: str = "str", name: str = "subject", **kw) -> ParamSpec:
    return ParamSpec(name=name, type=ParamType(type_), label=name, allowed_scopes=[Scope.CUSTOM],
                     default_scope=Scope.CUSTOM, **kw)


def render(text: str, msg: dict | None = None, type_: str = "str", **kw):
    return Expression(spec(type_, **kw), text).render(msg)


MSG = {"_msgid": "m1", "payload": {"name": "Ann", "count": 3, "price": "9.50",
                                   "items": [{"sku": "A-1"}, {"sku": "B-2"}], "ok": "yes"},
       "topic": "orders"}


@pytest.fixture(autouse=True)
def _reset_echo():
    EchoTool.calls = []
    yield


# -- rendering and types ---------------------------------------------------------

def test_text_templates_render_against_the_message():
    assert render("Hello {{ msg.payload.name }}", MSG) == "Hello Ann"
    assert render("{{ msg.topic | upper }}: {{ msg.payload['items'] | length }} items", MSG) \
        == "ORDERS: 2 items"
    # A key named like a dict method is the data, not the method.
    assert render("{{ msg.payload.items[1].sku }}", MSG) == "B-2"
    assert render("{% for i in msg.payload.items %}{{ i.sku }};{% endfor %}", MSG) == "A-1;B-2;"
    assert render("plain text, no tags", MSG) == "plain text, no tags"
    assert render("{{ msg._msgid }}", MSG) == "m1"


def test_one_expression_gives_its_own_value_and_text_is_coerced_to_the_param_type():
    assert render("{{ msg.payload.count }}", MSG, "int") == 3
    assert render("  {{ msg.payload.count * 2 }}\n", MSG, "json") == 6
    assert render("{{ msg.payload.items }}", MSG, "json") == [{"sku": "A-1"}, {"sku": "B-2"}]
    assert render("{{ {'who': msg.payload.name, 'n': msg.payload.count} }}", MSG, "json") \
        == {"who": "Ann", "n": 3}
    # Text is text for a json param: no surprise parse of "123" into a number.
    assert render("{{ msg.payload.count }}{{ msg.payload.count }}", MSG, "json") == "33"
    assert render("{{ msg.payload.count }}0", MSG, "int") == 30
    assert render("{{ msg.payload.price }}", MSG, "float") == 9.5
    assert render("{{ msg.payload.ok }}", MSG, "bool") is True
    assert render("{{ msg.payload.count > 5 }}", MSG, "bool") is False
    assert render("{{ msg.payload.items }}", MSG, "str") == '[{"sku": "A-1"}, {"sku": "B-2"}]'
    assert render("{{ 'b' }}", MSG, "enum", choices=["a", "b"]) == "b"
    # A value that is no copy of the message: a node may change what it got.
    got = render("{{ msg.payload.items }}", MSG, "json")
    got.append("x")
    assert len(MSG["payload"]["items"]) == 2


@pytest.mark.parametrize("text, type_, why", [
    ("{{ msg.payload.name }}", "int", 'the template gave "Ann", which is not a whole number'),
    ("{{ msg.payload.name }}", "float", 'the template gave "Ann", which is not a number'),
    ("{{ msg.payload.name }}", "bool", 'the template gave "Ann", which is not true or false'),
    ("{{ 'c' }}", "enum", 'the template gave "c", which is not one of a, b'),
    ("{{ cycler(1, 2) }}", "json", "the template gave a Cycler, which has no JSON form"),
])
def test_a_value_of_the_wrong_type_names_the_param_and_the_value(text, type_, why):
    kw = {"choices": ["a", "b"]} if type_ == "enum" else {}
    with pytest.raises(ExpressionError) as exc:
        render(text, MSG, type_, **kw)
    assert str(exc.value) == f"params.subject: {why}"


def test_undefined_values_are_errors_that_say_where_and_what_there_is():
    with pytest.raises(ExpressionError) as exc:
        render("Hi {{ msg.payloadd.name }}", MSG)
    assert str(exc.value) == "params.subject: 'msg' has no attribute 'payloadd' " \
                             "(it has: _msgid, payload, topic)"
    with pytest.raises(ExpressionError) as exc:
        render("{{ msg.payload.nme }}", MSG)
    assert str(exc.value).startswith("params.subject: 'msg.payload' has no attribute 'nme' "
                                     "(it has: name, count, price")
    with pytest.raises(ExpressionError, match=r"'msg.payload.items' has no element 5 "
                                              r"\(it has 2\)"):
        render("{{ msg.payload.items[5] }}", MSG)
    # The default filter and the defined test are the ways to allow a gap.
    assert render("{{ msg.payload.nme | default('someone') }}", MSG) == "someone"
    assert render("{{ 'yes' if msg.payload.nme is defined else 'no' }}", MSG) == "no"


def test_none_means_not_set_and_the_params_default_applies():
    @node("test.expr_default", name="Default", category="Test")
    class WithDefault(Node):
        greeting = Param(str, "", default="Hi", allow=CUSTOM | MESSAGE)

    n = WithDefault("d", params={"greeting": ParamValue(scope=Scope.EXPRESSION,
                                                        value="{{ msg.payload.none }}")})
    assert n.greeting.get({"payload": {"none": None}}) == "Hi"
    assert n.greeting.get({"payload": {"none": "Yo"}}) == "Yo"
    blank = WithDefault("b", params={"greeting": ParamValue(scope=Scope.EXPRESSION, value=" ")})
    assert blank.greeting.get({}) == "Hi"
    # Blank text is no number: for a typed param it means "not set" too.
    assert render("{{ msg.payload.missing | default('') }}", MSG, "int") is None
    assert render("{{ '' }}", MSG, "str") == ""


def test_a_template_is_compiled_once_per_text_not_per_message():
    text = "{{ msg.payload.n }} compiled once"
    compile_template.cache_clear()
    n = EchoTool("e", params={"prefix": ParamValue(scope=Scope.EXPRESSION, value=text)})
    for i in range(200):
        assert n.prefix.get({"payload": {"n": i}}) == f"{i} compiled once"
    info = compile_template.cache_info()
    assert info.misses == 1  # the one compile at construction; no render compiles
    again = Expression(spec(), text)
    assert again.compiled is n.prefix.expr.compiled


# -- the sandbox -------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "{{ ''.__class__.__mro__ }}",
    "{{ cycler.__init__.__globals__ }}",
    "{{ msg['__class__'] }}",
    "{{ joiner.__call__.__globals__['os'] }}",
])
def test_internals_are_refused_when_the_template_is_checked(text):
    flow = make_flow([N("src", "core.inject"), N("d", "core.debug", path=E(text))], ["src->d"])
    problems = [p for p in validate_flow(flow, Registry.default()) if p.severity == "error"]
    assert [(p.node, p.field) for p in problems] == [("d", "params.path.value")]
    assert "not reachable from a template: names starting with __ are internals" \
        in problems[0].message
    with pytest.raises(ExpressionError, match="params.subject: .* not reachable"):
        Expression(spec(), text)


@pytest.mark.parametrize("text, why", [
    # Built at run time, past the static check: the sandbox refuses them.
    ("{{ ''|attr('__cla' ~ 'ss__') }}", "access to attribute '__class__' of 'str' object is "
                                         "unsafe"),
    ("{{ msg | attr('_' ~ '_class__') }}", "access to attribute '__class__' of 'dict' object "
                                           "is unsafe"),
    ("{{ msg.payload.update({'hacked': 1}) }}", "access to attribute 'update' of 'dict' "
                                                "object is unsafe"),
    ("{{ msg.payload['items'].append(1) }}", "access to attribute 'append' of 'list' "
                                             "object is unsafe"),
    ("{% include '/etc/passwd' %}", "cannot include, import or extend"),
    ("{% import 'x.html' as x %}", "cannot include, import or extend"),
    ("{{ lipsum(1000) }}", "unknown name 'lipsum'"),
])
def test_the_sandbox_refuses_escapes_mutations_and_files(text, why):
    with pytest.raises(ExpressionError) as exc:
        render(text, MSG)
    assert why in str(exc.value)
    assert MSG["payload"].get("hacked") is None and len(MSG["payload"]["items"]) == 2


def test_unknown_names_and_syntax_errors_are_found_when_the_flow_is_checked():
    flow = make_flow([N("src", "core.inject"),
                      N("d", "core.debug", path=E("{{ payload.name }}")),
                      N("e", "core.debug", path=E("Hi {{ msg.payload.name ")),
                      N("f", "core.debug", path=E("{{ msg.payload | nofilter }}"))],
                     ["src->d", "src->e", "src->f"])
    problems = {p.node: p for p in validate_flow(flow, Registry.default())
                if p.severity == "error"}
    assert problems["d"].message == ("unknown name 'payload' (did you mean msg.payload?): a "
                                     "template reads msg, env, flow and global")
    assert problems["e"].message.startswith("template syntax: unexpected end of template")
    assert problems["f"].message == "template syntax: No filter named 'nofilter'."
    assert {p.field for p in problems.values()} == {"params.path.value"}


# -- bounds --------------------------------------------------------------------------

def test_a_template_longer_than_the_bound_is_refused():
    with pytest.raises(ExpressionError, match=f"more than the {MAX_TEMPLATE_CHARS} allowed"):
        render("x" * (MAX_TEMPLATE_CHARS + 1))
    assert render("x" * MAX_TEMPLATE_CHARS) == "x" * MAX_TEMPLATE_CHARS


@pytest.mark.parametrize("text, why", [
    # Steps: nested loops that do nothing each turn still end.
    ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
     f"ran more than {MAX_STEPS} steps"),
    ("{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(40) }}",
     f"did more than {MAX_WORK} units of work"),  # a macro call costs 100 units
    # Sizes: checked before the value is built.
    ("{{ 'x' * 10 ** 9 }}", "repeating a text or list would make about 1000000000"),
    ("{{ [0] * 10 ** 9 }}", "repeating a text or list"),
    ("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
     "{% endfor %}", "joining texts with ~"),
    ("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}"
     "{% endfor %}", "joining two texts or lists"),
    ("{{ range(100000) | join('x' * 100000) }}", "join would make"),
    ("{{ 'x' | center(10 ** 9) }}", "center would make"),
    ("{{ 'x'.ljust(10 ** 9) }}", "ljust() would make"),
    ("{{ ('a' * 1000) | replace('a', 'b' * 100000) }}", "replace would make"),
    ("{{ ('a' * 1000).replace('a', 'b' * 100000) }}", "replace() would make"),
    ("{{ '%1000000000s' % 'x' }}", "the %-format would make about 10000000"),
    ("{{ '{:>1000000000}'.format('x') }}", "format() would make about 1000000001"),
    ("{{ '{:>{w}}'.format('x', w=10 ** 9) }}", "format field with a nested field"),
    ("{{ 2 ** 100000000 }}", "would be a whole number of more than 4300 digits"),
    ("{{ [1] | batch(10 ** 9, 0) | list }}", "batch would make"),
    ("{{ msg | tojson(indent=1000) }}", "tojson indent"),
    # Output: a loop that writes is stopped at the size bound.
    ("{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}",
     f"the template's text passed {MAX_VALUE} characters"),
])
def test_renders_are_bounded_in_steps_and_size(text, why):
    with pytest.raises(ExpressionError) as exc:
        render(text, MSG)
    assert why in str(exc.value), str(exc.value)
    assert str(exc.value).startswith("params.subject: ")


def test_work_under_the_bounds_is_fine():
    assert len(render("{{ 'x' * 1000 }}")) == 1000
    assert render("{% for i in range(1000) %}{% endfor %}done") == "done"
    assert render("{{ range(5) | join(',') }}") == "0,1,2,3,4"
    assert render("{{ 2 ** 64 }}", type_="int") == 2 ** 64


# -- what a template sees ---------------------------------------------------------------

def test_env_hides_what_the_flows_secrets_name_and_secret_looking_names(monkeypatch):
    monkeypatch.setenv("SHOP_NAME", "Northwind")
    monkeypatch.setenv("SMTP_PASS", "hunter2-smtp")
    monkeypatch.setenv("MY_LLM_VAR", "sk-from-var")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    flow = parse_flow({"format": "switchboard.flow/1", "name": "t", "nodes": [
        {"id": "mail", "type": "mail.send",
         "params": {"password": fixed({"env": "SMTP_PASS"})}},
        {"id": "agent", "type": "ai.agent", "params": {"api_key_env": fixed("MY_LLM_VAR")}},
    ], "wires": []})
    hidden = hidden_env_names(flow, Registry.default())
    assert {"SMTP_PASS", "MY_LLM_VAR"} <= hidden
    # Named as readable, as a flow's settings.env_readable could: still
    # hidden (the secret param's variable, and the deny pattern's names).
    ctx = ExpressionContext(template_env(hidden, ["SHOP_NAME", "SMTP_PASS", "MY_LLM_VAR",
                                                  "OPENAI_API_KEY"]))
    expr = Expression(spec(), "{{ env.SHOP_NAME }}", ctx)
    assert expr.render(None) == "Northwind"
    for name in ("SMTP_PASS", "MY_LLM_VAR", "OPENAI_API_KEY"):
        with pytest.raises(ExpressionError, match=f"env.{name} is hidden from templates"):
            Expression(spec(), f"{{{{ env.{name} }}}}", ctx).render(None)
        with pytest.raises(ExpressionError, match="is hidden"):
            Expression(spec(), f"{{{{ env['{name}'] }}}}", ctx).render(None)
    listed = Expression(spec(type_="json"), "{{ env }}", ctx).render(None)
    assert "SHOP_NAME" in listed
    assert not {"SMTP_PASS", "MY_LLM_VAR", "OPENAI_API_KEY"} & set(listed)
    assert "hunter2-smtp" not in json.dumps(listed)


async def test_a_flow_run_uses_msg_payload_and_flow_variables():
    flow = make_flow([
        N("src", "core.inject", payload={"name": "Ann", "order": "A-1001"}),
        N("shop", "core.set_variable", variable="shop", value=P("Northwind")),
        N("line", "core.set_variable", variable="line",
          value=E("{{ flow.shop }}: order {{ msg.payload.order }} for {{ msg.payload.name }}")),
        N("get", "core.get_variable", variable="line"),
        N("show", "core.debug"),
    ], ["src->shop", "shop->line", "line->get", "get->show"])
    assert not [p for p in validate_flow(flow, Registry.default()) if p.severity == "error"]
    r = await run_flow(flow)
    assert r.result.status == "ok", r.of("node.error")
    assert r.debug("show") == ["Northwind: order A-1001 for Ann"]


async def test_a_run_time_error_names_the_node_and_the_param():
    flow = make_flow([N("src", "core.inject", payload={"name": "Ann"}),
                      N("line", "core.set_variable", variable="v",
                        value=E("Hi {{ msg.payload.nmae }}")),
                      N("show", "core.debug")], ["src->line", "line->show"])
    r = await run_flow(flow)
    assert r.result.status == "error"
    [err] = r.of("node.error")
    assert err.node == "line"
    assert err.message == "params.value: 'msg.payload' has no attribute 'nmae' (it has: name)"
    assert r.debug("show") == []


async def test_global_variables_are_readable(data_dir):
    data_dir.mkdir(parents=True)
    (data_dir / "variables.json").write_text(json.dumps({"visits": 41}), encoding="utf-8")
    flow = make_flow([N("src", "core.inject"),
                      N("set", "core.set_variable", variable="next",
                        value=E("{{ global.visits + 1 }}")),
                      N("get", "core.get_variable", variable="next"),
                      N("show", "core.debug")], ["src->set", "set->get", "get->show"])
    r = await run_flow(flow)
    assert r.debug("show") == [42]


def test_a_flow_with_an_expression_saves_and_loads_as_written(tmp_path):
    flow = make_flow([N("src", "core.inject", payload=E("{{ env.HOME }}"))])
    path = tmp_path / "e.flow.json"
    save_flow(flow, path)
    data = json.loads(path.read_text())
    assert data["nodes"][0]["params"]["payload"] == {"scope": "expression",
                                                     "value": "{{ env.HOME }}"}
    assert load_flow(path).node("src").params["payload"] == ParamValue(
        scope=Scope.EXPRESSION, value="{{ env.HOME }}")


def test_where_an_expression_is_allowed():
    # Wherever a fixed value is, except a secret; never where only the
    # message (or only the AI) may set a param.
    @node("test.expr_scopes", name="Scopes", category="Test")
    class Scopes(Node):
        fixed_ok = Param(str, "", default="", allow=CUSTOM)
        message_only = Param(str, "", default="", allow=MESSAGE)
        token = Param("secret", "", optional=True)

    s = Scopes.spec
    assert s.param("fixed_ok").allows(Scope.EXPRESSION)
    assert not s.param("message_only").allows(Scope.EXPRESSION)
    assert not s.param("token").allows(Scope.EXPRESSION)
    # The spec's allowed scopes (what the catalog lists) do not change.
    assert Scope.EXPRESSION not in s.param("fixed_ok").allowed_scopes
    reg = Registry([Scopes])
    flow = parse_flow({"format": "switchboard.flow/1", "name": "t", "nodes": [
        {"id": "s", "type": "test.expr_scopes", "params": {
            "fixed_ok": E("{{ 1 }}"), "message_only": E("{{ 1 }}"),
            "token": E("{{ env.HOME }}")}}], "wires": []})
    problems = {p.field: p.message for p in validate_flow(flow, reg) if p.severity == "error"}
    assert set(problems) == {"params.message_only.scope", "params.token.scope"}
    assert "a secret names where it is kept" in problems["params.token.scope"]
    assert "did not allow a fixed value for 'message_only'" \
        in problems["params.message_only.scope"]


def test_a_nodes_own_check_sees_a_template_as_no_fixed_value():
    # mail.send checks that a fixed smtp_port is a port number; a template's
    # text is no port number, and is not complained about.
    flow = make_flow([N("src", "core.inject"),
                      N("mail", "mail.send", smtp_port=E("{{ msg.payload.port }}"),
                        delivery=P("smtp"))], ["src->mail"])
    problems = [p for p in validate_flow(flow, Registry.default())
                if p.severity == "error" and p.field == "params.smtp_port"]
    assert problems == []


# -- the AI never reaches an expression param --------------------------------------------

def test_an_expression_param_is_never_in_a_tool_schema():
    fnode = FlowNode(id="e", type="test.echo", params={
        "text": ParamValue(scope=Scope.AI),
        "prefix": ParamValue(scope=Scope.EXPRESSION, value="{{ msg.payload }}")})
    assert [p.name for p, _ in ai_params(EchoTool.spec, fnode)] == ["text"]
    assert set(tool_schema(EchoTool.spec, fnode)["properties"]) == {"text"}


async def test_a_tool_call_cannot_set_or_read_an_expression_param():
    template = "{{ msg.payload.who }}: "
    turns = [
        # Naming the expression param: refused, the node never runs.
        {"tool_calls": [{"name": "echo", "arguments": {"text": "x", "prefix": "AI WAS HERE"}}]},
        {"tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}]},
        {"text": "done"}]
    flow = agent_flow(scripted(turns), [{"id": "echo", "type": "test.echo", "params": {
        "prefix": E(template)}}], prompt={"who": "designer"})
    flow.node("agent").params["prompt"] = ParamValue(scope=Scope.CUSTOM, value="go")
    result, rec, _ = await run_agent_flow(flow, reg=tools_registry())
    assert result.status == "ok", rec.of("node.error")
    outcomes = rec.of("tool.result")
    assert [o.status for o in outcomes] == ["refused", "success"]
    assert "unknown argument 'prefix'" in outcomes[0].error
    assert outcomes[1].data == {"echoed": "DESIGNER: HI"}
    assert EchoTool.calls == [{"text": "hi", "prefix": "designer: "}]


async def test_inside_a_tool_call_a_template_does_not_see_the_ais_arguments():
    # The arguments travel under __parameters__ in the tool_request; the msg a
    # template sees has no reserved key, however the name is spelled.
    turns = [{"tool_calls": [{"name": "echo", "arguments": {"text": "secret-arg"}}]},
             {"text": "done"}]
    flow = agent_flow(scripted(turns), [{"id": "echo", "type": "test.echo", "params": {
        "prefix": E("{{ msg['__param' ~ 'eters__'] }}")}}])
    result, rec, _ = await run_agent_flow(flow, reg=tools_registry())
    [outcome] = rec.of("tool.result")
    assert outcome.status == "error"
    assert "params.prefix: 'msg' has no attribute '__parameters__'" in outcome.error
    assert "secret-arg" not in outcome.error
    assert EchoTool.calls == []


# -- the documented example runs -----------------------------------------------------------

def test_the_docs_example_runs_with_switchboard_run(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SWITCHBOARD_DATA_DIR": str(tmp_path / "data"),
           "SHOP_NAME": "Northwind Shop"}
    r = subprocess.run([sys.executable, "-m", "runtime.cli", "run", str(EXAMPLE)],
                       capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert sorted(d["value"][0] for d in lines) == ["Ann <ann@example.com>",
                                                     "Bob <bob@example.com>"]
    mails = [p.read_text(encoding="utf-8") for p in (tmp_path / "outbox").glob("*.eml")]
    subjects = sorted(line for m in mails for line in m.splitlines()
                      if line.startswith("Subject:"))
    assert subjects == ["Subject: Northwind Shop: order A-1001 shipped (2 items)",
                        "Subject: Northwind Shop: order B-2002 shipped (1 item)"]
    ann = next(m for m in mails if "A-1001" in m)
    assert "Hello Ann,\n\nyour order A-1001 is on its way:\n  - Desk lamp\n  - Ergonomic " \
           "chair\n\nBest regards,\nNorthwind Shop" in ann.replace("\r\n", "\n")


async def test_a_template_param_of_a_node_run_out_of_process_is_rendered_by_the_host():
    """settings.out_of_process: the core package runs in a plugin process;
    the host renders the template (scopes are resolved host-side) and the
    plugin gets the value."""
    nodes = [N("src", "core.inject", payload={"name": "Ann"}),
             N("set", "core.set_variable", variable="v", value=E("Hi {{ msg.payload.name }}")),
             N("get", "core.get_variable", variable="v"),
             N("show", "core.debug")]
    flow = make_flow(nodes, ["src->set", "set->get", "get->show"])
    flow.settings.out_of_process = ["core"]
    r = await run_flow(flow, reg=Registry.default())
    assert r.result.status == "ok", r.of("node.error")
    assert r.debug("show") == ["Hi Ann"]
    from runtime.plugin.host import RemoteNode

    assert isinstance(r.node("set"), RemoteNode)
