"""Secret masking: how fast redact() reads text, with 0, 1 and 3 secrets
registered (an API key of 48 characters; then also a 26-character token
and a 183-character JWT-like one), over texts events carry: a short string,
a small JSON object, 4 KB and 100 KB of prose (docs/engine.md), a 64 KB
base64 blob (an attachment, an image) and a 4 KB text holding a secret.

    python benchmarks/masking.py [--root PATH]

``--root``: the source tree to import runtime from (A/B against another
checkout). Prints MB/s of the process's CPU time (steadier than the wall
clock on a shared machine), best of 5; never fails on a time."""

from __future__ import annotations

import argparse
import base64
import json
import random
import string
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=str(ROOT))
    args = ap.parse_args()
    sys.path.insert(0, args.root)
    from runtime.node import redact, register_secret

    rng = random.Random(1)

    def token(n: int) -> str:
        return "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(n))

    key, short_token, jwt = "sk-test-" + token(40), token(26), "eyJ" + token(180)
    prose = (ROOT / "docs" / "engine.md").read_text() * 20
    texts = {
        "40 ch": prose[1000:1040],
        "JSON 400": json.dumps({"a": prose[:380]}),
        "4 KB": prose[:4000],
        "100 KB": prose[:100_000],
        "b64 64K": base64.b64encode(rng.randbytes(48_000)).decode(),
        "4KB+key": prose[:2000] + key[:20] + " " + key[20:] + prose[2000:4000],
    }

    def bench() -> str:
        cells = []
        for text in texts.values():
            n = max(3, 300_000 // len(text))
            best = float("inf")
            for _ in range(5):
                t0 = time.process_time()
                for _ in range(n):
                    redact(text)
                best = min(best, (time.process_time() - t0) / n)
            cells.append(f"{len(text) / best / 1e6:8.1f}")
        return " ".join(cells)

    print(f"redact() MB/s, best of 5, Python {sys.version.split()[0]}, from {args.root}")
    print(f"{'':12s}" + " ".join(f"{name:>8s}" for name in texts))
    print(f"{'0 secrets':12s}{bench()}")
    register_secret(key)
    print(f"{'1 secret':12s}{bench()}")
    register_secret(short_token)
    register_secret(jwt)
    print(f"{'3 secrets':12s}{bench()}")


if __name__ == "__main__":
    main()
