"""Node-RED's mustache templates to Jinja2 (``mustache_to_jinja``), and the
Template node that uses it."""

from __future__ import annotations

import json
import re
from typing import Any

from .node_red_base import Env, Mapped, c, x

_MUSTACHE = re.compile(r"\{\{\{\s*([^}]*?)\s*\}\}\}|\{\{\s*([&#^/!>=]?)\s*([^}]*?)\s*\}\}")
_NAME = re.compile(r"^[A-Za-z_$][\w$]*(\.[\w$]+)*$")


def mustache_to_jinja(text: str, env: Env, out: Mapped, *, msg: str = "",
                      html: bool = True, two_pass: bool = False) -> str:
    """Mustache variables to Jinja2; literal text that Jinja2 would read is
    kept raw. Sections, partials and comments are not mapped: the whole
    template is kept as text and marked review. ``msg``: what a message's
    name is written after (``msg.`` in an expression); ``html``: whether
    ``{{x}}`` escapes HTML as mustache does. ``{{env.NAME}}`` of one of the
    subflow's env properties reads its param: ``{{ subflow.NAME }}``
    (``out.reads_subflow``); with ``two_pass`` (a Template node's text, which
    does not see ``subflow``) the result is then an expression that writes
    the Template node's text with the params' values in it
    (``subflow_text``)."""
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
    if two_pass and out.reads_subflow:
        return subflow_text(parts)
    return "".join(p if isinstance(p, str) else "{{ " + p[0] + " }}" for p in parts)


def subflow_text(parts: list[Any]) -> str:
    """The expression that writes a Template node's text: its own parts
    (str) as they are, and each subflow param (a 1-tuple: the expression
    reading it) as its value, inside {% raw %} so that the Template node
    writes the value as it is. Only the params go through a template twice,
    never the message's values."""
    out, run = [], []

    def flush() -> None:
        chunk = "".join(run)
        run.clear()
        if chunk:
            out.append("{% raw %}" + chunk + "{% endraw %}" if "endraw" not in chunk
                       else "{{ " + json.dumps(chunk) + " }}")

    for p in parts:
        if isinstance(p, str):
            run.append(p)
        else:
            flush()
            out.append("{{ '{% raw %}' ~ (" + p[0] + ") ~ '{% endraw %}' }}")
    flush()
    return "".join(out)


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
        jinja = mustache_to_jinja(text, env, out, two_pass=True)
        out.params["template"] = x(jinja) if out.reads_subflow else c(jinja)
        if out.reads_subflow:
            out.notes.append("The template reads the subflow's params: it is an expression "
                             "({{ }}) writing the Template node's text with their values in it")
    else:
        out.params["template"] = c(_literal(text))
    if n.get("fieldType", "msg") != "msg":
        out.review(f"writes to {n.get('fieldType')}.{n.get('field')}: writes msg.payload")
    else:
        out.params["to"] = c(str(n.get("field") or "payload"))
    if n.get("output", "str") != "str":
        out.review(f"output '{n.get('output')}' is parsed by Node-RED; Switchboard writes text")
    return out
