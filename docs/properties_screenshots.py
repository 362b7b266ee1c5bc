"""Screenshots of the properties panel for docs/properties.md: the real window
at 1440x900, light and dark, on the email-assistant example.

Run from the repository root: .venv/bin/python docs/properties_screenshots.py"""
# ruff: noqa: E402 - a linear script, read top to bottom
import os
import sys
import tempfile

os.environ["QT_QPA_PLATFORM"] = "offscreen"
os.environ["SWITCHBOARD_DATA_DIR"] = tempfile.mkdtemp()
os.environ["SWITCHBOARD_CREDENTIALS"] = "file"  # never the developer's keyring
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from PySide6.QtCore import QCoreApplication
from PySide6.QtWidgets import QApplication

QCoreApplication.setOrganizationName("switchboard-shots")
app = QApplication([])
from designer.model.commands import SetParam
from designer.model.document import FlowDocument
from designer.window.main_window import MainWindow
from runtime.spec import ParamValue, Scope

EXAMPLE = "resources/examples/email-assistant.flow.json"


def settle(n: int = 30) -> None:
    for _ in range(n):
        app.processEvents()


def window(theme: str, selected: str) -> MainWindow:
    w = MainWindow(FlowDocument.open(EXAMPLE), restore_layout=False)
    w.set_theme(theme)
    w.resize(1440, 900)
    w.show()
    settle()
    w.view.fit_all()
    w.select_node(selected)
    settle()
    return w


def done(w: MainWindow) -> None:
    w.document.undo_stack.setClean()
    w.close()
    settle()


def save(widget, name: str) -> None:
    widget.grab().save(f"docs/img/{name}.png")
    print(name)


for theme, suffix in (("light", ""), ("dark", "-dark")):
    # The agent: the preview closed to one line, provider and Credentials… in view.
    w = window(theme, "agent")
    save(w, f"properties-agent-sections{suffix}")
    done(w)

    # Send Mail with delivery outbox: the SMTP settings hidden, with a note.
    w = window(theme, "mail")
    save(w, f"properties-outbox{suffix}")
    done(w)

# Send Mail with delivery smtp and Connection opened: the server settings
# and the password's Credentials… button; the panel alone, scrolled to them.
w = window("light", "mail")
doc = w.document
doc.undo_stack.push(SetParam(doc, "mail", "delivery",
                             ParamValue(scope=Scope.CUSTOM, value="smtp"), merge=False))
settle()
form = w.properties.form
form.sections["connection"].set_open(True)
settle()
bar = w.properties.scroll.verticalScrollBar()
bar.setValue(form.sections["connection"].y() - 8)
settle()
save(w.properties_dock, "properties-connection")
done(w)
