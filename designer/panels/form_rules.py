"""What the properties form decides without widgets: the sections' open or
closed memory for the session, params by group, which params show, and a
problem's words and place in the form's terms."""

from __future__ import annotations

import json
import re
from typing import Any

from runtime.spec import NodeSpec, ParamSpec, ParamValue, Scope

from .editor_base import esc

# -- sections ---------------------------------------------------------------------------

#: Keys of the two previews in the open/closed memory, beside the param groups.
AGENT_PREVIEW = "@agent-preview"
TOOL_PREVIEW = "@tool-preview"
TOOL_SETTINGS = "@tool-settings"
OUTPUTS = "@outputs"
#: Groups shown in this order; others between them, in the order the node declares them.
_FIRST_GROUPS = ("", "connection")
_LAST_GROUPS = ("advanced",)
#: Open or closed, per (node type, section), for this session: a section the
#: user opened on one Send Mail is open on the next one too.
_open_sections: dict[tuple[str, str], bool] = {}


def section_open(node_type: str, key: str) -> bool:
    return _open_sections.get((node_type, key), False)


def remember_section(node_type: str, key: str, on: bool) -> None:
    _open_sections[(node_type, key)] = on


def param_groups(spec: NodeSpec) -> list[tuple[str, list[ParamSpec]]]:
    """The params by group: main ("") first, then connection, then the other
    groups as the node declares them, advanced last."""
    by_group: dict[str, list[ParamSpec]] = {}
    for p in spec.params:
        by_group.setdefault(p.group, []).append(p)

    def rank(group: str) -> tuple[int, int]:
        if group in _FIRST_GROUPS:
            return (0, _FIRST_GROUPS.index(group))
        if group in _LAST_GROUPS:
            return (2, _LAST_GROUPS.index(group))
        return (1, 0)
    return sorted(by_group.items(), key=lambda item: rank(item[0]))


def group_title(group: str) -> str:
    return group.replace("_", " ").replace("-", " ").capitalize()


def fixed_value(spec: NodeSpec, name: str, settings: dict[str, ParamValue]) -> Any:
    setting = settings.get(name)
    if setting is not None and setting.scope is Scope.CUSTOM and setting.value is not None:
        return setting.value
    p = spec.param(name)
    return p.default if p is not None else None


def condition_holds(spec: NodeSpec, p: ParamSpec, ctl: str,
                     settings: dict[str, ParamValue]) -> bool:
    """Whether ``ctl``'s part of ``p``'s visible_if holds (as param_visible
    reads it: a choice made at run time holds)."""
    setting = settings.get(ctl)
    if setting is not None and setting.scope is not Scope.CUSTOM:
        return True
    return fixed_value(spec, ctl, settings) in (p.visible_if or {}).get(ctl, [])


def is_changed(spec: NodeSpec, name: str, settings: dict[str, ParamValue]) -> bool:
    setting = settings.get(name)
    p = spec.param(name)
    if setting is None or p is None:
        return False
    if setting.scope is not p.default_scope:
        return True
    return setting.scope is Scope.CUSTOM and setting.value is not None \
        and setting.value != p.default


def quote_value(value: Any) -> str:
    return f"“{value}”" if isinstance(value, str) else json.dumps(value)


def doc_html(text: str) -> str:
    """A docstring as a paragraph: single line breaks joined, ``code`` kept."""
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text.strip())]
    html = "<br><br>".join(esc(p) for p in paragraphs)
    return re.sub(r"``(.+?)``|`(.+?)`", lambda m: f"<tt>{m.group(1) or m.group(2)}</tt>", html)


def param_of(spec: NodeSpec, field: str | None) -> ParamSpec | None:
    """The param a problem's field (params.smtp_port.value) is about."""
    parts = (field or "").split(".")
    return spec.param(parts[1]) if parts[0] == "params" and len(parts) > 1 else None


def human_message(spec: NodeSpec, message: str) -> str:
    """A problem's text with the param ids in it (smtp_port, 'to') and the
    node's type id replaced by the labels the form shows."""
    for p in sorted(spec.params, key=lambda p: -len(p.name)):
        message = message.replace(f"'{p.name}'", p.label)
        if "_" in p.name:
            message = re.sub(rf"(?<![\w.]){re.escape(p.name)}(?![\w])", p.label, message)
    return message.replace(f"{spec.type} ", f"{spec.name} ")


def field_label(spec: NodeSpec, field: str | None) -> str:
    """Where a problem is, in the form's words: "SMTP port" for
    params.smtp_port.value, "Tool name", "Output message_id", "Wire"."""
    if not field:
        return ""
    parts = field.split(".")
    if parts[0] == "params" and len(parts) > 1:
        p = spec.param(parts[1])
        return p.label if p else parts[1]
    if parts[0] == "tool":
        return "Tool name"
    if parts[0] == "outputs" and len(parts) > 1:
        return f"Output {parts[1]}"
    if parts[0].startswith("wires["):
        return "Wire"
    if field == "in":
        return ""
    return field
