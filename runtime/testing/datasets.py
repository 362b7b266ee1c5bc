"""Datasets: a case that names a CSV or JSONL file (``dataset``, relative to
the test file) is run once per row. Each row fills the case's input message
and expectations through ``{{ row.x }}`` templates (runtime.expressions; a
string that is one expression keeps the row value's type), and names its
case ``NAME[i]`` (``NAME[ID]`` for a row with an ``id``).

Bounds: a dataset file is at most ``MAX_DATASET_BYTES`` and holds at most
``MAX_ROWS`` rows; every row must be an object (a JSON object per JSONL
line; a CSV row is a dict of strings keyed by its header)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .cases import Case, TestFileError

MAX_DATASET_BYTES = 50 * 1024 * 1024
MAX_ROWS = 100_000


class _Lexer:
    env: Any = None

    def lex(self, text: str) -> Any:
        if self.env is None:
            from jinja2 import Environment

            self.env = Environment()
        return self.env.lex(text)


_LEXER = _Lexer()


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a ``.jsonl`` or ``.csv`` file; TestFileError naming the
    file (and the row) otherwise."""
    kind = path.suffix.lower()
    if kind not in (".jsonl", ".csv"):
        raise TestFileError(f"{path}: a dataset is a .jsonl or .csv file")
    try:
        size = path.stat().st_size
        if size > MAX_DATASET_BYTES:
            raise TestFileError(f"{path}: {size / 1024 / 1024:.1f} MB; a dataset may be at most "
                                f"{MAX_DATASET_BYTES // 1024 // 1024} MB")
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise TestFileError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise TestFileError(f"{path}: not UTF-8 text") from None
    rows: list[dict[str, Any]] = []

    def add(row: Any, where: str) -> None:
        if not isinstance(row, dict):
            raise TestFileError(f"{path}: {where}: a row must be an object, not "
                                f"{type(row).__name__}")
        if len(rows) >= MAX_ROWS:
            raise TestFileError(f"{path}: more than {MAX_ROWS} rows; a dataset holds at most "
                                f"{MAX_ROWS}")
        rows.append(row)

    if kind == ".jsonl":
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise TestFileError(f"{path}: line {n}: not JSON ({exc})") from None
            add(row, f"line {n}")
    else:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        try:
            for row in reader:
                if None in row:
                    raise TestFileError(f"{path}: line {reader.line_num}: more fields than the "
                                        "header names")
                add(row, f"line {reader.line_num}")
        except csv.Error as exc:
            raise TestFileError(f"{path}: line {reader.line_num}: {exc}") from None
    if not rows:
        raise TestFileError(f"{path}: the dataset holds no row")
    return rows


def _as_msg(text: str) -> str:
    """The template with its name ``row`` read as ``msg`` (the one row-like
    name runtime.expressions knows), so that it renders under the same
    sandbox and bounds; a dataset template that reads msg, env, flow or
    global is refused."""
    from jinja2 import TemplateSyntaxError

    from runtime.expressions import ExpressionError
    from runtime.expressions.context import ROOTS

    try:
        tokens = list(_LEXER.lex(text))
    except TemplateSyntaxError as exc:
        raise ExpressionError(f"not a template ({exc.message})") from None
    out = []
    for i, (_, kind, value) in enumerate(tokens):
        after_dot = i > 0 and tokens[i - 1][1:] == ("operator", ".")
        if kind == "name" and not after_dot:
            if value in ROOTS:
                raise ExpressionError(f"a dataset's template reads row, not {value}")
            if value == "row":
                value = "msg"
        out.append(value)
    return "".join(out)


def _fill(value: Any, row: dict[str, Any], where: str) -> Any:
    if isinstance(value, dict):
        return {k: _fill(v, row, where) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, row, where) for v in value]
    if isinstance(value, str) and "{{" in value and "row" in value:
        from runtime.expressions import compile_template
        from runtime.expressions.rendering import _render

        try:
            return _render(compile_template(_as_msg(value)), {"msg": row})
        except Exception as exc:  # the template's own error, named with where it is
            said = str(exc).replace("'msg'", "'row'").replace("msg.", "row.")
            raise TestFileError(f"{where}: {value!r}: {said}") from None
    return value


def expand(tests_file: Path, cases: list[Case]) -> list[Case]:
    """``cases`` with each case that names a dataset replaced by one case per row."""
    out: list[Case] = []
    for case in cases:
        if case.dataset is None:
            out.append(case)
            continue
        path = tests_file.parent / case.dataset
        rows = read_rows(path)
        data = case.model_dump(exclude_unset=True, by_alias=True, exclude={"dataset", "name"})
        for i, row in enumerate(rows):
            label = row.get("id", i)
            name = f"{case.name}[{label}]"
            where = f"{tests_file}: case '{name}' ({path} row {i + 1})"
            filled = dict(data, name=name)
            filled["input"] = _fill(data["input"], row, f"{where}: input")
            if "expect" in data:
                filled["expect"] = _fill(data["expect"], row, f"{where}: expect")
            try:
                out.append(Case.model_validate(filled))
            except ValidationError as exc:
                err = exc.errors()[0]
                loc = ".".join(str(p) for p in err["loc"])
                raise TestFileError(f"{where}: {loc}: "
                                    f"{err['msg'].removeprefix('Value error, ')}") from None
    return out
