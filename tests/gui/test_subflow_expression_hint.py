"""Inside a subflow definition a {{ }} param's editor says that the
template reads subflow too (its preview shows the params' defaults); before,
its hint said 'Reads msg, env, flow and global' there as anywhere."""

from __future__ import annotations

from designer.model.document import FlowDocument
from designer.panels.properties import PropertiesPanel
from runtime.spec import ParamValue, Scope
from tests.gui.test_subflow_instances import flow_file, registry  # noqa: F401 - fixtures


def test_the_hint_says_subflow_inside_a_definition_only(qtbot, flow_file):  # noqa: F811
    owner = FlowDocument.open(flow_file)
    defn = owner.flow.subflow("notify")
    url = ParamValue(scope=Scope.EXPRESSION, value="http://127.0.0.1/{{ subflow.channel }}")
    defn.nodes[2].params["url"] = url
    panel = PropertiesPanel(owner.for_definition(defn))
    qtbot.addWidget(panel)
    panel.show()
    panel.set_node("get")
    editor = panel.form.rows["url"].expression_editor
    editor.refresh_preview()
    assert editor.hint.text() == "Reads msg, env, flow, global and subflow"
    # The same node in a flow of its own: no subflow there.
    from runtime.flow import Flow

    alone = FlowDocument(Flow(name="Alone", nodes=[defn.nodes[2].model_copy(deep=True)]),
                         owner.registry)
    panel2 = PropertiesPanel(alone)
    qtbot.addWidget(panel2)
    panel2.show()
    panel2.set_node("get")
    editor2 = panel2.form.rows["url"].expression_editor
    editor2.refresh_preview()
    assert editor2.hint.text() == "Reads msg, env, flow and global"
