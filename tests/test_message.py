"""Messages: dotted paths, clones, reserved keys."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime import message as m
from runtime.message import (
    Message,
    PathError,
    deep_copy,
    delete_path,
    get_path,
    has_path,
    parse_path,
    set_path,
    to_jsonable,
)

# -- parsing ----------------------------------------------------------------


@pytest.mark.parametrize("path, parts", [
    ("payload", ("payload",)),
    ("payload.items.0.name", ("payload", "items", 0, "name")),
    ("payload.items[0].name", ("payload", "items", 0, "name")),
    ("a[0].b", ("a", 0, "b")),
    ("a[0][1]", ("a", 0, 1)),
    ("a.10", ("a", 10)),
    # Not canonical numbers: keys, not indices.
    ("a.01", ("a", "01")),
    ("a.-1", ("a", "-1")),
    ("a.²", ("a", "²")),
])
def test_parse_path(path, parts):
    assert parse_path(path) == parts


@pytest.mark.parametrize("bad", ["", "  ", "a..b", ".a", "a.", None, 3, ["a"]])
def test_bad_paths_raise_path_error(bad):
    with pytest.raises(PathError):
        parse_path(bad)


# -- get / set / delete -------------------------------------------------------


def sample() -> dict:
    return {"payload": {"items": [{"name": "x", "n": 1}, {"name": "y"}], "01": "zero-one",
                        "1": "one"}, "topic": "t"}


def test_get_nested_dicts_lists_and_bracket_form():
    msg = sample()
    assert get_path(msg, "payload.items.0.name") == "x"
    assert get_path(msg, "payload.items[1].name") == "y"
    assert get_path(msg, "payload.items.1") == {"name": "y"}
    assert get_path(msg, "topic") == "t"


def test_get_digit_part_reads_string_key_of_a_dict():
    msg = sample()
    assert get_path(msg, "payload.1") == "one"
    assert get_path(msg, "payload.01") == "zero-one"


@pytest.mark.parametrize("path", ["nope", "payload.items.5", "payload.items.x", "topic.x",
                                  "payload.items.0.name.deeper"])
def test_get_missing_returns_default(path):
    assert get_path(sample(), path) is None
    assert get_path(sample(), path, "dflt") == "dflt"
    assert not has_path(sample(), path)


def test_get_distinguishes_none_from_missing():
    msg = {"a": None}
    assert has_path(msg, "a")
    assert get_path(msg, "a", 5) is None


def test_set_creates_dicts_and_lists_on_the_way():
    msg: dict = {}
    set_path(msg, "a.b.c", 1)
    set_path(msg, "list.0.name", "first")
    set_path(msg, "list[1].name", "second")
    assert msg == {"a": {"b": {"c": 1}}, "list": [{"name": "first"}, {"name": "second"}]}


def test_set_replaces_scalars_in_the_way_and_overwrites():
    msg = {"a": 5, "items": [1, 2]}
    set_path(msg, "a.b", 1)
    set_path(msg, "items.1", "two")
    assert msg == {"a": {"b": 1}, "items": [1, "two"]}


def test_set_digit_part_on_a_dict_writes_a_string_key():
    msg: dict = {"d": {}}
    set_path(msg, "d.0", "x")
    assert msg == {"d": {"0": "x"}}


@pytest.mark.parametrize("path", ["items.5", "items.x"])
def test_set_refuses_what_a_list_cannot_take(path):
    msg = {"items": [1]}
    with pytest.raises(PathError):
        set_path(msg, path, 1)
    assert msg == {"items": [1]}


def test_delete():
    msg = sample()
    assert delete_path(msg, "payload.items.0.n")
    assert msg["payload"]["items"][0] == {"name": "x"}
    assert delete_path(msg, "payload.items[1]")
    assert len(msg["payload"]["items"]) == 1
    assert delete_path(msg, "payload.1")
    assert "1" not in msg["payload"]
    assert delete_path(msg, "topic")
    assert "topic" not in msg
    assert not delete_path(msg, "topic")
    assert not delete_path(msg, "payload.items.7")
    assert not delete_path(msg, "nothing.here")


def test_message_methods_use_the_same_paths():
    msg = Message.new({"a": [1]})
    msg.set_path("payload.a.1", 2)
    assert msg.get_path("payload.a") == [1, 2]
    assert msg.has_path("payload.a.1")
    assert msg.delete_path("payload.a.0")
    assert msg["payload"] == {"a": [2]}


# -- ids, reserved keys, clone ---------------------------------------------------


def test_new_message_has_unique_msgid_and_payload():
    a, b = Message.new(1), Message.new(2, topic="t")
    assert a.msgid and b.msgid and a.msgid != b.msgid
    assert a["payload"] == 1 and b["topic"] == "t"
    assert isinstance(a, dict)


def test_reserved_keys_are_the_ones_in_the_design():
    assert m.RESERVED_KEYS == {
        "__message_type__", "__tool_caller_id__", "__agent_node_id__", "__tool_name__",
        "__parameters__", "__tool_status__", "__tool_data__", "__tool_error__"}
    assert m.TOOL_REQUEST == "tool_request" and m.TOOL_RESPONSE == "tool_response"
    assert not Message.new().is_tool_request
    assert Message({m.MESSAGE_TYPE: m.TOOL_REQUEST}).is_tool_request


def test_clone_is_deep_and_keeps_the_type():
    msg = Message.new({"items": [{"a": 1}], "t": (1, [2])})
    copy = msg.clone()
    assert copy == msg and type(copy) is Message
    copy["payload"]["items"][0]["a"] = 99
    copy["payload"]["t"][1].append(3)
    assert msg["payload"]["items"][0]["a"] == 1
    assert msg["payload"]["t"] == (1, [2])


def test_to_jsonable():
    assert to_jsonable({"a": (1, b"xyz", object)}, limit=0)["a"][:2] == [1, "<3 bytes>"]
    assert to_jsonable("abcdef", limit=3) == "abc…"
    assert to_jsonable({1: 2}) == {"1": 2}


# -- properties -----------------------------------------------------------------

json_leaf = st.none() | st.booleans() | st.integers() | st.text(max_size=5) | st.floats(
    allow_nan=False)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner,
                                                                 max_size=4),
    max_leaves=12)
key = st.text(alphabet=st.characters(blacklist_characters=".[]"), min_size=1, max_size=6).filter(
    lambda s: s.strip() != "")
segment = key | st.integers(min_value=0, max_value=3).map(str) | st.sampled_from(["01", "²", "-1"])
path_st = st.lists(segment, min_size=1, max_size=5).map(".".join)


@given(st.dictionaries(st.text(max_size=4), json_value, max_size=4), path_st, json_value)
def test_set_then_get_returns_the_value(obj, path, value):
    try:
        set_path(obj, path, value)
    except PathError:
        return  # e.g. an index past the end of an existing list: refused, fine
    assert get_path(obj, path, object()) is value
    assert has_path(obj, path)


@given(path_st, json_value)
def test_set_on_an_empty_message_always_works_when_indices_start_at_zero(path, value):
    parts = parse_path(path)
    if any(isinstance(p, int) and p != 0 for p in parts):
        return
    msg: dict = {}
    set_path(msg, path, value)
    assert get_path(msg, path) == value


@given(st.dictionaries(st.text(max_size=4), json_value, max_size=4), path_st)
def test_delete_then_get_is_missing(obj, path):
    parts = parse_path(path)
    parent = get_path(obj, ".".join(map(str, parts[:-1]))) if len(parts) > 1 else obj
    removed = delete_path(obj, path)
    if removed and not isinstance(parent, list):
        # from a dict the key is gone; from a list later items move up
        assert not has_path(obj, path)


@given(st.dictionaries(st.text(max_size=4), json_value, max_size=5))
def test_clone_equals_original_and_is_independent(fields):
    msg = Message(fields)
    copy = msg.clone()
    assert copy == msg
    before = deep_copy(dict(msg))
    # Mutate every container of the copy; the original must not change.
    def scribble(v):
        if isinstance(v, dict):
            for k in list(v):
                scribble(v[k])
            v["__scribble__"] = 1
        elif isinstance(v, list):
            for x in v:
                scribble(x)
            v.append("scribble")
    scribble(copy)
    assert msg == before


def test_a_huge_number_in_a_path_is_a_key_not_a_crash():
    # int() refuses more than 4,300 digits; no list is that long anyway.
    from runtime.message import parse_path

    big = "9" * 5000
    assert parse_path(f"payload.{big}") == ("payload", big)
    assert parse_path("payload.123456789012345678") == ("payload", 123456789012345678)
