"""``switchboard test [FLOW|DIR] [-k PATTERN] [--junit FILE] [--record|--rerecord]``:
run the cases of ``FLOW.tests.json`` files (runtime.testing; docs/testing.md),
their agents answered from ``FLOW.cassette.json`` (or recording it).
Exit 0 every case passed, 1 one failed, 2 bad input (a test file that does
not parse, a flow without one)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from runtime.text import printable

from .base import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, UsageError

TEST_EPILOG = """exit codes:
  0    every case passed
  1    a case failed
  2    bad input: a test file that does not parse (named, with its field), no test file"""


def _add_test_parser(sub) -> None:
    t = sub.add_parser("test", help="run a flow's test cases (FLOW.tests.json)",
                       epilog=TEST_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("target", nargs="?", default=".",
                   help="a flow, its .tests.json, or a folder (every *.tests.json under it)")
    t.add_argument("-k", metavar="PATTERN", dest="pattern",
                   help="only the cases whose name holds PATTERN (or matches it as a regex)")
    t.add_argument("--junit", metavar="FILE", help="also write the results as JUnit XML")
    rec = t.add_mutually_exclusive_group()
    rec.add_argument("--record", action="store_const", const="new", dest="record",
                     help="call the real model for the cases FLOW.cassette.json has no answers "
                          "for and keep them there; replay the rest")
    rec.add_argument("--rerecord", action="store_const", const="all", dest="record",
                     help="call the real model for every case and record its answers again")


def _test_files(target: str) -> list[Path]:
    p = Path(target)
    if p.is_dir():
        files = sorted(p.rglob("*.tests.json"))
        if not files:
            raise UsageError(f"{target}: no *.tests.json file under it")
        return files
    if p.name.endswith(".tests.json"):
        if not p.exists():
            raise UsageError(f"{target}: no such file")
        return [p]
    name = p.name.removesuffix(".json").removesuffix(".flow")
    beside = p.with_name(f"{name}.tests.json")
    if not beside.exists():
        raise UsageError(f"{target}: no test file beside it (expected {beside})")
    return [beside]


def _test(args: argparse.Namespace) -> int:
    from runtime.testing import TestFileError, run_file

    results: list[tuple[Path, list]] = []
    for file in _test_files(args.target):
        try:
            cases = run_file(file, args.pattern, args.record)
        except TestFileError as exc:
            print(f"switchboard: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
        for r in cases:
            scores = f" [{', '.join(r.scores)}]" if r.scores else ""
            print(f"{'PASS' if r.ok else 'FAIL'} {printable(r.name)} ({r.ms:.0f} ms){scores}",
                  flush=True)
            for expected, happened, diff in r.failures:
                print(f"  expected {printable(expected)}")
                print(f"  got      {printable(happened)}")
                for line in diff.splitlines():
                    print(f"    {line}")
        results.append((file, cases))
    every = [r for _, cases in results for r in cases]
    failed = sum(not r.ok for r in every)
    print(f"{len(every) - failed} passed, {failed} failed ({len(every)} cases in "
          f"{len(results)} file{'s' * (len(results) != 1)})")
    if args.junit:
        _write_junit(args.junit, results)
    return EXIT_FAILED if failed else EXIT_OK


def _write_junit(path: str, results: list[tuple[Path, list]]) -> None:
    import xml.etree.ElementTree as ET

    root = ET.Element("testsuites")
    for file, cases in results:
        suite = ET.SubElement(root, "testsuite", name=str(file), tests=str(len(cases)),
                              failures=str(sum(not r.ok for r in cases)),
                              time=f"{sum(r.ms for r in cases) / 1000:.3f}")
        for r in cases:
            case = ET.SubElement(suite, "testcase", name=r.name, classname=file.name,
                                 time=f"{r.ms / 1000:.3f}")
            if not r.ok:
                fail = ET.SubElement(case, "failure", message=r.failures[0][0])
                fail.text = "\n".join(f"expected {e}\ngot {h}\n{d}".rstrip()
                                      for e, h, d in r.failures)
    try:
        ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
    except OSError as exc:
        raise UsageError(f"--junit {path}: cannot be written ({exc.strerror or exc})") from None
