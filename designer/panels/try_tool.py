""""Try as tool…": call one tool node the way an agent would, with no LLM.

The form is generated from the tool's JSON schema (exactly what the LLM
would see: the params set to scope ``ai``). The arguments go through the
same checks as an LLM's (``runtime.tools``): bad ones are refused and the
node never runs; good ones run the node's ``on_message`` in tool mode and
the dialog shows the ``tool_response``. The JSON tab sends text exactly as
typed, so a person can try what a confused LLM might send.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from runtime.engine import Engine
from runtime.events import EventBus
from runtime.flow import Flow, FlowNode
from runtime.message import (
    AGENT_NODE_ID,
    MESSAGE_TYPE,
    PARAMETERS,
    TOOL_CALLER_ID,
    TOOL_NAME,
    TOOL_REQUEST,
    TOOL_STATUS,
    Message,
)
from runtime.registry import Registry
from runtime.spec import Scope

from .inspector.common import COLORS, JsonTree, mono_font, preview

TRY_AGENT_ID = "try-as-tool"


class TryResult:
    """What one try came to; mirrors runtime.tools.ToolOutcome plus the
    response message."""

    def __init__(self, status: str, *, data: Any = None, error: str = "", ms: float = 0.0,
                 response: dict | None = None, args: Any = None) -> None:
        self.status = status  # success | error | refused
        self.data = data
        self.error = error
        self.ms = ms
        self.response = response
        self.args = args


def tool_def(flow: Flow, node_id: str, registry: Registry) -> Any:
    from runtime.tools import build_tool

    fnode = flow.node(node_id)
    spec = registry.spec(fnode.type) if fnode else None
    if fnode is None or spec is None or spec.tool is None:
        raise ValueError(f"node '{node_id}' declares no tool")
    return build_tool(spec, fnode)


async def call_tool(flow: Flow, node_id: str, raw_args: Any, registry: Registry | None = None,
                    timeout: float = 60.0) -> TryResult:
    """Validate ``raw_args`` (a dict, or JSON text as an LLM sends it) against
    the tool's schema, then run the node alone in tool mode."""
    from runtime.arguments import parse_arguments
    from runtime.tools import new_caller_id

    registry = registry or Registry.default()
    t0 = time.perf_counter()
    tool = tool_def(flow, node_id, registry)
    args, why = parse_arguments(raw_args)
    if why is None:
        why = tool.validate(args)
    if why is not None:
        return TryResult("refused", error=why, args=args, ms=(time.perf_counter() - t0) * 1000)
    fnode: FlowNode = flow.node(node_id).model_copy(deep=True)  # type: ignore[union-attr]
    fnode.disabled = False
    # The node alone: nothing else of the flow runs, and its own start/close
    # (a connection it opens) bracket the one call.
    # The LLM gets only a generic text for an unexpected exception (its text
    # may hold paths or host names); the designer trying the tool is not the
    # LLM and gets the whole (redacted) text, from the node.error event.
    bus = EventBus()
    errors: list[str] = []
    bus.subscribe(lambda e: errors.append(e.message) if e.type == "node.error" else None)
    engine = Engine(Flow(name=flow.name, nodes=[fnode]), registry, bus)
    rt = engine.nodes[node_id]
    req = Message.new(None)
    req[MESSAGE_TYPE] = TOOL_REQUEST
    req[TOOL_CALLER_ID] = new_caller_id()
    req[AGENT_NODE_ID] = TRY_AGENT_ID
    req[TOOL_NAME] = tool.name
    req[PARAMETERS] = args
    try:
        await rt.node.start()
        async with asyncio.timeout(timeout):
            resp = await engine.run_as_tool(node_id, req)
    except TimeoutError:
        return TryResult("error", error=f"the tool did not finish within {timeout:g} s",
                         args=args, ms=(time.perf_counter() - t0) * 1000)
    except Exception as exc:  # start() failed: the same text the LLM would get
        from runtime.engine import error_text

        return TryResult("error", error=error_text(exc), args=args,
                         ms=(time.perf_counter() - t0) * 1000)
    finally:
        try:
            await rt.node.close()
        except Exception:
            pass
    ms = (time.perf_counter() - t0) * 1000
    if resp.get(TOOL_STATUS) == "success":
        return TryResult("success", data=resp.get("__tool_data__"), ms=ms, response=dict(resp),
                         args=args)
    return TryResult("error", error=errors[-1] if errors else str(resp.get("__tool_error__")
                                                                 or "failed"),
                     ms=ms, response=dict(resp), args=args)


class _Field:
    """One schema property as a form row."""

    def __init__(self, name: str, schema: dict[str, Any], required: bool, multiline: bool) -> None:
        self.name = name
        self.schema = schema
        self.required = required
        self.type = schema.get("type")
        if isinstance(self.type, list):
            self.type = next((t for t in self.type if t != "null"), None)
        if "enum" in schema or self.type == "boolean":
            box = QComboBox()
            box.setEditable(True)
            box.addItem("")
            for choice in schema.get("enum") or ["true", "false"]:
                box.addItem(str(choice))
            self.widget: QWidget = box
        elif multiline:
            edit = QPlainTextEdit()
            edit.setFixedHeight(90)
            self.widget = edit
        else:
            self.widget = QLineEdit()
        tip = schema.get("description", "")
        self.widget.setToolTip(tip)
        if hasattr(self.widget, "setPlaceholderText"):
            self.widget.setPlaceholderText(tip or str(self.type or "any JSON"))

    def text(self) -> str:
        w = self.widget
        if isinstance(w, QComboBox):
            return w.currentText()
        if isinstance(w, QPlainTextEdit):
            return w.toPlainText()
        return w.text()  # type: ignore[attr-defined]

    def set_text(self, text: str) -> None:
        w = self.widget
        if isinstance(w, QComboBox):
            w.setCurrentText(text)
        elif isinstance(w, QPlainTextEdit):
            w.setPlainText(text)
        else:
            w.setText(text)  # type: ignore[attr-defined]

    def value(self) -> Any:
        """The text as the schema's type when it reads as one; otherwise the
        text itself, so that the schema check says what is wrong."""
        text = self.text()
        if self.type in ("integer", "number", "boolean", "object", "array") or self.type is None:
            try:
                return json.loads(text)
            except ValueError:
                return text
        return text


class TryToolDialog(QDialog):
    finished_call = Signal(object)  # TryResult

    def __init__(self, flow: Flow, node_id: str, registry: Registry | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.flow = flow
        self.node_id = node_id
        self.registry = registry or Registry.default()
        self.tool = tool_def(flow, node_id, self.registry)
        self.result: TryResult | None = None
        self._task: asyncio.Task | None = None
        fnode = flow.node(node_id)
        spec = self.registry.spec(fnode.type)  # type: ignore[union-attr]
        self.setWindowTitle(f"Try {self.tool.name} as a tool")
        self.resize(900, 620)

        title = QLabel(f"<b>{self.tool.name}</b>  —  {fnode.name or spec.name}"  # type: ignore[union-attr]
                       f"<br><span style='color:{COLORS['muted']}'>{self.tool.description}</span>")
        title.setWordWrap(True)
        intro = QLabel("These are the arguments the LLM would fill in. The node runs in tool "
                       "mode, exactly as an agent would call it; no LLM is involved.")
        intro.setWordWrap(True)
        intro.setStyleSheet(f"color: {COLORS['muted']};")

        # form from the schema
        self.fields: dict[str, _Field] = {}
        form_box = QWidget()
        form = QFormLayout(form_box)
        form.setContentsMargins(4, 8, 4, 8)
        form.setSpacing(8)
        props = self.tool.schema.get("properties", {})
        required = set(self.tool.schema.get("required", []))
        for name, prop in props.items():
            pspec = spec.param(name)  # type: ignore[union-attr]
            f = _Field(name, prop, name in required, bool(pspec and pspec.multiline)
                       or name in ("body", "text", "content"))
            self.fields[name] = f
            label = name + (" *" if f.required else "")
            form.addRow(label, f.widget)
        if not props:
            form.addRow(QLabel("This tool takes no arguments from the AI."))
        fixed = [(p, v) for p, v in (fnode.params or {}).items()  # type: ignore[union-attr]
                 if v.scope is not Scope.AI]
        if fixed:
            lines = []
            for p, v in fixed:
                shown = f"from message {v.path}" if v.scope is Scope.MESSAGE else preview(v.value, 60)
                lines.append(f"{p} = {shown}")
            note = QLabel("Fixed by the designer (the AI cannot change these):\n" + "\n".join(lines))
            note.setStyleSheet(f"color: {COLORS['muted']};")
            note.setWordWrap(True)
            form.addRow(note)

        self.raw = QPlainTextEdit()
        self.raw.setFont(mono_font())
        self.raw.setPlaceholderText('{"to": "..."}')
        self.input_tabs = QTabWidget()
        self.input_tabs.addTab(form_box, "Form")
        self.input_tabs.addTab(self.raw, "JSON (sent as typed)")
        self.input_tabs.currentChanged.connect(self._sync_raw)
        self.schema_view = JsonTree()
        self.schema_view.set_value(self.tool.schema, "schema")
        self.input_tabs.addTab(self.schema_view, "Schema")

        self.status = QLabel("Fill in the arguments and press Call.")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.response = JsonTree()
        out_box = QWidget()
        ol = QVBoxLayout(out_box)
        ol.setContentsMargins(0, 0, 0, 0)
        ol.addWidget(self.status)
        ol.addWidget(self.response, 1)

        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.input_tabs)
        split.addWidget(out_box)
        split.setSizes([450, 450])

        self.call_button = QPushButton("Call")
        self.call_button.setDefault(True)
        self.call_button.clicked.connect(self.call)
        close = QPushButton("Close")
        close.clicked.connect(self.reject)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.call_button)
        buttons.addWidget(close)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 14, 16, 14)
        layout.setSpacing(10)
        layout.addWidget(title)
        layout.addWidget(intro)
        layout.addWidget(split, 1)
        layout.addLayout(buttons)

    # -- arguments ----------------------------------------------------------
    def form_args(self) -> dict[str, Any]:
        """An empty field is not sent at all, as when an LLM leaves an
        argument out (a required one is then refused as missing)."""
        out = {}
        for name, f in self.fields.items():
            if f.text() == "":
                continue
            out[name] = f.value()
        return out

    def set_args(self, args: dict[str, Any]) -> None:
        for name, value in args.items():
            if name in self.fields:
                self.fields[name].set_text(value if isinstance(value, str) else json.dumps(value))

    def set_raw(self, text: str) -> None:
        self.input_tabs.setCurrentIndex(1)
        self.raw.setPlainText(text)

    def _sync_raw(self, index: int) -> None:
        if index == 1 and not self.raw.toPlainText().strip():
            self.raw.setPlainText(json.dumps(self.form_args(), indent=2, ensure_ascii=False))

    def arguments(self) -> Any:
        """What is sent: the JSON text as typed on the JSON tab, else the form."""
        if self.input_tabs.currentIndex() == 1:
            return self.raw.toPlainText()
        return self.form_args()

    # -- calling ------------------------------------------------------------
    def call(self) -> None:
        if self._task is not None:
            return
        from designer.control.run_controller import qt_event_loop

        self.call_button.setEnabled(False)
        self.status.setText("Calling…")
        self.response.clear()
        self._task = qt_event_loop().create_task(
            call_tool(self.flow, self.node_id, self.arguments(), self.registry))
        self._task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task) -> None:
        self._task = None
        self.call_button.setEnabled(True)
        if task.cancelled():
            self.status.setText("Cancelled.")
            return
        exc = task.exception()
        result = task.result() if exc is None else TryResult("error", error=str(exc))
        self.show_result(result)

    def show_result(self, result: TryResult) -> None:
        self.result = result
        ms = f"{result.ms:.0f} ms" if result.ms >= 1 else f"{result.ms * 1000:.0f} µs"
        if result.status == "success":
            self.status.setText(f"<span style='color:{COLORS['success']}'><b>✓ success</b></span>"
                                f"  in {ms}. The agent would get the tool_response below.")
            self.response.set_roots([("tool_response", result.response),
                                     ("data", result.data)], expand=True)
        elif result.status == "refused":
            self.status.setText(f"<span style='color:{COLORS['refused']}'><b>⊘ refused</b></span>"
                                f" — the node did not run. The LLM would be told:<br>"
                                f"<i>{_html(result.error)}</i>")
            self.response.set_roots([("arguments", result.args),
                                     ("error", "refused: " + result.error)])
        else:
            self.status.setText(f"<span style='color:{COLORS['error']}'><b>✕ error</b></span>"
                                f"  after {ms}: {_html(result.error)}")
            roots = [("error", result.error)]
            if result.response is not None:
                roots.insert(0, ("tool_response", result.response))
            self.response.set_roots(roots)
        self.finished_call.emit(result)

    def done(self, code: int) -> None:
        if self._task is not None:
            self._task.cancel()
        super().done(code)


def _html(text: str) -> str:
    import html

    return html.escape(text).replace("\n", "<br>")
