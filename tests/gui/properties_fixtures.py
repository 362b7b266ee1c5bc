"""A small fake registry for the properties-panel tests: an agent-like node
with a tools port and a mailer-like tool node whose params cover every
editor type and scope rule. Real nodes (ai.agent, mail.send) are tested
too, when they are installed."""

from __future__ import annotations

from runtime.flow import Flow, FlowNode, Wire
from runtime.node import AI, CUSTOM, MESSAGE, Node, Param, Tool, node
from runtime.registry import Registry
from runtime.spec import ParamValue, Scope


@node("test.agent", name="Test Agent", category="AI", icon="agent", color="#9b59b6",
      tools_port=True)
class FakeAgent(Node):
    """Asks a model, which may call the tools wired to its tools port."""

    model = Param(str, "Model name", default="gpt-4o-mini", allow=CUSTOM)
    prompt = Param(str, "What to ask", default="", scope=MESSAGE, path="payload",
                   allow=CUSTOM | MESSAGE)
    instructions = Param(str, "System instructions", default="", multiline=True, allow=CUSTOM)


@node("test.mailer", name="Test Mailer", category="Mail", icon="mail", color="#2e86c1",
      tool=Tool("send_email", "Send an email message"))
class FakeMailer(Node):
    """Sends a mail (in tests: nowhere)."""

    to = Param(str, "Recipient address", scope=AI, allow=AI | CUSTOM | MESSAGE)
    subject = Param(str, "Subject line", scope=AI, allow=AI | CUSTOM | MESSAGE)
    body = Param(str, "Message body", scope=AI, allow=AI | CUSTOM | MESSAGE, multiline=True)
    priority = Param(str, "How urgent", choices=["low", "normal", "high"], default="normal",
                     allow=AI | CUSTOM)
    smtp_host = Param(str, "SMTP server", default="localhost", allow=CUSTOM | MESSAGE)
    smtp_port = Param(int, "SMTP port", default=25, allow=CUSTOM | MESSAGE)
    timeout = Param(float, "Seconds to wait", default=10.0, allow=CUSTOM)
    starttls = Param(bool, "Use STARTTLS", default=False, allow=CUSTOM)
    headers = Param("json", "Extra headers", default={}, allow=CUSTOM)
    password = Param("secret", "SMTP password")


@node("test.rules", name="Test Rules", category="Core", icon="switch", color="#e2a03f")
class FakeRules(Node):
    """A node with a JSON param and a node-level check."""

    rules = Param("json", "Rules", default=[], allow=CUSTOM)

    @classmethod
    def check(cls, params):
        rules = params.get("rules")
        if rules is not None and not isinstance(rules.value, list):
            return [("rules", "rules must be a list")]
        return []


FAKE_CLASSES = [FakeAgent, FakeMailer, FakeRules]


def fake_registry() -> Registry:
    return Registry(FAKE_CLASSES)


def fake_flow() -> Flow:
    """agent --tools--> mail; rules on its own."""
    return Flow(
        name="Fake",
        nodes=[
            FlowNode(id="agent", type="test.agent", position=(0, 0)),
            FlowNode(id="mail", type="test.mailer", position=(200, 100),
                     params={"to": ParamValue(scope=Scope.AI),
                             "subject": ParamValue(scope=Scope.AI,
                                                   description="A short subject line"),
                             "body": ParamValue(scope=Scope.MESSAGE, path="payload.body"),
                             "smtp_host": ParamValue(scope=Scope.CUSTOM, value="127.0.0.1")}),
            FlowNode(id="rules", type="test.rules", position=(0, 200)),
        ],
        wires=[Wire.model_validate({"from": ["agent", "tools"], "to": ["mail", "in"]})],
    )


def real_email_flow(registry: Registry) -> Flow | None:
    """The email-assistant shape of DESIGN.md with the real nodes, if they
    are installed: inject -> agent -> debug, agent.tools -> mail.send."""
    if "ai.agent" not in registry or "mail.send" not in registry:
        return None
    return Flow.model_validate({
        "name": "Email assistant",
        "nodes": [
            {"id": "start", "type": "core.inject", "name": "Ask", "position": [80, 120],
             "params": {"payload": {"scope": "custom",
                                    "value": "Tell john@example.com his order shipped"}}},
            {"id": "agent", "type": "ai.agent", "name": "Mail assistant",
             "position": [320, 120],
             "params": {"provider": {"scope": "custom", "value": "openai"},
                        "model": {"scope": "custom", "value": "gpt-4o-mini"},
                        "base_url": {"scope": "custom", "value": "http://127.0.0.1:8000/v1"},
                        "instructions": {"scope": "custom",
                                         "value": "You send mail for the user. Keep it short."}}},
            {"id": "mail", "type": "mail.send", "name": "Send Mail", "position": [560, 260],
             "params": {"to": {"scope": "ai"},
                        "subject": {"scope": "ai", "description": "A short subject line"},
                        "body": {"scope": "message", "path": "payload.body"},
                        "smtp_host": {"scope": "custom", "value": "127.0.0.1"},
                        "smtp_port": {"scope": "custom", "value": 2525}}},
            {"id": "show", "type": "core.debug", "position": [560, 120]},
        ],
        "wires": [
            {"from": ["start", "out"], "to": ["agent", "in"]},
            {"from": ["agent", "out"], "to": ["show", "in"]},
            {"from": ["agent", "tools"], "to": ["mail", "in"]},
        ],
    })


def save_screenshots(out_dir: str, dark: bool = False) -> list[str]:
    """Render the panel docked beside an empty area, as in the designer,
    with realistic nodes selected: ``python -m tests.gui.properties_fixtures
    docs/img [--dark]`` (offscreen works)."""
    from pathlib import Path

    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QApplication, QDockWidget, QMainWindow, QWidget

    from designer.look import theme
    from designer.model.document import FlowDocument
    from designer.panels.properties import PropertiesPanel

    app = QApplication.instance() or QApplication([])
    theme.apply(app, theme.DARK if dark else theme.LIGHT)
    registry = Registry.default()
    flow = real_email_flow(registry)
    if flow is None:
        registry, flow = fake_registry(), fake_flow()
    flow.nodes.append(FlowNode.model_validate({
        "id": "route", "type": "core.switch", "name": "Route by priority", "position": [80, 300],
        "params": {"path": {"scope": "custom", "value": "payload.priority"},
                   "rules": {"scope": "custom", "value": [
                       {"op": "eq", "value": "high"}, {"op": "regex", "value": "^urg"},
                       {"op": "else"}]}}}))
    doc = FlowDocument(flow, registry)
    win = QMainWindow()
    win.resize(1000, 860)
    win.setCentralWidget(QWidget())
    dock = QDockWidget("Properties", win)
    panel = PropertiesPanel(doc)
    dock.setWidget(panel)
    win.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, dock)
    win.resizeDocks([dock], [380], Qt.Orientation.Horizontal)
    win.show()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    saved = []
    suffix = "-dark" if dark else ""
    for node_id, name, scroll_to in (("mail", "mail", None), ("mail", "mail-tool", "smtp_host"),
                                     ("agent", "agent", None), ("route", "switch", None),
                                     (None, "empty", None)):
        panel.set_node(node_id)
        doc.revalidate()
        app.processEvents()
        bar = panel.scroll.verticalScrollBar()
        bar.setValue(panel.form.rows[scroll_to].y() - 8 if scroll_to and panel.form else 0)
        app.processEvents()
        path = out / f"properties-{name}{suffix}.png"
        dock.grab().save(str(path))
        saved.append(str(path))
    win.close()
    if flow.node("mail") is not None and registry is Registry.default():
        saved.append(_window_shot(app, flow, out / f"properties-window{suffix}.png"))
    return saved


def _window_shot(app, flow: Flow, path) -> str:
    """The real main window with Send Mail selected."""
    import tempfile
    from pathlib import Path

    from designer.window.main_window import MainWindow

    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / "email-assistant.flow.json"
        file.write_text(flow.dumps(), encoding="utf-8")
        w = MainWindow(restore_layout=False)
        w.open_path(str(file), ask=False)
        w.resize(1440, 900)
        w.show()
        app.processEvents()
        w.select_node("mail")
        w.view.fit_all()
        w.document.revalidate()
        app.processEvents()
        w.grab().save(str(path))
        w.autosave.stop()
        w.document.undo_stack.setClean()
        w.close()
    return str(path)


if __name__ == "__main__":
    import os
    import sys

    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    for p in save_screenshots(args[0] if args else "docs/img", dark="--dark" in sys.argv):
        print(p)
