"""Flows with long values and a main window at 1440x900 over them, for the
tests that open every card, dialog and panel with a 2,000-character body,
a 300-character subject and 50 recipients (test_window_size.py,
test_text_fits.py).

Import with ``from tests.gui.long_values import *  # noqa: F403``: the
``open_window`` fixture (and the ``history`` and ``qt_loop`` it needs) and
the flow builders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PySide6.QtWidgets import QApplication

from designer.look import theme
from designer.model.document import FlowDocument
from tests.gui.inspector_fixtures import EMAIL_ASSISTANT, history, qt_loop  # noqa: F401
from tests.gui.layout_checks import SCREEN_H, SCREEN_W, settle

__all__ = ["ANSWER", "BODY", "LONG_NAME", "RECIPIENTS", "SUBJECT", "ask_flow", "email_flow", "history",
           "mcp_flow", "open_window", "qt_loop"]

RECIPIENTS = ", ".join(f"customer{i:02d}.with.a.long.name@example-shop.com" for i in range(50))
SUBJECT = ("Your order A-1001 has shipped and is on its way to you " * 6)[:300]
BODY = ("Hello John, your order A-1001 shipped today and will arrive within three working "
        "days. " * 30)[:2000]
LONG_NAME = ("Customer support assistant for the northern region (escalations) " * 2).strip()


@pytest.fixture
def open_window(qtbot, qt_loop, history, monkeypatch, data_dir):  # noqa: F811
    """The main window at 1440x900 over a flow file, the run history in a
    folder with a long path (the History tab shows it)."""
    from PySide6.QtWidgets import QMessageBox

    from designer.window.main_window import MainWindow

    monkeypatch.setattr(QMessageBox, "question",
                        staticmethod(lambda *a, **k: QMessageBox.StandardButton.Discard))
    monkeypatch.setattr("designer.running.run_integration.open_history", lambda: history)
    windows = []

    def make(path: Path) -> MainWindow:
        # The designer's own look (Fusion, the theme's style sheet with its
        # item padding), as the app applies it at start.
        theme.apply(QApplication.instance(), theme.LIGHT)
        w = MainWindow(FlowDocument.open(path), restore_layout=False,
                       autosave_interval_ms=3_600_000)
        w.resize(SCREEN_W, SCREEN_H)
        w.show()
        qtbot.waitExposed(w)
        settle()
        assert (w.width(), w.height()) == (SCREEN_W, SCREEN_H)
        windows.append(w)
        return w

    yield make
    for w in windows:
        if w.run_session.controller.is_running:
            w.run_session.controller.stop()
            qtbot.waitUntil(lambda w=w: not w.run_session.controller.is_running, timeout=10000)
        w.document.undo_stack.setClean()
        w.close()
        w.deleteLater()
    QApplication.processEvents()


ANSWER = ("Sent.\n\n" + "I emailed the 50 customers that order A-1001 shipped today; the mail "
          "says it arrives within three working days and how to track it. " * 8
          + "Tracking: https://track.example-shop.com/orders/A-1001/shipments/"
          "7f3a9c2e-4b1d-4e8a-9c55-2f1e0d6b8a77/status?lang=en&notify=email")


def email_flow(tmp_path: Path, *, approval: dict | None = None, answer: str = ANSWER) -> Path:
    """The email assistant whose agent sends one long mail to 50 people and
    answers at length."""
    data = json.loads(EMAIL_ASSISTANT.read_text())
    nodes = {n["id"]: n for n in data["nodes"]}
    nodes["agent"]["name"] = LONG_NAME
    script = nodes["agent"]["params"]["script"]["value"]
    script[0]["tool_calls"][0]["arguments"] = {"to": RECIPIENTS, "subject": SUBJECT,
                                               "body": BODY}
    script[1]["text"] = answer
    nodes["mail"]["params"]["outbox_dir"] = {"scope": "custom", "value": str(tmp_path / "out")}
    nodes["mail"]["tool"] = {"approval": approval or {"mode": "never"}}
    path = tmp_path / "long.flow.json"
    path.write_text(json.dumps(data))
    return path




# -- flows ------------------------------------------------------------------------------------
def ask_flow(tmp_path: Path, arguments: dict) -> Path:
    data = json.loads(EMAIL_ASSISTANT.read_text())
    nodes = {n["id"]: n for n in data["nodes"]}
    nodes["agent"]["params"]["script"]["value"][0]["tool_calls"] = [
        {"name": "ask_human", "arguments": arguments}]
    nodes["mail"] = {"id": "mail", "type": "ai.ask_human", "name": "Ask a person",
                     "position": [560, 300],
                     "params": {"question": {"scope": "ai"}, "choices": {"scope": "ai"}}}
    data["nodes"] = list(nodes.values())
    path = tmp_path / "ask.flow.json"
    path.write_text(json.dumps(data))
    return path


def mcp_flow(tmp_path: Path) -> Path:
    data = json.loads(EMAIL_ASSISTANT.read_text())
    # Long descriptions and many tools; names as MCP servers give them (one
    # unbroken word of 100 characters would still need the whole dock).
    tools = [{"name": f"search_customer_orders_{i}", "description": BODY[:1500],
              "input_schema": {"type": "object", "properties": {
                  name: {"type": "string", "description": SUBJECT}
                  for name in ("customer_email", "order_number", "since_date", "status")}}}
             for i in range(12)]
    data["nodes"].append({"id": "mcp", "type": "mcp.server", "name": LONG_NAME,
                          "position": [320, 320], "params": {
                              "command": {"scope": "custom", "value": "/bin/false"},
                              "tools": {"scope": "custom", "value": tools}}})
    data["wires"].append({"from": ["agent", "tools"], "to": ["mcp", "in"]})
    path = tmp_path / "mcp.flow.json"
    path.write_text(json.dumps(data))
    return path
