"""The node side of issue 12's properties work: every built-in node's params
are grouped so that a newcomer sees what matters first, and visible_if
names real choices, so the designer can hide what a choice makes
meaningless."""

from __future__ import annotations

import pytest

from runtime.registry import Registry
from runtime.spec import ParamType, ParamValue, Scope

# The packages whose params this part grouped.
GROUPED = ("mail.", "http.", "browser.", "files.", "csv.", "excel.", "trigger.")
GROUPS = {"", "connection", "authentication", "advanced"}


def specs():
    return [s for s in Registry.default().specs() if s.type.startswith(GROUPED)]


def custom(**values):
    return {k: ParamValue(scope=Scope.CUSTOM, value=v) for k, v in values.items()}


@pytest.mark.parametrize("spec", specs(), ids=lambda s: s.type)
def test_groups_are_known_and_main_comes_first_in_every_node(spec):
    groups = {p.group for p in spec.params}
    assert groups <= GROUPS, groups - GROUPS
    assert any(not p.group for p in spec.params), "a node with no main param opens empty"


@pytest.mark.parametrize("spec", Registry.default().specs(), ids=lambda s: s.type)
def test_no_required_param_hides_in_a_closed_section(spec):
    # A closed section must never hold what the node cannot run without.
    assert [p.name for p in spec.params if p.group and p.required] == []


@pytest.mark.parametrize("spec", Registry.default().specs(), ids=lambda s: s.type)
def test_visible_if_names_choices_that_exist(spec):
    for p in spec.params:
        for other, values in (p.visible_if or {}).items():
            ctl = spec.param(other)
            assert ctl is not None and ctl.type is ParamType.ENUM, (p.name, other)
            assert set(values) <= set(ctl.choices or []), (p.name, values)
            # Shown with at least one choice, hidden with at least one other.
            assert values and set(ctl.choices) - set(values), (p.name, values)


def test_send_mail_outbox_hides_the_server_and_shows_the_folder():
    spec = Registry.default().spec("mail.send")
    smtp = ("smtp_host", "smtp_port", "username", "password", "starttls")
    assert all(spec.param(n).group == "connection" for n in smtp)
    assert spec.param("max_recipients").group == "advanced"
    assert all(spec.param_visible(n, {}) for n in smtp)  # the default is smtp
    assert not spec.param_visible("outbox_dir", {})
    outbox = custom(delivery="outbox")
    assert not any(spec.param_visible(n, outbox) for n in smtp)
    assert spec.param_visible("outbox_dir", outbox)
    # What the AI may fill does not depend on the delivery.
    assert all(spec.param_visible(n, outbox) for n in ("to", "cc", "subject", "body"))


def test_http_request_shows_the_fields_of_the_chosen_auth_body_and_response():
    spec = Registry.default().spec("http.request")
    visible = {name: spec.param_visible(name, {}) for name in
               ("username", "password", "token", "body", "body_file", "response_file")}
    assert visible == {"username": False, "password": False, "token": False, "body": True,
                       "body_file": False, "response_file": False}
    assert spec.param_visible("token", custom(auth="bearer"))
    assert not spec.param_visible("password", custom(auth="bearer"))
    assert not spec.param_visible("body", custom(body_type="none"))
    assert spec.param_visible("body_file", custom(body_type="file"))
    assert spec.param_visible("response_file", custom(response_as="file"))


def test_the_properties_doc_shows_images_that_exist():
    import re
    from pathlib import Path

    doc = Path(__file__).resolve().parents[1] / "docs" / "properties.md"
    names = re.findall(r"\(img/([^)]+\.png)\)", doc.read_text(encoding="utf-8"))
    assert "properties-agent-sections.png" in names and "properties-outbox.png" in names
    for name in names:
        assert (doc.parent / "img" / name).is_file(), name
