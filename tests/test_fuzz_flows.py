"""Fuzzing flow files: mutations of the real example flows must end
`switchboard validate` with 0 or 2 and `switchboard run` with 0, 1, 2 or 124,
never with a traceback or an "internal error"; and `parse_flow` must raise
nothing but FlowError for whatever decoded JSON they hold.

The mutations: wrong types at every place of the file, missing and extra
keys, huge and negative numbers, NaN, deep nesting, odd and invalid unicode,
duplicate ids and wires, dangling wires, unknown types, ports and scopes, and
damage to the text itself (cut short, deep brackets, 5,000-digit numbers,
invalid UTF-8).

CI runs SWITCHBOARD_FUZZ_EXAMPLES (default 2,000) validate examples and half
as many run and parse_flow examples (about 25 s on 2 cores); raise it for a
longer hunt:

    SWITCHBOARD_FUZZ_EXAMPLES=20000 .venv/bin/pytest tests/test_fuzz_flows.py
"""

from __future__ import annotations

import copy
import io
import json
import os
import socket
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from runtime import cli
from runtime.flow import FlowError, Problem, parse_flow, validate_flow
from runtime.node import NodeConfigError
from runtime.registry import Registry

EXAMPLES_DIR = Path(__file__).resolve().parents[1] / "resources" / "examples"
EXAMPLES = {p.name: json.loads(p.read_text(encoding="utf-8"))
            for p in sorted(EXAMPLES_DIR.glob("*.flow.json"))}
N_EXAMPLES = int(os.environ.get("SWITCHBOARD_FUZZ_EXAMPLES", "2000"))
N_RUN_EXAMPLES = max(N_EXAMPLES // 2, 50)
# pytest's per-test limit (120 s) is for the default size; a raised
# SWITCHBOARD_FUZZ_EXAMPLES gets time in proportion.
pytestmark = pytest.mark.timeout(max(120, N_EXAMPLES // 40))
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
                               "duplicate", "wire", "id", "type", "scope", "provider"]))
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
