"""A subflow's inputs and outputs (runtime.flow.subflows, docs/subflows.md):
``subflow.in`` is where a message that reaches the instance's input port of
the same name enters the definition, ``subflow.out`` where one leaves by
the instance's output port of its name.

They exist only inside a definition. A run expands every instance into
its definition's nodes and routes the wires through these two straight to
what they connect (runtime.flow.expand), so in an RPA run they never run
at all; they are kept as real nodes only inside an instance that is an
agent's tool, where they pass a message through. In a top-level flow
validation refuses them."""

from __future__ import annotations

from typing import Any

from runtime.node import CUSTOM, BoundParam, Node, Param, node

CATEGORY = "Subflows"


def _param_called_name(cls: type[Node]) -> type[Node]:
    """The file format calls the port's param ``name``, which ``@node``
    keeps for the node's display name: it is declared as ``port`` and
    renamed in the spec."""
    params = [p.model_copy(update={"name": "name", "label": "Name"}) if p.name == "port" else p
              for p in cls.spec.params]
    cls.spec = cls.spec.model_copy(update={"params": params})
    return cls


class _Port(Node):
    """The node's display name stays ``self.name``; the param ``name`` is
    ``self.port`` (and ``param("name")``)."""

    def __init__(self, id: str, name: str = "", *args: Any, **kw: Any) -> None:
        super().__init__(id, name, *args, **kw)
        self.port: BoundParam = self.__dict__["name"]
        self.name = name or self.spec.name

    def param(self, name: str) -> BoundParam:
        return self.port if name == "name" else super().param(name)


@_param_called_name
@node("subflow.in", name="Subflow input", category=CATEGORY, icon="login", color="#8d6e63",
      inputs=())
class SubflowIn(_Port):
    """An input of the subflow being defined: what reaches the instance's
    input port of this name leaves here."""

    port = Param(str, "The input's name: the instance's input port (e.g. order)",
                 default="in", allow=CUSTOM)

    def on_message(self, msg):
        return None  # passes the message on, unchanged


@_param_called_name
@node("subflow.out", name="Subflow output", category=CATEGORY, icon="logout", color="#8d6e63",
      outputs=())
class SubflowOut(_Port):
    """An output of the subflow being defined: what reaches it leaves the
    instance by the output port of this name."""

    port = Param(str, "The output's name: the instance's output port (e.g. done)",
                 default="out", allow=CUSTOM)

    def on_message(self, msg):
        return None  # nothing is wired after it inside the definition
