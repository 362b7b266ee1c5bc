"""Fuzzing flow files: mutations of the real example flows must end
`switchboard validate` with 0 or 2 and `switchboard run` with 0, 1, 2 or 124,
never with a traceback or an "internal error"; and `parse_flow` must raise
nothing but FlowError for whatever decoded JSON they hold.

The mutations: wrong types at every place of the file, missing and extra
keys, huge and negative numbers, NaN, deep nesting, odd and invalid unicode,
duplicate ids and wires, dangling wires, unknown types, ports and scopes, and
damage to the text itself (cut short, deep brackets, 5,000-digit numbers,
invalid UTF-8), and templates: a Template node's template or a param's
expression replaced by one built from the shapes that once broke the
bounds (huge repeats and widths, named %-formats, repeated format fields,
squaring loops, lists nested by reference, nested loops, big blocks).

The template property on its own (``test_any_render_ends_within_its_bounds``):
whatever such a template is, compiling it gives a template or an
ExpressionError, and rendering it a value or an ExpressionError naming the
bound, within the memory the bounds allow; never another exception, never
a hang (pytest's timeout would end one).

CI runs SWITCHBOARD_FUZZ_EXAMPLES (default 2,000) validate examples, half as
many run and parse_flow examples and a tenth as many template renders (about
a minute on 2 cores); raise it for a longer hunt:

    SWITCHBOARD_FUZZ_EXAMPLES=20000 .venv/bin/pytest tests/test_fuzz_flows.py
"""

from __future__ import annotations

import copy
import io
import json
import os
import resource
import socket
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from runtime import cli
from runtime.expressions import Expression, ExpressionError, TextTemplate
from runtime.flow import FlowError, Problem, parse_flow, validate_flow
from runtime.node import NodeConfigError
from runtime.registry import Registry
from runtime.spec import ParamSpec, ParamType, Scope

EXAMPLES_DIR = Path(__file__).resolve().parents[1] / "resources" / "examples"
EXAMPLES = {p.name: json.loads(p.read_text(encoding="utf-8"))
            for p in sorted(EXAMPLES_DIR.glob("*.flow.json"))}
N_EXAMPLES = int(os.environ.get("SWITCHBOARD_FUZZ_EXAMPLES", "2000"))
N_RUN_EXAMPLES = max(N_EXAMPLES // 2, 50)
# The limit is there to end a hang, not to time the work: 2,000 examples
# take ~45 s of CPU, and a machine shared with other work (load 4 on 2
# CPUs) stretched that past 130 s. A raised SWITCHBOARD_FUZZ_EXAMPLES gets
# time in proportion.
pytestmark = pytest.mark.timeout(max(360, N_EXAMPLES // 5))
RUN_TIMEOUT = "0.5"  # seconds; a mutation that makes a flow wait forever costs this much

NODE_TYPES = sorted(s.type for s in Registry.default().specs())
DEEP = "\x00deep\x00"  # placeholder: replaced by deep brackets in the text, past json.dumps

FUZZ = settings(deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture,
    HealthCheck.filter_too_much])


# -- values ------------------------------------------------------------------------

# No "/", "\\" or "~": a mutated outbox folder must stay below the test's own
# working directory (absolute and home paths would write .eml files anywhere).
safe_chars = st.characters(blacklist_characters="/\\~", blacklist_categories=("Cs",))
odd_text = st.sampled_from([
    "", " ", "\x00", "\ud800", "\udfff", "a\udc00b", "\ud83d\ude00", "😀", "\u202eevil", "\u200b",
    "e\u0301", "\uffff", "\ufeff", "ǅ", "ß" * 3, "\n\r\t", "null", "NaN", "{{", "{% for %}",
    "{{ payload * 99999999 }}", "payload..x", "payload[", "payload.0.1", "out", "in", "tools",
    "out0", "custom", "message", "ai", "openai", "anthropic", "scripted", "smtp", "outbox",
]) | st.sampled_from([300, 5000, 100_000]).map(lambda n: "1" * n)  # built here: short reprs
numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 1, 2**31, 2**63, -(2**63), 10**30, -(10**30), 10**400, 65536, 0.0,
                     -0.0, 1e-300, 1e308, -1e308]),
    st.floats(allow_nan=True, allow_infinity=True),
)
leaf = st.one_of(st.none(), st.booleans(), numbers, st.text(safe_chars, max_size=12), odd_text,
                 st.just(DEEP))
# Two levels at most here (st.recursive overran hypothesis' buffer a third of
# the time); DEEP stands for any depth.
small_keys = st.text(safe_chars, max_size=6) | odd_text
shallow = st.one_of(leaf, st.lists(leaf, max_size=4), st.dictionaries(small_keys, leaf, max_size=4))
values = st.one_of(shallow, st.lists(shallow, max_size=3),
                   st.dictionaries(small_keys, shallow, max_size=3))
keys = st.one_of(st.sampled_from(["id", "type", "name", "position", "params", "outputs", "tool",
                                  "disabled", "notes", "from", "to", "scope", "value", "path",
                                  "description", "format", "nodes", "wires", "extra"]),
                 st.text(safe_chars, max_size=8), odd_text)


# -- templates -------------------------------------------------------------------

# Pieces of the shapes that once broke the bounds (issue T3 1/10): sizes,
# widths and exponents near and far past the bounds, format strings with
# named, starred and repeated fields, and the names a template reads.
T_NUMBERS = st.sampled_from(["0", "1", "-1", "7", "999999", "1000000", "400000000", "2 ** 31",
                             "10 ** 9", "4300", "14285", "1e308", "0.5", "range(5) | length"])
T_TEXTS = st.sampled_from(["'x'", "''", "'ab' * 1000", "'%(a)s'", "'%(a)400000000s'", "'%s%s'",
                           "'%*d'", "'{0}{0}{0}'", "'{:>400000000}'", "'{a}'", "'{:{w}}'",
                           "'%(a(b))s'", "'\\t' * 100", "'{}'"])
T_NAMES = st.sampled_from(["msg.payload", "msg.payload.big", "msg.payload.shared",
                           "msg.payload.rows", "msg.payload.n", "msg", "env", "payload"])
T_FILTERS = st.sampled_from([
    "length", "string", "list", "sort", "unique", "first", "sum", "tojson", "tojson(indent=16)",
    "pprint", "upper", "center(400000000)", "indent(999999)", "replace('x', 'xxxxxxxxxx')",
    "join(',')", "join('x' * 1000)", "batch(999999, 'xxxx')", "slice(999999, [1])",
    "format(a='x')", "format(1, 2)", "wordwrap(1)", "urlize", "map('string') | list", "reverse",
    "dictsort", "select('odd') | list", "default('d')", "int", "float", "items | list"])
T_METHODS = st.sampled_from([
    ".format('x')", ".format(msg.payload.big)", ".format(a=msg.payload.big, w=9)",
    ".format_map({'a': msg.payload.big})", ".ljust(999999)", ".center(400000000)",
    ".zfill(999999)", ".replace('', 'xx')", ".join(range(99999))", ".split()",
    ".expandtabs(999999)", ".count('x')"])
T_OPS = st.sampled_from(["*", "+", "**", "%", "~", "-", "//", "=="])


def t_exprs() -> st.SearchStrategy[str]:
    leaf = T_NUMBERS | T_TEXTS | T_NAMES | st.sampled_from(["[1] * 999999", "[[1] * 999] * 999",
                                                            "namespace(a=1)", "range(100000)"])

    def grow(inner):
        return st.one_of(
            st.tuples(inner, T_OPS, inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            st.tuples(inner, T_FILTERS).map(lambda t: f"({t[0]} | {t[1]})"),
            st.tuples(inner, T_METHODS).map(lambda t: f"({t[0]}){t[1]}"),
            st.lists(inner, min_size=1, max_size=6).map(lambda xs: f"[{', '.join(xs)}]"),
            st.tuples(inner, inner).map(lambda t: f"dict(a={t[0]}, b={t[1]})"),
        )

    return st.recursive(leaf, grow, max_leaves=6)


@st.composite
def t_templates(draw) -> str:
    """A template of the shapes above (for a param's expression or a
    Template node: a name that one does not know is its own error)."""
    e = draw(t_exprs())
    shape = draw(st.sampled_from(["out", "out", "loop", "loops", "square", "block", "macro",
                                  "nest", "compare", "text"]))
    n = draw(st.sampled_from(["3", "1000", "100000"]))
    if shape == "out":
        return f"{{{{ {e} }}}}"
    if shape == "loop":
        return f"{{% for i in range({n}) %}}{{{{ {e} }}}}{{% endfor %}}"
    if shape == "loops":
        return (f"{{% for i in range({n}) %}}{{% for j in range({n}) %}}{{% endfor %}}"
                f"{{% endfor %}}{{{{ {e} }}}}")
    if shape == "square":
        return (f"{{% set ns = namespace(v={e}) %}}{{% for i in range({n}) %}}"
                f"{{% set ns.v = ns.v {draw(T_OPS)} ns.v %}}{{% endfor %}}{{{{ ns.v | length }}}}")
    if shape == "block":
        return (f"{{% set t %}}{{% for i in range({n}) %}}{{{{ {e} }}}}{{% endfor %}}"
                "{% endset %}{{ t | length }}")
    if shape == "macro":
        return (f"{{% macro m(k) %}}{{% if k %}}{{{{ m(k - 1) }}}}{{{{ m(k - 1) }}}}"
                f"{{% else %}}{{{{ {e} }}}}{{% endif %}}{{% endmacro %}}{{{{ m(30) | length }}}}")
    if shape == "nest":
        return (f"{{% set a = [{e}] %}}{{% set b = [a, a, a, a, a, a, a, a, a, a] %}}"
                "{% set c = [b, b, b, b, b, b, b, b, b, b] %}{{ [c, c, c] | string | length }}")
    if shape == "compare":
        return f"{{% for i in range({n}) %}}{{% if {e} == {e} %}}{{% endif %}}{{% endfor %}}ok"
    return f"text {{{{ {e} }}}} and {{% if {e} %}}yes{{% endif %}}"


#: The shapes of the issue, for mutations of whole flows (drawing from the
#: generator above costs more than a flow's other mutations together).
T_PRESETS = [
    "{{ 'x' * 400000000 }}", "{{ 'x' * msg.payload }}", "{{ 'x' * payload }}",
    "{{ '{:>400000000}'.format('x') }}", "{{ ('{:>' ~ msg.payload ~ '}').format('x') }}",
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "{% set a = 2**999999 %}ok", "{{ 10 ** 5000 }}", "{{ '%(a)400000000s' % {'a': 'x'} }}",
    "{{ '%(a)400000000s' | format(a='x') }}", "{{ ('%(a)s' * 1000) % {'a': 'x' * 100000} }}",
    "{% set ns = namespace(n=3) %}{% for i in range(40) %}{% set ns.n = ns.n * ns.n %}"
    "{% endfor %}{{ ns.n > 0 }}",
    "{{ [[1] * 999999] * 999999 }}", "{{ ('{0}' * 1000).format('x' * 100000) }}",
    "{% set a = ['x' * 20000] %}{% set b = [a, a, a, a, a, a, a, a, a, a] %}"
    "{% set c = [b, b, b, b, b, b, b, b, b, b] %}{{ c }}",
    "{% macro m(k) %}{% if k %}{{ m(k - 1) }}{{ m(k - 1) }}{% endif %}{% endmacro %}{{ m(30) }}",
    "{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}",
    "{{ env | tojson }}", "{{ msg | tojson(indent=16) }}", "{{ payload.name }}",
    "{{ msg.payload }}", "Hi {{ payload }}", "{{ msg.payload.n + 1 }}", "{% if %}",
]
_SHARED = ["y" * 100] * 1000
T_MESSAGE = {"_msgid": "m", "topic": "t", "payload": {
    "big": "x" * 100_000, "n": 3, "shared": [_SHARED] * 1000,
    "rows": [{"sku": f"A-{i}", "qty": i} for i in range(2000)]}}
#: How much a render may grow the process (its peak resident size), far
#: below what the shapes above built before the bounds (gigabytes).
T_PEAK_KB = 256 * 1024
N_TEMPLATE_EXAMPLES = max(N_EXAMPLES // 10, 50)


def _str_params(node: dict) -> list[str]:
    spec = Registry.default().spec(node.get("type")) if isinstance(node.get("type"), str) \
        else None
    if spec is None:
        return ["payload"]
    return [p.name for p in spec.params if p.type.value in ("str", "json", "int")
            and not p.secret] or ["payload"]


# -- mutations of the decoded document ------------------------------------------

def places(doc) -> list[tuple[object, object]]:
    """Every (container, key) in the document, the root excluded."""
    out: list[tuple[object, object]] = []
    stack = [doc]
    while stack:
        c = stack.pop()
        items = c.items() if isinstance(c, dict) else enumerate(c)
        for k, v in list(items):
            out.append((c, k))
            if isinstance(v, (dict, list)):
                stack.append(v)
    return out


def node_list(doc) -> list[dict]:
    nodes = doc.get("nodes") if isinstance(doc, dict) else None
    return [n for n in nodes if isinstance(n, dict)] if isinstance(nodes, list) else []


def wire_list(doc) -> list[dict]:
    wires = doc.get("wires") if isinstance(doc, dict) else None
    return [w for w in wires if isinstance(w, dict)] if isinstance(wires, list) else []


@st.composite
def mutate_once(draw, doc):
    op = draw(st.sampled_from(["same", "same", "same", "replace", "replace", "delete", "add",
                               "duplicate", "wire", "id", "type", "scope", "provider",
                               "template"]))
    nodes, wires = node_list(doc), wire_list(doc)
    ids = [n.get("id") for n in nodes] + ["ghost", "", 5, None]
    if op == "wire" and wires:
        wire = draw(st.sampled_from(wires))
        end = draw(st.sampled_from(["from", "to"]))
        wire[end] = [draw(st.sampled_from(ids)),
                     draw(st.sampled_from(["out", "in", "tools", "out0", "out7", "nope"]))]
    elif op == "id" and nodes:
        draw(st.sampled_from(nodes))["id"] = draw(st.sampled_from(ids))
    elif op == "type" and nodes:
        draw(st.sampled_from(nodes))["type"] = draw(st.sampled_from([*NODE_TYPES, "no.such"]))
    elif op == "scope" and nodes:
        node = draw(st.sampled_from(nodes))
        params = node.setdefault("params", {})
        if isinstance(params, dict):
            name = draw(st.sampled_from([*params, "payload", "seconds", "provider", "delivery"]))
            setting = {"scope": draw(st.sampled_from(["custom", "message", "ai", "robot"]))}
            if draw(st.booleans()):
                setting[draw(st.sampled_from(["value", "path", "description"]))] = draw(values)
            params[name] = setting
    elif op == "template" and nodes:
        # A Template node's template, or any text param as an expression.
        node = draw(st.sampled_from(nodes))
        params = node.setdefault("params", {})
        if isinstance(params, dict):
            text = draw(st.sampled_from(T_PRESETS))
            if node.get("type") == "core.template" and draw(st.booleans()):
                params["template"] = {"scope": "custom", "value": text}
            else:
                params[draw(st.sampled_from(_str_params(node)))] = {"scope": "expression",
                                                                     "value": text}
    elif op == "provider":
        agents = [n for n in nodes if n.get("type") == "ai.agent"] or nodes
        if agents and isinstance(agents[0].get("params", {}), dict):
            agents[0].setdefault("params", {})["provider"] = {
                "scope": "custom",
                "value": draw(st.sampled_from(["openai", "anthropic", "ollama", "scripted"]))}
    else:
        where = places(doc)
        if not where:
            return
        container, key = where[draw(st.integers(0, len(where) - 1))]
        if op == "delete":
            del container[key]
        elif op == "add" and isinstance(container, dict):
            container[draw(keys)] = draw(values)
        elif op == "add":
            container.insert(key, draw(values))
        elif op == "duplicate" and isinstance(container, list):
            container.insert(key, copy.deepcopy(container[key]))
        elif op == "same":  # a value of the same JSON type: often still a valid flow
            container[key] = draw(same_kind(container[key]))
        else:
            container[key] = draw(values)


def same_kind(value) -> st.SearchStrategy:
    if isinstance(value, bool) or value is None:
        return st.sampled_from([True, False, None])
    if isinstance(value, (int, float)):
        return numbers
    if isinstance(value, str):
        return st.text(safe_chars, max_size=12) | odd_text
    if isinstance(value, list):
        return st.lists(values, max_size=4) | st.just(value[::-1])
    return st.dictionaries(keys, values, max_size=3).map(lambda extra: {**value, **extra})


@st.composite
def flow_texts(draw) -> bytes:
    """A mutated example flow, as the bytes of a file."""
    doc = copy.deepcopy(EXAMPLES[draw(st.sampled_from(sorted(EXAMPLES)))])
    for _ in range(draw(st.integers(0, 3))):
        draw(mutate_once(doc))
    if draw(st.integers(0, 19)) == 0:
        doc = draw(values)  # now and then not a flow at all
    text = json.dumps(doc, ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, 2])))
    depth = draw(st.sampled_from([2, 63, 64, 65, 300, 5000]))
    text = text.replace(json.dumps(DEEP), "[" * depth + "]" * depth)
    damage = draw(st.sampled_from(["none"] * 40 + ["cut", "deep", "digits", "bom", "latin1",
                                                   "surrogate", "empty", "nul"]))
    if damage == "cut":
        text = text[:draw(st.integers(0, max(len(text) - 1, 0)))]
    elif damage == "deep":
        text = '{"format": "switchboard.flow/1", "nodes": ' + "[" * 5000 + "]" * 5000 + "}"
    elif damage == "digits":
        text = text.replace("80", "8" * 5000, 1)
    elif damage == "surrogate":
        text = text.replace('"Hello', '"\\ud800Hello', 1).replace('"Tell', '"\\udc00Tell', 1)
    elif damage == "empty":
        text = ""
    elif damage == "nul":
        text = text.replace(",", ",\x00", 1)
    raw = text.encode("utf-8", errors="surrogatepass")
    if damage == "bom":
        raw = b"\xef\xbb\xbf" + raw
    elif damage == "latin1":
        raw = raw.replace(b"e", b"\xe9", 1)
    return raw


# -- the properties ----------------------------------------------------------------

def switchboard(*args: str) -> tuple[int, str, str]:
    """``runtime.cli.main`` in this process, with stdout and stderr encoded as
    on a terminal: UTF-8, strict on stdout, backslashreplace on stderr."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", write_through=True)
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace",
                           write_through=True)
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = cli.main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
    return code, out.buffer.getvalue().decode("utf-8"), err.buffer.getvalue().decode("utf-8")


def check_output(path: str, code: int, stderr: str) -> None:
    assert "Traceback" not in stderr, stderr
    assert "internal error" not in stderr, stderr
    if code == 2:
        first = stderr.splitlines()[0] if stderr.strip() else ""
        assert first.startswith(path), f"exit 2 must name the file first: {stderr!r}"


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """No API keys, no connections, and a working directory of its own: a
    mutated email flow can switch to openai or smtp, but reaches nothing."""
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(var, raising=False)

    def refuse(*args, **kwargs):
        raise OSError("network is off in the fuzz test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    # Mutated browser flows get the answer of a machine without the browser
    # extra instead of a real Chromium: the property is about flow files, a
    # browser is tested for real in test_browser_nodes.py, and hundreds of
    # Playwright drivers cut off mid-start by the run's timeout left
    # half-made objects that crashed the interpreter's final collection.
    import nodes.browser.session as browser_session

    def no_browser():
        raise NodeConfigError(browser_session.INSTALL_HINT)

    monkeypatch.setattr(browser_session, "playwright_api", no_browser)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write_flow(folder: Path, raw: bytes) -> str:
    fd, path = tempfile.mkstemp(suffix=".flow.json", dir=folder)
    with os.fdopen(fd, "wb") as fh:
        fh.write(raw)
    return path


@settings(FUZZ, max_examples=N_EXAMPLES)
@given(raw=flow_texts())
def test_validate_ends_with_0_or_2_and_a_clear_reason(offline, raw):
    path = write_flow(offline, raw)
    try:
        code, _, stderr = switchboard("validate", path)
    finally:
        os.unlink(path)
    event(f"exit {code}")
    assert code in (0, 2), (code, stderr)
    check_output(path, code, stderr)


@settings(FUZZ, max_examples=N_RUN_EXAMPLES)
@given(raw=flow_texts())
def test_run_ends_with_0_1_2_or_124_never_a_traceback(offline, raw):
    path = write_flow(offline, raw)
    try:
        code, _, stderr = switchboard("run", path, "--timeout", RUN_TIMEOUT)
    finally:
        os.unlink(path)
    event(f"exit {code}")
    assert code in (0, 1, 2, 124), (code, stderr)
    check_output(path, code, stderr)


@settings(FUZZ, max_examples=N_EXAMPLES // 2)
@given(raw=flow_texts())
def test_parse_flow_raises_nothing_but_flow_error(raw):
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        event("not JSON")
        return
    try:
        flow = parse_flow(data, "f.flow.json")
    except FlowError as exc:
        event("refused")
        assert exc.problems and all(p.file == "f.flow.json" for p in exc.problems)
        assert all(str(p).startswith("f.flow.json: ") for p in exc.problems)
        return
    problems = validate_flow(flow, file="f.flow.json")
    event("refused by validation" if any(p.severity == "error" for p in problems) else "valid")
    assert all(isinstance(p, Problem) for p in problems)


def _one_render(make, msg) -> str:
    """Compile and render; the outcome as a word for hypothesis' stats."""
    try:
        template = make()
    except ExpressionError as exc:
        assert str(exc).strip() and "Traceback" not in str(exc)
        return "refused when compiled"
    try:
        template.render(msg)
    except ExpressionError as exc:
        assert str(exc).strip() and "internal error" not in str(exc)
        return "refused when rendered"
    return "rendered"


# The renders take about a second at worst (MAX_WORK), a tenth on average.
@pytest.mark.timeout(max(600, N_TEMPLATE_EXAMPLES * 3))
@settings(FUZZ, max_examples=N_TEMPLATE_EXAMPLES)
@given(text=t_templates())
def test_any_render_ends_within_its_bounds(text):
    """An expression and a Template node with the same text: each compiles
    to a template or an ExpressionError, and renders to a value or an
    ExpressionError, without growing the process past T_PEAK_KB; nothing
    else escapes. (A hang would be ended by pytest's timeout.)"""
    spec = ParamSpec(name="p", type=ParamType.STR, label="p", allowed_scopes=[Scope.CUSTOM],
                     default_scope=Scope.CUSTOM)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    event("expression " + _one_render(lambda: Expression(spec, text), T_MESSAGE))
    event("template node " + _one_render(lambda: TextTemplate(text), T_MESSAGE))
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown < T_PEAK_KB, f"the process grew {grown // 1024} MB for {text!r}"
