"""Compare two runs: what ``switchboard runs diff`` prints, as a page that
wraps instead of cutting values at 50 characters.

The differences are runtime.rundiff.diff_runs' (the same pure function the
terminal uses); this module only lays them out. Where a node's input or
output, or a tool call, differs, the two messages stand side by side as
indented JSON with the lines that differ tinted (A red, B green, as in a
code review), so a changed subject is seen in its message, not as a bare
path. A run is a row of History: ``CompareDialog.for_runs`` reads its
events and flow there."""

from __future__ import annotations

import html
import json
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from runtime.cost import fmt_usd
from runtime.rundiff import (
    ABSENT,
    IGNORED_KEYS,
    RunFacts,
    changes,
    diff_runs,
    edited_calls,
    facts,
)

from ...look import theme
from .common import copy_text, fmt_duration

if TYPE_CHECKING:
    from runtime.history import History, RunInfo

#: Lines of one side of a message, and characters of one string in it:
#: a recorded message is bounded already, but a page of it helps nobody.
MAX_LINES = 80
MAX_STRING = 600
#: Characters of compact JSON kept on one line (a short list, a small object).
ONE_LINE = 56
#: A duration differs when the longer is this much longer than the shorter,
#: and by at least DURATION_MIN_MS: two runs never take exactly as long, and
#: a few milliseconds either way is noise, not a difference to look at.
DURATION_RATIO = 1.25
DURATION_MIN_MS = 100.0

SECTION_TITLES = {
    "flow": "Flow: what was set differently",
    "messages": "Messages per node (in / out)",
    "inputs": "Node inputs: the last message each node got",
    "outputs": "Node outputs: the last message each node sent",
    "tool_calls": "Tool calls: arguments and results",
    "debug": "Debug output",
    "answers": "Answers",
    "durations": "Durations",
}


# -- what the page shows, as data ------------------------------------------------

class RunPair:
    """Two runs and what differed between them, ready to lay out."""

    def __init__(self, events_a: list[Any], events_b: list[Any], flow_a: dict | None = None,
                 flow_b: dict | None = None, info_a: RunInfo | None = None,
                 info_b: RunInfo | None = None) -> None:
        self.diff = diff_runs(events_a, events_b, flow_a, flow_b)
        self.a, self.b = facts(events_a), facts(events_b)
        # A call a person edited (at a breakpoint, or approving it with
        # changes) ran with their arguments, not the LLM's: shown as it ran.
        self.edited = {"a": edited_calls(events_a), "b": edited_calls(events_b)}
        self.info_a, self.info_b = info_a, info_b
        self.names = {**_names(flow_a), **_names(flow_b)}
        for f in (self.a, self.b):
            for node, name in f.names.items():
                self.names.setdefault(node, name)

    def who(self, node: str) -> str:
        name = self.names.get(node, "")
        return f"{name} ({node})" if name and name != node else node


def _names(flow: dict | None) -> dict[str, str]:
    return {n.get("id", ""): n.get("name", "") for n in (flow or {}).get("nodes", [])
            if n.get("name")}


def origin_text(started: Any, who: Any = str) -> str:
    """"rerun of 3fa2… from Send Mail (mail)", "rerun of 3fa2…, one tool
    call", or "" for an ordinary run."""
    if started is None or not getattr(started, "rerun_of", ""):
        return ""
    where = (f" from {who(started.from_node)}" if started.from_node
             else ", one tool call" if started.call else "")
    return f"rerun of {started.rerun_of}{where}"


def json_lines(value: Any, path: str = "", depth: int = 0, key: Any = None,
               last: bool = True) -> list[tuple[int, str, str]]:
    """``value`` as indented JSON, one (depth, text, path) per line; paths
    as rundiff writes them (``payload.items[0]``), so the lines of a
    changed path can be found. Short parts stay on one line."""
    head = f"{json.dumps(key, ensure_ascii=False)}: " if key is not None else ""
    comma = "" if last else ","
    if isinstance(value, str) and len(value) > MAX_STRING:
        value = value[:MAX_STRING] + f"… ({len(value):,} characters)"
    compact = json.dumps(value, ensure_ascii=False, default=str)
    if not isinstance(value, (dict, list)) or not value or \
            len(compact) + len(head) + depth * 2 <= ONE_LINE:
        return [(depth, head + compact + comma, path)]
    if isinstance(value, dict):
        items = [(k, v, f"{path}.{k}" if path else str(k), k) for k, v in value.items()
                 if path or k not in IGNORED_KEYS]
        brackets = "{}"
    else:
        items = [(i, v, f"{path}[{i}]", None) for i, v in enumerate(value)]
        brackets = "[]"
    lines = [(depth, head + brackets[0], path)]
    for n, (_k, v, child, name) in enumerate(items):
        lines += json_lines(v, child, depth + 1, name, n == len(items) - 1)
    lines.append((depth, brackets[1] + comma, path))
    return lines


def duration_differs(a: Any, b: Any) -> bool:
    """Whether two durations (ms; None or ABSENT where a run has none)
    differ enough to point at: one run has it and the other not, or the
    longer is DURATION_RATIO times the shorter and DURATION_MIN_MS more."""
    a = a if isinstance(a, (int, float)) else None
    b = b if isinstance(b, (int, float)) else None
    if a is None or b is None:
        return (a is None) != (b is None)
    low, high = sorted((a, b))
    return high - low >= DURATION_MIN_MS and high >= low * DURATION_RATIO


def duration_change(a: Any, b: Any) -> str:
    """B against A, as a signed duration: "+2.4 s", "−850 ms"; "" when
    either is missing."""
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return ""
    delta = b - a
    return ("+" if delta >= 0 else "−") + fmt_duration(abs(delta))


def changed(path: str, paths: set[str]) -> bool:
    """Whether a line at ``path`` is part of a difference: the path itself,
    inside a changed object, or the whole value ("(value)")."""
    if "(value)" in paths:
        return True
    return any(path == p or path.startswith(p + ".") or path.startswith(p + "[")
               for p in paths)


# -- the page ----------------------------------------------------------------------

def _blend(color: str, base: str, amount: float) -> str:
    a, b = QColor(color), QColor(base)
    return QColor(round(a.red() * amount + b.red() * (1 - amount)),
                  round(a.green() * amount + b.green() * (1 - amount)),
                  round(a.blue() * amount + b.blue() * (1 - amount))).name()


class Page:
    """The diff as HTML for a QTextBrowser (Qt's rich text: tables, tinted
    blocks, pre-wrapped monospace)."""

    def __init__(self, pair: RunPair) -> None:
        self.pair = pair
        t = theme.current()
        self.t = t
        self.tint_a = _blend(t.error, t.base, 0.14)
        self.tint_b = _blend(t.done, t.base, 0.16)
        self.tint_row = _blend(t.warning, t.base, 0.14)
        self.parts: list[str] = []

    # -- building blocks ---------------------------------------------------------
    def esc(self, text: Any) -> str:
        return html.escape(str(text))

    def muted(self, text: str) -> str:
        return f"<span style='color:{self.t.muted}'>{self.esc(text)}</span>"

    def heading(self, text: str) -> None:
        self.parts.append(f"<h3 style='margin-top:18px; margin-bottom:6px'>{self.esc(text)}</h3>")

    def value(self, v: Any) -> str:
        if v is ABSENT:
            return self.muted("—")
        text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)
        if len(text) > MAX_STRING:
            text = text[:MAX_STRING] + "…"
        return f"<span style='font-family:monospace'>{self.esc(text)}</span>"

    def table(self, header: list[str], rows: list[tuple[list[str], bool]],
              widths: list[int]) -> None:
        """Rows of cells (already HTML), tinted where the flag says they differ."""
        cells = "".join(f"<th align='left' width='{w}%' style='color:{self.t.muted}'>"
                        f"{self.esc(h)}</th>" for h, w in zip(header, widths, strict=True))
        out = [f"<table width='100%' cellspacing='0' cellpadding='5'><tr>{cells}</tr>"]
        for row, differs in rows:
            bg = f" style='background-color:{self.tint_row}'" if differs else ""
            out.append(f"<tr{bg}>" + "".join(f"<td valign='top'>{c}</td>" for c in row)
                       + "</tr>")
        out.append("</table>")
        self.parts.append("".join(out))

    def side(self, value: Any, paths: set[str], tint: str) -> str:
        if value is ABSENT:
            return self.muted("(nothing)")
        lines = json_lines(value)
        more = len(lines) - MAX_LINES
        out = []
        for depth, text, path in lines[:MAX_LINES]:
            bg = f"background-color:{tint};" if changed(path, paths) else ""
            out.append(f"<p style='margin:0; {bg} font-family:monospace; white-space:pre-wrap; "
                       f"margin-left:{depth * 14}px'>{self.esc(text)}</p>")
        if more > 0:
            out.append(f"<p style='margin:0'>{self.muted(f'… {more} more lines')}</p>")
        return "".join(out)

    def side_by_side(self, title: str, a: Any, b: Any, paths: set[str]) -> None:
        label_a, label_b = self.run_label("a"), self.run_label("b")
        self.parts.append(
            f"<p style='margin-top:10px; margin-bottom:4px'><b>{self.esc(title)}</b></p>"
            "<table width='100%' cellspacing='0' cellpadding='6'>"
            f"<tr><th align='left' width='50%' style='color:{self.t.muted}'>{label_a}</th>"
            f"<th align='left' width='50%' style='color:{self.t.muted}'>{label_b}</th></tr>"
            f"<tr><td valign='top' style='border:1px solid {self.t.border}'>"
            f"{self.side(a, paths, self.tint_a)}</td>"
            f"<td valign='top' style='border:1px solid {self.t.border}'>"
            f"{self.side(b, paths, self.tint_b)}</td></tr></table>")

    def run_label(self, side: str) -> str:
        f: RunFacts = self.pair.a if side == "a" else self.pair.b
        return self.esc(f"{side.upper()} · run {f.run_id}")

    # -- sections -----------------------------------------------------------------
    def build(self) -> str:
        d = self.pair.diff
        self.summary()
        if d.get("not_rerun"):
            side = "B" if d["partial"] == "b" else "A"
            who = ", ".join(self.pair.who(n) for n in d["not_rerun"])
            self.parts.append(f"<p>{self.muted(f'Not rerun in {side} (left out below): {who}')}"
                              "</p>")
        if d["same"]:
            self.parts.append("<p><b>No differences in what the runs did</b> (only in how long "
                              "they took).</p>")
        self.flow()
        self.messages()
        self.tool_calls()
        self.messages_side_by_side("outputs", "out")
        self.messages_side_by_side("inputs", "in")
        self.debug()
        self.answers()
        self.durations()
        return (f"<html><body style='color:{self.t.text}'>" + "".join(self.parts)
                + "</body></html>")

    def summary(self) -> None:
        label = {"status": "Status", "duration_ms": "Duration", "errors": "Errors",
                 "cost_usd": "Cost", "tokens": "Tokens", "tool_cost_usd": "Tool cost"}
        rows = []
        for r in self.pair.diff["summary"]:
            a, b = r.get("a", ABSENT), r.get("b", ABSENT)
            if r["field"] in ("tokens", "tool_cost_usd") and not a and not b:
                continue  # no LLM, no paid tool: nothing to say
            if r["field"] == "duration_ms":
                cells = [fmt_duration(v) if v is not ABSENT else "—" for v in (a, b)]
                if duration_differs(a, b):
                    cells[1] += f" ({duration_change(a, b)})"
            elif r["field"] in ("cost_usd", "tool_cost_usd"):
                cells = [fmt_usd(v) if isinstance(v, (int, float)) else "—" for v in (a, b)]
            else:
                cells = ["—" if v is ABSENT else f"{v:,}" if isinstance(v, int) else str(v)
                         for v in (a, b)]
            differs = duration_differs(a, b) if r["field"] == "duration_ms" else not r["same"]
            rows.append(([self.esc(label.get(r["field"], r["field"]))]
                         + [self.esc(c) for c in cells], differs))
        self.heading("Summary")
        self.table(["", self.run_label("a"), self.run_label("b")], rows, [20, 40, 40])

    def flow(self) -> None:
        found = self.pair.diff["flow"]
        if not found:
            return
        self.heading(SECTION_TITLES["flow"])
        rows = [([self.esc(c["node"] if c["node"].startswith("(") else self.pair.who(c["node"])),
                  self.value(c["path"]), self.value(c.get("a", ABSENT)),
                  self.value(c.get("b", ABSENT))], True) for c in found]
        self.table(["Node", "Setting", "A", "B"], rows, [18, 22, 30, 30])

    def messages(self) -> None:
        found = self.pair.diff["messages"]
        if not found:
            return
        self.heading(SECTION_TITLES["messages"])
        rows = [([self.esc(self.pair.who(c["node"])),
                  self.esc(f"{c['a']['in']} / {c['a']['out']}"),
                  self.esc(f"{c['b']['in']} / {c['b']['out']}")], True) for c in found]
        self.table(["Node", "A", "B"], rows, [30, 35, 35])

    def messages_side_by_side(self, section: str, direction: str) -> None:
        found = self.pair.diff[section]
        if not found:
            return
        self.heading(SECTION_TITLES[section])
        by_node: dict[str, set[str]] = {}
        for c in found:
            by_node.setdefault(c["node"], set()).add(
                "(value)" if c["path"] == "(message)" else c["path"])
        for node, paths in by_node.items():
            a, b = self.pair.a.last(node, direction), self.pair.b.last(node, direction)
            what = ", ".join(sorted(p for p in paths if p != "(value)")) or "the whole message"
            self.side_by_side(f"{self.pair.who(node)} · differs in {what}", a, b, paths)

    def tool_calls(self) -> None:
        found = self.pair.diff["tool_calls"]
        if not found:
            return
        self.heading(SECTION_TITLES["tool_calls"])
        groups: dict[tuple, set[str]] = {}
        for c in found:
            key = (c["tool"], c["index"], c["caller_a"], c["caller_b"])
            groups.setdefault(key, set()).add("(value)" if c["path"] == "(call)" else c["path"])
        for (tool, index, ca, cb), paths in groups.items():
            a = _call_view(self.pair.a, ca, self.pair.edited["a"])
            b = _call_view(self.pair.b, cb, self.pair.edited["b"])
            if a is not ABSENT and b is not ABSENT:
                # As they ran: a person's edit may undo (or make) a difference.
                paths = {c["path"] for c in changes(a, b, limit=MAX_LINES)}
            what = ", ".join(sorted(p for p in paths if p != "(value)")) or (
                "made in one run only" if ABSENT in (a, b) else "nothing, as they ran")
            ids = " · ".join(x for x in (ca and f"A {ca}", cb and f"B {cb}") if x)
            edited = [side.upper() for side, caller in (("a", ca), ("b", cb))
                      if caller in self.pair.edited[side]]
            note = (f" · {' and '.join(edited)} ran with arguments a person edited"
                    if edited else "")
            self.side_by_side(f"{tool} #{index} ({ids}) · differs in {what}{note}", a, b, paths)

    def debug(self) -> None:
        found = self.pair.diff["debug"]
        if not found:
            return
        self.heading(SECTION_TITLES["debug"])
        rows = [([self.esc(f"{self.pair.who(c['node'])} #{c['index'] + 1}"),
                  self.value(c["path"]), self.value(c.get("a", ABSENT)),
                  self.value(c.get("b", ABSENT))], True) for c in found]
        self.table(["Node", "Path", "A", "B"], rows, [18, 14, 34, 34])

    def answers(self) -> None:
        found = self.pair.diff["answers"]
        if not found:
            return
        self.heading(SECTION_TITLES["answers"])
        rows = [([self.esc(f"{self.pair.who(c['agent'])} #{c['index'] + 1}"),
                  self.esc(c.get("a", "—")), self.esc(c.get("b", "—"))], True) for c in found]
        self.table(["Agent", "A", "B"], rows, [18, 41, 41])

    def durations(self) -> None:
        """Every node's (and the run's) time; a row whose times differ by
        more than noise (duration_differs) is tinted, B saying by how much."""
        self.heading(SECTION_TITLES["durations"])
        rows = []
        for c in self.pair.diff["durations"]:
            name = "Total" if c["node"] == "(total)" else self.pair.who(c["node"])
            a, b = c.get("a"), c.get("b")
            cells = [fmt_duration(v) if isinstance(v, (int, float)) else "—" for v in (a, b)]
            differs = duration_differs(a, b)
            if differs and duration_change(a, b):
                cells[1] += f" ({duration_change(a, b)})"
            rows.append(([self.esc(name)] + [self.esc(t) for t in cells], differs))
        self.table(["Node", "A", "B"], rows, [30, 35, 35])


def _call_view(f: RunFacts, caller_id: str, edited: dict[str, Any]) -> Any:
    """A call as the diff's paths name it: args (as the call ran), status,
    result."""
    call = next((c for c in f.calls if c["caller_id"] == caller_id), None) if caller_id else None
    if call is None:
        return ABSENT
    return {"args": edited.get(caller_id, call["args"]), "status": call["status"],
            "result": call["data"] if call["status"] == "success" else call["error"]}


# -- the widgets -------------------------------------------------------------------

class DiffView(QWidget):
    """Two runs compared: a line naming them, Swap and Copy as Text, and the
    page. ``show_pair`` takes a RunPair; ``text()`` is the page as plain
    text (for tests and the clipboard's plain form)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.pair: RunPair | None = None
        self._swap: Any = None
        self.title = QLabel()
        self.title.setWordWrap(True)
        self.title.setTextFormat(Qt.TextFormat.RichText)
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.swap_button = QPushButton("Swap A and B")
        self.swap_button.setToolTip("Compare the other way round")
        self.swap_button.clicked.connect(lambda: self._swap and self._swap())
        self.copy_button = QPushButton("Copy as Text")
        self.copy_button.setToolTip("The comparison as `switchboard runs diff` prints it")
        self.copy_button.clicked.connect(self.copy)
        self.browser = QTextBrowser()
        self.browser.setOpenLinks(False)
        self.browser.document().setDocumentMargin(12)
        bar = QHBoxLayout()
        bar.setContentsMargins(0, 0, 0, 0)
        bar.addWidget(self.title, 1)
        bar.addWidget(self.swap_button, 0, Qt.AlignmentFlag.AlignTop)
        bar.addWidget(self.copy_button, 0, Qt.AlignmentFlag.AlignTop)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(8)
        layout.addLayout(bar)
        layout.addWidget(self.browser, 1)

    def show_pair(self, pair: RunPair, swap: Any = None) -> None:
        """Show ``pair``; ``swap()`` (if given) shows it the other way round."""
        self.pair, self._swap = pair, swap
        self.swap_button.setVisible(swap is not None)
        lines = []
        for tag, info, f in (("A", pair.info_a, pair.a), ("B", pair.info_b, pair.b)):
            origin = origin_text(f.started, pair.who)
            when = _when(info.started) if info is not None else ""
            flow = (info.flow if info is not None else "") or "Untitled"
            status = info.status if info is not None else ""
            lines.append(f"<b>{tag}</b>&nbsp; run {html.escape(f.run_id)} · "
                         f"{html.escape(flow)} · {html.escape(when)} · {html.escape(status)}"
                         + (f" · <i>{html.escape(origin)}</i>" if origin else ""))
        self.title.setText("<br>".join(lines))
        self.browser.setHtml(Page(pair).build())

    def text(self) -> str:
        return self.browser.toPlainText()

    def copy(self) -> None:
        if self.pair is None:
            return
        from runtime.runs import format_diff

        copy_text("\n".join(format_diff(self.pair.diff, self.pair.info_a, self.pair.info_b,
                                        self.pair.names)))


def _when(ts: float | None) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else ""


class CompareDialog(QDialog):
    """"Compare Runs" from History: beside the window, not blocking it."""

    def __init__(self, history: History, a: str, b: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.history = history
        self.setWindowTitle("Compare Runs")
        self.setObjectName("CompareRunsDialog")
        self.resize(1180, 760)
        self.view = DiffView(self)
        close = QPushButton("Close")
        close.clicked.connect(self.close)
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(close)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 12, 14, 12)
        layout.addWidget(self.view, 1)
        layout.addLayout(row)
        self.compare(a, b)

    def compare(self, a: str, b: str) -> None:
        h = self.history
        pair = RunPair(h.events(a), h.events(b), h.flow_of(a), h.flow_of(b), h.run(a), h.run(b))
        self.view.show_pair(pair, swap=lambda: self.compare(b, a))
