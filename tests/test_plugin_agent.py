"""The issue's finish line: an agent calls a Node.js tool (the bundled
textkit plugin) and an out-of-process Python tool in one turn, through the
real openai SDK, and gets both answers; the Node.js nodes also work as an
ordinary RPA chain. Real processes throughout."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from nodes.ai import Agent
from nodes.core.inject_debug import DebugNode, Inject
from runtime.plugin import host
from runtime.plugin.host import Plugin, PluginManifest, PluginProcess
from runtime.registry import Registry
from tests.servers.flows import AI_SCOPE, agent_flow, fixed, run
from tests.servers.llm import LlmServer, openai_reply

ROOT = Path(__file__).resolve().parents[1]
TEXTKIT = ROOT / "nodes" / "textkit-js"
PKGS = Path(__file__).resolve().parent / "plugin_pkgs"

if shutil.which("node") is None or not (TEXTKIT / "node_modules").is_dir():
    pytest.skip("the Node.js plugin needs `node` and `npm ci` in nodes/textkit-js",
                allow_module_level=True)


@pytest.fixture
def plugins(data_dir):
    """textkit as Switchboard finds it (bundled, next to the node packages)
    and the Python test package, each in its own process."""
    textkit = next(p for p in host.find_plugins()[0] if p.name == "textkit")
    js = PluginProcess(textkit)
    py = PluginProcess(Plugin(PluginManifest(
        name="ptest", command=[sys.executable, "-m", "runtime.plugin", "serve",
                               "sbtest_plugin", "--name", "ptest"],
        env={"PYTHONPATH": f"{PKGS}{os.pathsep}{ROOT}"}), None, "test"))
    classes = []
    for process in (js, py):
        _version, specs = process.describe()
        classes += [host.remote_class(s, process) for s in specs]
    yield Registry([Inject, DebugNode, Agent, *classes]), js, py
    js.stop()
    py.stop()


def test_switchboard_nodes_lists_the_nodejs_packages_nodes(data_dir):
    import subprocess

    out = subprocess.run([sys.executable, "-m", "runtime.cli", "nodes"], capture_output=True,
                         text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    lines = {ln.split()[0]: ln for ln in out.stdout.splitlines() if ln.strip()}
    for type_id in ("text.slugify", "text.word_count", "text.regex_extract"):
        assert "[plugin: textkit]" in lines[type_id], out.stdout


async def test_an_agent_calls_a_nodejs_tool_and_a_python_plugin_tool(plugins, monkeypatch):
    reg, js, py = plugins
    monkeypatch.setenv("TEST_OPENAI_KEY", "sk-test-key-of-the-plugin-test")
    with LlmServer() as llm:
        llm.replies = [
            openai_reply(tool_calls=[("slugify", {"text": "Crème Brûlée, 2nd edition!"}),
                                     ("upper", {"text": "from python"})]),
            openai_reply("Slug and shout done."),
        ]
        agent = {"provider": fixed("openai"), "model": fixed("gpt-test"),
                 "base_url": fixed(llm.openai_url), "api_key_env": fixed("TEST_OPENAI_KEY"),
                 "instructions": fixed("Use the tools.")}
        flow = agent_flow(agent, [
            {"id": "slug", "type": "text.slugify", "params": {"text": AI_SCOPE}},
            {"id": "up", "type": "ptest.upper", "params": {"text": AI_SCOPE}},
        ])
        result, rec, _ = await run(flow, reg=reg)
        assert result.status == "ok", rec.of("node.error")
        first, second = (r["body"] for r in llm.requests)
    names = {t["function"]["name"] for t in first["tools"]}
    assert names == {"slugify", "upper"}
    answers = [json.loads(m["content"]) for m in second["messages"] if m["role"] == "tool"]
    assert answers == [{"slug": "creme-brulee-2nd-edition"}, {"result": "FROM PYTHON"}]
    assert js.pid != py.pid and js.alive and py.alive
    [final] = rec.debug_values()
    assert final["payload"] == "Slug and shout done."


async def test_nodejs_nodes_in_an_rpa_chain(plugins):
    reg, js, _py = plugins
    from runtime.flow import parse_flow

    flow = parse_flow({"format": "switchboard.flow/1", "name": "t", "nodes": [
        {"id": "ask", "type": "core.inject", "params": {"payload": fixed("Hello big World")}},
        {"id": "slug", "type": "text.slugify", "params": {"separator": fixed("-")}},
        {"id": "count", "type": "text.word_count", "params": {
            "text": {"scope": "message", "path": "payload"}}},
        {"id": "show", "type": "core.debug", "params": {"path": fixed("msg")}},
    ], "wires": [{"from": ["ask", "out"], "to": ["slug", "in"]},
                 {"from": ["slug", "out"], "to": ["count", "in"]},
                 {"from": ["count", "out"], "to": ["show", "in"]}]})
    result, rec, _ = await run(flow, reg=reg)
    assert result.status == "ok", rec.of("node.error")
    [msg] = rec.debug_values()
    # slugify wrote "hello-big-world" over the payload; word_count read it
    # and wrote its counts: words (its main output) to payload.
    assert (msg["payload"], msg["characters"], msg["lines"]) == (3, 15, 1)
