""""Serve Tools over MCP…" on the email-assistant example's agent: the dialog
serves its tools over streamable HTTP inside the designer's loop, and the
SDK's own client, with the dialog's token, calls them from another thread;
the calls are counted in the dialog and listed in the inspector's Tools tab.
"""

from __future__ import annotations

import threading

import anyio
import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.gui.inspector_fixtures import EMAIL_ASSISTANT, qt_loop  # noqa: F401 - a fixture

TIMEOUT_MS = 30_000


def client_calls(url: str, token: str, out: dict) -> threading.Thread:
    """A client on its own thread and loop (the designer's loop is the GUI
    thread's): lists the tools, makes a good call and a hostile one."""

    async def talk() -> None:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http, \
                streamable_http_client(url, http_client=http) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            out["tools"] = [t.name for t in (await session.list_tools()).tools]
            out["sent"] = await session.call_tool("send_email", {
                "to": "john@example.com", "subject": "Shipped", "body": "Today."})
            out["refused"] = await session.call_tool("send_email", {
                "to": "john@example.com", "subject": "s", "body": "b", "smtp_host": "evil"})
        async with httpx2.AsyncClient() as http:
            out["no_token"] = (await http.post(url, json={})).status_code

    def run() -> None:
        try:
            anyio.run(talk)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_serving_an_agents_tools_from_its_context_menu(qt_loop, qtbot, data_dir):  # noqa: F811
    from designer.model.document import FlowDocument
    from designer.running.mcp_dialog import McpServeDialog
    from designer.window.main_window import MainWindow

    window = MainWindow(FlowDocument.open(str(EMAIL_ASSISTANT)), restore_layout=False,
                        autosave_interval_ms=3_600_000)
    window.resize(1440, 900)
    window.show()
    session = window.run_session
    try:
        names = [a.text() for a in window.build_node_menu("agent").actions()]
        assert "Serve Tools over MCP…" in names
        assert "Serve Tools over MCP…" not in [a.text() for a in
                                              window.build_node_menu("mail").actions()]
        [serve] = [a for a in window.build_node_menu("agent").actions()
                   if a.text() == "Serve Tools over MCP…"]
        serve.trigger()
        dialog = window.findChild(McpServeDialog)
        assert dialog is not None and dialog.isVisible()
        assert dialog.serving
        assert session.controller.is_running
        assert dialog.url.startswith("http://127.0.0.1:") and dialog.url.endswith("/mcp")
        assert dialog.url_field.text() == dialog.url
        assert dialog.token_field.text() == dialog.token and len(dialog.token) >= 32
        assert dialog.tool_names.text() == "send_email"

        out: dict = {}
        thread = client_calls(dialog.url, dialog.token, out)
        qtbot.waitUntil(lambda: not thread.is_alive(), timeout=TIMEOUT_MS)
        assert "error" not in out, out.get("error")
        assert out["tools"] == ["send_email"]
        assert not out["sent"].is_error, out["sent"].content
        assert out["refused"].is_error
        assert "unknown argument 'smtp_host'" in out["refused"].content[0].text
        assert out["no_token"] == 401
        assert dialog.calls == 2
        assert dialog.status.text() == "Serving · 2 calls (1 refused)"

        # In the inspector, as an agent's calls would be.
        tools = session.inspector.tools

        def shown():
            tools.refresh()
            return sorted(c.status for c in tools.calls_shown())

        qtbot.waitUntil(lambda: shown() == ["refused", "success"], timeout=TIMEOUT_MS)
        assert {c.agent for c in tools.calls_shown()} == {"agent"}
        assert {c.tool for c in tools.calls_shown()} == {"send_email"}
        [eml] = (data_dir / "outbox").glob("*.eml")  # the example's delivery
        assert "Subject: Shipped" in eml.read_text()

        dialog.stop_button.click()
        qtbot.waitUntil(lambda: not session.controller.is_running, timeout=TIMEOUT_MS)
        qtbot.waitUntil(lambda: not dialog.serving, timeout=TIMEOUT_MS)
        assert session.controller.last_result.status == "ok"  # completed, not stopped
        # The status line follows the serving task's done callback, one turn
        # of the event loop after the task ends (under load it was still
        # "Stopping…" here).
        qtbot.waitUntil(lambda: not dialog.status.text().startswith("Stopping"),
                        timeout=TIMEOUT_MS)
        assert dialog.status.text().startswith("Stopped · 2 calls")
        dialog.close()
    finally:
        if session.controller.is_running:
            session.controller.stop()
            qtbot.waitUntil(lambda: not session.controller.is_running, timeout=TIMEOUT_MS)
        window.document.undo_stack.setClean()
        window.close()
        window.deleteLater()


def test_a_run_already_going_is_named(qt_loop, qtbot, data_dir):  # noqa: F811
    from designer.model.document import FlowDocument
    from designer.running.mcp_dialog import open_mcp_dialog
    from designer.window.main_window import MainWindow

    window = MainWindow(FlowDocument.open(str(EMAIL_ASSISTANT)), restore_layout=False,
                        autosave_interval_ms=3_600_000)
    window.show()
    session = window.run_session
    try:
        first = open_mcp_dialog(session, "agent")
        assert first.serving
        # The run has started its nodes (a Stop before the run's first step
        # would be lost: Engine.stop needs a running run).
        qtbot.waitUntil(session.controller.engine.started.is_set, timeout=TIMEOUT_MS)
        second = open_mcp_dialog(session, "agent")
        assert not second.serving
        assert second.status.text().startswith("A run is going. Stop it first")
        second.close()
        # The window's Stop ends the run, and with it the serving.
        window.stop_action.trigger()
        qtbot.waitUntil(lambda: not first.serving, timeout=TIMEOUT_MS)
        assert first.status.text().startswith("Stopped")
        first.close()
    finally:
        if session.controller.is_running:
            session.controller.stop()
            qtbot.waitUntil(lambda: not session.controller.is_running, timeout=TIMEOUT_MS)
        window.document.undo_stack.setClean()
        window.close()
        window.deleteLater()
