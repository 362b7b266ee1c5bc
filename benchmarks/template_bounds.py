"""Templates at their bounds: for each class of attack on the template
engine (issue T3 1/10), what stops it and what the worst case costs.

Each case runs in a fresh process and prints how it ended (the bound's
message), its time (wall and CPU: on a busy machine the CPU time is the
figure to read), the peak of what Python allocated for it (tracemalloc,
a second run) and how much the process's resident size grew (ru_maxrss).
The "worst" cases are the slowest renders the fuzz test found that end
within the bounds, so their time is the figure the bounds hold.

Prints figures; never fails on a time.

    .venv/bin/python benchmarks/template_bounds.py [--case NAME]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BIG = "x" * 100_000
SHARED = ["y" * 100] * 1000

#: name -> (what runs it, the template, the message)
CASES: dict[str, tuple[str, str, dict]] = {
    # 1. the Template node
    "node: 'x' * 400000000 (validation)": ("check", "{{ 'x' * 400000000 }}", {}),
    "node: 'x' * payload (400000000)": ("node", "{{ 'x' * payload }}", {"payload": 400_000_000}),
    "node: '{:>400000000}'.format(...) (validation)":
        ("check", "{{ '{:>400000000}'.format('x') }}", {}),
    "node: format width from the message":
        ("node", "{{ ('{:>' ~ payload ~ '}').format('x') }}", {"payload": 400_000_000}),
    "node: nested range(100000) loops":
        ("node", "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
                 "{% endfor %}", {}),
    "node: {% set a = 2**999999 %} (validation)": ("check", "{% set a = 2**999999 %}ok", {}),
    # 2. the holes
    "expr: '%(a)400000000s' % {...} (validation)":
        ("expr", "{{ '%(a)400000000s' % {'a': 'x'} }}", {}),
    "expr: named width from the message":
        ("expr", "{{ ('%(a)' ~ msg.payload ~ 's') % {'a': 'x'} }}", {"payload": 400_000_000}),
    "expr: format filter, named field": ("expr", "{{ '%(a)400000000s' | format(a='x') }}", {}),
    "expr: repeated squaring (40 turns)":
        ("expr", "{% set ns = namespace(n=msg.payload) %}{% for i in range(40) %}"
                 "{% set ns.n = ns.n * ns.n %}{% endfor %}{{ ns.n > 0 }}", {"payload": 3}),
    "expr: [[1] * 999999] * 999999": ("expr", "{{ [[1] * 999999] * 999999 }}", {}),
    "expr: ('{0}' * 1000).format(100 kB)":
        ("expr", "{{ ('{0}' * 1000).format(msg.payload) }}", {"payload": BIG}),
    "expr: literals nested by reference":
        ("expr", "{% set a = [msg.payload] %}{% set b = [a, a, a, a, a, a, a, a, a, a] %}"
                 "{% set c = [b, b, b, b, b, b, b, b, b, b] %}{{ c | length }}",
         {"payload": "x" * 20_000}),
    "expr: message lists sharing items, written out":
        ("expr", "{{ msg.payload }}!", {"payload": [SHARED] * 1000}),
    "expr: tojson(indent=16) of deep nesting":
        ("expr", "{{ msg.payload | tojson(indent=16) }}",
         {"payload": [[[[[[[[[[["x"] * 20_000]]]]]]]]]]}),
    "expr: a macro's text, 1000 x 10 kB":
        ("expr", "{% macro m() %}{% for i in range(1000) %}{{ msg.payload }}{% endfor %}"
                 "{% endmacro %}{{ m() | length }}", {"payload": "x" * 10_000}),
    "expr: comparing 20k-item lists in a loop":
        ("expr", "{% for i in range(100000) %}{% if msg.payload.a == msg.payload.b %}{% endif %}"
                 "{% endfor %}", {"payload": {"a": list(range(20_000)), "b": list(range(20_000))}}),
    # The slowest renders within the bounds (found by the fuzz test).
    "worst: namespace() written 100000 times":
        ("node", "{% for i in range(100000) %}{{ namespace(a=1) }}{% endfor %}", {}),
    "worst: dict() in a loop":
        ("node", "{% set t %}{% for i in range(100000) %}{{ dict(a=2 ** 31, b=14285) }}"
                 "{% endfor %}{% endset %}{{ t | length }}", {}),
    "worst: str.format in a compared loop":
        ("node", "{% for i in range(100000) %}{% if ('%(a)s').format(msg.payload) == "
                 "('%(a)s').format(msg.payload) %}{% endif %}{% endfor %}ok", {"payload": BIG}),
    "worst: a missing key's chain in a loop":
        ("node", "{% for i in range(100000) %}{{ nothing.a.b }}{% endfor %}", {}),
    "worst: recursive macro":
        ("node", "{% macro m(k) %}{% if k %}{{ m(k - 1) }}{{ m(k - 1) }}{% endif %}{% endmacro %}"
                 "{{ m(30) }}", {}),
    "worst: a long loop body": ("node", "{% for i in range(100000) %}" + "{{ i + 1 }}" * 200
                                + "{% endfor %}", {}),
    "worst: wordwrap(1) of 100 kB": ("node", "{{ payload | wordwrap(1) | length }}",
                                     {"payload": BIG}),
    "worst: sort 100k rows by attribute":
        ("node", "{{ payload | sort(attribute='b') | length }}",
         {"payload": [{"a": i, "b": str(i)} for i in range(100_000)]}),
}


def run_case(kind: str, text: str, msg: dict) -> str:
    from runtime.expressions import Expression, ExpressionError, TextTemplate, compile_text_template
    from runtime.spec import ParamSpec, ParamType, Scope

    spec = ParamSpec(name="p", type=ParamType.STR, label="p", allowed_scopes=[Scope.CUSTOM],
                     default_scope=Scope.CUSTOM)
    compile_text_template.cache_clear()
    try:
        if kind == "check":
            compile_text_template(text)
            return "valid"
        if kind == "node":
            out = TextTemplate(text).render(msg)
        else:
            out = Expression(spec, text).render(msg)
        return f"rendered {len(str(out))} characters"
    except ExpressionError as exc:
        return str(exc)


def one(name: str) -> None:
    """Run one case (in its own process) and print its figures as JSON."""
    kind, text, msg = CASES[name]
    run_case("node", "{{ 1 }}", {})  # imports and the environment made
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0, c0 = time.perf_counter(), time.process_time()
    outcome = run_case(kind, text, msg)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base
    tracemalloc.start()
    run_case(kind, text, msg)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(json.dumps({"outcome": outcome, "ms": elapsed * 1000, "cpu_ms": cpu * 1000,
                      "peak_mb": peak / 1e6,
                      "rss_mb": grown / 1024}))


def deadline_overshoot() -> float:
    """How long a render goes on after its run's deadline passed (ms)."""
    from runtime.expressions import RUN_DEADLINE, RenderDeadline, TextTemplate

    t = TextTemplate("{% for i in range(100000) %}{{ i ~ 'x' }}{% endfor %}")
    worst = 0.0
    for delay in (0.001, 0.005, 0.02):
        token = RUN_DEADLINE.set(time.monotonic() + delay)
        try:
            t.render({})
        except RenderDeadline:
            worst = max(worst, time.monotonic() - RUN_DEADLINE.get())  # type: ignore[operator]
        except Exception:  # noqa: BLE001 - a bound came first: nothing to measure
            pass
        finally:
            RUN_DEADLINE.reset(token)
    return worst * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", help="run one case and print its figures as JSON")
    args = parser.parse_args()
    if args.case:
        one(args.case)
        return
    print(f"{'case':52s} {'ms':>7s} {'cpu ms':>7s} {'alloc MB':>9s} {'RSS+ MB':>8s}  outcome")
    for name in CASES:
        r = subprocess.run([sys.executable, __file__, "--case", name], capture_output=True,
                           text=True, cwd=ROOT)
        try:
            f = json.loads(r.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            print(f"{name:52s} failed: {r.stderr.strip()[-200:]}")
            continue
        outcome = f["outcome"]
        outcome = outcome if len(outcome) <= 90 else outcome[:89] + "…"
        print(f"{name:52s} {f['ms']:7.0f} {f['cpu_ms']:7.0f} {f['peak_mb']:9.1f} "
              f"{f['rss_mb']:8.1f}  {outcome}")
    print(f"\nA render stops at most {deadline_overshoot():.0f} ms after its run's deadline.")


if __name__ == "__main__":
    main()
