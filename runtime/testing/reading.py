"""Reading a test file: the file checked against the models (``cases``),
named by file and field when it is wrong, and its dataset cases expanded
one per row (``datasets``)."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from .cases import MAX_CASES, MAX_EXPECT, MAX_FILE_BYTES, TestFile, TestFileError, _where
from .datasets import expand


def read_tests(path: str | Path) -> TestFile:
    """The test file at ``path``, checked; TestFileError naming the file
    and the field otherwise."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise TestFileError(f"{path}: {size / 1024 / 1024:.1f} MB; a test file may be at "
                                f"most {MAX_FILE_BYTES // 1024 // 1024} MB")
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TestFileError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise TestFileError(f"{path}: not UTF-8 text") from None
    except ValueError as exc:
        raise TestFileError(f"{path}: not JSON ({exc})") from None
    if isinstance(data, dict) and isinstance(data.get("cases"), list):
        if len(data["cases"]) > MAX_CASES:
            raise TestFileError(f"{path}: cases: {len(data['cases'])} cases; a test file holds "
                                f"at most {MAX_CASES}")
        for i, case in enumerate(data["cases"]):
            if isinstance(case, dict) and isinstance(case.get("expect"), list) and \
                    len(case["expect"]) > MAX_EXPECT:
                raise TestFileError(f"{path}: cases[{i}].expect: {len(case['expect'])} "
                                    f"expectations; a case holds at most {MAX_EXPECT}")
    try:
        tests = TestFile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        more = f" (and {exc.error_count() - 1} more problems)" if exc.error_count() > 1 else ""
        msg = err["msg"].removeprefix("Value error, ")
        raise TestFileError(f"{path}: {_where(err['loc'], data) or 'the file'}: {msg}{more}") \
            from None
    tests.cases = expand(path, tests.cases)
    names = [c.name for c in tests.cases]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise TestFileError(f"{path}: cases: the name '{dup}' is given to more than one case")
    return tests
