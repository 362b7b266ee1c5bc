"""Nodes that reshape messages."""

from __future__ import annotations

from typing import Any

from runtime.expressions import ExpressionError, TextTemplate, compile_text_template
from runtime.message import PathError, deep_copy, delete_path, get_path, parse_path, set_path
from runtime.node import CUSTOM, Node, NodeConfigError, Param, node
from runtime.spec import Scope

CHANGE_ACTIONS = ("set", "delete", "move", "copy")


@node("core.change", name="Change", category="Core", icon="edit", color="#e2a03f")
class Change(Node):
    """Sets, deletes, moves or copies message properties, rule by rule."""

    rules = Param("json", 'Rules in order: {"action": "set", "path": "payload.x", "value": 1}, '
                  '{"action": "delete", "path": ...}, {"action": "move"|"copy", "from": ..., '
                  '"path": ...}', default=[], allow=CUSTOM)

    @classmethod
    def check(cls, params):
        rules = params.get("rules")
        problems = _rule_problems(rules.value if rules else [])
        return [("rules", p) for p in problems] if problems else []

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        # Compile once into small closures: the hot path is one call per rule.
        self._ops = [_compile_rule(r) for r in (self.rules.get() or [])]
        if len(self._ops) == 1:
            # The usual change node has one rule: that closure is the whole
            # on_message (it returns None: send on), one call per message.
            self.on_message = self._ops[0]  # type: ignore[method-assign]

    def on_message(self, msg):
        for op in self._ops:
            op(msg)


def _compile_rule(rule: dict) -> Any:
    action, path, src = rule["action"], rule["path"], rule.get("from")
    if action == "set":
        value = rule.get("value")
        if isinstance(value, (dict, list)):
            return lambda msg: set_path(msg, path, deep_copy(value))
        parts = parse_path(path)
        if len(parts) == 1 and isinstance(parts[0], str):
            key = parts[0]

            def set_top(msg: dict) -> None:
                msg[key] = value

            return set_top
        return lambda msg: set_path(msg, path, value)
    if action == "delete":
        def delete(msg: dict) -> None:  # not a lambda: on_message must return None
            delete_path(msg, path)

        return delete
    # Copying or moving a property the message does not have leaves the
    # target alone rather than writing null there.
    if action == "copy":
        def copy(msg: dict) -> None:
            value = get_path(msg, src, _MISSING)
            if value is not _MISSING:
                set_path(msg, path, deep_copy(value))

        return copy

    def move(msg: dict) -> None:
        value = get_path(msg, src, _MISSING)
        if value is _MISSING:
            return
        delete_path(msg, src)
        set_path(msg, path, value)

    return move


_MISSING = object()


#: The paths each action reads, to check; an action not here is unknown.
_PATH_KEYS = {"set": ("path",), "delete": ("path",), "move": ("path", "from"),
              "copy": ("path", "from")}


def _rule_problems(rules: Any) -> list[str]:
    if not isinstance(rules, list):
        return ["rules must be a list"]
    out = []
    for i, r in enumerate(rules):
        if not isinstance(r, dict):
            out.append(f"rule {i + 1} must be an object")
            continue
        action = r.get("action")
        keys = _PATH_KEYS.get(action) if type(action) is str else None
        if keys is None:
            out.append(f"rule {i + 1}: action must be one of {', '.join(CHANGE_ACTIONS)}")
            continue
        for key in keys:
            try:
                parse_path(r.get(key) or "")
            except PathError as exc:
                out.append(f"rule {i + 1}: '{key}': {exc}")
        if action == "set" and "value" not in r:
            out.append(f"rule {i + 1}: a set rule needs a value")
    return out


@node("core.template", name="Template", category="Core", icon="template", color="#d86f9b")
class Template(Node):
    """Renders a Jinja2 template over the message (``{{ payload.name }}``,
    ``{{ msg.topic }}``) and writes the text to a path. The engine of
    expressions renders it (runtime.expressions.TextTemplate): the same
    sandbox and the same bounds of steps, work, sizes and output, checked
    when the flow is; a missing key reads as empty text. Inside a subflow
    definition the template also sees ``subflow``: the params of the
    instance it runs in (``{{ subflow.carrier }}``)."""

    template = Param(str, "Jinja2 template; the message's fields are variables, and 'msg' is "
                     "the whole message", default="{{ payload }}", multiline=True, allow=CUSTOM)
    to = Param(str, "Where to write the text", default="payload", allow=CUSTOM)

    @classmethod
    def check(cls, params):
        tpl = params.get("template")
        if tpl and isinstance(tpl.value, str):
            try:
                compile_text_template(tpl.value)
            except ExpressionError as exc:
                return [("template", f"template error: {exc}")]
        return []

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        # A param set by an expression ({{ }} scope) has a value per message:
        # it is read then, not here (with no message it may not render).
        self._tpl: TextTemplate | None = None
        if self.template.scope is not Scope.EXPRESSION:
            try:
                self._tpl = TextTemplate(self.template.get() or "")
            except ExpressionError as exc:
                raise NodeConfigError(f"template error: {exc}") from None
        self._to = None if self.to.scope is Scope.EXPRESSION else self.to.get() or "payload"

    def _subflow(self, msg: Any) -> Any:
        """What ``{{ subflow.NAME }}`` reads for ``msg`` when this node runs
        inside a subflow instance (that instance's params, as a ``{{ }}``
        param there sees them); else None, and ``subflow`` stays a key of
        the message."""
        values = self.__dict__.get("_subflow_values", False)
        if values is False:
            engine = getattr(self._rt, "engine", None)
            context = engine.template_context(self.id, "template") \
                if hasattr(engine, "template_context") else None
            values = self._subflow_values = getattr(context, "subflow", None)
        return values(msg) if values is not None else None

    def on_message(self, msg):
        # RenderDeadline (the run's --timeout passed mid-render) is not an
        # ExpressionError: it reaches the engine, which ends the run.
        try:
            tpl = self._tpl or TextTemplate(self.template.get(msg) or "")  # compiled once a text
            text = tpl.render(msg, self._subflow(msg)) if "subflow" in tpl.compiled.roots \
                else tpl.render(msg)
        except ExpressionError as exc:
            raise NodeConfigError(f"template: {exc}") from None
        set_path(msg, self._to or self.to.get(msg) or "payload", text)


@node("core.split", name="Split", category="Core", icon="split", color="#e2a03f")
class Split(Node):
    """Sends one message per element of a list (or per key of an object),
    with ``parts`` = {index, count, key, id} so a later node knows where it was
    (``id`` is the split message's, the same for all its parts)."""

    path = Param(str, "The list to split", default="payload", allow=CUSTOM)

    def on_message(self, msg):
        from runtime.message import new_msgid
        from runtime.node import DROP

        path = self.path.get() or "payload"
        value = get_path(msg, path)
        if isinstance(value, dict):
            items = list(value.items())
        elif isinstance(value, list):
            items = list(enumerate(value))
        else:
            return None  # not a list: pass the message through unchanged
        # Copy the message without the list once per part, not the whole list
        # each time (that was quadratic). The incoming message is ours to
        # change: it is dropped here, and each item goes to exactly one part.
        set_path(msg, path, None)
        # The split message's id names the group, so that a Join in auto
        # mode never mixes the parts of two splits of the same length.
        group = msg.get("_msgid") or new_msgid()
        for i, (key, item) in enumerate(items):
            part = deep_copy(msg)
            set_path(part, path, item)
            part["parts"] = {"index": i, "count": len(items), "key": key, "id": group}
            part["_msgid"] = new_msgid()
            self.send(part)
        return DROP
