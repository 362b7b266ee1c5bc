"""Make the Python stubs of the plugin protocol (``pb/``) from
``protos/switchboard/plugin/v1/plugin.proto`` with grpcio-tools.

The stubs are checked in, so that installing Switchboard needs no compiler;
tests/test_plugin_protocol.py regenerates them and fails when the checked-in
files are stale. After editing the .proto: ``python -m runtime.plugin.gen``.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROTO_ROOT = HERE / "protos"
PROTO = "switchboard/plugin/v1/plugin.proto"
OUT = HERE / "pb"
FILES = ("plugin_pb2.py", "plugin_pb2.pyi", "plugin_pb2_grpc.py")


def generate() -> dict[str, str]:
    """The stub files' text, by file name, as protoc makes them now."""
    from grpc_tools import protoc  # the test extra has it; the runtime does not need it

    with tempfile.TemporaryDirectory() as tmp:
        args = ["protoc", f"-I{PROTO_ROOT}", f"-I{_well_known()}", f"--python_out={tmp}",
                f"--pyi_out={tmp}", f"--grpc_python_out={tmp}", str(PROTO_ROOT / PROTO)]
        if protoc.main(args) != 0:
            raise RuntimeError(f"protoc failed on {PROTO}")
        made = Path(tmp) / Path(PROTO).parent
        out = {}
        for name in FILES:
            text = (made / name).read_text(encoding="utf-8")
            # protoc writes an absolute import of the proto package; the stubs
            # live inside runtime.plugin.pb, so it becomes a relative one.
            text = re.sub(r"^from switchboard\.plugin\.v1 import", "from . import", text,
                          flags=re.M)
            out[name] = text
        return out


def _well_known() -> str:
    import grpc_tools

    return str(Path(grpc_tools.__file__).parent / "_proto")


def main() -> int:
    for name, text in generate().items():
        (OUT / name).write_text(text, encoding="utf-8")
        print(f"wrote {OUT / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
