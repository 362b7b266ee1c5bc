"""The designer's choices about an MCP server's tools, as the flow keeps them
(the ``tools`` param of ``mcp.server``), and what the LLM sees of each.

One entry per tool the server listed: its name, description and input schema
as listed, then the designer's choices: enabled, a new name for the LLM,
arguments pinned to a fixed value (the Custom scope of a node param: removed
from the schema the LLM sees, and filled in by the node, so the LLM can
neither see nor set them), argument descriptions for the LLM, and the
approval policy and call limits a tool node has (runtime.flow.ToolOverride).

No Qt and no ``mcp`` import here: the flow validator, the tool-schema
builder and the designer all read it."""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runtime.approval import ApprovalPolicy
from runtime.arguments import preview, short
from runtime.tools import TOOL_NAME_RE

#: Tools one server may list (more are left out of the listing, with a note).
MAX_TOOLS = 500
#: Characters of one tool's input schema, as JSON.
MAX_SCHEMA_CHARS = 64 * 1024
#: Characters of a tool's description kept from the listing.
MAX_DESCRIPTION_CHARS = 4000
#: MCP's own bound on a tool name.
MAX_NAME_CHARS = 128


class McpToolEntry(BaseModel):
    """One tool of an MCP server in a flow: as listed, and as the designer set it."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    description: str = Field(default="", max_length=MAX_DESCRIPTION_CHARS)
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    enabled: bool = True
    #: The name the LLM calls it by; unset: the server's name.
    rename: str | None = None
    #: Arguments the designer fixed (scope Custom): never in the LLM's schema.
    pinned: dict[str, Any] = Field(default_factory=dict)
    #: What the LLM is told about an argument instead of the server's words.
    arg_descriptions: dict[str, str] = Field(default_factory=dict)
    approval: ApprovalPolicy | None = None
    max_calls_per_run: int | None = Field(default=None, ge=1, le=1_000_000)
    max_calls_per_turn: int | None = Field(default=None, ge=1, le=1000)

    @property
    def offered_name(self) -> str:
        """The function name the LLM sees."""
        return self.rename or self.name

    def arguments(self) -> dict[str, dict]:
        """The tool's arguments as listed: name -> property schema."""
        props = self.input_schema.get("properties")
        return {k: v for k, v in props.items() if isinstance(v, dict)} \
            if isinstance(props, dict) else {}

    def to_json(self) -> dict[str, Any]:
        """As the flow file keeps it: the listing, whether it is enabled, and
        the designer's other choices only where made."""
        data = self.model_dump(mode="json", exclude_none=True)
        out = {k: data[k] for k in ("name", "description", "input_schema", "enabled")}
        for key in ("rename", "pinned", "arg_descriptions", "approval", "max_calls_per_run",
                    "max_calls_per_turn"):
            if data.get(key):
                out[key] = data[key]
        return out


@dataclass(frozen=True)
class OfferedTool:
    """One tool as an agent offers it to its LLM (what runtime.tools reads
    from a node class's ``tool_entries``)."""

    name: str
    description: str
    schema: dict[str, Any]
    approval: ApprovalPolicy | None
    max_calls_per_run: int | None
    max_calls_per_turn: int | None


def llm_schema(entry: McpToolEntry) -> dict[str, Any]:
    """The server's input schema less the pinned arguments, with the
    designer's descriptions, and closed (``additionalProperties: false``): an
    argument the LLM sends that this schema does not hold, a pinned one above
    all, is refused before the node runs, as for any tool."""
    schema = copy.deepcopy(entry.input_schema)
    schema["type"] = "object"
    props = schema.get("properties")
    props = dict(props) if isinstance(props, dict) else {}
    for arg in entry.pinned:
        props.pop(arg, None)
    # A property's title ("Order Id") is a model's field label: tokens the
    # LLM does not need, and it keeps a flat schema out of strict mode.
    props = {k: {pk: pv for pk, pv in v.items() if pk != "title"} if isinstance(v, dict) else v
             for k, v in props.items()}
    for arg, text in entry.arg_descriptions.items():
        if arg in props and isinstance(props[arg], dict) and text:
            props[arg] = {**props[arg], "description": text}
    schema["properties"] = props
    required = schema.get("required")
    if isinstance(required, list):
        schema["required"] = [r for r in required if r in props]
    else:
        schema["required"] = []
    schema["additionalProperties"] = False
    schema.pop("title", None)  # "addArguments": a model's class name, nothing for the LLM
    return schema


def parse_entries(value: Any) -> tuple[list[McpToolEntry], list[str]]:
    """The entries of a ``tools`` param value, and what is wrong with it
    (each problem names the tool and the field)."""
    if value is None:
        return [], []
    if not isinstance(value, list):
        return [], ["must be a list of tools (List tools fills it)"]
    if len(value) > MAX_TOOLS:
        return [], [f"holds {len(value)} tools; at most {MAX_TOOLS}"]
    entries: list[McpToolEntry] = []
    problems: list[str] = []
    for i, raw in enumerate(value):
        where = f"tool #{i + 1}"
        if isinstance(raw, dict) and isinstance(raw.get("name"), str):
            where = f"tool '{short(raw['name'], 64)}'"
        try:
            entry = McpToolEntry.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(x) for x in first["loc"])
            problems.append(f"{where}: {field + ': ' if field else ''}{first['msg']}")
            continue
        problems += [f"{where}: {p}" for p in entry_problems(entry)]
        entries.append(entry)
    offered: dict[str, str] = {}
    for e in entries:
        if not e.enabled:
            continue
        other = offered.get(e.offered_name)
        if other is not None:
            problems.append(f"tools '{other}' and '{e.name}' are both offered as "
                            f"'{e.offered_name}'; rename one")
        offered[e.offered_name] = e.name
    return entries, problems


def entry_problems(entry: McpToolEntry) -> list[str]:
    """What is wrong with one entry: a schema too big, a name the LLM cannot
    call, a pinned argument the tool does not have or of the wrong type."""
    out = []
    if len(json.dumps(entry.input_schema)) > MAX_SCHEMA_CHARS:
        out.append(f"input_schema is over {MAX_SCHEMA_CHARS} characters")
    if entry.enabled and not TOOL_NAME_RE.match(entry.offered_name):
        field = "rename" if entry.rename else "name"
        out.append(f"{field}: '{short(entry.offered_name, 64)}' is not a name an LLM can call "
                   "(1-64 letters, digits, '_' or '-'); rename it")
    args = entry.arguments()
    for arg, value in entry.pinned.items():
        if arg not in args:
            out.append(f"pinned: '{short(arg, 64)}' is not an argument of this tool "
                       f"(it has: {', '.join(args) or 'none'})")
            continue
        why = value_problem(args[arg], value)
        if why:
            out.append(f"pinned: '{arg}': {why}")
    for arg in entry.arg_descriptions:
        if arg not in args:
            out.append(f"arg_descriptions: '{short(arg, 64)}' is not an argument of this tool")
    return out


def value_problem(prop: dict[str, Any], value: Any) -> str | None:
    """Why a pinned value does not fit its argument's schema, or None."""
    import jsonschema

    try:
        error = jsonschema.exceptions.best_match(
            jsonschema.Draft202012Validator(prop).iter_errors(value))
    except (jsonschema.exceptions.SchemaError, RecursionError, TypeError):
        return None  # a schema we cannot read: the server will judge the value
    if error is None:
        return None
    return f"{preview(value)} does not fit: {short(error.message, 200)}"


def offered(entries: list[McpToolEntry]) -> list[OfferedTool]:
    """The enabled tools as the LLM sees them."""
    return [OfferedTool(name=e.offered_name, description=e.description,
                        schema=llm_schema(e), approval=e.approval,
                        max_calls_per_run=e.max_calls_per_run,
                        max_calls_per_turn=e.max_calls_per_turn)
            for e in entries if e.enabled]


# -- a new listing --------------------------------------------------------------

def callable_name(name: str) -> str:
    """A name an LLM can call for a server's tool name that is not one
    (``files.read`` -> ``files_read``)."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_")[:64]
    return slug or "tool"


def merge_listing(old: list[McpToolEntry], listed: list[dict[str, Any]]) -> tuple[
        list[McpToolEntry], str]:
    """The entries after listing the server's tools again: each listed tool
    with its new description and schema, keeping what the designer chose for
    it (a new tool starts enabled, renamed only if its name is not callable);
    a pin of an argument the tool no longer has is dropped. Also a sentence
    saying what changed."""
    by_name = {e.name: e for e in old}
    out: list[McpToolEntry] = []
    added = 0
    for tool in listed[:MAX_TOOLS]:
        name = str(tool.get("name") or "")[:MAX_NAME_CHARS]
        if not name:
            continue
        schema = tool.get("input_schema")
        if not isinstance(schema, dict) or len(json.dumps(schema)) > MAX_SCHEMA_CHARS:
            schema = {"type": "object"} if not isinstance(schema, dict) else schema
        description = short(str(tool.get("description") or ""), MAX_DESCRIPTION_CHARS - 1)
        before = by_name.get(name)
        if before is None:
            added += 1
            rename = None if TOOL_NAME_RE.match(name) else callable_name(name)
            out.append(McpToolEntry(name=name, description=description, input_schema=schema,
                                    rename=rename))
            continue
        entry = before.model_copy(deep=True, update={"description": description,
                                                     "input_schema": schema})
        args = entry.arguments()
        entry.pinned = {k: v for k, v in entry.pinned.items() if k in args}
        entry.arg_descriptions = {k: v for k, v in entry.arg_descriptions.items() if k in args}
        out.append(entry)
    kept = {e.name for e in out}
    gone = [e.name for e in old if e.name not in kept]
    parts = [f"{len(out)} tool{'s' * (len(out) != 1)}"]
    if added and old:
        parts.append(f"{added} new")
    if gone:
        parts.append(f"{len(gone)} no longer offered and removed ({short(', '.join(gone), 120)})")
    if len(listed) > MAX_TOOLS:
        parts.append(f"only the first {MAX_TOOLS} kept")
    return out, ", ".join(parts)


def entries_value(entries: list[McpToolEntry]) -> list[dict[str, Any]]:
    """The ``tools`` param value for these entries."""
    return [e.to_json() for e in entries]
