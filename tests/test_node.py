"""The node authoring API: specs generated from classes, param resolution by
scope, outputs in RPA and tool mode, secrets."""

from __future__ import annotations

import pytest

from runtime.message import MESSAGE_TYPE, PARAMETERS, TOOL_DATA, TOOL_REQUEST, Message
from runtime.node import (
    AI,
    CUSTOM,
    MESSAGE,
    Node,
    NodeConfigError,
    Output,
    Param,
    Tool,
    node,
    redact,
    resolve_secret,
)
from runtime.registry import Registry
from runtime.spec import ParamType, ParamValue, Scope


@node("test.mail", name="Send Mail", category="Mail", icon="mail",
      tool=Tool("send_email", "Send an email message"))
class SendMail(Node):
    """Sends one mail.

    More text here."""

    to = Param(str, "Email recipient", scope=AI, allow=AI | CUSTOM | MESSAGE)
    subject = Param(str, "Subject line", default="(none)", scope=AI, allow=AI | CUSTOM | MESSAGE)
    body = Param(str, "Message body", allow=CUSTOM | MESSAGE, path="payload.body")
    port = Param(int, "SMTP port", default=25)
    timeout = Param(float, "Seconds", default=10.0)
    tls = Param(bool, "Use TLS", default=False)
    security = Param(str, "Security", choices=["none", "starttls", "tls"], default="none")
    extra = Param("json", "Extra headers", optional=True)
    password = Param("secret", "SMTP password", optional=True)
    message_id = Output(str, "Message-ID of the sent mail")
    reply = Output(str, "Server answer")

    def on_message(self, msg):
        self.message_id.set(msg, f"<{self.to.get(msg)}>")
        self.reply.set(msg, "250 ok")


def make(cls=SendMail, params=None, outputs=None) -> Node:
    settings = {k: ParamValue.model_validate(v) for k, v in (params or {}).items()}
    return cls("n1", "", settings, outputs, None)


# -- spec generation -------------------------------------------------------------


def test_spec_header():
    spec = SendMail.spec
    assert (spec.type, spec.name, spec.category, spec.icon) == ("test.mail", "Send Mail", "Mail",
                                                                 "mail")
    assert spec.description == "Sends one mail.\n\nMore text here."
    assert [p.name for p in spec.inputs] == ["in"]
    assert [p.name for p in spec.outputs] == ["out"]
    assert spec.tool.name == "send_email" and spec.tool.description == "Send an email message"
    assert not spec.source and not spec.has_tools_port
    assert Registry([SendMail]).spec("test.mail") is spec


def test_param_types_defaults_and_required():
    spec = SendMail.spec
    types = {p.name: p.type for p in spec.params}
    assert types == {"to": ParamType.STR, "subject": ParamType.STR, "body": ParamType.STR,
                     "port": ParamType.INT, "timeout": ParamType.FLOAT, "tls": ParamType.BOOL,
                     "security": ParamType.ENUM, "extra": ParamType.JSON,
                     "password": ParamType.SECRET}
    assert [p.name for p in spec.params][:3] == ["to", "subject", "body"]  # declaration order
    p = spec.param
    assert p("port").default == 25 and p("port").has_default and not p("port").required
    assert p("to").required and not p("to").has_default
    assert p("extra").optional and not p("extra").required
    assert p("subject").label == "Subject" and p("subject").description == "Subject line"
    assert p("body").default_path == "payload.body"


def test_allowed_and_default_scopes():
    p = SendMail.spec.param
    assert set(p("to").allowed_scopes) == {Scope.AI, Scope.CUSTOM, Scope.MESSAGE}
    assert p("to").default_scope is Scope.AI
    assert set(p("body").allowed_scopes) == {Scope.CUSTOM, Scope.MESSAGE}
    assert p("body").default_scope is Scope.CUSTOM
    assert set(p("port").allowed_scopes) == {Scope.CUSTOM, Scope.MESSAGE}  # the default allow
    assert p("password").allowed_scopes == [Scope.CUSTOM]
    assert p("security").choices == ["none", "starttls", "tls"]
    assert p("password").secret and not p("port").secret


def test_naming_a_default_scope_allows_it():
    p = Param(str, "x", scope=AI)
    assert p.scope is Scope.AI and AI in p.allow and CUSTOM in p.allow


def test_a_default_scope_outside_allow_is_refused():
    with pytest.raises(TypeError, match="not in allow"):
        Param(str, "x", scope=AI, allow=CUSTOM)


@pytest.mark.parametrize("allow", [AI, MESSAGE, CUSTOM | MESSAGE, CUSTOM | AI])
def test_secret_allows_only_custom(allow):
    with pytest.raises(TypeError, match="only CUSTOM"):
        Param("secret", "key", allow=allow)


def test_outputs_main_goes_to_payload_others_to_their_name():
    outs = {o.name: o.path for o in SendMail.spec.results}
    assert outs == {"message_id": "payload", "reply": "reply"}


def test_node_options_ports_tools_and_sources():
    @node("test.spec_agent", name="A", category="T", outputs=("out", "err"), tools_port=True,
          inputs=())
    class A(Node):
        async def generate(self):
            pass

    spec = A.spec
    assert [(p.name, p.kind) for p in spec.outputs] == [("out", "out"), ("err", "out"),
                                                        ("tools", "tools")]
    assert spec.has_tools_port and spec.inputs == [] and spec.source


@pytest.mark.parametrize("attr", ["name", "id", "send", "spec", "_hidden"])
def test_reserved_names_cannot_be_params(attr):
    with pytest.raises(TypeError, match="reserved"):
        node("test.reserved", name="R", category="T")(type("R", (Node,), {attr: Param(str)}))


def test_subclass_inherits_and_overrides_params():
    @node("test.base", name="Base", category="T")
    class Base(Node):
        a = Param(str, "a", default="x")
        b = Param(int, "b", default=1)

    @node("test.derived", name="Derived", category="T")
    class Derived(Base):
        b = Param(int, "b again", default=2)
        c = Param(bool, "c", default=True)

    assert [(p.name, p.default) for p in Derived.spec.params] == [("a", "x"), ("b", 2),
                                                                   ("c", True)]


# -- param.get by scope ---------------------------------------------------------------


def test_custom_scope_uses_the_fixed_value_and_ignores_the_message():
    n = make(params={"port": {"scope": "custom", "value": 2525},
                     "to": {"scope": "custom", "value": "ada@x"}})
    msg = Message.new("p", port=99, to="other@x")
    assert n.port.get(msg) == 2525 and n.to.get(msg) == "ada@x"
    assert n.port.get() == 2525


def test_param_left_out_takes_the_spec_default():
    n = make()
    assert n.port.get(Message.new()) == 25 and n.security.get() == "none"
    assert n.timeout.get() == 10.0


def test_int_given_for_a_float_param_becomes_a_float():
    n = make(params={"timeout": {"scope": "custom", "value": 3}})
    assert n.timeout.get() == 3.0 and isinstance(n.timeout.get(), float)


def test_message_scope_reads_the_path_then_the_default():
    n = make(params={"port": {"scope": "message", "path": "payload.cfg[0].port"}})
    assert n.port.get(Message.new({"cfg": [{"port": 587}]})) == 587
    assert n.port.get(Message.new({})) == 25
    assert n.port.get(Message.new({}), default=7) == 7
    assert n.port.get(None) == 25


def test_message_scope_defaults_to_the_params_own_path():
    n = make()  # body: default scope custom, but its message path defaults to payload.body
    n2 = make(params={"body": {"scope": "message"}})
    assert n2.body.get(Message.new({"body": "hello"})) == "hello"
    assert n.body.get(Message.new({"body": "hello"})) is None
    n3 = make(params={"port": {"scope": "message"}})
    assert n3.port.get(Message.new(port=465)) == 465


def tool_request(**params) -> Message:
    msg = Message.new("ignored", to="from-message@x")
    msg[MESSAGE_TYPE] = TOOL_REQUEST
    msg[PARAMETERS] = params
    return msg


def test_ai_scope_in_a_tool_request_reads_only_the_parameters():
    n = make()  # to and subject default to scope ai
    msg = tool_request(to="llm@x")
    assert n.to.get(msg) == "llm@x"
    assert n.subject.get(msg) == "(none)"  # not sent by the LLM: the default
    # ...never msg["to"], even though the message has it
    assert n.to.get(tool_request()) is None


def test_ai_scope_outside_a_tool_call_falls_back_to_msg_name_then_default():
    n = make()
    assert n.to.get(Message.new(to="rpa@x")) == "rpa@x"
    assert n.subject.get(Message.new(subject="Hi")) == "Hi"
    assert n.subject.get(Message.new()) == "(none)"
    assert n.to.get(None) is None


def test_custom_and_message_params_ignore_tool_parameters():
    n = make(params={"port": {"scope": "custom", "value": 2525},
                     "body": {"scope": "message", "path": "payload.body"}})
    msg = tool_request(port=1, body="evil")
    msg["payload"] = {"body": "real"}
    assert n.port.get(msg) == 2525 and n.body.get(msg) == "real"


# -- output.set ------------------------------------------------------------------------


def test_output_set_in_rpa_mode_writes_paths():
    n = make()
    msg = Message.new("old")
    n.on_message(msg)
    assert msg["payload"] == "<None>" and msg["reply"] == "250 ok"
    assert TOOL_DATA not in msg


def test_output_path_override_from_the_flow():
    n = make(outputs={"message_id": "result.id", "reply": "result.reply"})
    msg = Message.new("keep", to="a@b")
    n.on_message(msg)
    assert msg["payload"] == "keep"
    assert msg["result"] == {"id": "<a@b>", "reply": "250 ok"}


def test_output_set_in_tool_mode_collects_by_name():
    n = make(outputs={"message_id": "result.id"})
    msg = tool_request(to="llm@x")
    n.on_message(msg)
    assert msg[TOOL_DATA] == {"message_id": "<llm@x>", "reply": "250 ok"}
    assert msg["payload"] == "ignored" and "result" not in msg and "reply" not in msg


def test_send_does_nothing_in_tool_mode():
    sent = []

    class RT:
        def send(self, msg, port):
            sent.append((msg, port))

    n = SendMail("n", runtime=RT())
    n.send(tool_request())
    n.send(Message.new(1), "out")
    assert len(sent) == 1 and sent[0][0]["payload"] == 1


# -- secrets -----------------------------------------------------------------------------


def test_secret_resolves_from_env(monkeypatch):
    monkeypatch.setenv("SB_TEST_SMTP_PW", "hunter2-secret")
    n = make(params={"password": {"scope": "custom", "value": {"env": "SB_TEST_SMTP_PW"}}})
    assert n.password.get(Message.new()) == "hunter2-secret"
    assert redact("server said: hunter2-secret is wrong") == "server said: *** is wrong"


def test_missing_secret_error_names_the_env_var_not_a_value(monkeypatch):
    monkeypatch.delenv("SB_TEST_NOT_SET", raising=False)
    n = make(params={"password": {"scope": "custom", "value": {"env": "SB_TEST_NOT_SET"}}})
    with pytest.raises(NodeConfigError) as info:
        n.password.get(Message.new())
    assert "SB_TEST_NOT_SET" in str(info.value) and "password" in str(info.value)


def test_a_secret_must_be_a_reference():
    with pytest.raises(NodeConfigError, match="must name an env var") as info:
        resolve_secret("plain-text-pw", param="password")
    assert "plain-text-pw" not in str(info.value)


def test_unset_optional_secret_is_none():
    assert make().password.get(Message.new()) is None


def test_explicit_null_is_a_value_for_json_params_only():
    n = make(params={"extra": {"scope": "custom", "value": None},
                     "port": {"scope": "custom", "value": None}})
    assert n.extra.get(Message.new(), default="fallback") is None
    assert n.port.get(Message.new()) == 25
    assert make().extra.get(Message.new(), default="fallback") == "fallback"


def test_an_output_may_be_called_status():
    """DESIGN's own example of an output name is `status` (an HTTP status);
    the node API must not take that name for itself."""
    from runtime.message import Message
    from runtime.node import Node, Output, node

    @node("test.status_output", name="Status output", category="Test")
    class WithStatus(Node):
        result = Output(str, "main result")
        status = Output(int, "an HTTP status")

        def on_message(self, msg):
            self.result.set(msg, "ok")
            self.status.set(msg, 204)
            self.show_status("done", "green", "done")

    n = WithStatus("s")
    msg = Message.new()
    n.on_message(msg)
    assert msg["payload"] == "ok" and msg["status"] == 204
    assert [o.name for o in WithStatus.spec.results] == ["result", "status"]


async def test_run_blocking_runs_in_a_worker_thread_and_returns_its_value():
    import threading

    from runtime.node import Node, node

    @node("test.blocking", name="Blocking", category="Test")
    class Blocking(Node):
        async def on_message(self, msg):
            msg["thread"] = await self.run_blocking(lambda: threading.current_thread().name)
            msg["sum"] = await self.run_blocking(sum, [1, 2, 3])

    msg = {"payload": 1}
    await Blocking("b").on_message(msg)
    assert msg["thread"] != threading.current_thread().name
    assert msg["sum"] == 6


@pytest.mark.parametrize("name,label", [
    ("smtp_host", "SMTP host"), ("api_key_env", "API key env"), ("base_url", "Base URL"),
    ("starttls", "STARTTLS"), ("outbox_dir", "Outbox folder"), ("to", "To"),
    ("repeat_seconds", "Repeat seconds")])
def test_generated_labels_read_like_words(name, label):
    from runtime.node import label_for

    assert label_for(name) == label
