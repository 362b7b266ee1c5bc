"""Node-RED node -> Switchboard node, one function per Node-RED type.

Each mapper gets the Node-RED entry and a context (the env values in scope:
a subflow instance's, its subflow's defaults, a tab's) and returns a
``Mapped``: the Switchboard type and params, the status (``mapped``;
``review``: imported, but a person should look, the notes say at what;
``placeholder``: no equivalent, a core.placeholder that blocks the run) and
the port each Node-RED output index becomes."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from .node_red_base import (
    Env,
    Mapped,
    c,
    dollar_env,
    env_name,
    m,
    param_ref,
    placeholder,
    sub,
    typed,
    x,
)
from .node_red_text import _template, mustache_to_jinja

# -- the mappers ------------------------------------------------------------------------

def _inject(n: dict, env: Env) -> Mapped:
    out = Mapped("core.inject")
    props = n.get("props")
    if not isinstance(props, list):
        props = [{"p": "payload"}, {"p": "topic", "vt": "str"}]
    for prop in props:
        if not isinstance(prop, dict):
            continue
        p = prop.get("p")
        if p == "payload":
            v = prop.get("v", n.get("payload", ""))
            vt = prop.get("vt", n.get("payloadType", "str"))
            _inject_payload(out, v, vt, env)
        elif p == "topic":
            topic = prop.get("v", n.get("topic", ""))
            if prop.get("vt", "str") != "str":
                out.review(f"topic of type {prop.get('vt')} kept as text")
            ref = param_ref(topic, env)
            out.params["topic"] = sub(ref[0]) if ref else \
                c(str(dollar_env(topic or "", env, out, "topic")))
        else:
            out.review(f"msg.{p} ({prop.get('vt')} {str(prop.get('v'))[:60]!r}) is not set by "
                       "Switchboard's inject: add a Change node after it")
    repeat = str(n.get("repeat") or "").strip()
    if repeat:
        try:
            out.params["repeat_seconds"] = c(float(repeat))
            out.params["count"] = c(0)
        except ValueError:
            out.review(f"repeat {repeat!r} is not a number")
    if n.get("crontab"):
        return _schedule(n, out)
    return out


def _schedule(n: dict, inject: Mapped) -> Mapped:
    """An inject on a cron schedule: a Schedule trigger with the same cron,
    payload (as its value) and topic; 'inject once at start' fires at start."""
    out = Mapped("trigger.schedule", notes=list(inject.notes), status=inject.status)
    out.params["cron"] = c(str(n["crontab"]))
    kind = inject.params.get("payload_type", c("string"))["value"]
    text = inject.params.get("payload", c("")).get("value")
    if inject.params.get("payload", {}).get("scope") == "subflow":
        out.params["payload"] = inject.params["payload"]  # as each instance sets it
    elif kind == "timestamp":
        out.review("the payload is {fired_at, scheduled_for} instead of a timestamp")
    else:
        vt = {"string": "str", "number": "num", "boolean": "bool", "JSON": "json"}.get(kind)
        ok, value, why = typed(text, vt, None) if vt else (False, text, f"a {kind} payload")
        if not ok:
            out.review(f"payload: {why}; sent as its text")
        out.params["payload"] = c(value)
    if "topic" in inject.params:
        out.params["topic"] = inject.params["topic"]
    if n.get("once"):
        out.params["fire_at_start"] = c(True)
    return out


def _inject_payload(out: Mapped, v: Any, vt: str, env: Env) -> None:
    kinds = {"str": "string", "num": "number", "bool": "boolean", "json": "JSON",
             "date": "timestamp"}
    ref = env.param(str(v)) if vt == "env" else param_ref(v, env) if vt in kinds else None
    if ref is not None:  # the subflow's param, as each instance sets it
        name, ptype = ref
        out.params["payload"] = sub(name)
        out.params["payload_type"] = c(
            "string" if vt == "str" else _PAYLOAD_OF_PARAM.get(ptype, "JSON"))
        return
    if vt == "env":
        ok, value, _why = env.lookup(str(v))
        if ok:
            kind = {bool: "boolean", int: "number", float: "number", str: "string"}.get(
                type(value), "JSON")
            text = value if kind == "string" else json.dumps(value)
            out.params["payload_type"], out.params["payload"] = c(kind), c(text)
            return
        out.params["payload_type"], out.params["payload"] = c("env variable"), c(str(v))
        return
    if vt in kinds:
        out.params["payload_type"] = c(kinds[vt])
        if vt != "date":
            text = v if isinstance(v, str) else json.dumps(v)
            out.params["payload"] = c(str(dollar_env(text, env, out, "payload")))
        return
    out.params["payload_type"], out.params["payload"] = c("string"), c(str(v))
    out.review(f"payload of type '{vt}' ({str(v)[:60]!r}) kept as text")


#: The inject payload type that reads a subflow param of each type.
_PAYLOAD_OF_PARAM = {"str": "string", "enum": "string", "int": "number", "float": "number",
                     "bool": "boolean", "json": "JSON"}


def _debug(n: dict, env: Env) -> Mapped:
    out = Mapped("core.debug", ports=[])
    complete = str(n.get("complete", "payload"))
    if n.get("targetType") == "jsonata":
        out.review(f"shows the JSONata expression {complete[:80]!r}: shows payload instead")
        complete = "payload"
    path = "msg" if complete == "true" else ("payload" if complete in ("false", "") else complete)
    out.params["path"] = c(path)
    return out


def _change(n: dict, env: Env) -> Mapped:
    out = Mapped("core.change")
    rules = []
    if not n.get("rules") and n.get("action"):
        out.review(f"a change node of Node-RED before 0.14 (action {str(n.get('action'))[:20]!r} "
                   f"on {str(n.get('property'))[:60]!r}): not mapped")
    for i, r in enumerate(n.get("rules") or []):
        if not isinstance(r, dict):
            continue
        t, p, where = r.get("t"), str(r.get("p", "")), f"rule {i + 1}"
        if r.get("pt", "msg") != "msg":
            out.review(f"{where}: sets {r.get('pt')}.{p}: use a Set Variable node")
            continue
        if t == "delete":
            rules.append({"action": "delete", "path": p})
        elif t == "move":
            if r.get("tot", "msg") != "msg":
                out.review(f"{where}: moves to {r.get('tot')}.{r.get('to')}: not mapped")
                continue
            rules.append({"action": "move", "from": p, "path": str(r.get("to", ""))})
        elif t == "set":
            tot = r.get("tot", "str")
            if tot == "msg":
                rules.append({"action": "copy", "from": str(r.get("to", "")), "path": p})
                continue
            ref = env.param(env_name(r.get("to")) or str(r.get("to"))) if tot == "env" \
                else param_ref(r.get("to"), env) if tot in ("str", "num", "bool", "json") \
                else None
            if ref is not None:  # the subflow's param, as each instance sets it
                rules.append({"action": "set", "path": p, "param": ref[0]})
                continue
            ok, value, why = typed(dollar_env(r.get("to"), env, out, where), tot, env)
            if not ok:
                out.review(f"{where}: sets msg.{p}: {why}; set to its text")
            rules.append({"action": "set", "path": p, "value": value})
        elif t == "change":
            rule = _replace_rule(r, p, env, out, where)
            if rule is not None:
                rules.append(rule)
        else:
            out.review(f"{where}: '{t}' on msg.{p} is not mapped")
    params = list(dict.fromkeys(r["param"] for r in rules if "param" in r))
    if params or any(r["action"] == "replace" for r in rules):
        from .node_red_python import change_code

        python = Mapped("core.python", status=out.status, notes=out.notes)
        python.params["code"] = c(change_code(str(n.get("name") or ""), rules))
        if params:
            # The params' values for each message: args[NAME] in the code.
            python.params["input"] = x(subflow_dict(params))
            python.notes.append(f"Rules set from the subflow's params {', '.join(params)}: "
                                "the change node became a Python node doing its rules in "
                                "order, the params read as args (its input)")
        if any(r["action"] == "replace" for r in rules):
            python.review("search and replace rules: the change node became a Python node "
                          "doing its rules in order")
        return python
    out.params["rules"] = c(rules)
    return out


def subflow_dict(params: list[str]) -> str:
    """An expression whose value is {NAME: the subflow param NAME} for each."""
    return "{{ {" + ", ".join(f"{json.dumps(p)}: subflow.{p}" for p in params) + "} }}"


def _replace_rule(r: dict, p: str, env: Env, out: Mapped, where: str) -> dict | None:
    """Node-RED's 'change' rule: in a text, every match of ``from`` (text or
    regex) replaced; any other value equal to ``from`` set to ``to``."""
    fromt, tot = r.get("fromt", "str"), r.get("tot", "str")
    ok, to, why = typed(dollar_env(r.get("to"), env, out, where), tot, env)
    if not ok or tot == "msg":
        out.review(f"{where}: replaces with {tot} {str(r.get('to'))[:60]!r}: not mapped")
        return None
    src = r.get("from")
    if fromt == "re":
        try:
            re.compile(str(src))
        except re.error as exc:
            out.review(f"{where}: regex {str(src)[:60]!r}: {exc}; not mapped")
            return None
        from_value: Any = None
    else:
        ok, from_value, why = typed(src, fromt, env)
        if not ok:
            out.review(f"{where}: searches for {why}; not mapped")
            return None
    from .node_red_python import js_replacement

    text = to if isinstance(to, str) else json.dumps(to)
    return {"action": "replace", "path": p, "regex": fromt == "re",
            "from": str(src) if fromt == "re" else str(from_value), "from_value": from_value,
            "to": to, "to_text": js_replacement(text) if fromt == "re" else text}


_SWITCH_OPS = {"eq": "eq", "neq": "neq", "lt": "lt", "lte": "lte", "gt": "gt", "gte": "gte",
               "cont": "contains", "regex": "regex", "true": "true", "false": "false",
               "null": "null", "else": "else"}
_NEVER = {"op": "regex", "value": "(?!)"}


def _switch(n: dict, env: Env) -> Mapped:
    out = Mapped("core.switch")
    if n.get("propertyType", "msg") != "msg":
        out.review(f"tests {n.get('propertyType')} {n.get('property')!r}: tests msg.payload")
        out.params["path"] = c("payload")
    else:
        out.params["path"] = c(str(n.get("property") or "payload"))
    rules = []
    for i, r in enumerate(n.get("rules") or []):
        if not isinstance(r, dict):
            rules.append(_NEVER)
            continue
        op = _SWITCH_OPS.get(r.get("t"))
        if op is None:
            out.review(f"rule {i + 1}: '{r.get('t')}' is not mapped; the rule never matches")
            rules.append(_NEVER)
            continue
        rule: dict[str, Any] = {"op": op}
        if op not in ("true", "false", "null", "else"):
            ok, value, why = typed(r.get("v"), r.get("vt", "str"), env)
            if not ok:
                out.review(f"rule {i + 1}: {why}; compared with its text")
            if op == "regex":
                value = ("(?i)" if r.get("case") else "") + str(value)
            elif op in ("lt", "lte", "gt", "gte") and r.get("vt") == "str":
                try:
                    value = float(value)
                    value = int(value) if value.is_integer() else value
                except (TypeError, ValueError):
                    pass
            rule["value"] = value
        rules.append(rule)
    out.params["rules"] = c(rules or [{"op": "else"}])
    out.params["mode"] = c("all" if str(n.get("checkall", "true")) == "true" else "first")
    if n.get("repair"):
        out.review("'recreate message sequences' is not mapped")
    out.ports = [f"out{i}" for i in range(max(len(rules), 1))]
    return out


def _split(n: dict, env: Env) -> Mapped:
    out = Mapped("core.split")
    out.params["path"] = c(str(n.get("property") or "payload"))
    if str(n.get("arraySplt", 1)) != "1" or n.get("arraySpltType", "len") != "len":
        out.review(f"splits arrays in chunks of {n.get('arraySplt')}: splits per element")
    if n.get("addname"):
        out.review(f"copying the key to msg.{str(n.get('addname'))[:60]} is not mapped "
                   "(it is in msg.parts.key)")
    return out


def _join(n: dict, env: Env) -> Mapped:
    out = Mapped("core.join")
    mode = n.get("mode", "auto")
    prop = str(n.get("property") or "payload") if n.get("propertyType", "msg") == "msg" \
        else "payload"
    if mode == "custom":
        count = str(n.get("count") or "").strip()
        build = n.get("build", "array")
        if build == "array" and count.isdigit() and int(count) > 0:
            out.params["mode"], out.params["count"] = c("count"), c(int(count))
        else:
            out.params["mode"] = c("auto")
            out.review(f"custom join (build {build!r}, count {count!r}): joins the parts of a "
                       "split instead")
        out.params["path"] = c(prop)
    elif mode == "reduce":
        out.params["mode"] = c("auto")
        out.review(f"reduce mode ({str(n.get('reduceExp'))[:60]!r}) is not mapped: collects the "
                   "parts into a list")
    else:
        out.params["mode"] = c("auto")
    timeout = str(n.get("timeout") or "").strip()
    if timeout:
        try:
            out.params["timeout_seconds"] = c(float(timeout))
        except ValueError:
            out.review(f"timeout {timeout!r} is not a number")
    return out


_UNITS = {"millisecond": 0.001, "second": 1, "minute": 60, "hour": 3600, "day": 86400}


def _seconds(value: Any, unit: Any) -> float:
    u = str(unit or "seconds").rstrip("s").lower()
    return float(value or 0) * _UNITS.get(u, 1)


def _delay(n: dict, env: Env) -> Mapped:
    kind = n.get("pauseType", "delay")
    if kind in ("rate", "queue", "timed"):
        out = Mapped("core.rate_limit")
        try:
            rate = max(int(float(n.get("rate") or 1)), 1)
            per = _seconds(n.get("nbRateUnits") or 1, n.get("rateUnits"))
        except (TypeError, ValueError):
            rate, per = 1, 1.0
            out.review("rate does not read; 1 a second")
        out.params.update(count=c(rate), interval_seconds=c(per),
                          mode=c("drop" if n.get("drop") else "queue"))
        if kind != "rate":
            out.review(f"'{kind}' mode (per topic) is not mapped: limits all messages together")
        if n.get("allowrate"):
            out.review("msg.rate overriding the rate is not mapped")
        return out
    out = Mapped("core.delay")
    try:
        if kind == "random":
            low = _seconds(n.get("randomFirst"), n.get("randomUnits"))
            high = _seconds(n.get("randomLast"), n.get("randomUnits"))
            out.params["seconds"] = c((low + high) / 2)
            out.review(f"random delay {low}-{high} s: waits the middle")
        else:
            out.params["seconds"] = c(_seconds(n.get("timeout", 5), n.get("timeoutUnits")))
            if kind == "delayv":
                out.params["seconds"] = x("{{ (msg.delay or 0) / 1000 }}")
    except (TypeError, ValueError):
        out.review(f"delay {n.get('timeout')!r} does not read: 1 second")
        out.params["seconds"] = c(1.0)
    return out


def _catch(n: dict, env: Env) -> Mapped:
    out = Mapped("core.catch")
    scope = n.get("scope")
    out.params["nodes"] = c([str(s) for s in scope] if isinstance(scope, list) else [])
    if isinstance(scope, str) and scope:
        out.review(f"catches the errors of its '{scope}' only in Node-RED: catches every node's")
    if n.get("uncaught"):
        out.review("'uncaught only' is not mapped: catches every error of the nodes")
    return out


def _http_in(n: dict, env: Env) -> Mapped:
    out = Mapped("trigger.webhook")
    url = str(n.get("url") or "/")
    out.params["path"] = c(url if url.startswith("/") else "/" + url)
    method = str(n.get("method") or "get").upper()
    out.params["method"] = c(method if method in ("POST", "GET", "PUT", "PATCH", "DELETE")
                             else "ANY")
    if ":" in url:
        out.review(f"route parameters in {url!r} are not mapped")
    if n.get("upload"):
        out.review("file uploads are not mapped")
    return out


def _http_response(n: dict, env: Env) -> Mapped:
    out = Mapped("http.response", ports=[])
    status = str(n.get("statusCode") or "").strip()
    if status:
        if status.isdigit():
            out.params["status"] = c(int(status))
        else:
            out.review(f"status {status!r} is not a number")
    headers = n.get("headers")
    if isinstance(headers, dict) and headers:
        out.params["headers"] = c({str(k): str(v) for k, v in headers.items()})
    return out


def _http_request(n: dict, env: Env) -> Mapped:
    out = Mapped("http.request")
    method = str(n.get("method") or "GET").upper()
    if method == "USE":
        out.params["method"] = m("method")
    elif method in ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"):
        out.params["method"] = c(method)
    else:
        out.review(f"method {method!r} is not mapped: GET")
    ref = param_ref(n.get("url"), env)
    url = str(dollar_env(n.get("url") or "", env, out, "url"))
    if ref is not None:
        out.params["url"] = sub(ref[0])
    elif not url:
        out.params["url"] = m("url")
    elif "{{" in url:
        out.params["url"] = x(mustache_to_jinja(url, env, out, msg="msg.", html=False))
    else:
        out.params["url"] = c(url)
    out.params["response_as"] = c({"txt": "text", "obj": "json"}.get(n.get("ret", "txt"), "auto"))
    if n.get("ret") == "bin":
        out.review("a binary response (Buffer) is read as auto (text or JSON)")
    if n.get("senderr"):
        out.params["fail_on_error_status"] = c(True)
    headers = {}
    for h in n.get("headers") or []:
        if not isinstance(h, dict):
            continue
        name = h.get("keyValue") if h.get("keyType") == "other" else h.get("keyType")
        value = h.get("valueValue") if h.get("valueType") == "other" else h.get("valueType")
        if h.get("keyType") in ("msg", "flow", "global", "env") \
                or h.get("valueType") in ("msg", "flow", "global", "env"):
            out.review(f"header {str(name)[:60]!r} is read from {h.get('valueType')}: not mapped")
        elif _SECRET_HEADER.search(str(name)):
            out.review(f"header {str(name)[:60]!r} holds a secret: not imported (set auth/token)")
        elif name:
            headers[str(name)] = str(value or "")
    if headers:
        out.params["headers"] = c(headers)
    if n.get("paytoqs") not in (None, False, "ignore"):
        out.review("payload as query parameters is not mapped")
    if n.get("authType") or n.get("tls") or n.get("proxy"):
        out.review("authentication, TLS or proxy settings (config nodes, credentials) are "
                   "not imported: set auth/username/password or verify_tls")
    return out


_SECRET_HEADER = re.compile(r"authorization|cookie|key|token|secret|password", re.I)


def _filename(n: dict, out: Mapped, env: Env) -> dict[str, Any]:
    name = n.get("filename")
    kind = n.get("filenameType", "str")
    if kind == "msg" or not name:
        return m(str(name or "filename"))
    ref = env.param(str(name)) if kind == "env" else param_ref(name, env)
    if ref is not None:
        return sub(ref[0])
    if kind == "env":
        ok, value, why = env.lookup(str(name))
        if ok:
            return c(str(value))
        out.review(f"file name: {why}")
    return c(str(dollar_env(name, env, out, "file name")))


def _file_in(n: dict, env: Env) -> Mapped:
    out = Mapped("files.read")
    out.params["path"] = _filename(n, out, env)
    fmt = n.get("format", "utf8")
    if fmt == "utf8":
        out.params["format"] = c("text")
    else:
        out.params["format"] = c("base64" if fmt == "" else "text")
        out.review(f"format {fmt or 'buffer'!r}: read as "
                   f"{'base64 text' if fmt == '' else 'one text'}")
    return out


def _file_out(n: dict, env: Env) -> Mapped:
    if n.get("overwriteFile") == "delete":
        out = Mapped("files.delete")
        out.params["path"] = _filename(n, out, env)
        return out
    out = Mapped("files.write")
    out.params["path"] = _filename(n, out, env)
    out.params["content"] = m("payload")
    out.params["mode"] = c("overwrite" if str(n.get("overwriteFile")) == "true" else "append")
    out.params["create_folders"] = c(bool(n.get("createDir")))
    if n.get("appendNewline", True):
        out.review("Node-RED adds a newline after each payload; Switchboard writes it as is")
    return out


def _csv(n: dict, env: Env) -> Mapped:
    from .node_red_python import CSV_CODE

    out = Mapped("core.python")
    sep = {"\\t": "\t", "tab": "\t"}.get(str(n.get("sep", ",")), str(n.get("sep") or ","))
    cols = [s.strip() for s in str(n.get("temp") or "").split(",") if s.strip()]
    ret = {"\\r\\n": "\r\n", "\\n": "\n", "\\r": "\r"}.get(str(n.get("ret") or "\\n"), "\n")
    out.params["code"] = c(CSV_CODE.format(
        sep=sep[:1], header=bool(n.get("hdrin")), columns=cols, each=n.get("multi") == "one",
        ret=ret, header_out=n.get("hdrout") not in (False, "none", "", None)))
    out.review("the csv node became a Python node doing the same conversion: check quoting "
               "and number handling")
    if str(n.get("skip") or "0") != "0":
        out.review(f"skipping the first {n.get('skip')} lines is not mapped")
    if n.get("strings") is False:
        out.review("numbers are parsed (Node-RED's 'parse numerical values' was off)")
    return out


def _json(n: dict, env: Env) -> Mapped:
    from .node_red_python import json_code

    out = Mapped("core.python")
    path = str(n.get("property") or "payload")
    action = str(n.get("action") or "")
    if "[" in path or action not in ("", "str", "obj"):
        out.review(f"property {path!r} / action {action!r}: converts msg.payload both ways")
        path, action = "payload", ""
    out.params["code"] = c(json_code(str(n.get("name") or ""), action, path,
                                     bool(n.get("pretty"))))
    if n.get("schema"):
        out.review("the JSON schema check is not mapped")
    return out


_JS_PASS = re.compile(r"^\s*return\s+msg\s*;?\s*$")


def _function(n: dict, env: Env) -> Mapped:
    out = Mapped("core.python")
    func = str(n.get("func") or "")
    outputs = int(n.get("outputs", 1) or 0) if str(n.get("outputs", 1)).isdigit() else 1
    if _JS_PASS.match(func) and not n.get("initialize") and not n.get("finalize") \
            and outputs <= 1:
        out.params["code"] = c("return msg  # Node-RED: return msg;")
        return out
    lines = ["# Imported from a Node-RED function node: the JavaScript below does NOT run.",
             "# Translate it to Python (msg is the message; return msg, a list, or DROP),",
             "# then delete the raise at the end.", "#"]
    for label, code in (("setup", n.get("initialize")), ("function", func),
                        ("close", n.get("finalize"))):
        if code:
            lines.append(f"# --- {label} (JavaScript) ---")
            lines += ["# " + ln for ln in str(code).splitlines()]
    params = list(dict.fromkeys(
        ref[0] for code in (n.get("initialize"), func, n.get("finalize")) if code
        for name in _ENV_GET.findall(str(code)) if (ref := env.param(name)) is not None))
    if params:
        # env.get("NAME") of the subflow's env properties: its params, given
        # to the Python as its input.
        out.params["input"] = x(subflow_dict(params))
        lines += ["#", "# env.get(\"NAME\") of this subflow's properties: args[\"NAME\"] here "
                  f"(the input gives {', '.join(params)})."]
    lines.append(f"raise NotImplementedError({_py_text(_fn_message(n))})")
    out.params["code"] = c("\n".join(lines) + "\n")
    out.review("a function node: its JavaScript is kept as a comment and the node raises "
               "until it is translated to Python")
    return out


_ENV_GET = re.compile(r"""\benv\.get\(\s*["']([A-Za-z_][\w]*)["']\s*\)""")


def _fn_message(n: dict) -> str:
    name = str(n.get("name") or n.get("id"))[:80]
    return f"Node-RED function '{name}' was imported as JavaScript: translate it to Python"


def _py_text(s: str) -> str:
    return json.dumps(s)


MAPPERS: dict[str, Callable[[dict, Env], Mapped]] = {
    "inject": _inject, "debug": _debug, "change": _change, "switch": _switch,
    "template": _template, "split": _split, "join": _join, "delay": _delay, "catch": _catch,
    "http in": _http_in, "http response": _http_response, "http request": _http_request,
    "file in": _file_in, "file": _file_out, "csv": _csv, "function": _function, "json": _json,
}


def map_node(n: dict, env: Env) -> Mapped:
    mapper = MAPPERS.get(str(n.get("type")))
    if mapper is None:
        return placeholder(n, "no Switchboard equivalent")
    return mapper(n, env)
