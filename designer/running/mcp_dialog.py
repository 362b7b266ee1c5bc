""""Serve Tools over MCP…" on an agent node: its tools, served to any MCP
client (Claude Desktop, an IDE, another framework's agent) over streamable
HTTP on 127.0.0.1, behind a bearer token made for this serving.

Serving is a run of the document's flow started like the Run button's (the
same controller, so its events reach the inspector: each client call is a
line in the Tools tab, an approval is a card), in which the flow's sources
stay quiet (``runtime.mcp_serve.quiet_flow``). The run lasts until Stop, the
dialog closes, or the window's Stop ends the run."""

from __future__ import annotations

import html
import logging
import secrets
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QGuiApplication
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QGridLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from runtime.mcp_serve import (
    HttpEndpoint,
    ServedCall,
    ServeError,
    ToolServer,
    listen,
    quiet_flow,
    serve_run,
)

from ..control.run_controller import qt_event_loop
from ..panels.inspector.common import mono_font

log = logging.getLogger(__name__)

HOST = "127.0.0.1"


def serve_action_for(session: Any, node_id: str) -> QAction | None:
    """The node menu's "Serve Tools over MCP…", for a node with a tools port."""
    fnode = session.document.flow.node(node_id)
    spec = session.document.registry.spec(fnode.type) if fnode else None
    if spec is None or not spec.has_tools_port:
        return None
    action = QAction("Serve Tools over MCP…", session.window)
    action.setToolTip("Let MCP clients call this agent's tools, with the same checks, "
                      "approvals and limits as the agent's own calls")
    action.triggered.connect(lambda: open_mcp_dialog(session, node_id))
    return action


def open_mcp_dialog(session: Any, agent_id: str) -> McpServeDialog:
    dialog = McpServeDialog(session, agent_id, session.window)
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    dialog.show()
    dialog.start()
    return dialog


class McpServeDialog(QDialog):
    """Serves one agent's tools while it is open; shows the URL, the token
    and the calls so far."""

    def __init__(self, session: Any, agent_id: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("mcpServeDialog")
        self.session = session
        self.agent_id = agent_id
        fnode = session.document.flow.node(agent_id)
        self.agent_name = (fnode.name if fnode is not None and fnode.name else agent_id)
        self.setWindowTitle(f"Serve Tools over MCP — {self.agent_name}")
        self.tools: ToolServer | None = None
        self.endpoint: HttpEndpoint | None = None
        self.token = ""
        self._task: Any = None
        self._counts: dict[str, int] = {}

        layout = QVBoxLayout(self)
        layout.setSpacing(10)
        intro = QLabel(f"MCP clients can call the tools of <b>{html.escape(self.agent_name)}</b> "
                       "while this is open, with the same schemas, checks, approvals and "
                       "limits as the agent's own calls. The flow's triggers stay quiet; "
                       "each call shows in the inspector's Tools tab.", self)
        intro.setWordWrap(True)
        layout.addWidget(intro)

        grid = QGridLayout()
        grid.setHorizontalSpacing(8)
        grid.setVerticalSpacing(6)
        self.tool_names = QLabel(self)
        self.tool_names.setWordWrap(True)
        self.url_field = self._field()
        self.token_field = self._field()
        self.token_field.setEchoMode(QLineEdit.EchoMode.Password)
        self.copy_url = QPushButton("Copy", self)
        self.copy_url.clicked.connect(lambda: self._copy(self.url))
        self.copy_token = QPushButton("Copy", self)
        self.copy_token.clicked.connect(lambda: self._copy(self.token))
        self.show_token = QPushButton("Show", self)
        self.show_token.setCheckable(True)
        self.show_token.toggled.connect(self._toggle_token)
        grid.addWidget(QLabel("Tools:", self), 0, 0)
        grid.addWidget(self.tool_names, 0, 1, 1, 3)
        grid.addWidget(QLabel("URL:", self), 1, 0)
        grid.addWidget(self.url_field, 1, 1, 1, 2)
        grid.addWidget(self.copy_url, 1, 3)
        grid.addWidget(QLabel("Token:", self), 2, 0)
        grid.addWidget(self.token_field, 2, 1)
        grid.addWidget(self.show_token, 2, 2)
        grid.addWidget(self.copy_token, 2, 3)
        grid.setColumnStretch(1, 1)
        layout.addLayout(grid)
        hint = QLabel("A client sends the token in the header <code>Authorization: Bearer "
                      "&lt;token&gt;</code>. The token is new each time you serve.", self)
        hint.setWordWrap(True)
        hint.setStyleSheet("color: palette(placeholder-text);")
        layout.addWidget(hint)

        self.status = QLabel("Starting…", self)
        self.status.setObjectName("mcpServeStatus")
        self.status.setWordWrap(True)
        layout.addWidget(self.status)

        buttons = QDialogButtonBox(self)
        self.stop_button = buttons.addButton("Stop", QDialogButtonBox.ButtonRole.ActionRole)
        self.stop_button.clicked.connect(self.stop)
        self.stop_button.setEnabled(False)
        close = buttons.addButton(QDialogButtonBox.StandardButton.Close)
        close.clicked.connect(self.close)
        layout.addWidget(buttons)

    def _field(self) -> QLineEdit:
        field = QLineEdit(self)
        field.setReadOnly(True)
        field.setFont(mono_font())
        field.setMinimumWidth(330)
        return field

    # -- state ----------------------------------------------------------------
    @property
    def url(self) -> str:
        return self.endpoint.url if self.endpoint is not None else ""

    @property
    def serving(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def calls(self) -> int:
        return self.tools.calls if self.tools is not None else 0

    def start(self) -> bool:
        """Start the serving run; False, with the reason shown, if it cannot."""
        session = self.session
        controller = session.controller
        if controller.is_running:
            return self._cannot("A run is going. Stop it first: serving the tools starts a "
                                "run of its own.")
        inspector = session.inspector
        if inspector.viewing_stored:
            inspector.show_live()
        document = session.document
        path = str(document.path) if document.path else ""
        record = session.record_action.isChecked()
        if not controller.run(quiet_flow(document.flow, document.registry), file=path,
                              trace=record):
            return self._cannot("The flow has errors, so it cannot run; the inspector's "
                                "Problems tab lists them.")
        engine = controller.engine
        try:
            sock = listen(HOST, 0)
        except ServeError as exc:
            controller.stop()
            return self._cannot(str(exc))
        self.tools = ToolServer(engine, self.agent_id, on_call=self._on_call)
        self.token = secrets.token_urlsafe(32)
        self.endpoint = HttpEndpoint(self.tools, sock, self.token)
        # serve_run holds the run open now, before its first step.
        self._task = qt_event_loop().create_task(serve_run(
            self.tools, controller.wait(), self.endpoint.serve, self.endpoint.stop))
        self._task.add_done_callback(self._ended)
        names = [t.name for t in self.tools.tools()]
        self.tool_names.setText(", ".join(names) if names else
                                "none: wire tool nodes to the agent's tools port")
        self.url_field.setText(self.url)
        self.token_field.setText(self.token)
        self.stop_button.setEnabled(True)
        self._show_count()
        return True

    def stop(self) -> None:
        """Stop serving: the run ends once the calls in flight have answered."""
        if self.endpoint is not None and self.serving:
            self.endpoint.stop()
            self.status.setText("Stopping…")
        self.stop_button.setEnabled(False)

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt override
        # This dialog may be deleted now; the run winds down without it.
        if self.tools is not None:
            self.tools.on_call = None
        if self._task is not None:
            self._task.remove_done_callback(self._ended)
        self.stop()
        super().closeEvent(event)

    def _cannot(self, why: str) -> bool:
        self.status.setText(why)
        self.stop_button.setEnabled(False)
        return False

    def _on_call(self, call: ServedCall) -> None:
        self._counts[call.status] = self._counts.get(call.status, 0) + 1
        self._show_count()

    def _show_count(self, prefix: str = "Serving") -> None:
        n = self.calls
        text = f"{prefix} · {n} call{'' if n == 1 else 's'}"
        parts = [f"{count} {status}" for status, count in sorted(self._counts.items())
                 if status != "success"]
        if n and parts:
            text += f" ({', '.join(parts)})"
        self.status.setText(text)

    def _ended(self, task: Any) -> None:
        if task.cancelled() or task.exception() is not None:
            if not task.cancelled():
                log.error("serving MCP failed", exc_info=task.exception())
            self.status.setText("Stopped: serving failed (details in the log).")
        else:
            self._show_count("Stopped")
        self.stop_button.setEnabled(False)

    # -- copying ----------------------------------------------------------------
    def _copy(self, text: str) -> None:
        clipboard = QGuiApplication.clipboard()
        if clipboard is not None and text:
            clipboard.setText(text)

    def _toggle_token(self, shown: bool) -> None:
        self.token_field.setEchoMode(QLineEdit.EchoMode.Normal if shown
                                     else QLineEdit.EchoMode.Password)
        self.show_token.setText("Hide" if shown else "Show")
