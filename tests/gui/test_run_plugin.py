"""A flow whose nodes run in a plugin process, run from the designer (the
plugin's stream on qasync's loop inside Qt's), and stopped from it."""

from __future__ import annotations

from runtime.flow import parse_flow
from runtime.plugin import host
from tests.gui.inspector_fixtures import *  # noqa: F403 - the fixtures


def fixed(v):
    return {"scope": "custom", "value": v}


def test_a_flow_with_a_package_out_of_process_runs_and_stops_in_the_designer(fake_window,
                                                                            qtbot):
    flow = parse_flow({
        "format": "switchboard.flow/1", "name": "Out of process",
        "settings": {"out_of_process": ["core"]},
        "nodes": [
            {"id": "go", "type": "core.inject", "params": {"payload": fixed({"n": 1})}},
            {"id": "set", "type": "core.change", "params": {"rules": fixed([
                {"action": "set", "path": "payload.seen", "value": True}])}},
            {"id": "wait", "type": "core.delay", "params": {"seconds": fixed(3600)}},
            {"id": "show", "type": "core.debug", "params": {"path": fixed("payload")}},
        ],
        "wires": [{"from": ["go", "out"], "to": ["set", "in"]},
                  {"from": ["set", "out"], "to": ["show", "in"]},
                  {"from": ["set", "out"], "to": ["wait", "in"]}]})
    window = fake_window(flow)
    session = window.session
    window.run_action.trigger()
    debug = session.inspector.debug
    qtbot.waitUntil(lambda: debug.list.topLevelItemCount() == 1, timeout=30000)
    assert [e.value for e in debug.entries()] == [{"n": 1, "seen": True}]
    engine = session.controller.engine
    proxy = engine.nodes["wait"].node
    assert isinstance(proxy, host.RemoteNode) and proxy.process.alive
    # The delay waits in the plugin; Stop ends the run and its call.
    assert session.controller.is_running
    window.stop_action.trigger()
    qtbot.waitUntil(lambda: not session.controller.is_running, timeout=30000)
    assert "Stopped" in session.status.text() or "stopped" in session.status.text()
    assert not proxy.process.instances  # every instance closed in the plugin
