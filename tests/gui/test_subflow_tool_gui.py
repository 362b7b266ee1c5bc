"""A subflow as an agent's tool in the inspector (#25 item 5): the Tools
tab and the Agent tab show the nodes inside that ran for a call, and the
calls an agent inside made, nested under the call. Real runs (scripted
agents, core nodes), real widgets (offscreen)."""

from __future__ import annotations

import asyncio

from designer.panels.inspector.agent_tab import AgentTree
from designer.panels.inspector.context import InspectorContext
from designer.panels.inspector.tools_tab import ToolsTab
from runtime.engine import Engine
from runtime.events import EventBus, parse_event
from runtime.flow import Flow
from runtime.registry import Registry
from tests.servers.flows import EchoTool
from tests.subflow_fixtures import P, W, _own_library  # noqa: F401 - the autouse fixture

REG = Registry([*Registry.default(), EchoTool])


def calls(*items: tuple[str, dict]) -> dict:
    return {"tool_calls": [{"name": n, "arguments": a} for n, a in items]}


def helper_flow(outer: list[dict] | None = None) -> Flow:
    """An agent whose tool is a subflow: look the SKU up (a Change), then ask
    a helper agent inside, which calls its own tool (echo)."""
    defn = {
        "name": "check_stock", "label": "Check stock",
        "description": "Check whether a product is in stock",
        "params": [{"name": "sku", "type": "str", "ai_allowed": True}],
        "nodes": [
            {"id": "i", "type": "subflow.in", "position": [40, 80]},
            {"id": "look", "type": "core.change", "name": "Look up stock", "position": [220, 80],
             "params": {"rules": P([{"action": "set", "path": "stock", "value": 12}])}},
            {"id": "bot", "type": "ai.agent", "name": "Stock clerk", "position": [420, 80],
             "params": {"provider": P("scripted"), "prompt": {"scope": "message", "path": "sku"},
                        "script": P([calls(("echo", {"text": "12 left"})),
                                     {"text": "12 in stock"}])}},
            {"id": "echo", "type": "test.echo", "name": "Echo", "position": [420, 240],
             "params": {"text": {"scope": "ai"}}},
            {"id": "o", "type": "subflow.out", "position": [620, 80]}],
        "wires": [W("i", "look"), W("look", "bot"), W("bot", "o"), W("bot:tools", "echo")]}
    script = outer or [calls(("check_stock", {"sku": "A-1"})), {"text": "A-1: 12 in stock."}]
    return Flow.model_validate({
        "format": "switchboard.flow/1", "name": "Stock", "subflows": [defn],
        "nodes": [
            {"id": "ask", "type": "core.inject", "position": [40, 80],
             "params": {"payload": P("Is A-1 in stock?")}},
            {"id": "agent", "type": "ai.agent", "name": "Assistant", "position": [240, 80],
             "params": {"provider": P("scripted"), "script": P(script)}},
            {"id": "show", "type": "core.debug", "position": [460, 80]},
            {"id": "stock", "type": "subflow:check_stock", "position": [240, 240],
             "params": {"sku": {"scope": "ai"}}}],
        "wires": [W("ask", "agent"), W("agent", "show"), W("agent:tools", "stock")]})


def run_events(flow: Flow) -> list:
    bus = EventBus()
    events: list = []
    bus.subscribe(events.append)
    engine = Engine(flow, REG, bus)
    result = asyncio.run(engine.run(timeout=30))
    assert result.status == "ok", [e for e in events if e.type == "node.error"]
    # As the inspector gets them from history: written and read back.
    return [parse_event(e.model_dump_json()) for e in events]


def context(flow: Flow, events: list) -> InspectorContext:
    ctx = InspectorContext(REG)
    ctx.flow = flow
    ctx.model.apply(events)
    return ctx


def test_the_tools_tab_nests_the_nodes_inside_and_their_calls_under_the_subflow_call(qtbot):
    flow = helper_flow()
    ctx = context(flow, run_events(flow))
    tab = ToolsTab(ctx)
    qtbot.addWidget(tab)
    tab.refresh()
    rows = [(depth, texts[:4]) for depth, texts in tab.rows()]
    assert rows[0][0] == 0 and rows[0][1][0] == "Assistant"
    depth, (tool, args, result, _ms) = rows[1]
    assert (depth, tool, args) == (1, "check_stock", '{"sku": "A-1"}')
    assert result == '✓ {"result": "12 in stock"}'
    nested = [(d, t[0], t[1], t[2]) for d, t in rows[2:]]
    assert nested == [
        (2, "↳ Look up stock", "stock.look", "✓ ran"),
        (2, "↳ Stock clerk", "stock.bot", "✓ ran"),
        (2, "echo", '{"text": "12 left"}', '✓ {"echoed": "12 LEFT"}'),
    ]
    # The rows open, and a node's row says what it is.
    call_item = tab._call_items[ctx.model.tool_calls[next(iter(ctx.model.tool_calls))].caller_id]
    assert call_item.isExpanded()
    step_row = call_item.child(0)
    tab.tree.setCurrentItem(step_row)
    assert tab.detail_title.text() == "Look up stock  ·  ✓ ran"
    picked: list[str] = []
    tab.node_selected.connect(picked.append)
    tab._clicked(step_row)
    assert picked == ["stock.look"]


def test_the_agent_tab_nests_the_nodes_inside_and_the_inner_agents_turns(qtbot):
    flow = helper_flow()
    ctx = context(flow, run_events(flow))
    tree = AgentTree(ctx)
    qtbot.addWidget(tree)
    [conv] = [c for c in ctx.model.conversations if c.agent == "agent"]
    tree.show_conversation(conv)
    rows = [(depth, texts[0], texts[3]) for depth, texts in tree.rows()]
    assert rows == [
        (0, "Turn 1", ""),
        (1, "→ check_stock", "✓ success"),
        (2, "↳ Look up stock", "✓ ran"),
        (2, "↳ Stock clerk", "✓ ran"),
        (2, "stock.bot · turn 1", ""),
        (3, "→ echo", "✓ success"),
        (2, "stock.bot · turn 2", ""),
        (0, "Turn 2", ""),
    ]


def test_a_failed_node_inside_shows_red_under_its_call(qtbot):
    flow = helper_flow([calls(("check_stock", {"sku": "A-1"})), {"text": "sorry"}])
    # The look-up is a template that fails on a payload without a total.
    data = flow.to_json()
    data["subflows"][0]["nodes"][1] = {
        "id": "look", "type": "core.template", "name": "Look up stock", "position": [220, 80],
        "params": {"template": P("{{ payload.total * 1.2 }}")}}
    flow = Flow.model_validate(data)
    events = run_events(flow)
    ctx = context(flow, events)
    tab = ToolsTab(ctx)
    qtbot.addWidget(tab)
    tab.refresh()
    rows = tab.rows()
    call = next(t for _d, t in rows if t[0] == "check_stock")
    assert call[2].startswith("✕ error: node 'stock.look' (Look up stock) inside subflow "
                              "'Check stock' failed: ")
    [step] = [t for d, t in rows if d == 2]
    assert step[0] == "↳ Look up stock" and step[2].startswith("✕ failed: ")
