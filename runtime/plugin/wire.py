"""What the host and a plugin agree on besides the .proto: the handshake
line, the token's metadata key, JSON coding of messages and the bounds."""

from __future__ import annotations

import base64
import datetime
import ipaddress
from pathlib import Path
from typing import Any

import orjson

PROTOCOL = 1
TOKEN_KEY = "x-switchboard-token"
#: Where the plugin's SDK finds the .proto (the Node.js SDK loads it at run time).
PROTO_ENV = "SWITCHBOARD_PLUGIN_PROTO"
PROTO_PATH = Path(__file__).resolve().parent / "protos" / "switchboard" / "plugin" / "v1" / "plugin.proto"
#: Largest gRPC message either side accepts (one Batch of frames).
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
#: Longest handshake line read from a plugin's stdout.
MAX_HANDSHAKE_BYTES = 4096

_OPTS = orjson.OPT_NON_STR_KEYS


def _default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    return repr(value)


def dumps(value: Any) -> bytes:
    """JSON bytes of a message or value; what JSON cannot carry (bytes,
    sets, objects) becomes the nearest JSON (base64, a list, its repr)."""
    return orjson.dumps(value, default=_default, option=_OPTS)


loads = orjson.loads


def handshake_line(address: str, token: str, pid: int) -> str:
    return orjson.dumps({"switchboard_plugin": PROTOCOL, "address": address, "token": token,
                         "pid": pid}).decode()


class HandshakeError(ValueError):
    pass


def parse_handshake(line: bytes) -> tuple[str, str]:
    """(address, token) from a plugin's first stdout line; HandshakeError
    naming what is wrong otherwise. Only a Unix socket or a loopback address
    is accepted: a plugin must not be reachable from another machine."""
    text = line.decode("utf-8", "replace").strip()
    shown = text[:120] + ("..." if len(text) > 120 else "")
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise HandshakeError(f"expected a JSON handshake line, got {shown!r}") from None
    if not isinstance(data, dict) or "switchboard_plugin" not in data:
        raise HandshakeError(f"expected a JSON handshake line, got {shown!r}")
    if data["switchboard_plugin"] != PROTOCOL:
        raise HandshakeError(f"speaks protocol {data['switchboard_plugin']!r}; "
                             f"this Switchboard speaks {PROTOCOL}")
    address, token = data.get("address"), data.get("token")
    if not isinstance(address, str) or not isinstance(token, str) or len(token) < 16:
        raise HandshakeError("the handshake needs an address and a token of 16+ characters")
    if not is_local_address(address):
        raise HandshakeError(f"address {address!r} is neither a Unix socket nor loopback")
    return address, token


def is_local_address(address: str) -> bool:
    if address.startswith("unix:"):
        return len(address) > 5
    host = address.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def channel_options() -> list[tuple[str, Any]]:
    return [("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]
