"""Scorers: the expectation kind ``score`` grades the final answer (or a
debug value) from 0 to 1 and holds when the score reaches its threshold.

- ``similarity``: the word sequences of the value and ``expected`` compared
  (difflib's ratio over lower-cased words); threshold 0.8 by default;
- ``mentions_all``: the fraction of the strings in ``expected`` that the
  value holds (case-insensitive); threshold 1.0 by default;
- ``json_schema``: 1 when the value is JSON (or, for a debug value, already
  an object or list) valid against ``schema`` (jsonschema), else 0;
  threshold 1.0 by default.

The LLM judge is not here yet."""

from __future__ import annotations

import difflib
import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

DEFAULT_THRESHOLD = {"similarity": 0.8, "mentions_all": 1.0, "json_schema": 1.0}


class ScoreExpect(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["score"]
    scorer: Literal["similarity", "mentions_all", "json_schema"]
    on: Literal["answer", "debug"] = "answer"
    node: str | None = None
    expected: Any = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    threshold: float | None = Field(default=None, ge=0, le=1)

    @model_validator(mode="after")
    def _fits(self) -> ScoreExpect:
        if self.scorer == "similarity" and not isinstance(self.expected, str):
            raise ValueError("similarity needs 'expected', a text")
        if self.scorer == "mentions_all" and not (
                isinstance(self.expected, list) and self.expected
                and all(isinstance(x, str) for x in self.expected)):
            raise ValueError("mentions_all needs 'expected', a list of texts")
        if self.scorer == "json_schema":
            if self.schema_ is None:
                raise ValueError("json_schema needs 'schema', a JSON Schema object")
            from jsonschema import validators
            from jsonschema.exceptions import SchemaError

            try:
                validators.validator_for(self.schema_).check_schema(self.schema_)
            except SchemaError as exc:
                raise ValueError(f"schema: not a valid JSON Schema ({exc.message})") from None
        return self

    @property
    def limit(self) -> float:
        return DEFAULT_THRESHOLD[self.scorer] if self.threshold is None else self.threshold


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                           sort_keys=True, default=str)


def score(exp: ScoreExpect, value: Any) -> tuple[float, str]:
    """The value's score and, when it is 0 for a reason, that reason."""
    if exp.scorer == "similarity":
        a, b = _words(exp.expected), _words(_text(value))
        if not a and not b:
            return 1.0, ""
        return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio(), ""
    if exp.scorer == "mentions_all":
        text = _text(value).lower()
        missing = [m for m in exp.expected if m.lower() not in text]
        return 1 - len(missing) / len(exp.expected), \
            f"missing {json.dumps(missing, ensure_ascii=False)}" if missing else ""
    from jsonschema import validators

    data = value
    if isinstance(value, str):
        try:
            data = json.loads(value)
        except ValueError as exc:
            return 0.0, f"not JSON ({exc})"
    errors = sorted(validators.validator_for(exp.schema_)(exp.schema_).iter_errors(data),
                    key=lambda e: list(e.path))
    if errors:
        at = "/".join(str(p) for p in errors[0].path) or "the top"
        return 0.0, f"at {at}: {errors[0].message}"
    return 1.0, ""


def pick(exp: ScoreExpect, answers: list[tuple[str, str]], debug: list[tuple[str, Any]]
         ) -> tuple[bool, Any]:
    """(found, the value scored): the last final answer (of the agent
    ``node``) or the last debug value (of the node ``node``)."""
    pool = answers if exp.on == "answer" else debug
    values = [v for n, v in pool if exp.node is None or n == exp.node]
    return (True, values[-1]) if values else (False, None)


def what(exp: ScoreExpect) -> str:
    target = f"{exp.on}{' ' + exp.node if exp.node else ''}"
    return f"score {exp.scorer} of {target} >= {exp.limit:g}"


def judge_score(exp: ScoreExpect, answers: list[tuple[str, str]],
                debug: list[tuple[str, Any]]) -> tuple[str | None, tuple[str, str, str] | None]:
    """(the note for the case line, the failure or None)."""
    found, value = pick(exp, answers, debug)
    if not found:
        return None, (what(exp), "no agent answered" if exp.on == "answer"
                      else "nothing was shown", "")
    s, why = score(exp, value)
    note = f"{exp.scorer} {s:.2f}"
    if s >= exp.limit:
        return note, None
    shown = _text(value)
    shown = shown if len(shown) <= 200 else shown[:200] + "..."
    return note, (what(exp), f"{note}{'; ' + why if why else ''}; value "
                  f"{json.dumps(shown, ensure_ascii=False)}", "")
