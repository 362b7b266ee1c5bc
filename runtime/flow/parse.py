"""Decoded JSON to a Flow: the structural checks that hold whatever a file
holds (depth, lone surrogates, non-finite numbers) and pydantic's errors
turned into Problems that name the node and the field."""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pydantic import ValidationError

from .model import FORMAT, Flow, FlowError, Problem

# Bounds on what a flow file may be. Deeper data would make json, pydantic,
# deepcopy and the nodes' own checks recurse until Python gives up; a real
# flow nests about 10 levels (a param value's own structure included).
MAX_DEPTH = 64  # levels of JSON arrays/objects, the file's top object being 1


def parse_flow(data: Any, file: str = "") -> Flow:
    """A Flow from decoded JSON, or FlowError naming each structural problem.
    Raises nothing else, whatever ``data`` holds."""
    return _parse(data, file, check_text=True, check_numbers=True)


def _parse(data: Any, file: str, *, check_text: bool, check_numbers: bool) -> Flow:
    if not isinstance(data, dict):
        raise FlowError([Problem(file=file, message="a flow file must hold a JSON object, "
                                                    f"not {_kind(data)}")])
    if "format" not in data:
        # Without this a stray JSON object would pass as a flow of the
        # current format; the model's default only serves flows made in code.
        raise FlowError([Problem(file=file, field="format",
                                 message=f"missing format; expected {FORMAT!r}")])
    failed: ValidationError | None = None
    if not check_text:
        # The model first: where it takes the file, only the values it takes
        # as they are (Any) can be deep or hold a number that is not finite,
        # and a look at those alone is a fraction of a walk over every
        # container of the file (a third of loading a 100,000-node chain).
        # Anything it refuses, and anything that look finds, goes the whole
        # way below, so that every problem is reported as it always was.
        try:
            flow = Flow.model_validate(data)
        except ValidationError as exc:
            failed = exc
        except RecursionError:
            pass
        else:
            if not _suspect_values(flow, check_numbers):
                return flow
    bad = _find_bad_place(data, check_text=check_text, check_numbers=check_numbers)
    if bad is not None:
        path, why = bad
        raise FlowError([_problem_at(path, why, data, file)])
    try:
        if failed is not None:
            raise failed
        return Flow.model_validate(data)
    except ValidationError as exc:
        raise FlowError([_problem_from_pydantic(e, data, file) for e in exc.errors()]) from None
    except RecursionError:  # bounded above; kept so that nothing else escapes
        raise FlowError([Problem(file=file, message=_TOO_DEEP)]) from None


# Levels of the file above the values the model takes as they are (Any):
# root 1, nodes 2, node 3, then params 4, setting 5, value 6; pin 4 (a dict
# of lists of dicts of values); tool 4, approval 5, rules 6, rule 7, value 8.
_VALUE_LEVEL, _PIN_LEVEL, _RULE_VALUE_LEVEL = 6, 4, 8


def _suspect_values(flow: Flow, check_numbers: bool) -> bool:
    """Whether a flow the model took holds what _find_bad_place refuses:
    nesting past MAX_DEPTH or (with ``check_numbers``) a number that is not
    finite. Only the model's Any values (param values, pins, approval rules'
    values) and its plain float fields can (the rest is typed, a few levels
    deep, and position is FiniteFloat); tests/test_flow.py's
    test_the_value_screen_knows_every_untyped_field keeps this list whole."""
    if flow.subflows:
        # Definitions nest nodes a level deeper, and declare defaults and
        # visible_if values of any type: the whole walk takes them.
        return True
    budget = flow.settings.budget_usd
    if check_numbers and budget is not None and budget - budget != 0:
        return True
    for fnode in flow.nodes:
        for pval in fnode.params.values():
            v = pval.value
            tv = type(v)
            if tv is list or tv is dict:
                if _suspect(v, _VALUE_LEVEL, check_numbers):
                    return True
            elif tv is float and check_numbers and v - v != 0:
                return True
        if fnode.pin is not None and _suspect(fnode.pin, _PIN_LEVEL, check_numbers):
            return True
        tool = fnode.tool
        if tool is not None and tool.approval is not None:
            for rule in tool.approval.rules:
                if _suspect([rule.value], _RULE_VALUE_LEVEL - 1, check_numbers):
                    return True
    return False


def _suspect(value: list | dict, depth: int, check_numbers: bool) -> bool:
    """``value``, a container at level ``depth``, nests past MAX_DEPTH or
    holds a number that is not finite (with ``check_numbers``)."""
    stack = [(value, depth)]
    pop, push = stack.pop, stack.append
    while stack:
        obj, depth = pop()
        if depth > MAX_DEPTH:
            return True
        for v in (obj.values() if type(obj) is dict else obj):
            tv = type(v)
            if tv is dict or tv is list:
                push((v, depth + 1))
            elif tv is float and check_numbers and v - v != 0:  # inf - inf is nan
                return True
    return False


_TOO_DEEP = f"nested too deeply: a flow file may nest arrays and objects at most {MAX_DEPTH} levels"


def _find_bad_place(data: Any, *, check_text: bool,
                    check_numbers: bool = False) -> tuple[list, str] | None:
    """The path to the first place nested deeper than MAX_DEPTH, or (with
    ``check_text``) to a string holding a lone surrogate, or (with
    ``check_numbers``) to a NaN or infinite number, with why; else None.
    Iterative, so that depth costs no stack; a chain of 100,000 nodes takes
    about 0.5 s, so load_flow takes it only for a file the model refuses, or
    with a lone surrogate escape in it, or whose kept values _suspect_values
    finds wrong. Python's json reads NaN, Infinity and -Infinity, and a
    number beyond ±1.8e308 as infinity: each is a float that is not finite."""
    # link: (parent link, key) - the path is only built when something is wrong
    stack: list[tuple[Any, int, Any]] = [(data, 1, None)]
    pop, push = stack.pop, stack.append
    while stack:
        obj, depth, link = pop()
        if depth > MAX_DEPTH:
            return _path(link), _TOO_DEEP
        items = obj.items() if type(obj) is dict else enumerate(obj)
        if not check_text:
            # One more test per number, far cheaper than the regular
            # expression that once told when to look for them (half a
            # 100,000-node file's load).
            for k, v in items:
                tv = type(v)
                if tv is dict or tv is list:
                    push((v, depth + 1, (link, k)))
                elif tv is float and check_numbers and v - v != 0:  # inf - inf is nan
                    return _path((link, k)), _not_finite(v)
            continue
        for k, v in items:
            if type(v) is dict or type(v) is list:
                push((v, depth + 1, (link, k)))
            elif type(v) is str:
                if check_text and _lone_surrogate(v):
                    return _path((link, k)), _SURROGATE
            elif type(v) is float and check_numbers and v - v != 0:  # inf - inf is nan
                return _path((link, k)), _not_finite(v)
            if check_text and type(k) is str and _lone_surrogate(k):
                return _path(link) + [k], _SURROGATE
    return None


def _not_finite(x: float) -> str:
    what = "NaN" if x != x else "Infinity (or a number beyond ±1.8e308)"
    return f"{what} is not a JSON number; a flow file's numbers must be finite"


_SURROGATE = ("text holds a lone surrogate (a \\ud800-\\udfff escape without its pair), "
              "which is not valid Unicode")
# A lone surrogate can only come from a \uD8xx-\uDFxx escape: the text itself
# was decoded as strict UTF-8. Without one, load_flow skips the string check.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")



def _lone_surrogate(s: str) -> bool:
    if s.isascii():
        return False
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _path(link: Any) -> list:
    out = []
    while link is not None:
        link, key = link
        out.append(key)
    out.reverse()
    return out


def _kind(value: Any) -> str:
    """What a JSON value is, in the words of a flow file's reader."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _field(loc: list, limit: int = 8) -> str | None:
    """``params.x.value[0]`` from a location; long ones end in ``...``."""
    out = ""
    for i, part in enumerate(loc):
        if i == limit:
            out += "..."
            break
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or None


def _problem_at(loc: list, message: str, data: dict, file: str) -> Problem:
    """A Problem at a place in the decoded file: the node by its id (by its
    index when the id is not usable text) and the field inside it."""
    node, index = None, None
    if len(loc) >= 2 and loc[0] == "nodes" and isinstance(loc[1], int):
        index = loc[1]
        nodes = data.get("nodes")
        if isinstance(nodes, list) and index < len(nodes) and isinstance(nodes[index], dict):
            node_id = nodes[index].get("id")
            if isinstance(node_id, str) and node_id and not _lone_surrogate(node_id):
                node = node_id
        loc = loc[2:]
    return Problem(file=file, node=node, node_index=index, field=_field(loc), message=message)


def _problem_from_pydantic(err: Any, data: dict, file: str) -> Problem:
    loc = list(err.get("loc", ()))
    kind = err.get("type", "")
    msg = err.get("msg", "invalid")
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    got = f", not {_kind(err.get('input'))}"
    if kind == "extra_forbidden":
        msg = "unknown field"
    elif kind in ("model_type", "dict_type"):
        if len(loc) == 2 and loc[0] in ("nodes", "wires"):
            msg = f"a {loc[0][:-1]} must be a JSON object{got}"
        else:
            msg = f"must be a JSON object{got}"
    elif kind in ("tuple_type", "list_type"):
        msg = f"must be a JSON array{got}"
    elif kind.endswith("_type") or kind.endswith("_parsing"):
        msg += got
    msg = msg.replace(" after validation", "")  # "Tuple should have at most 2 items, not 3"
    return _problem_at(loc, msg, data, file)



@contextmanager
def _no_gc() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
