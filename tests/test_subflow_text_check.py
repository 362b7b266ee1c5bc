"""Validation of a Template node's own text inside a subflow definition
(docs/subflows.md, "Errors"): ``{{ subflow.NAME }}`` there reads the
instance's param NAME (61a95cf), so a NAME the definition does not declare
is an error naming the node and the name, as for a ``{{ }}`` param; before,
it was not checked and rendered as empty text. Outside a definition
``subflow`` in the text is a key of the message: no error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.test_subflows import (  # noqa: F401 - the autouse fixture
    IN,
    OUT,
    P,
    W,
    _own_library,
    debug,
    errors,
    flow,
    inject,
    sub,
)

ROOT = Path(__file__).resolve().parents[1]


def text(id: str, value: str) -> dict:
    """A core.template whose own text (a fixed value) is ``value``."""
    return {"id": id, "type": "core.template", "params": {"template": P(value)}}


def shipping(value: str) -> dict:
    return sub("ship", [IN(), text("say", value), OUT()], [W("i", "say"), W("say", "o")],
               [{"name": "carrier", "default": "post"}, {"name": "days", "type": "int",
                                                          "default": 3}])


def used(defn: dict):
    return flow([inject(), {"id": "s1", "type": "subflow:ship"}, debug("d")],
                [W("src", "s1"), W("s1", "d")], [defn])


def test_an_unknown_name_in_a_template_nodes_text_is_an_error_naming_node_and_name():
    errs = errors(used(shipping("Ship by {{ subflow.carrier }} in {{ subflow.nope }} days")))
    assert [e for e in errs if "nope" in e] == [
        "f.flow.json: node 'subflows.ship/say', params.template.value: the text reads "
        "subflow.nope, and subflow 'ship' has no param 'nope' (its params: carrier, days)"]


def test_known_names_a_computed_one_and_the_flows_own_templates_are_no_error():
    assert errors(used(shipping("{{ subflow.carrier }} {{ subflow['days'] }} {{ payload }}"))) == []
    # Read by a computed name: known per message only, not checked here.
    assert errors(used(shipping("{{ subflow[payload.which] }}"))) == []
    # In the flow itself 'subflow' is a key of the message.
    top = flow([inject({"subflow": {"nope": 1}}), text("t", "{{ subflow.nope }}"), debug("d")],
               [W("src", "t"), W("t", "d")])
    assert errors(top) == []


def test_a_definition_no_instance_uses_is_checked_too():
    unused = flow([inject(), debug("d")], [W("src", "d")], [shipping("{{ subflow.nope }}")])
    assert any("node 'subflows.ship/say'" in e and "'nope'" in e for e in errors(unused))


def test_switchboard_validate_says_it(tmp_path):
    path = tmp_path / "ship.flow.json"
    path.write_text(used(shipping("By {{ subflow.carier }}")).dumps())
    done = subprocess.run([sys.executable, "-m", "runtime.cli", "validate", str(path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode != 0
    assert ("node 'subflows.ship/say', params.template.value: the text reads subflow.carier, "
            "and subflow 'ship' has no param 'carier' (its params: carrier, days)") in (
        done.stdout + done.stderr)
    assert "Traceback" not in done.stderr
