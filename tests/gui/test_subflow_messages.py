"""The inspector's Messages tab for a subflow instance selected on the
canvas after a designer run (docs/subflows.md, "Running and inspecting"):
the run runs the instance's nodes by path, so the instance has no messages
of its own; the tab shows what entered it (the messages into the nodes its
input feeds, one message fed to two nodes once) and what left it (the
messages out of the nodes feeding its output), each labelled with its node
inside. Before, it said the instance had received no message."""

from __future__ import annotations

from PySide6.QtCore import Qt

from tests.gui.editor_fixtures import make_window  # noqa: F401 - the fixture
from tests.gui.inspector_fixtures import qt_loop  # noqa: F401 - the fixture
from tests.gui.subflow_fixtures import registry  # noqa: F401 - the fixture
from tests.gui.test_subflow_run import open_window, run_to_end
from tests.subflow_fixtures import _own_library  # noqa: F401 - the autouse fixture

VALUE = Qt.ItemDataRole.UserRole + 1


def roots(pane) -> list[tuple[str, object]]:
    tree = pane.tree
    return [(tree.topLevelItem(i).text(0), tree.topLevelItem(i).data(0, VALUE))
            for i in range(tree.topLevelItemCount())]


def test_a_selected_instance_shows_what_entered_and_left_it(make_window, registry,  # noqa: F811
                                                             qtbot):
    w = open_window(make_window, registry)
    run_to_end(qtbot, w)
    messages = w.run_session.inspector.messages
    w.scene.select_nodes(["fan1"])  # as a click on it does
    assert messages.node_id == "fan1"
    assert messages.header.text() == "First fan"
    note = messages.note.text()
    assert "has not received" not in note
    assert note.startswith("Subflow instance: 1 in · 2 out · 0 errors inside.")
    assert "Set A and Set B" in note
    # Its input feeds Set A and Set B: the one message that entered, once.
    [(label, entered)] = roots(messages.incoming)
    assert label == "#1  newest  · Set A"
    assert entered["payload"] == {"x": 1}
    # Both feed its output: what each sent.
    left = roots(messages.outgoing)
    assert [lbl.rpartition("· ")[2] for lbl, _ in left] == ["Set B", "Set A"]  # newest first
    assert [m["payload"] for _, m in left] == [{"x": 1, "b": 2}, {"x": 1, "a": 1}]
    # The instance that failed inside: its message went in, nothing out.
    w.scene.select_nodes(["risky"])
    assert messages.note.text().startswith("Subflow instance: 1 in · 0 out · 1 error inside.")
    assert [m["payload"] for _, m in roots(messages.incoming)] == [{"x": 1}]
    assert roots(messages.outgoing) == []
    # A node of the flow is shown as before.
    w.scene.select_nodes(["d1"])
    assert messages.note.text() == "2 in · 0 out · 0 errors"
