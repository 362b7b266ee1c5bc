"""Screenshots of plugin nodes in the designer at 1440x900 for docs/designer.md:
the palette with the textkit plugin's nodes (the Node.js package in
nodes/textkit-js; its specs are read from the plugin once, which starts it)
and the Run > Node Packages dialog over the window.

Run from the repository root: .venv/bin/python docs/plugins_screenshots.py"""
# ruff: noqa: E402 - a linear script, read top to bottom
import os
import sys
import tempfile

os.environ["QT_QPA_PLATFORM"] = "offscreen"
os.environ["SWITCHBOARD_DATA_DIR"] = tempfile.mkdtemp()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from PySide6.QtCore import QCoreApplication, QPoint, QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPainterPath
from PySide6.QtWidgets import QAbstractItemView, QApplication

QCoreApplication.setOrganizationName("switchboard-shots")
app = QApplication([])
from designer.model.document import FlowDocument
from designer.window.main_window import MainWindow
from runtime.flow import parse_flow
from runtime.registry import Registry

registry = Registry.default()
if not any(s.plugin == "textkit" for s in registry.specs()):
    sys.exit("the textkit plugin did not load (is nodes/textkit-js/node_modules there?): "
             + "; ".join(registry.load_errors))

FLOW = {
    "format": "switchboard.flow/1",
    "name": "Blog editor",
    "settings": {"out_of_process": ["mail"]},
    "nodes": [
        {"id": "draft", "type": "core.inject", "name": "New draft", "position": [80, 80],
         "params": {"payload": {"scope": "custom", "value": {
             "title": "Crème Brûlée, 2nd edition!",
             "body": "Three eggs, cream, sugar and a blowtorch."}}}},
        {"id": "slug", "type": "text.slugify", "name": "Slug", "position": [320, 80],
         "params": {"text": {"scope": "message", "path": "payload.title"},
                    "max_length": {"scope": "custom", "value": 60}},
         "outputs": {"slug": "slug"}},
        {"id": "length", "type": "text.word_count", "name": "Length", "position": [560, 80],
         "params": {"text": {"scope": "message", "path": "payload.body"}},
         "outputs": {"words": "words"}},
        {"id": "post", "type": "core.debug", "name": "Post", "position": [800, 80]},
        {"id": "ask", "type": "core.inject", "name": "Ask", "position": [80, 240],
         "params": {"payload": {"scope": "custom", "value":
                                "Send grace@example.com the slug and length of my draft."}}},
        {"id": "editor", "type": "ai.agent", "name": "Editor", "position": [320, 240],
         "params": {"provider": {"scope": "custom", "value": "openai"}}},
        {"id": "answer", "type": "core.debug", "name": "Answer", "position": [800, 240]},
        {"id": "slug_tool", "type": "text.slugify", "name": "Slugify", "position": [560, 340]},
        {"id": "count_tool", "type": "text.word_count", "name": "Count words",
         "position": [560, 440]},
        {"id": "mail", "type": "mail.send", "name": "Send Mail", "position": [560, 540],
         "params": {"to": {"scope": "ai"}, "subject": {"scope": "ai"}, "body": {"scope": "ai"},
                    "sender": {"scope": "custom", "value": "editor@example.com"}}},
    ],
    "wires": [
        {"from": ["draft", "out"], "to": ["slug", "in"]},
        {"from": ["slug", "out"], "to": ["length", "in"]},
        {"from": ["length", "out"], "to": ["post", "in"]},
        {"from": ["ask", "out"], "to": ["editor", "in"]},
        {"from": ["editor", "out"], "to": ["answer", "in"]},
        {"from": ["editor", "tools"], "to": ["slug_tool", "in"]},
        {"from": ["editor", "tools"], "to": ["count_tool", "in"]},
        {"from": ["editor", "tools"], "to": ["mail", "in"]},
    ],
}


def settle(n: int = 30) -> None:
    for _ in range(n):
        app.processEvents()


path = os.path.join(tempfile.mkdtemp(), "blog-editor.flow.json")
with open(path, "w", encoding="utf-8") as f:
    f.write(parse_flow(FLOW).dumps())
w = MainWindow(FlowDocument.open(path, registry), restore_layout=False)
w.set_theme("light")
w.resize(1440, 900)
w.show()
settle()
w.scene.select_nodes(["slug"])
settle()
w.view.fit_all()
tree = w.palette.tree
tree.setCurrentItem(w.palette.item_for_type("text.slugify"))
tree.scrollToItem(w.palette.item_for_type("text.word_count"),
                  QAbstractItemView.ScrollHint.PositionAtCenter)
settle()
problems = [str(p) for p in w.document.problems]
if problems:
    sys.exit("the flow has problems: " + "; ".join(problems))
w.grab().save("docs/img/plugins-palette.png")
print("plugins-palette")

dialog = w.show_node_packages()
settle()
# Offscreen, a window grab has no dialog in it: lay the dialog's own grab
# over the window's, centred, with a soft shadow as a window manager would.
shot = w.grab()
pane = dialog.grab()
at = QPoint((shot.width() - pane.width()) // 2, (shot.height() - pane.height()) // 2)
p = QPainter(shot)
p.setRenderHint(QPainter.RenderHint.Antialiasing)
p.fillRect(shot.rect(), QColor(0, 0, 0, 40))
for i in range(12, 0, -1):
    shadow = QPainterPath()
    shadow.addRoundedRect(QRectF(at.x() - i, at.y() - i + 6, pane.width() + 2 * i,
                                 pane.height() + 2 * i), 10 + i, 10 + i)
    p.fillPath(shadow, QColor(0, 0, 0, 6))
p.drawPixmap(at, pane)
p.setPen(QColor(0, 0, 0, 60))
p.setBrush(Qt.BrushStyle.NoBrush)
p.drawRect(QRectF(at.x() - 0.5, at.y() - 0.5, pane.width(), pane.height()))
p.end()
shot.save("docs/img/plugins-dialog.png")
print("plugins-dialog")
dialog.close()
w.document.undo_stack.setClean()
w.close()
