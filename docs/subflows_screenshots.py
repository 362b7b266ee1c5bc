"""Screenshots at 1440x900 for docs/subflows.md, each of the real window:

- instances (docs/img/subflows-instances.png, "In the designer:
  instances"): an order desk flow with two instances of the library
  subflow check_stock, one in the order's path and one wired to an agent's
  tools port (SKU and Qty for the AI, Warehouse fixed), while the library
  holds a newer version: the palette's Subflows category, the stacked
  cards with their ports and "available" badges, Properties with Update;
- editing (subflows-editing.png, "Editing subflows"): the definition of
  resources/examples/order-subflows.flow.json's subflow "shipping" in its
  own tab, the breadcrumb, a node inside reading a subflow param;
- run (subflows-run.png, "Running and inspecting"): a finished run of that
  example: the instances' badges and wire counts, the Timeline grouped by
  instance;
- props (subflows-props.png, "Declaring params"): Subflow Properties…
  on that subflow, a secret param being added;
- tool (subflows-tool.png, "A subflow as an agent's tool"): the Tools tab
  with a subflow call, the nodes that ran inside it and a nested call.

Run from the repository root: .venv/bin/python docs/subflows_screenshots.py
[FOLDER] [SHOT...]: every shot by default, or only those named (`... tool
run`), into FOLDER (docs/img by default), as the other *_screenshots.py
scripts take their folder."""
# ruff: noqa: E402 - a linear script, read top to bottom
import os
import sys
import tempfile
from pathlib import Path

os.environ["QT_QPA_PLATFORM"] = "offscreen"
os.environ["SWITCHBOARD_DATA_DIR"] = tempfile.mkdtemp()
os.environ["SWITCHBOARD_CREDENTIALS"] = "file"  # never the developer's keyring
os.environ.pop("SWITCHBOARD_SUBFLOWS", None)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from PySide6.QtCore import QCoreApplication
from PySide6.QtWidgets import QApplication

QCoreApplication.setOrganizationName("switchboard-shots")
app = QApplication([])
from designer.control.run_controller import qt_event_loop
from designer.model.commands import current_pin
from designer.model.document import FlowDocument
from designer.panels.inspector.inspector import TAB_NAMES
from designer.window.main_window import MainWindow
from runtime.flow import parse_flow
from runtime.flow.model import SubflowDef
from runtime.flow.subflows import save_to_library

qt_event_loop()
EXAMPLE = Path("resources/examples/order-subflows.flow.json")
folder = Path(tempfile.mkdtemp()) / "order-desk"  # the flows made here, and their library
folder.mkdir()
OUT = Path("docs/img")


def settle(n: int = 30) -> None:
    for _ in range(n):
        app.processEvents()


def window(path: Path) -> MainWindow:
    w = MainWindow(FlowDocument.open(path), restore_layout=False)
    w.set_theme("light")
    w.resize(1440, 900)
    w.show()
    settle()
    w.view.fit_all()
    return w


def grab(w: MainWindow, name: str) -> None:
    """Save the window as OUT/NAME.png, then close it (unmodified: no
    question asked)."""
    settle()
    w.grab().save(str(OUT / f"{name}.png"))
    print(name)
    w.document.undo_stack.setClean()
    for tab in getattr(w.tabs, "all_tabs", list)():
        tab.doc.undo_stack.setClean()
    w.close()
    settle()


def fixed(value):
    return {"scope": "custom", "value": value}


def check_stock(version: str, params: list[dict]) -> SubflowDef:
    """Ask the warehouse's stock service about a SKU; out by in_stock or missing."""
    return SubflowDef.model_validate({
        "name": "check_stock", "label": "Check stock", "version": version,
        "description": "Ask the warehouse's stock service whether a SKU is in stock",
        "params": params,
        "nodes": [
            {"id": "order", "type": "subflow.in", "position": [0, 80],
             "params": {"name": fixed("order")}},
            {"id": "ask", "type": "http.request", "name": "Ask stock service",
             "position": [220, 80],
             "params": {"url": {"scope": "expression",
                                "value": "http://127.0.0.1:8080/stock/{{ subflow.sku }}"}}},
            {"id": "enough", "type": "core.switch", "name": "Enough?", "position": [440, 80],
             "params": {"path": fixed("payload.available"),
                        "rules": fixed([{"op": "gte", "value": 1}, {"op": "else"}])}},
            {"id": "in_stock", "type": "subflow.out", "position": [660, 20],
             "params": {"name": fixed("in_stock")}},
            {"id": "missing", "type": "subflow.out", "position": [660, 140],
             "params": {"name": fixed("missing")}}],
        "wires": [{"from": ["order", "out"], "to": ["ask", "in"]},
                  {"from": ["ask", "out"], "to": ["enough", "in"]},
                  {"from": ["enough", "out0"], "to": ["in_stock", "in"]},
                  {"from": ["enough", "out1"], "to": ["missing", "in"]}]})


PARAMS = [
    {"name": "sku", "label": "SKU", "type": "str", "ai_allowed": True,
     "description": "The article number, e.g. A-1001"},
    {"name": "qty", "label": "Quantity", "type": "int", "default": 1, "ai_allowed": True,
     "description": "How many the order needs"},
    {"name": "warehouse", "label": "Warehouse", "type": "enum", "default": "main",
     "choices": ["main", "north", "south"]}]


def shot_instances() -> None:
    """Two instances of the library subflow check_stock (1.0.0 pinned, 1.1.0
    in the library), one an agent's tool; Properties of the tool one."""
    library = folder / "subflows"
    v1 = check_stock("1.0.0", PARAMS)
    save_to_library(v1, library)
    pin = current_pin(v1).model_dump()
    flow = parse_flow({
        "format": "switchboard.flow/1", "name": "Order desk",
        "nodes": [
            {"id": "orders", "type": "core.inject", "name": "New order", "position": [40, 60],
             "params": {"payload": fixed({"sku": "A-1001", "qty": 2})}},
            {"id": "stock", "type": "subflow:check_stock", "name": "Check stock",
             "position": [280, 60], "subflow": pin,
             "params": {"sku": {"scope": "message", "path": "payload.sku"},
                        "qty": {"scope": "message", "path": "payload.qty"}}},
            {"id": "ship", "type": "core.debug", "name": "Ship it", "position": [540, 20]},
            {"id": "backorder", "type": "core.debug", "name": "Back-order", "position": [540, 110]},
            {"id": "question", "type": "core.inject", "name": "Customer asks", "position": [40, 300],
             "params": {"payload": fixed("Can I get 3 of A-2002 by Friday?")}},
            {"id": "agent", "type": "ai.agent", "name": "Assistant", "position": [280, 300],
             "params": {"provider": fixed("scripted"),
                        "instructions": fixed("Answer stock questions with check_stock.")}},
            {"id": "answer", "type": "core.debug", "name": "Answer", "position": [540, 300]},
            {"id": "stock_tool", "type": "subflow:check_stock", "name": "Stock lookup",
             "position": [540, 420], "subflow": pin,
             "params": {"sku": {"scope": "ai"}, "qty": {"scope": "ai"},
                        "warehouse": fixed("north")}}],
        "wires": [
            {"from": ["orders", "out"], "to": ["stock", "order"]},
            {"from": ["stock", "in_stock"], "to": ["ship", "in"]},
            {"from": ["stock", "missing"], "to": ["backorder", "in"]},
            {"from": ["question", "out"], "to": ["agent", "in"]},
            {"from": ["agent", "out"], "to": ["answer", "in"]},
            {"from": ["agent", "tools"], "to": ["stock_tool", "order"]}]})
    path = folder / "order-desk.flow.json"
    path.write_text(flow.dumps())
    # A colleague saved 1.1.0 since: it may reserve what it finds.
    save_to_library(check_stock("1.1.0", PARAMS + [
        {"name": "reserve", "label": "Reserve", "type": "bool", "default": False}]), library)

    w = window(path)
    w.select_node("stock_tool")
    settle()
    problems = [str(p) for p in w.document.revalidate() if p.severity == "error"]
    if problems:
        print("the flow has problems:", *problems, sep="\n  ")
    grab(w, "subflows-instances")


def shot_editing() -> None:
    """The example's subflow "shipping" open in its own tab (opened as a
    user does, by activating an instance), the breadcrumb under the tabs,
    and a node inside selected, so that Properties shows a param taken from
    the subflow's params."""
    w = window(EXAMPLE)
    w.activate_node(w.document, "ship_express")  # what a double-click does
    settle()
    tab = w.tabs.current()
    assert tab is not None and tab.name == "shipping", "the subflow did not open"
    inner = next((n.id for n in tab.doc.flow.nodes
                  if any(v.scope == "subflow" or "subflow." in str(v.value or "")
                         for v in n.params.values())), None)
    if inner:
        tab.scene.select_nodes([inner])
    settle()
    tab.view.fit_all()
    problems = [str(p) for p in w.document.revalidate() if p.severity == "error"]
    if problems:
        print("the flow has problems:", *problems, sep="\n  ")
    print("subflows-editing:", w.tabs.breadcrumb_text())
    grab(w, "subflows-editing")


def shot_props() -> None:
    """Subflow Properties… on the example's subflow "shipping": its header
    and params table, a secret param being added (its AI box disabled),
    drawn over the window where the dialog opens."""
    from PySide6.QtCore import QPoint
    from PySide6.QtGui import QColor, QPainter

    from designer.window.subflow_props import SubflowPropsDialog

    w = window(EXAMPLE)
    w.activate_node(w.document, "ship_express")
    settle()
    tab = w.tabs.current()
    assert tab is not None and tab.name == "shipping", "the subflow did not open"
    dialog = SubflowPropsDialog(w, tab.definition, library=False)
    row = dialog.add_row(None)
    row.name.setText("api_key")
    row.label.setText("API key")
    row.type.setCurrentText("secret")
    row.default.setText("SHIP_API_KEY")
    row.description.setText("The carrier API's key, from the environment")
    dialog.show()
    settle()
    shot = w.grab()
    painter = QPainter(shot)
    at = QPoint((shot.width() - dialog.width()) // 2, (shot.height() - dialog.height()) // 2)
    painter.drawPixmap(at, dialog.grab())
    painter.setPen(QColor("#8a8f98"))  # the frame a window manager would draw
    painter.drawRect(at.x() - 1, at.y() - 1, dialog.width() + 1, dialog.height() + 1)
    painter.end()
    dialog.reject()
    dialog.deleteLater()
    shot.save(str(OUT / "subflows-props.png"))
    print("subflows-props")
    w.close()
    settle()


def shot_run() -> None:
    """A finished run of the order-subflows example, the Timeline grouped by
    instance."""
    w = window(EXAMPLE)
    w.run_action.trigger()
    while w.run_session.controller.is_running:
        app.processEvents()
    settle()
    inspector = w.run_session.inspector
    inspector.tabs.setCurrentIndex(TAB_NAMES.index("Timeline"))
    settle()
    w.view.fit_all()
    w.select_node("ship_express")
    grab(w, "subflows-run")


def shot_tool() -> None:
    """The Tools tab after a run whose agent called the subflow check_stock
    once: inside, a Change looks the SKU up and a Stock clerk agent thinks
    (its own tool) and answers; the call lists the nodes that ran inside it
    and the clerk's call nested under it."""
    clerk_script = [
        {"tool_calls": [{"name": "think", "arguments": {
            "thought": "14 on hand in north, 3 wanted: enough, no reservation needed."}}]},
        {"text": "A-2002: 14 in stock at north, 3 can ship today."}]
    tool_flow = parse_flow({
        "format": "switchboard.flow/1", "name": "Stock questions",
        "subflows": [{
            "name": "check_stock", "label": "Check stock",
            "description": "Ask the warehouse whether a SKU is in stock",
            "params": PARAMS,
            "nodes": [
                {"id": "order", "type": "subflow.in", "position": [0, 80],
                 "params": {"name": fixed("order")}},
                {"id": "look", "type": "core.change", "name": "Look up stock", "position": [200, 80],
                 "params": {"rules": fixed([{"action": "set", "path": "on_hand", "value": 14}])}},
                {"id": "clerk", "type": "ai.agent", "name": "Stock clerk", "position": [420, 80],
                 "params": {"provider": fixed("scripted"), "script": fixed(clerk_script),
                            "prompt": {"scope": "expression",
                                       "value": "{{ subflow.qty }} of {{ subflow.sku }}?"}}},
                {"id": "think", "type": "ai.think", "name": "Think", "position": [420, 240]},
                {"id": "answer", "type": "subflow.out", "position": [640, 80],
                 "params": {"name": fixed("answer")}}],
            "wires": [{"from": ["order", "out"], "to": ["look", "in"]},
                      {"from": ["look", "out"], "to": ["clerk", "in"]},
                      {"from": ["clerk", "out"], "to": ["answer", "in"]},
                      {"from": ["clerk", "tools"], "to": ["think", "in"]}]}],
        "nodes": [
            {"id": "question", "type": "core.inject", "name": "Customer asks", "position": [40, 60],
             "params": {"payload": fixed("Can I get 3 of A-2002 by Friday?")}},
            {"id": "agent", "type": "ai.agent", "name": "Assistant", "position": [300, 60],
             "params": {"provider": fixed("scripted"),
                        "instructions": fixed("Answer stock questions with check_stock."),
                        "script": fixed([
                            {"tool_calls": [{"name": "check_stock",
                                             "arguments": {"sku": "A-2002", "qty": 3}}]},
                            {"text": "Yes: 3 of A-2002 can ship today, well before Friday."}])}},
            {"id": "reply", "type": "core.debug", "name": "Reply", "position": [560, 60]},
            {"id": "stock_tool", "type": "subflow:check_stock", "name": "Stock lookup",
             "position": [560, 220],
             "params": {"sku": {"scope": "ai"}, "qty": {"scope": "ai"},
                        "warehouse": fixed("north")}}],
        "wires": [{"from": ["question", "out"], "to": ["agent", "in"]},
                  {"from": ["agent", "out"], "to": ["reply", "in"]},
                  {"from": ["agent", "tools"], "to": ["stock_tool", "order"]}]})
    tool_path = folder / "stock-questions.flow.json"
    tool_path.write_text(tool_flow.dumps())
    w = window(tool_path)
    w.run_action.trigger()
    while w.run_session.controller.is_running:
        app.processEvents()
    settle()
    tools_tab = w.run_session.inspector.tools
    w.run_session.inspector.tabs.setCurrentIndex(TAB_NAMES.index("Tools"))
    tools_tab.refresh()
    settle()
    w.view.fit_all()
    w.select_node("stock_tool")
    first_step = next(iter(tools_tab._step_items.values()))
    tools_tab.tree.setCurrentItem(first_step.parent())
    grab(w, "subflows-tool")


SHOTS = {"instances": shot_instances, "editing": shot_editing, "run": shot_run,
         "tool": shot_tool, "props": shot_props}

if __name__ == "__main__":
    wanted: list[str] = []
    for arg in sys.argv[1:]:
        if arg in SHOTS:
            wanted.append(arg)
        elif Path(arg).is_dir():
            OUT = Path(arg)
        else:
            raise SystemExit(f"{arg!r} is neither a shot ({', '.join(SHOTS)}) nor an "
                             "existing folder to save into")
    for name in wanted or list(SHOTS):
        SHOTS[name]()
