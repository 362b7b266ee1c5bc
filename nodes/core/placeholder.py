"""A stand-in for a node an importer could not map (runtime.importers): it
keeps the original node's type, its settings (bounded) and its wires, so
nothing of the imported flow is dropped, and its check is an error naming
the original type, so a run of the flow is refused (exit 2) until a person
replaces it; the flow still opens in the designer."""

from __future__ import annotations

from typing import Any

from runtime.node import CUSTOM, Node, NodeConfigError, Param, node

#: Most outputs a placeholder keeps (Node-RED's editor allows far fewer).
MAX_OUTPUTS = 64


@node("core.placeholder", name="Placeholder", category="Imported", icon="help", color="#9e9e9e",
      outputs=("out0",), dynamic_outputs=True)
class Placeholder(Node):
    """Stands for a node imported from another tool that has no Switchboard
    equivalent. It keeps the original's type, settings and wires; the flow
    does not run until it is replaced."""

    original_type = Param(str, "The original node's type, e.g. Node-RED's 'ui_button'",
                          default="", allow=CUSTOM)
    source = Param(str, "Where the node came from, e.g. Node-RED", default="Node-RED",
                   allow=CUSTOM)
    original = Param("json", "The original node's settings, as exported (long texts cut)",
                     default={}, allow=CUSTOM)
    reason = Param(str, "Why it could not be mapped", default="no Switchboard equivalent",
                   allow=CUSTOM)
    outputs = Param(int, "How many outputs the original node had (its wires are kept)",
                    default=1, allow=CUSTOM)

    @classmethod
    def output_ports(cls, params):
        p = params.get("outputs")
        n = p.value if p is not None else 1
        n = n if isinstance(n, int) and not isinstance(n, bool) else 1
        return [f"out{i}" for i in range(min(max(n, 1), MAX_OUTPUTS))]

    @classmethod
    def check(cls, params):
        return [("", problem_text(params))]

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        raise NodeConfigError(problem_text(self._params_view()))

    def _params_view(self) -> dict:
        return {"original_type": _Value(self.original_type.get()),
                "original": _Value(self.original.get()),
                "source": _Value(self.source.get()), "reason": _Value(self.reason.get())}


class _Value:
    def __init__(self, value: Any) -> None:
        self.value = value


def problem_text(params: dict) -> str:
    """'placeholder for Node-RED node 'x' (type 'ui_button'): ...; replace it'."""
    def text(name: str, default: str) -> str:
        p = params.get(name)
        v = getattr(p, "value", None)
        return str(v)[:200] if v not in (None, "") else default

    orig = getattr(params.get("original"), "value", None)
    name = orig.get("name") if isinstance(orig, dict) else None
    named = f"'{str(name)[:100]}' " if isinstance(name, str) and name else ""
    return (f"placeholder for {text('source', 'Node-RED')} node {named}(type "
            f"'{text('original_type', '?')}'): {text('reason', 'no Switchboard equivalent')}; "
            "replace it")
