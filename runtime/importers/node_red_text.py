"""Node-RED's mustache templates to Jinja2 (``mustache_to_jinja``), and the
Template node that uses it."""

from __future__ import annotations

import re
from typing import Any

from .node_red_base import Env, Mapped, c

_MUSTACHE = re.compile(r"\{\{\{\s*([^}]*?)\s*\}\}\}|\{\{\s*([&#^/!>=]?)\s*([^}]*?)\s*\}\}")
_NAME = re.compile(r"^[A-Za-z_$][\w$]*(\.[\w$]+)*$")


def mustache_to_jinja(text: str, env: Env, out: Mapped, *, msg: str = "",
                      html: bool = True) -> str:
    """Mustache variables to Jinja2; literal text that Jinja2 would read is
    kept raw. Sections, partials and comments are not mapped: the whole
    template is kept as text and marked review. ``msg``: what a message's
    name is written after (``msg.`` in an expression); ``html``: whether
    ``{{x}}`` escapes HTML as mustache does. ``{{env.NAME}}`` of one of the
    subflow's env properties reads its param: ``{{ subflow.NAME }}``
    (``out.reads_subflow``), in a Template node's text as in a ``{{ }}``
    param."""
    parts: list[Any] = []
    pos = 0
    for hit in _MUSTACHE.finditer(text):
        parts.append(_literal(text[pos:hit.start()]))
        pos = hit.end()
        triple, sigil, name = hit.group(1), hit.group(2), hit.group(3)
        escape = triple is None and sigil != "&"
        name = (triple if triple is not None else name).strip()
        if (triple is None and sigil not in ("", "&")) or not _NAME.match(name or "-"):
            out.review(f"mustache tag {hit.group(0)[:60]!r} (sections, partials, comments) is "
                       "not mapped: the template is kept as plain text")
            out.reads_subflow = False
            return _literal(text)
        root = name.split(".")[0]
        escape = escape and html
        if root == "env":
            ref = env.param(name.split(".", 1)[1] if "." in name else "")
            if ref is not None:
                parts.append(("subflow." + ref[0] + (" | e" if escape else ""),))
                out.reads_subflow = True
                continue
            ok, value, why = env.lookup(name.split(".", 1)[1] if "." in name else "")
            if ok:
                parts.append(_literal(_escape_html(str(value)) if escape else str(value)))
                continue
            out.review(f"{{{{{name}}}}}: {why}; Switchboard's Template node does not read env "
                       "(it renders empty): set the value on the message with a Change node")
        elif root in ("flow", "global"):
            out.review(f"{{{{{name}}}}} reads a {root} variable: check that the run sets it")
        at = "" if root in ("flow", "global") and msg else msg  # their own roots
        parts.append("{{ " + at + name + (" | e" if escape else "") + " }}")
    parts.append(_literal(text[pos:]))
    return "".join(p if isinstance(p, str) else "{{ " + p[0] + " }}" for p in parts)


def _literal(text: str) -> str:
    if any(s in text for s in ("{{", "{%", "{#", "}}", "%}", "#}")):
        return "{% raw %}" + text + "{% endraw %}"
    return text


def _escape_html(s: str) -> str:
    return (s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;").replace("'", "&#39;").replace("`", "&#x60;")
            .replace("=", "&#x3D;").replace("/", "&#x2F;"))


def _template(n: dict, env: Env) -> Mapped:
    out = Mapped("core.template")
    text = str(n.get("template") or "")
    if n.get("syntax", "mustache") == "mustache":
        out.params["template"] = c(mustache_to_jinja(text, env, out))
    else:
        out.params["template"] = c(_literal(text))
    if n.get("fieldType", "msg") != "msg":
        out.review(f"writes to {n.get('fieldType')}.{n.get('field')}: writes msg.payload")
    else:
        out.params["to"] = c(str(n.get("field") or "payload"))
    if n.get("output", "str") != "str":
        out.review(f"output '{n.get('output')}' is parsed by Node-RED; Switchboard writes text")
    return out
