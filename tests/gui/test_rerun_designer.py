"""Rerunning part of a run in the designer (issue 16, items 3 and 4): Run
from Here on the email assistant's mail node (a tool: its last call is
repeated, edited), Re-run This Call… from the Tools tab, Run from Here with
an edited message on a plain flow, History comparing two runs, and a run
recorded by `switchboard run` in another process listed and opened.

Everything is real: the example's scripted agent, its mail written to the
outbox folder under the data dir, the history database, the CLI as a
subprocess."""

from __future__ import annotations

import email
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from designer.panels.inspector.inspector import TAB_HISTORY
from designer.running.rerun_actions import FROM_HERE, FROM_HERE_CHANGED, RerunDialog
from runtime.history import History
from tests.gui.inspector_fixtures import EMAIL_ASSISTANT, EXAMPLES, qt_loop  # noqa: F401

TIMEOUT_MS = 30_000
ROOT = Path(__file__).resolve().parents[2]
ORDER_MAILS = EXAMPLES / "order-mails.flow.json"
NEW_SUBJECT = "Shipped: order A-1001 (rerun)"


@pytest.fixture
def open_window(qt_loop, qtbot, data_dir):  # noqa: F811
    from designer.model.document import FlowDocument
    from designer.window.main_window import MainWindow

    made = []

    def make(path: Path):
        window = MainWindow(FlowDocument.open(str(path)), restore_layout=False,
                            autosave_interval_ms=3_600_000)
        window.resize(1440, 900)
        window.show()
        made.append(window)
        return window

    yield make
    for window in made:
        session = window.run_session
        if session.controller.is_running:
            session.controller.stop()
            qtbot.waitUntil(lambda s=session: not s.controller.is_running, timeout=TIMEOUT_MS)
        for dialog in window.findChildren(RerunDialog):
            dialog.close()
        compare = session.inspector.history_tab.compare_dialog
        if compare is not None:
            compare.close()
        window.document.undo_stack.setClean()
        window.close()
        window.deleteLater()


def wait_run(qtbot, window, start) -> str:
    """Start a run with ``start()`` and wait for its end; its run id."""
    controller = window.run_session.controller
    with qtbot.waitSignal(controller.run_finished, timeout=TIMEOUT_MS):
        assert start() is not False
    return controller.engine.run_id


def menu_action(window, node_id: str, text: str):
    [action] = [a for a in window.build_node_menu(node_id).actions() if a.text() == text]
    return action


def subjects(data_dir: Path) -> list[str]:
    out = []
    for eml in sorted((data_dir / "outbox").glob("*.eml")):
        out.append(email.message_from_bytes(eml.read_bytes())["Subject"])
    return out


def events_of(run_id: str) -> list:
    with History() as history:
        return history.events(run_id)


def test_run_from_here_on_the_mail_tool_then_compare(open_window, qtbot, data_dir):
    window = open_window(EMAIL_ASSISTANT)
    session = window.run_session
    reruns = session.reruns
    assert not menu_action(window, "mail", FROM_HERE).isEnabled()  # nothing ran yet

    first = wait_run(qtbot, window, session.run)
    assert subjects(data_dir) == ["Your order A-1001 has shipped"]
    # The mail node only ran as the agent's tool: Run from Here repeats its call.
    action = menu_action(window, "mail", FROM_HERE_CHANGED)
    assert action.isEnabled(), action.toolTip()
    assert "send_email" in menu_action(window, "mail", FROM_HERE).toolTip()
    assert not menu_action(window, "ask", FROM_HERE).isEnabled() or \
        session.inspector.ctx.model.replay_inputs.get("ask")
    action.trigger()
    [dialog] = [d for d in window.findChildren(RerunDialog) if d.isVisible()]
    args = dialog.editor.value()
    assert args["subject"] == "Your order A-1001 has shipped"
    dialog.set_value({**args, "subject": NEW_SUBJECT})
    controller = session.controller
    with qtbot.waitSignal(controller.run_finished, timeout=TIMEOUT_MS):
        dialog.run_button.click()
    second = controller.engine.run_id
    assert second != first
    assert not [d for d in window.findChildren(RerunDialog) if d.isVisible()]  # it closed

    # Only the mail node ran: no LLM turn, no debug output from the agent's side.
    events = events_of(second)
    kinds = [e.type for e in events]
    assert "llm.request" not in kinds and "debug" not in kinds
    [call] = [e for e in events if e.type == "tool.call"]
    assert call.node == "mail" and call.args["subject"] == NEW_SUBJECT
    [result] = [e for e in events if e.type == "tool.result"]
    assert result.status == "success"
    [started] = [e for e in events if e.type == "run.started"]
    assert started.rerun_of == first and started.call
    assert sorted(subjects(data_dir)) == sorted(["Your order A-1001 has shipped", NEW_SUBJECT])
    # The inspector shows the repeated call live, in the Tools tab.
    tools = session.inspector.tools
    assert [c.args["subject"] for c in tools.calls_shown()] == [NEW_SUBJECT]
    assert reruns.last_error == ""

    # History lists both; the rerun is selected, and Compare pairs it with its origin.
    history = session.inspector.history_tab
    history.refresh()
    assert history.run_ids()[:2] == [second, first]
    history.select_run(second)
    assert history.compare_pair() == (first, second)
    # Two runs selected compare the older as A, too.
    history.tree.clearSelection()
    for i in range(2):
        history.tree.topLevelItem(i).setSelected(True)
    assert history.compare_button.isEnabled()
    dialog = history.compare_selected()
    assert dialog is not None and dialog.isVisible()
    text = dialog.view.text()
    assert "send_email #1" in text and "args.subject" in text
    assert "Your order A-1001 has shipped" in text and NEW_SUBJECT in text
    assert "Not rerun in B" in text and "Assistant (agent)" in text
    assert f"rerun of {first}, one tool call" in dialog.view.title.text()
    diff = dialog.view.pair.diff
    assert {c["path"] for c in diff["tool_calls"]} >= {"args.subject"}
    dialog.view.swap_button.click()  # B the original now
    assert dialog.view.pair.a.run_id == second


def test_rerun_this_call_from_the_tools_tab(open_window, qtbot, data_dir):
    window = open_window(EMAIL_ASSISTANT)
    session = window.run_session
    wait_run(qtbot, window, session.run)
    tools = session.inspector.tools
    [call] = tools.calls_shown()
    menu = tools.menu_for(call.caller_id)
    [rerun] = [a for a in menu.actions() if a.text() == "Re-run This Call…"]
    assert rerun.isEnabled()
    rerun.trigger()
    [dialog] = [d for d in window.findChildren(RerunDialog) if d.isVisible()]
    # An argument the AI may not set is refused by the tool bridge, as for the LLM.
    dialog.set_value({**call.args, "smtp_host": "evil.example.com"})
    with qtbot.waitSignal(session.controller.run_finished, timeout=TIMEOUT_MS):
        dialog.run_button.click()
    [refused] = tools.calls_shown()
    assert refused.status == "refused"
    assert "unknown argument 'smtp_host'" in refused.error
    assert len(subjects(data_dir)) == 1  # no second mail

    # The Agent tab's calls tree offers the same, on the refused call too.
    agent_menu = session.inspector.agent.calls.menu_for(refused.caller_id)
    assert [a.text() for a in agent_menu.actions()][0] == "Re-run This Call…"


def test_run_from_here_with_an_edited_message_on_a_plain_flow(open_window, qtbot, tmp_path,
                                                              monkeypatch):
    monkeypatch.chdir(tmp_path)  # the example's outbox folder is relative to the working one
    window = open_window(ORDER_MAILS)
    session = window.run_session
    first = wait_run(qtbot, window, session.run)
    assert len(subjects(tmp_path)) == 2
    action = menu_action(window, "mail", FROM_HERE_CHANGED)
    assert action.isEnabled(), action.toolTip()
    action.trigger()
    [dialog] = [d for d in window.findChildren(RerunDialog) if d.isVisible()]
    message = dialog.editor.value()
    assert message["payload"]["order"] == "A-1001"
    message["payload"]["order"] = "Z-9"
    dialog.set_value(message)
    with qtbot.waitSignal(session.controller.run_finished, timeout=TIMEOUT_MS):
        dialog.run_button.click()
    second = session.controller.engine.run_id
    events = events_of(second)
    [started] = [e for e in events if e.type == "run.started"]
    assert started.rerun_of == first and started.from_node == "mail"
    stats = [e for e in events if e.type == "stats"][-1]
    # Upstream never ran; the mail node got both recorded messages, both edited.
    for upstream in ("orders", "shop", "split"):
        assert not stats.nodes.get(upstream, {}).get("in") and \
            not stats.nodes.get(upstream, {}).get("out"), upstream
    assert stats.nodes["mail"]["in"] == 2
    history = session.inspector.history_tab
    history.refresh()
    assert history.tree.topLevelItem(0).text(1) == \
        f"Order mails · rerun of {first} from Tell the customer (mail)"
    new = sorted(s for s in subjects(tmp_path) if "Z-9" in s)
    # Only the changed path is changed in the second message (its items stay
    # its own); the shop's name is the flow variable the first run set upstream.
    assert new == ["Northwind: order Z-9 shipped (1 item)",
                   "Northwind: order Z-9 shipped (2 items)"]

    # Run from Here starts from the run the inspector shows: now the rerun,
    # whose mail node got the edited messages.
    third = wait_run(qtbot, window, lambda: session.reruns.run_from_here("mail"))
    assert sum("Z-9" in s for s in subjects(tmp_path)) == 4
    assert {e.node for e in events_of(third) if e.type == "debug"} == {"sent"}
    # Opened from History, the first run replays what the mail node got then.
    assert session.inspector.open_run(first)
    wait_run(qtbot, window, lambda: session.reruns.run_from_here("mail"))
    assert sorted(s for s in subjects(tmp_path) if "Z-9" not in s) == sorted([
        "Northwind: order A-1001 shipped (2 items)", "Northwind: order B-2002 shipped (1 item)",
    ] * 2)


def test_a_run_from_the_terminal_is_listed_opened_and_compared(open_window, qtbot, data_dir):
    window = open_window(EMAIL_ASSISTANT)
    session = window.run_session
    inspector = session.inspector
    designer_run = wait_run(qtbot, window, session.run)
    # `switchboard run` in another process, on the same data dir, with a
    # path relative to its own working folder.
    env = {**os.environ, "SWITCHBOARD_DATA_DIR": str(data_dir), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "runtime.cli", "run",
                           str(EMAIL_ASSISTANT.relative_to(ROOT))], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    history = inspector.history_tab
    inspector.tabs.setCurrentIndex(TAB_HISTORY)  # coming to the tab reads the history again
    qtbot.waitUntil(lambda: len(history.run_ids()) == 2, timeout=TIMEOUT_MS)
    cli_run, older = history.run_ids()
    assert older == designer_run
    item = history.tree.topLevelItem(0)
    assert item.text(1) == "Email assistant"
    assert Path(item.toolTip(1)) == EMAIL_ASSISTANT  # made whole, whatever the cwd was
    history.select_run(cli_run)
    history.open_button.click()
    assert inspector.viewing_stored and inspector.ctx.model.run_id == cli_run
    assert [e.node for e in inspector.debug.entries()] == ["show", "calls"]
    assert [c.tool for c in inspector.tools.calls_shown()] == ["send_email"]

    # From the stored terminal run, Run from Here on the mail node repeats its call.
    assert session.reruns.why_not("mail") == ""
    rerun = wait_run(qtbot, window, lambda: session.reruns.run_from_here("mail"))
    assert [e.rerun_of for e in events_of(rerun) if e.type == "run.started"] == [cli_run]
    assert not inspector.viewing_stored  # the rerun is shown live
    assert len(subjects(data_dir)) == 3

    # The designer's run and the terminal's compared: the same flow did the same.
    history.refresh()
    history.tree.clearSelection()
    for run_id in (designer_run, cli_run):
        history.tree.topLevelItem(history.run_ids().index(run_id)).setSelected(True)
    assert history.compare_pair() == (designer_run, cli_run)
    dialog = history.compare_selected()
    text = dialog.view.text()
    assert "Summary" in text and "Durations" in text
    # What differs is only where the mail went (a new file, a new Message-ID).
    assert {c["path"].split(".")[0] for c in dialog.view.pair.diff["tool_calls"]} == {"result"}


def test_stop_at_the_call_edit_continue_then_rerun_the_mail_and_compare(open_window, qtbot,
                                                                        data_dir):
    """Issue 16's whole story: the agent's call held at a breakpoint on the
    mail node, its subject edited, continued; the mail node alone run again
    with another subject; the two runs compared here and in the terminal."""
    window = open_window(EMAIL_ASSISTANT)
    session = window.run_session
    dbg = session.debugging
    dbg.store.set_node("mail")
    controller = session.controller
    with qtbot.waitSignal(controller.run_finished, timeout=TIMEOUT_MS):
        assert session.run()
        qtbot.waitUntil(lambda: len(dbg.held()) == 1 and dbg.tab.current() is not None,
                        timeout=TIMEOUT_MS)
        args = dbg.tab.editor.value()
        dbg.tab.editor.text_edit.setPlainText(json.dumps({**args, "subject": "Edited at the stop"}))
        dbg.continue_action.trigger()
    first = controller.engine.run_id
    dbg.store.remove_node("mail")

    menu_action(window, "mail", FROM_HERE_CHANGED).trigger()
    [dialog] = [d for d in window.findChildren(RerunDialog) if d.isVisible()]
    ran = dialog.editor.value()
    assert ran == {**args, "subject": "Edited at the stop"}  # as the call ran, not as asked
    dialog.set_value({**ran, "subject": NEW_SUBJECT})
    with qtbot.waitSignal(controller.run_finished, timeout=TIMEOUT_MS):
        dialog.run_button.click()
    second = controller.engine.run_id
    assert sorted(subjects(data_dir)) == sorted(["Edited at the stop", NEW_SUBJECT])

    history = session.inspector.history_tab
    history.refresh()
    history.select_run(second)
    dialog = history.compare_selected()
    text = dialog.view.text()
    # The call as it ran: with the subject edited at the stop, not the LLM's.
    assert "differs in args.subject, result.file, result.message_id · A ran with arguments " \
        "a person edited" in text
    assert '"subject": "Edited at the stop"' in text and NEW_SUBJECT in text

    env = {**os.environ, "SWITCHBOARD_DATA_DIR": str(data_dir), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "runtime.cli", "runs", "diff", first, second],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    # The terminal's diff: the mail node's input, edited at the stop, against the rerun's.
    inputs = done.stdout.split("node inputs")[1].splitlines()
    [line] = [x for x in inputs if "'Send Mail' (mail)  __parameters__.subject" in x][:1]
    assert '"Edited at the stop"' in line and f'"{NEW_SUBJECT}"' in line
