"""docs/scopes.md promises a runnable flow and what the model sees of it;
hold the page to that, through the same panel the screenshots show."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from designer.model.document import FlowDocument
from designer.panels import PropertiesPanel
from runtime.flow import parse_flow, validate_flow
from runtime.registry import Registry

DOC = Path(__file__).resolve().parents[2] / "docs" / "scopes.md"


def doc_flow():
    text = DOC.read_text(encoding="utf-8")
    block = re.search(r"```json\n(.*?)```", text, re.S)
    assert block, "docs/scopes.md has no flow"
    return parse_flow(json.loads(block.group(1)))


def test_scopes_doc_flow_is_valid_and_offers_only_ai_params(qtbot):
    registry = Registry.default()
    if "ai.agent" not in registry or "mail.send" not in registry:
        pytest.skip("ai.agent and mail.send are not installed")
    flow = doc_flow()
    assert [p for p in validate_flow(flow, registry) if p.severity == "error"] == []
    doc = FlowDocument(flow, registry)
    panel = PropertiesPanel(doc)
    qtbot.addWidget(panel)
    panel.set_node("agent")
    (fn,) = panel.form.functions
    params = fn["function"]["parameters"]
    assert fn["function"]["name"] == "send_email"
    assert set(params["properties"]) == {"to", "subject"}
    assert params["required"] == ["to", "subject"]
    assert params["properties"]["subject"]["description"] == "A short subject line"
    assert params["additionalProperties"] is False


def test_scopes_doc_images_exist():
    for name in re.findall(r"\(img/([^)]+\.png)\)", DOC.read_text(encoding="utf-8")):
        assert (DOC.parent / "img" / name).is_file(), name
