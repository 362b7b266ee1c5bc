"""Issue T3 1/10, items 1-3: every template, expression or Template node,
renders in one bounded engine, and ``env`` is an allow-list.

1. The Template node has the expressions' bounds (steps, work, sizes,
   output), its template is compiled when the flow is checked (a constant
   that cannot be built is a validation error, never an internal error),
   and a render past ``--timeout`` ends the run with 124.
2. The bounds have no holes: named %-format widths, the format filter,
   repeated fields, integer digits, and sizes counted through nesting
   (``[[1] * 999999] * 999999``), each checked before the value is built.
3. ``env`` holds only what the flow, the user's settings or the defaults
   name as readable, and the secret-name pattern (now with PASS and PWD)
   still hides a secret that is named.

Each test fails on the code before this change (checked by running this
file against that code)."""

from __future__ import annotations

import io
import json
import time
import tracemalloc
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

import runtime.expressions as expressions
from runtime import cli
from runtime.expressions import (
    MAX_WORK,
    Expression,
    ExpressionContext,
    ExpressionError,
    TextTemplate,
    template_env,
)
from runtime.flow import parse_flow, validate_flow
from runtime.registry import Registry
from runtime.spec import ParamSpec, ParamType, Scope
from tests.runtime_fixtures import N, flow_data, make_flow
from tests.runtime_fixtures import run as run_flow

#: The most a bounded render may allocate here, well above what the bounds
#: allow (a few values of MAX_VALUE characters) and far below the attacks.
PEAK_BYTES = 64 * 1024 * 1024


def spec(type_: str = "str") -> ParamSpec:
    return ParamSpec(name="subject", type=ParamType(type_), label="subject",
                     allowed_scopes=[Scope.CUSTOM], default_scope=Scope.CUSTOM)


def render(text: str, msg: dict | None = None, type_: str = "str", context=None):
    return Expression(spec(type_), text, context).render(msg)


def refused(text: str, msg: dict | None = None, type_: str = "str") -> str:
    """The error a template ends with, checking that the render stayed
    within PEAK_BYTES."""
    tracemalloc.start()
    try:
        with pytest.raises(ExpressionError) as exc:
            render(text, msg, type_)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < PEAK_BYTES, f"{peak / 1e6:.0f} MB for {text!r}"
    return str(exc.value)


def switchboard(*args: str) -> tuple[int, str, str]:
    """``runtime.cli.main`` in this process."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = cli.main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def template_flow(path: Path, template: str, payload=0, settings: dict | None = None) -> str:
    data = flow_data([N("src", "core.inject", payload=payload),
                      N("tpl", "core.template", template=template),
                      N("show", "core.debug")], ["src->tpl", "tpl->show"])
    if settings:
        data["settings"] = settings
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def template_problems(template: str) -> list[str]:
    flow = make_flow([N("src", "core.inject"), N("tpl", "core.template", template=template)],
                     ["src->tpl"])
    return [f"{p.field}: {p.message}" for p in validate_flow(flow, Registry.default())
            if p.severity == "error"]


# -- 1. the Template node: one engine, compiled when the flow is checked -----------

@pytest.mark.parametrize("template, why", [
    ("{{ 'x' * 400000000 }}", "repeating a text or list would make about 400000000"),
    ("{{ '{:>400000000}'.format('x') }}", "format() would make about 400000001"),
    ("{% set a = 2**999999 %}ok", "2 ** 999999 would be a whole number of more than 4300 digits"),
    ("{{ '%(a)400000000s' % {'a': 'x'} }}", "the %-format would make about 4000000"),
    ("{{ [[1] * 999999] * 999999 }}", "a list or mapping would make more than the 1000000"),
])
def test_a_template_nodes_constant_that_cannot_be_built_is_a_validation_error(template, why):
    [problem] = template_problems(template)
    assert problem.startswith("params.template: template error: ") and why in problem, problem


def test_validate_and_run_name_the_node_for_a_constant_too_big_never_an_internal_error(tmp_path):
    path = template_flow(tmp_path / "pow.flow.json", "{% set a = 2**999999 %}ok")
    for command in (("validate", path), ("run", path, "--no-history")):
        code, _, err = switchboard(*command)
        assert code == 2, err
        assert err.startswith(f"{path}: node 'tpl', params.template: template error: 2 ** 999999")
        assert "internal error" not in err and "Traceback" not in err


@pytest.mark.parametrize("template, payload, why", [
    # The same attacks with the size from the message: found when rendering.
    ("{{ 'x' * payload }}", 400_000_000, "repeating a text or list would make about 400000000"),
    ("{{ ('{:>' ~ payload ~ '}').format('x') }}", 400_000_000, "format() would make about"),
    ("{{ ('%(a)' ~ payload ~ 's') % {'a': 'x'} }}", 400_000_000, "the %-format would make"),
    ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", 0,
     "the template ran more than 100000 steps"),
    ("{% set ns = namespace(n=payload) %}{% for i in range(40) %}{% set ns.n = ns.n * ns.n %}"
     "{% endfor %}{{ ns.n > 0 }}", 3, "would be a whole number of more than 4300 digits"),
    ("{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}", 0,
     "the template's text passed 1000000 characters"),
])
async def test_the_template_node_renders_with_the_expression_bounds(template, payload, why):
    flow = make_flow([N("src", "core.inject", payload=payload),
                      N("tpl", "core.template", template=template), N("show", "core.debug")],
                     ["src->tpl", "tpl->show"])
    tracemalloc.start()
    try:
        r = await run_flow(flow)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    [err] = r.of("node.error")
    assert err.node == "tpl" and err.message.startswith("template: ") and why in err.message, \
        err.message
    assert r.debug("show") == []
    assert peak < PEAK_BYTES, f"{peak / 1e6:.0f} MB"


def test_the_template_node_keeps_its_own_ways():
    """Message keys as names, a missing key as empty text, internals as
    nothing, and the sandbox's refusals: as before, now under the bounds."""
    t = TextTemplate("Hi {{ payload.name }} ({{ topic }}) {{ msg.payload.n * 2 }} "
                     "[{{ payload.missing.deeper }}]{{ ''.__class__ }}")
    assert t.render({"payload": {"name": "Ada", "n": 21}, "topic": "t"}) == "Hi Ada (t) 42 []"
    with pytest.raises(ExpressionError, match="'append' of 'list' object is unsafe"):
        TextTemplate("{{ payload.append(1) }}").render({"payload": []})


def test_a_template_that_an_expression_gives_is_read_for_each_message(tmp_path):
    """Found by the fuzz test: the template param set by an expression was
    rendered when the run was built, with no message: any error then was an
    "internal error". Now it is read per message, and fails per message."""
    good = "Hi {{ '{{ payload.name }}' }} {{ msg.payload.n }}"  # a template made per message
    bad = "{{ msg.payload.nothing }}"
    for text, code, want in ((good, 0, "Hi Ada 7"), (bad, 1, None)):
        path = tmp_path / "expr.flow.json"
        data = flow_data([N("src", "core.inject", payload={"name": "Ada", "n": 7}),
                          N("tpl", "core.template",
                            template={"scope": "expression", "value": text}),
                          N("show", "core.debug")], ["src->tpl", "tpl->show"])
        path.write_text(json.dumps(data), encoding="utf-8")
        got, out, err = switchboard("run", str(path), "--no-history")
        assert got == code, err
        assert "internal error" not in err and "Traceback" not in err
        if want:
            assert json.loads(out)["value"] == want
        else:
            assert "params.template: 'msg.payload' has no attribute 'nothing'" in err


def _deadline_passes_after(monkeypatch, calls: int) -> None:
    """The clock renders read jumps an hour ahead after ``calls`` readings:
    a render that is still going then has seen the deadline pass (no test
    here waits for a real clock)."""
    real = getattr(expressions, "_now", time.monotonic)
    count = [0]

    def clock() -> float:
        count[0] += 1
        return real() + (3600 if count[0] > calls else 0)

    monkeypatch.setattr(expressions, "_now", clock, raising=False)


LONG_RENDER = "{% for i in range(50000) %}{% endfor %}done"


async def test_a_render_past_the_runs_deadline_ends_the_run_as_timed_out(monkeypatch):
    _deadline_passes_after(monkeypatch, 1)  # read once as the render starts, then past
    flow = make_flow([N("src", "core.inject"), N("tpl", "core.template", template=LONG_RENDER),
                      N("show", "core.debug")], ["src->tpl", "tpl->show"])
    r = await run_flow(flow, timeout=600)
    assert r.result.reason == "timeout" and r.result.in_flight == {"tpl": 1}
    assert r.debug("show") == [] and r.of("node.error") == []


def test_switchboard_run_exits_124_when_a_render_passes_the_timeout(monkeypatch, tmp_path):
    _deadline_passes_after(monkeypatch, 1)
    path = template_flow(tmp_path / "slow.flow.json", LONG_RENDER)
    code, out, err = switchboard("run", path, "--timeout", "600", "--no-history")
    assert code == 124, err
    assert "unfinished: tpl (1)" in err and out == ""
    assert "internal error" not in err and "Traceback" not in err


# -- 2. no holes in the bounds --------------------------------------------------------

BIG = "x" * 100_000


@pytest.mark.parametrize("text, msg, why", [
    # The named %-format form, and the format filter with named fields.
    ("{{ '%(a)40000000s' % {'a': 'x'} }}", None, "the %-format would make about 400000"),
    ("{{ ('%(a)' ~ msg.payload ~ 's') % {'a': 'x'} }}", {"payload": 40_000_000},
     "the %-format would make"),
    ("{{ '%(a)40000000s' | format(a='x') }}", None, "the %-format would make"),
    ("{{ ('%(a)' ~ msg.payload ~ 's') | format(a='x') }}", {"payload": 40_000_000},
     "the %-format would make"),
    # A value referred to by many fields counts each time.
    ("{{ ('%(a)s' * 1000) % {'a': msg.payload} }}", {"payload": BIG}, "the %-format would make"),
    ("{{ ('%(a(b))s' * 1000) % {'a(b)': msg.payload} }}", {"payload": BIG},
     "the %-format would make"),
    ("{{ ('{0}' * 1000).format(msg.payload) }}", {"payload": BIG}, "format() would make"),
    ("{{ ('{a}' * 1000).format_map({'a': msg.payload}) }}", {"payload": BIG},
     "format() would make"),
    # Whole numbers: digits are bounded whatever the operator.
    ("{% set ns = namespace(n=msg.payload) %}{% for i in range(20) %}"
     "{% set ns.n = ns.n * ns.n %}{% endfor %}{{ ns.n > 0 }}", {"payload": 3},
     "whole number of more than 4300 digits"),
    ("{{ 10 ** 5000 }}", None, "10 ** 5000 would be a whole number of more than 4300 digits"),
    ("{{ msg.payload ** 3000 }}", {"payload": 1000}, "more than 4300 digits"),
    ("{{ [msg.payload] * 1000 }}", {"payload": 10 ** 4000}, "repeating a text or list"),
    # Sizes through nesting, before the value is built.
    ("{{ [['x' * 1000] * 500] * 10 }}", None, "repeating a text or list would make about 5000010"),
    ("{{ [[1] * 999999] * 999999 }}", None, "a list or mapping would make more than the 1000000"),
    ("{{ ([msg.payload] * 20) | length }}", {"payload": ["x" * 100] * 1000},
     "repeating a text or list would make"),
    ("{% set a = [msg.payload] %}{% set b = [a, a, a, a, a, a, a, a, a, a] %}"
     "{% set c = [b, b, b, b, b, b, b, b, b, b] %}{{ c | length }}", {"payload": "x" * 20_000},
     "a list or mapping would make more than the 1000000"),
    ("{% set a = dict(x=msg.payload, y=msg.payload) %}{% set b = dict(p=a, q=a, r=a, s=a) %}"
     "{% set c = dict(p=b, q=b, r=b, s=b) %}{{ c | length }}", {"payload": "x" * 100_000},
     "dict() or namespace() would make more than"),
    ("{{ msg.payload | tojson(indent=16) }}",
     {"payload": [[[[[[[[[[["x"] * 20_000]]]]]]]]]]}, "tojson would make"),
    ("{{ msg.payload | pprint }}", {"payload": [[[[[[[[[[["x"] * 200_000]]]]]]]]]]},
     "pprint would make"),
    # Texts built in a block or a macro count as a whole.
    ("{% macro m() %}{% for i in range(1000) %}{{ msg.payload }}{% endfor %}{% endmacro %}"
     "{{ m() | length }}", {"payload": "x" * 10_000}, "the text of a block or macro would make"),
    ("{% set t %}{% for i in range(1000) %}{{ msg.payload }}{% endfor %}{% endset %}"
     "{{ t | length }}", {"payload": "x" * 10_000}, "the text of a block or macro would make"),
    # Work: comparing or scanning big values in a loop is counted.
    ("{% for i in range(100000) %}{% if msg.payload.a == msg.payload.b %}{% endif %}"
     "{% endfor %}", {"payload": {"a": list(range(20_000)), "b": list(range(20_000))}},
     f"did more than {MAX_WORK} units of work"),
    ("{% for i in range(100000) %}{{ (msg.payload | upper)[:1] }}{% endfor %}",
     {"payload": BIG}, f"did more than {MAX_WORK} units of work"),
])
def test_every_operation_is_bounded_before_it_builds(text, msg, why):
    error = refused(text, msg)
    assert why in error, error


def test_a_message_whose_lists_repeat_each_other_is_not_written_out():
    """A code node can send lists that refer to each other: a million items
    in three objects. Writing one out is refused before the text is made."""
    inner = ["x" * 100] * 1000
    payload = [inner] * 1000
    assert "writing out a value would make more than" in refused("{{ msg.payload }}!",
                                                                {"payload": payload})
    assert "joining texts with ~ would make more than" in refused("{{ msg.payload ~ '' }}",
                                                        {"payload": payload})
    assert "the string filter would make more than" in refused("{{ msg.payload | string }}",
                                                     {"payload": payload})
    assert "join would make" in refused("{{ msg.payload | join(',') }}", {"payload": payload})


def test_a_constant_bound_is_found_when_the_flow_is_checked_for_expressions_too():
    from runtime.expressions import problem

    assert "more than 4300 digits" in problem(spec(), "{{ 10 ** 5000 }}")
    assert "the %-format would make" in problem(spec(), "{{ '%(a)40000000s' % {'a': 1} }}")
    assert problem(spec(), "{{ 1 / 0 }}") is None  # not a bound: the render names it


def test_work_under_the_bounds_still_renders():
    assert render("{{ '%(a)5s|%(b)-3d|' % {'a': 'x', 'b': 7} }}") == "    x|7  |"
    assert render("{{ '%s-%s' | format(1, 2) }}") == "1-2"
    assert render("{{ '{0}{1}{0}'.format('a', 'b') }}") == "aba"
    assert render("{{ 2 ** 64 * 3 }}", type_="int") == 3 * 2 ** 64
    assert len(render("{{ 10 ** 4299 }}")) == 4300
    assert render("{{ [[1, 2]] * 3 }}", type_="json") == [[1, 2]] * 3
    assert render("{{ {'a': [1, msg.payload]} | tojson }}", {"payload": 2}) == '{"a": [1, 2]}'
    rows = [{"sku": f"A-{i}", "qty": i} for i in range(5000)]
    assert render("{% for r in msg.payload %}{% if r.qty > 4997 %}{{ r.sku }};{% endif %}"
                  "{% endfor %}", {"payload": rows}) == "A-4998;A-4999;"
    assert render("{{ msg.payload }}", {"payload": rows}, "json") == rows  # passed on, not built


# -- 3. env: an allow-list, with the secret names as a second guard ----------------------

@pytest.fixture
def environ(monkeypatch, data_dir):
    for name, value in {"DB_PASS": "pw-pass", "DB_PWD": "pw-pwd", "SHOP_NAME": "Northwind",
                        "APP_REGION": "eu", "HOME": "/home/ada"}.items():
        monkeypatch.setenv(name, value)
    return data_dir


def test_env_holds_only_the_defaults_unless_something_names_more(environ):
    ctx = ExpressionContext(template_env())
    text = render("{{ env | tojson }}", context=ctx)
    listed = json.loads(text)
    assert listed.get("HOME") == "/home/ada"
    assert not {"DB_PASS", "DB_PWD", "SHOP_NAME", "APP_REGION"} & set(listed)
    assert "pw-pass" not in text and "pw-pwd" not in text
    with pytest.raises(ExpressionError, match="env.SHOP_NAME is not readable by templates: .*"
                                              "settings.env_readable"):
        render("{{ env.SHOP_NAME }}", context=ctx)
    with pytest.raises(ExpressionError, match="env.DB_PASS is hidden from templates"):
        render("{{ env['DB_PASS'] }}", context=ctx)


def test_a_flows_env_readable_names_variables_and_never_a_secret(environ, tmp_path):
    path = tmp_path / "env.flow.json"
    data = flow_data([N("src", "core.inject", payload={"scope": "expression", "value":
                        "{{ env.SHOP_NAME }}/{{ env.APP_REGION }}/{{ env | tojson }}"}),
                      N("show", "core.debug")], ["src->show"])
    data["settings"] = {"env_readable": ["SHOP_NAME", "APP_*", "DB_PASS", "DB_PWD"]}
    path.write_text(json.dumps(data), encoding="utf-8")
    code, out, err = switchboard("run", str(path), "--no-history")
    assert code == 0, err
    [line] = [json.loads(x) for x in out.splitlines()]
    shown, region, listed = line["value"].split("/", 2)
    assert (shown, region) == ("Northwind", "eu")
    assert set(json.loads(listed)) >= {"SHOP_NAME", "APP_REGION", "HOME"}
    assert "pw-pass" not in out + err and "pw-pwd" not in out + err
    flow = parse_flow(data, "env.flow.json")
    ctx = ExpressionContext.for_run(flow, Registry.default(), lambda key, make: make())
    for name in ("DB_PASS", "DB_PWD"):
        with pytest.raises(ExpressionError, match=f"env.{name} is hidden from templates"):
            render(f"{{{{ env.{name} }}}}", context=ctx)


def test_the_users_settings_name_readable_variables_for_every_flow(environ):
    (environ).mkdir(parents=True, exist_ok=True)
    (environ / "settings.json").write_text(json.dumps({"env_readable": ["SHOP_NAME"]}),
                                           encoding="utf-8")
    assert render("{{ env.SHOP_NAME }}", context=ExpressionContext(template_env())) == "Northwind"
    with pytest.raises(ExpressionError, match="env.APP_REGION is not readable"):
        render("{{ env.APP_REGION }}", context=ExpressionContext(template_env()))
    (environ / "settings.json").write_text('{"env_readable": ["SHOP NAME"]}', encoding="utf-8")
    with pytest.raises(ExpressionError) as exc:
        render("{{ env.SHOP_NAME }}", context=ExpressionContext(template_env()))
    assert "settings.json: env_readable[0]: \"SHOP NAME\" is not a variable's name" \
        in str(exc.value)


@pytest.mark.parametrize("names, why", [
    (["*"], "entry 1: \"*\" is not a variable's name"),
    (["SHOP_NAME", "1ST"], "entry 2: \"1ST\" is not a variable's name"),
    (["SHOP_NAME", 7], "entry 2: must be a variable's name in quotes"),
    ("SHOP_NAME", "must be a JSON array, not text"),
])
def test_a_bad_env_readable_list_is_refused_naming_the_entry(tmp_path, names, why):
    path = tmp_path / "bad.flow.json"
    data = flow_data([N("src", "core.inject")])
    data["settings"] = {"env_readable": names}
    path.write_text(json.dumps(data), encoding="utf-8")
    code, _, err = switchboard("validate", str(path))
    assert code == 2 and err.startswith(f"{path}: settings.env_readable: ") and why in err, err


def test_pass_and_pwd_are_secret_names_now():
    assert expressions.SECRET_NAME.search("DB_PASS") and expressions.SECRET_NAME.search("DB_PWD")
