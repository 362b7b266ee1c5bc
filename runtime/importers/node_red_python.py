"""Node-RED nodes whose work Switchboard's core nodes cannot do, written as
the code of a core.python node that does it: a change node with search and
replace rules, the json node, the csv node."""

from __future__ import annotations

import json
import re
from typing import Any

_CHANGE_CODE = '''# Node-RED change node{name}, as Python: its rules include search and
# replace, or values of the subflow's params, which Switchboard's Change
# node has not. The rules, in order:
import copy
import re

RULES = json.loads({rules!r})
MISSING = object()


def parts(path):
    return [int(p[1:-1]) if p.startswith("[") else p
            for p in re.findall(r"\\[\\d+\\]|[^.\\[\\]]+", path)]


def get(obj, path):
    for k in parts(path):
        try:
            obj = obj[k]
        except (KeyError, IndexError, TypeError):
            return MISSING
    return obj


def put(obj, path, value):
    keys = parts(path)
    for i, k in enumerate(keys[:-1]):
        try:
            nxt = obj[k]
        except (KeyError, IndexError, TypeError):
            nxt = None
        if not isinstance(nxt, (dict, list)):
            nxt = [] if isinstance(keys[i + 1], int) else {{}}
            obj[k] = nxt
        obj = nxt
    obj[keys[-1]] = value


def drop(obj, path):
    keys = parts(path)
    parent = get(obj, ".".join(str(k) for k in keys[:-1])) if len(keys) > 1 else obj
    if isinstance(parent, dict):
        parent.pop(keys[-1], None)


for rule in RULES:
    action, path = rule["action"], rule["path"]
    if action == "set":  # a fixed value, or a subflow param's (the input: args)
        put(msg, path, copy.deepcopy(args[rule["param"]] if "param" in rule else rule["value"]))
    elif action == "delete":
        drop(msg, path)
    elif action in ("copy", "move"):
        value = get(msg, rule["from"])
        if value is not MISSING:
            if action == "move":
                drop(msg, rule["from"])
            put(msg, path, copy.deepcopy(value))
    elif action == "replace":
        value = get(msg, path)
        if isinstance(value, str):
            if rule["regex"]:
                value = re.sub(rule["from"], rule["to_text"], value)
            else:
                value = value.replace(rule["from"], rule["to_text"])
            put(msg, path, value)
        elif value is not MISSING and value == rule["from_value"]:
            put(msg, path, copy.deepcopy(rule["to"]))
return msg
'''


def js_replacement(to: str) -> str:
    """A JavaScript replacement string ($1, $&, $$) as Python's re.sub's."""
    out = to.replace("\\", "\\\\")
    out = re.sub(r"\$(\d+)", r"\\g<\1>", out)
    return out.replace("$&", r"\g<0>").replace("$$", "$")


def change_code(name: str, rules: list[dict[str, Any]]) -> str:
    return _CHANGE_CODE.format(name=f" '{name}'" if name else "",
                               rules=json.dumps(rules, ensure_ascii=False)).replace(
        "import copy\n", "import copy\nimport json\n", 1)


_JSON_CODE = '''# Node-RED json node{name}, as Python: text -> a value, a value -> JSON text.
import json

action, path, indent = {action!r}, {path!r}, {indent!r}
parts = path.split(".")
holder = msg
for key in parts[:-1]:
    holder = holder.get(key) if isinstance(holder, dict) else None
if isinstance(holder, dict) and parts[-1] in holder:
    value = holder[parts[-1]]
    if isinstance(value, str) and action in ("", "obj"):
        holder[parts[-1]] = json.loads(value)
    elif not isinstance(value, str) and action in ("", "str"):
        holder[parts[-1]] = json.dumps(value, ensure_ascii=False, indent=indent,
                                       separators=(",", ": ") if indent else (",", ":"))
return msg
'''


def json_code(name: str, action: str, path: str, pretty: bool) -> str:
    return _JSON_CODE.format(name=f" '{name}'" if name else "", action=action, path=path,
                             indent=4 if pretty else None)


CSV_CODE = '''# Node-RED csv node, as Python: text -> one message per row (or a list),
# an object or list of objects -> CSV text.
import csv
import io

sep, header = {sep!r}, {header!r}
columns = {columns!r}
value = msg.get("payload")
if isinstance(value, str):
    rows = list(csv.reader(io.StringIO(value), delimiter=sep))
    names = rows.pop(0) if header and rows else (columns or [f"col{{i + 1}}" for i in range(max(map(len, rows), default=0))])
    def num(v):
        try:
            return int(v) if v.lstrip("-").isdigit() else float(v)
        except ValueError:
            return v
    records = [{{k: num(v) for k, v in zip(names, row)}} for row in rows]
    if {each!r}:
        return [dict(msg, payload=r) for r in records]
    msg["payload"] = records
    return msg
records = value if isinstance(value, list) else [value]
names = columns or list(dict.fromkeys(k for r in records for k in r))
buf = io.StringIO()
w = csv.writer(buf, delimiter=sep, lineterminator={ret!r})
if {header_out!r}:
    w.writerow(names)
for r in records:
    w.writerow([r.get(k, "") for k in names])
msg["payload"] = buf.getvalue()
return msg
'''
