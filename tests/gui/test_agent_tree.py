"""The Agent tab's tree, over real runs: a triage agent (the openai SDK
against the local test server) whose tool is a mail agent (scripted) whose
tool is a reporter agent (scripted); approval decisions made by a stand-in
for the designer's card. The run's events go through the inspector's model
into the real widgets, as the designer feeds them."""

from __future__ import annotations

import asyncio

import pytest

from designer.panels.inspector.agent_tab import AgentTab, call_status_text, nest
from designer.panels.inspector.context import InspectorContext
from runtime.approval import Decision
from tests.servers.flows import agent_flow, run, scripted
from tests.servers.llm import LlmServer, openai_reply
from tests.servers.smtp import SmtpServer
from tests.test_hitl import OUTSIDE_ONLY, REG, DecidingPeople, mail_tool, nested_flow, send


def run_events(flow, people, monkeypatch=None):
    result, rec, _ = asyncio.run(run(flow, reg=REG, people=people))
    assert result.status == "ok", rec.of("node.error")
    return rec.events, flow


def agent_tab(qtbot, flow, events) -> AgentTab:
    ctx = InspectorContext(REG)
    ctx.flow = flow
    ctx.model.apply(events)
    tab = AgentTab(ctx)
    qtbot.addWidget(tab)
    tab.resize(1400, 420)
    tab.show()
    tab.reset()
    return tab


@pytest.fixture
def nested_run(monkeypatch):
    monkeypatch.setenv("TEST_OPENAI_KEY", "sk-test-key-of-the-tree-test")
    rows = [{"order": "A-1", "total": 120}, {"order": "A-2", "total": 80}]
    people = DecidingPeople(Decision(True, by="designer"))
    with LlmServer() as llm, SmtpServer() as smtp:
        llm.replies = [openai_reply(tool_calls=[("mail_agent", {"task": "Mail eve, with a report"})]),
                       openai_reply("All done.")]
        events, flow = run_events(nested_flow(llm, smtp, rows), people)
        assert [m["To"] for m in smtp.messages] == ["eve@example.com"]
    return flow, events


def test_the_tree_nests_parent_child_and_grandchild(qtbot, nested_run):
    flow, events = nested_run
    tab = agent_tab(qtbot, flow, events)
    tab.select_agent("triage")
    assert tab.current_view() == "tree"  # agents nest: the tree shows first
    rows = [(depth, cols[0]) for depth, cols in tab.calls.rows()]
    assert rows == [
        (0, "Turn 1"),
        (1, "→ mail_agent"),
        (2, "Mail agent · turn 1"),
        (3, "→ reporter"),
        (4, "Reporter · turn 1"),
        (5, "→ write_csv"),
        (4, "Reporter · turn 2"),
        (5, "→ handoff"),
        (2, "Mail agent · turn 2"),
        (3, "→ send_email"),
        (3, "→ think"),
        (2, "Mail agent · turn 3"),
        (3, "→ handoff"),
        (0, "Turn 2"),
    ]
    by_step = {cols[0]: cols for _, cols in tab.calls.rows()}
    # Arguments, result, status (with who approved) and duration on each call.
    mail = by_step["→ send_email"]
    assert '"to": "eve@example.com"' in mail[1]
    assert "eve@example.com" in mail[2]
    assert mail[3] == "✓ success · approved by designer"
    assert mail[4].endswith(("ms", "s"))
    assert by_step["→ write_csv"][3] == "✓ success"  # never waited: nothing to say
    assert "Mailed eve; report attached" in by_step["→ mail_agent"][2]
    assert by_step["Turn 2"][2] == "All done."
    # The detail pane shows the decision of the call in focus.
    item = tab.calls.tree.findItems("→ send_email", _flags(), 0)[0]
    tab.calls.tree.setCurrentItem(item)
    roots = [tab.calls.detail.topLevelItem(i).text(0)
             for i in range(tab.calls.detail.topLevelItemCount())]
    assert roots == ["arguments", "result", "approval", "decision"]
    assert "approved by designer" in tab.calls.detail_title.text()


def test_rows_close_and_stay_closed_while_the_run_goes_on(qtbot, nested_run):
    flow, events = nested_run
    ctx = InspectorContext(REG)
    ctx.flow = flow
    half = next(i for i, e in enumerate(events) if e.type == "tool.decision")
    ctx.model.apply(events[:half])
    tab = AgentTab(ctx)
    qtbot.addWidget(tab)
    tab.select_agent("triage")
    tab.refresh()
    waiting = [cols for _, cols in tab.calls.rows() if cols[0] == "→ send_email"]
    assert waiting and waiting[0][3] == "waiting for approval"  # beside a clock icon
    top = tab.calls.tree.topLevelItem(0)
    reporter = top.child(0).child(0).child(0)
    assert reporter.text(0) == "→ reporter"
    reporter.setExpanded(False)
    ctx.model.apply(events[half:])
    tab.refresh()
    reporter = tab.calls.tree.topLevelItem(0).child(0).child(0).child(0)
    assert reporter.text(0) == "→ reporter" and not reporter.isExpanded()
    assert tab.calls.tree.topLevelItem(0).child(0).isExpanded()
    # A person's choice of view holds.
    tab.transcript_button.click()
    tab.refresh()
    assert tab.current_view() == "transcript"


def test_a_rejection_shows_who_and_why(qtbot):
    people = DecidingPeople(Decision(False, by="designer", reason="not this customer"))
    with SmtpServer() as smtp:
        turns = [{"tool_calls": [{"name": n, "arguments": a}
                                 for n, a in (send("ann@ourcompany.com"), send("eve@example.com"))]},
                 {"text": "done"}]
        events, flow = run_events(agent_flow(scripted(turns), [mail_tool(smtp, OUTSIDE_ONLY)]),
                                  people)
    tab = agent_tab(qtbot, flow, events)
    tab.set_view("tree", user=True)
    calls = [cols for _, cols in tab.calls.rows() if cols[0].startswith("→")]
    assert [c[3] for c in calls] == ["✓ success", "⊘ rejected by designer: not this customer"]
    assert calls[1][2] == "rejected by designer: not this customer"
    # One agent, no nesting: the model's tree is flat.
    conv = tab.current_conversation()
    [turn1, turn2] = nest(tab.ctx.model, conv)
    assert [c.call.tool for c in turn1.calls] == ["send_email", "send_email"]
    assert not any(c.turns for c in turn1.calls) and turn2.calls == []
    assert call_status_text(turn1.calls[1].call).startswith("⊘ rejected")


def _flags():
    from PySide6.QtCore import Qt

    return Qt.MatchFlag.MatchExactly | Qt.MatchFlag.MatchRecursive


# -- screenshots for docs/inspecting.md and docs/tools.md ---------------------------------

def save_screenshots(out_dir: str = "docs/img") -> None:
    """The triage-delegation example run in the designer at 1440x900, light
    and dark: the Agent tab's tree with the outside recipient approved at
    the card, and the mail node's Approval and limits opened:
    ``.venv/bin/python -m tests.gui.test_agent_tree docs/img``."""
    import os
    import tempfile

    os.environ["QT_QPA_PLATFORM"] = "offscreen"
    os.environ.setdefault("SWITCHBOARD_DATA_DIR", tempfile.mkdtemp())
    from PySide6.QtCore import QCoreApplication
    from PySide6.QtWidgets import QApplication

    QCoreApplication.setOrganizationName("switchboard-shots")
    app = QApplication.instance() or QApplication([])
    from designer.control.run_controller import qt_event_loop
    from designer.look import theme
    from designer.model.document import FlowDocument
    from designer.panels.form_rules import TOOL_SETTINGS, remember_section
    from designer.panels.inspector.inspector import TAB_NAMES
    from designer.window.main_window import MainWindow

    qt_event_loop()

    def settle(n: int = 30) -> None:
        for _ in range(n):
            app.processEvents()

    for dark in (False, True):
        theme.apply(app, theme.DARK if dark else theme.LIGHT)
        suffix = "-dark" if dark else ""
        w = MainWindow(FlowDocument.open("resources/examples/triage-delegation.flow.json"),
                       restore_layout=False)
        w.resize(1440, 900)
        w.show()
        settle()
        w.run_action.trigger()
        people = w.run_session.controller.people
        while w.run_session.controller.is_running:
            app.processEvents()
            for pending in list(people.pending):
                if hasattr(pending, "approve") and pending.open:
                    pending.approve()
        settle()
        w.view.fit_all()
        ins = w.run_session.inspector
        ins.tabs.setCurrentIndex(TAB_NAMES.index("Agent"))
        ins.agent.select_agent("triage")
        ins.agent.set_view("tree")
        settle()
        tree = ins.agent.calls.tree
        mail = tree.findItems("→ send_email", _flags(), 0)
        if mail:
            tree.setCurrentItem(mail[0])
        settle()
        w.grab().save(f"{out_dir}/agent-tree{suffix}.png")
        # The mail node's settings, opened, with the rule of the example.
        remember_section("mail.send", TOOL_SETTINGS, True)
        w.select_node("mail")
        settle()
        form = w.properties.form if hasattr(w, "properties") else None
        if form is not None and getattr(form, "tool_settings", None) is not None:
            form.tool_settings.set_open(True)
            settle()
            bar = w.properties.scroll.verticalScrollBar()
            bar.setValue(form.tool_settings.y() - 8)
        settle()
        w.grab().save(f"{out_dir}/tool-approval-settings{suffix}.png")
        w.close()
        settle()


if __name__ == "__main__":
    import sys

    save_screenshots(sys.argv[1] if len(sys.argv) > 1 else "docs/img")
