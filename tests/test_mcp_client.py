"""``mcp.server``: an agent uses the tools of a real MCP server (the demo
server in tests/servers/mcp_demo.py, written with the ``mcp`` SDK, started
as a subprocess), over stdio and over streamable HTTP. The LLM is the local
OpenAI-compatible test server; the tools it was offered are read from the
requests it received, and what the MCP server really got from its log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nodes.ai import Agent
from nodes.core.inject_debug import DebugNode, Inject
from nodes.mcp import McpServer
from nodes.mcp.entries import McpToolEntry, entries_value, merge_listing
from runtime.approval import DenyApprover, People
from runtime.flow import parse_flow, validate_flow
from runtime.registry import Registry
from runtime.spec import ParamValue
from runtime.tools import agent_tool_specs
from tests.servers.flows import agent_flow, fixed, run
from tests.servers.llm import LlmServer, openai_reply

DEMO = str(Path(__file__).parent / "servers" / "mcp_demo.py")
API_KEY = "sk-test-mcp-K3Y"
MCP_TOKEN = "mcp-t0ken-must-not-leak"
PINNED_REGION = "eu-west-PINNED"


def registry() -> Registry:
    return Registry([Inject, DebugNode, Agent, McpServer])


@pytest.fixture
def llm():
    with LlmServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _secrets(monkeypatch):
    monkeypatch.setenv("TEST_OPENAI_KEY", API_KEY)
    monkeypatch.setenv("TEST_MCP_TOKEN", MCP_TOKEN)


@pytest.fixture
def server_log(tmp_path) -> Path:
    return tmp_path / "mcp-demo.jsonl"


@pytest.fixture
def http_server(server_log):
    """The demo server over streamable HTTP, behind a bearer token."""
    proc = subprocess.Popen([sys.executable, DEMO, "http", "--token", MCP_TOKEN,
                             "--log", str(server_log)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("PORT "), line
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


def openai_agent(llm: LlmServer) -> dict:
    return {"provider": fixed("openai"), "model": fixed("gpt-test"),
            "base_url": fixed(llm.openai_url), "api_key_env": fixed("TEST_OPENAI_KEY"),
            "instructions": fixed("You look up orders.")}


def stdio_params(log: Path) -> dict[str, dict]:
    return {"transport": fixed("stdio"), "command": fixed(sys.executable),
            "args": fixed([DEMO, "stdio", "--log", str(log)])}


def http_params(url: str) -> dict[str, dict]:
    return {"transport": fixed("http"), "url": fixed(url),
            "token": fixed({"env": "TEST_MCP_TOKEN"})}


async def listed(params: dict[str, dict], log: Path | None = None) -> list[McpToolEntry]:
    """The server's tools, listed as the designer's List tools does. With the
    stdio server's ``log``: its process is gone after, and the log is
    emptied for the run's own starts and calls."""
    settings = {k: ParamValue.model_validate(v) for k, v in params.items()}
    tools = await McpServer.list_server_tools(settings, "demo")
    entries, summary = merge_listing([], tools)
    assert summary == "5 tools"
    if log is not None:
        [pid] = [e["pid"] for e in events(log) if e["event"] == "start"]
        assert not alive(pid)
        log.unlink()
    return entries


def choose(entries: list[McpToolEntry], **changes: dict) -> list[dict]:
    """The tools param value after the designer's choices: ``tool={field: value}``."""
    out = []
    for e in entries:
        out.append(McpToolEntry.model_validate({**e.model_dump(), **changes.get(e.name, {})}))
    return entries_value(out)


def mcp_node(params: dict[str, dict], tools: list[dict], node_id: str = "demo") -> dict:
    return {"id": node_id, "type": "mcp.server", "name": "demo",
            "params": {**params, "tools": fixed(tools)}}


def events(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def alive(pid: int) -> bool:
    """Whether a process runs (a zombie does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return not Path("/proc").is_dir()
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def offered_tools(request: dict) -> dict[str, dict]:
    return {t["function"]["name"]: t["function"] for t in request["body"].get("tools", [])}


def tool_answers(request: dict) -> list[str]:
    return [m["content"] for m in request["body"]["messages"] if m["role"] == "tool"]


# -- the agent uses the tools -----------------------------------------------------------

async def test_stdio_tools_with_a_pinned_argument_renamed_disabled_limited_and_approved(
        llm, server_log):
    params = stdio_params(server_log)
    tools = choose(
        await listed(params, server_log),
        lookup_order={"rename": "find_order", "pinned": {"region": PINNED_REGION},
                      "arg_descriptions": {"order_id": "The order number, like A-17"}},
        add={"max_calls_per_run": 2,
             "approval": {"mode": "rules", "rules": [{"arg": "a", "op": "gt", "value": 100}]}},
        slow={"enabled": False}, crash={"enabled": False})
    llm.replies = [
        openai_reply(tool_calls=[
            ("add", {"a": 2, "b": 3}),
            ("find_order", {"order_id": "A-17"}),
            # The LLM tries to set the pinned argument: refused, never sent.
            ("find_order", {"order_id": "A-18", "region": "us-east"}),
            ("add", {"a": 500, "b": 1}),  # needs approval: the person says no
            ("add", {"a": 1, "b": 1}),  # a third add: past its max_calls_per_run
            ("slow", {"seconds": 1}),  # disabled: not offered, unknown
        ]),
        openai_reply("Order A-17 has shipped."),
    ]
    flow = agent_flow(openai_agent(llm), [mcp_node(params, tools)], prompt="Where is A-17?")
    result, rec, _ = await run(flow, reg=registry(), people=People(DenyApprover()))
    assert result.status == "ok", rec.of("node.error")

    first, second = llm.requests
    offered = offered_tools(first)
    assert set(offered) == {"add", "find_order", "fail"}  # renamed, two disabled
    assert first["body"]["tools"] == agent_tool_specs(flow, registry())["agent"]
    find = offered["find_order"]
    assert set(find["parameters"]["properties"]) == {"order_id"}
    assert find["parameters"]["required"] == ["order_id"]
    assert find["parameters"]["properties"]["order_id"]["description"] == \
        "The order number, like A-17"
    # The pinned argument and its value are nowhere in what the LLM was offered.
    for request in llm.requests:
        offered_text = json.dumps(request["body"].get("tools", []))
        assert '"region"' not in offered_text and PINNED_REGION not in offered_text

    answers = tool_answers(second)
    assert json.loads(answers[0]) == {"result": "5"}
    assert json.loads(answers[1]) == {"result": f"order A-17 in region {PINNED_REGION}: shipped"}
    assert "refused" in answers[2] and "'region'" in answers[2]
    assert "rejected" in answers[3]
    assert "refused" in answers[4] and "max_calls_per_run" in answers[4]
    assert "unknown tool 'slow'" in answers[5]

    # What the server really received: the designer's region, once; the
    # refused, rejected and disabled calls never reached it.
    calls = [e for e in events(server_log) if e["event"] == "call"]
    assert [(c["tool"], c["args"]) for c in calls] == [
        ("add", {"a": 2, "b": 3}),
        ("lookup_order", {"order_id": "A-17", "region": PINNED_REGION})]
    # One connection for the run, and its process is gone when the run is.
    starts = [e["pid"] for e in events(server_log) if e["event"] == "start"]
    assert len(starts) == 1 and not alive(starts[0])
    statuses = {e.caller_id: e.status for e in rec.of("tool.result")}
    assert sorted(statuses.values()) == ["refused", "refused", "refused", "rejected",
                                         "success", "success"]


async def test_streamable_http_with_a_token_from_the_credentials(llm, http_server, server_log):
    params = http_params(http_server)
    tools = choose(await listed(params), lookup_order={"pinned": {"region": PINNED_REGION}})
    llm.replies = [
        openai_reply(tool_calls=[("lookup_order", {"order_id": "B-2"}),
                                 ("lookup_order", {"order_id": "B-3", "region": "us-east"})]),
        openai_reply("B-2 shipped."),
    ]
    flow = agent_flow(openai_agent(llm), [mcp_node(params, tools)])
    result, rec, _ = await run(flow, reg=registry())
    assert result.status == "ok", rec.of("node.error")
    offered = offered_tools(llm.requests[0])
    assert set(offered["lookup_order"]["parameters"]["properties"]) == {"order_id"}
    answers = tool_answers(llm.requests[1])
    assert PINNED_REGION in answers[0]
    assert "refused" in answers[1]
    calls = [e for e in events(server_log) if e["event"] == "call"]
    assert [c["args"] for c in calls] == [{"order_id": "B-2", "region": PINNED_REGION}]
    # The token reached the server (it answers nothing without it) and nothing else.
    assert MCP_TOKEN not in rec.dump() and MCP_TOKEN not in flow.dumps()
    assert MCP_TOKEN not in json.dumps([r["body"] for r in llm.requests])


async def test_a_wrong_token_fails_the_calls_with_the_reason_not_the_run(llm, http_server,
                                                                         monkeypatch):
    tools = choose(await listed(http_params(http_server)))
    monkeypatch.setenv("TEST_MCP_TOKEN", "not-the-token")
    llm.replies = [openai_reply(tool_calls=[("add", {"a": 1, "b": 2})]),
                   openai_reply("The tool is not available.")]
    flow = agent_flow(openai_agent(llm), [mcp_node(http_params(http_server), tools)])
    result, rec, _ = await run(flow, reg=registry())
    assert result.status == "ok"
    [answer] = tool_answers(llm.requests[1])
    assert "cannot connect to MCP server 'demo'" in answer and "HTTP 401" in answer


async def test_a_server_that_dies_fails_that_call_and_is_started_again(llm, server_log):
    params = stdio_params(server_log)
    tools = choose(await listed(params, server_log))
    llm.replies = [
        openai_reply(tool_calls=[("crash", {"reason": "out of memory"})]),
        openai_reply(tool_calls=[("add", {"a": 40, "b": 2})]),
        openai_reply("Done."),
    ]
    flow = agent_flow(openai_agent(llm), [mcp_node(params, tools)])
    result, rec, _ = await run(flow, reg=registry())
    assert result.status == "ok", rec.of("node.error")
    crashed = tool_answers(llm.requests[1])[0]
    assert "MCP server 'demo' exited while calling crash" in crashed
    assert "demo server crashing: out of memory" in crashed  # its last words, from stderr
    assert json.loads(tool_answers(llm.requests[2])[1]) == {"result": "42"}
    starts = [e["pid"] for e in events(server_log) if e["event"] == "start"]
    assert len(starts) == 2 and not any(alive(pid) for pid in starts)


async def test_a_call_past_its_timeout_fails_and_the_server_is_stopped(llm, server_log):
    params = {**stdio_params(server_log), "timeout_seconds": fixed(0.5)}
    tools = choose(await listed(params, server_log))
    llm.replies = [openai_reply(tool_calls=[("slow", {"seconds": 600})]),
                   openai_reply("Too slow.")]
    flow = agent_flow(openai_agent(llm), [mcp_node(params, tools)])
    result, rec, _ = await run(flow, reg=registry())
    assert result.status == "ok"
    [answer] = tool_answers(llm.requests[1])
    assert "did not answer slow within 0.5 s (timeout_seconds)" in answer
    starts = [e["pid"] for e in events(server_log) if e["event"] == "start"]
    assert len(starts) == 1 and not alive(starts[0])


async def test_a_plain_message_calls_a_tool_with_the_pins(server_log):
    params = stdio_params(server_log)
    tools = choose(await listed(params, server_log),
                   lookup_order={"pinned": {"region": PINNED_REGION}})
    node = mcp_node({**params, "tool_name": fixed("lookup_order")}, tools)
    flow = parse_flow({
        "format": "switchboard.flow/1", "name": "rpa",
        "nodes": [{"id": "ask", "type": "core.inject",
                   "params": {"payload": fixed({"order_id": "C-9", "region": "us-east"})}},
                  node,
                  {"id": "show", "type": "core.debug", "params": {"path": fixed("payload")}}],
        "wires": [{"from": ["ask", "out"], "to": ["demo", "in"]},
                  {"from": ["demo", "out"], "to": ["show", "in"]}]})
    result, rec, _ = await run(flow, reg=registry())
    assert result.status == "ok", rec.of("node.error")
    assert rec.debug_values() == [f"order C-9 in region {PINNED_REGION}: shipped"]


# -- the flow's checks ------------------------------------------------------------------

def _tool(name: str, **extra) -> dict:
    schema = {"type": "object", "properties": {"a": {"type": "integer"},
                                               "region": {"type": "string"}},
              "required": ["a", "region"]}
    return {"name": name, "description": "", "input_schema": schema, "enabled": True, **extra}


def test_two_servers_offering_one_name_to_an_agent_is_an_error_that_says_rename():
    flow = agent_flow({"provider": fixed("scripted")}, [
        mcp_node({}, [_tool("add")], "one"), mcp_node({}, [_tool("add"), _tool("sub")], "two")])
    problems = [p for p in validate_flow(flow, registry()) if p.severity == "error"]
    assert [str(p) for p in problems] == [
        "<flow>: node 'two', params.tools: agent 'agent' has two tools named 'add' (nodes "
        "'one' and 'two'); rename one in the node's tools list"]
    renamed = agent_flow({"provider": fixed("scripted")}, [
        mcp_node({}, [_tool("add")], "one"),
        mcp_node({}, [_tool("add", rename="add_two"), _tool("sub")], "two")])
    assert not [p for p in validate_flow(renamed, registry()) if p.severity == "error"]
    specs = agent_tool_specs(renamed, registry())["agent"]
    assert [f["function"]["name"] for f in specs] == ["add", "add_two", "sub"]


def test_bad_pins_and_names_are_named_in_the_tools_param():
    flow = agent_flow({"provider": fixed("scripted")}, [mcp_node({}, [
        _tool("add", pinned={"region": 7}),
        _tool("sub", pinned={"zone": "x"}),
        _tool("files.read"),
        {"name": "broken", "enabled": "perhaps"}])])
    problems = [str(p) for p in validate_flow(flow, registry()) if p.severity == "error"]
    assert problems == [
        "<flow>: node 'demo', params.tools: tool 'add': pinned: 'region': 7 does not fit: 7 is "
        "not of type 'string'",
        "<flow>: node 'demo', params.tools: tool 'sub': pinned: 'zone' is not an argument of "
        "this tool (it has: a, region)",
        "<flow>: node 'demo', params.tools: tool 'files.read': name: 'files.read' is not a "
        "name an LLM can call (1-64 letters, digits, '_' or '-'); rename it",
        "<flow>: node 'demo', params.tools: tool 'broken': enabled: Input should be a valid "
        "boolean, unable to interpret input",
    ]


def test_a_pinned_required_argument_leaves_the_schema_and_the_required_list():
    flow = agent_flow({"provider": fixed("scripted")}, [
        mcp_node({}, [_tool("add", pinned={"region": "eu"})])])
    [fn] = agent_tool_specs(flow, registry())["agent"]
    assert fn["function"]["parameters"] == {
        "type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
        "additionalProperties": False}
    assert fn["function"]["strict"] is True


def test_a_new_listing_keeps_the_designers_choices():
    old = [McpToolEntry.model_validate(_tool("add", rename="plus", pinned={"region": "eu"},
                                             enabled=False)),
           McpToolEntry.model_validate(_tool("gone"))]
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    new, summary = merge_listing(old, [
        {"name": "add", "description": "Adds", "input_schema": schema},
        {"name": "files.read", "description": "", "input_schema": {"type": "object"}}])
    assert summary == "2 tools, 1 new, 1 no longer offered and removed (gone)"
    add, read = new
    assert (add.rename, add.enabled, add.description) == ("plus", False, "Adds")
    assert add.pinned == {}  # the tool has no region any more: its pin went with it
    assert read.rename == "files_read"  # a name an LLM can call


# -- docs/mcp.md: "Using an MCP server's tools" runs as written ----------------

def test_the_client_example_in_docs_mcp_md_runs_as_shown(tmp_path):
    """The flow of the docs, saved and run as a reader would from the
    repository root: the tools the model is offered are the ones shown, and
    the run refuses the model's region and reaches the server with the
    designer's."""
    import re

    root = Path(__file__).resolve().parents[1]
    text = (root / "docs" / "mcp.md").read_text(encoding="utf-8")
    section = text.split("\n## Using an MCP server's tools\n", 1)[1]
    flow_json = re.search(r"```json\n(.*?)```", section, re.S).group(1)
    offered_shown = re.search(r"\$ \.venv/bin/switchboard tools mcp-orders\.flow\.json\n(.*?)```",
                              section, re.S).group(1)
    flow = tmp_path / "mcp-orders.flow.json"
    data = json.loads(flow_json)
    # The docs start the demo server with the README's venv; here, this Python.
    data["nodes"][3]["params"]["command"]["value"] = sys.executable
    flow.write_text(json.dumps(data), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(root), "SWITCHBOARD_DATA_DIR": str(tmp_path / "d")}
    cli = [sys.executable, "-m", "runtime.cli"]
    tools = subprocess.run([*cli, "tools", str(flow)], cwd=root, env=env, capture_output=True,
                           text=True, timeout=60)
    assert tools.returncode == 0, tools.stderr
    assert json.loads(tools.stdout) == json.loads(offered_shown)
    ran = subprocess.run([*cli, "run", str(flow)], cwd=root, env=env, capture_output=True,
                         text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    [line] = [json.loads(x) for x in ran.stdout.splitlines() if x.startswith("{")]
    refused, ok = line["value"]
    assert refused["status"] == "refused" and "unknown argument 'region'" in refused["error"]
    assert ok["status"] == "success"
    assert ok["data"] == {"result": "order A-17 in region eu-west: shipped"}
