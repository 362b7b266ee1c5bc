"""The plugin protocol's checked-in stubs and the handshake rules."""

from __future__ import annotations

import json

import pytest

from runtime.plugin import gen, wire


def test_checked_in_stubs_match_the_proto():
    """runtime/plugin/pb is what protoc makes of the .proto now; after an
    edit of the .proto, run `python -m runtime.plugin.gen`."""
    made = gen.generate()
    for name, text in made.items():
        assert (gen.OUT / name).read_text(encoding="utf-8") == text, (
            f"runtime/plugin/pb/{name} is stale: run python -m runtime.plugin.gen")


def line(**fields) -> bytes:
    data = {"switchboard_plugin": 1, "address": "unix:/tmp/x/plugin.sock", "token": "a" * 32}
    data.update(fields)
    return json.dumps({k: v for k, v in data.items() if v is not None}).encode()


def test_a_good_handshake_gives_address_and_token():
    assert wire.parse_handshake(line()) == ("unix:/tmp/x/plugin.sock", "a" * 32)
    assert wire.parse_handshake(line(address="127.0.0.1:5555"))[0] == "127.0.0.1:5555"
    assert wire.parse_handshake(line(address="[::1]:5555"))[0] == "[::1]:5555"


@pytest.mark.parametrize("raw, problem", [
    (b"Listening on port 5555", "expected a JSON handshake line, got 'Listening on port 5555'"),
    (b"[1, 2]", "expected a JSON handshake line"),
    (line(switchboard_plugin=2), "speaks protocol 2; this Switchboard speaks 1"),
    (line(token="short"), "a token of 16+ characters"),
    (line(token=None), "a token of 16+ characters"),
    (line(address="10.0.0.7:5555"), "'10.0.0.7:5555' is neither a Unix socket nor loopback"),
    (line(address="example.com:80"), "neither a Unix socket nor loopback"),
    (line(address="unix:"), "neither a Unix socket nor loopback"),
    (b"x" * 5000, "..."),
])
def test_a_bad_handshake_says_what_is_wrong(raw, problem):
    with pytest.raises(wire.HandshakeError) as info:
        wire.parse_handshake(raw)
    assert problem in str(info.value)
    assert len(str(info.value)) < 300  # a garbage line is quoted, not dumped whole


def test_messages_keep_what_json_cannot_carry_as_the_nearest_json():
    import datetime

    data = wire.loads(wire.dumps({"b": b"\x00\xff", "s": {1}, "t": (1, 2),
                                  "d": datetime.date(2026, 11, 23), 3: "int key"}))
    assert data == {"b": "AP8=", "s": [1], "t": [1, 2], "d": "2026-11-23", "3": "int key"}
