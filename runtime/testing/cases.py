"""The test file's models (pydantic) and its reading, with its bounds."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .scorers import ScoreExpect

FORMAT = "switchboard.tests/1"
MAX_FILE_BYTES = 5 * 1024 * 1024
MAX_CASES = 1000
MAX_EXPECT = 200
MAX_TIMEOUT = 3600.0


class TestFileError(Exception):
    """A test file that cannot be used; its text names the file and field."""

    __test__ = False  # not a pytest class


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Match(_Strict):
    """The operators on one value: every one given must hold."""

    equals: Any = None
    contains: Any = None
    matches: str | None = None
    expr: str | None = None

    @model_validator(mode="after")
    def _one(self) -> Match:
        given = self.model_fields_set & {"equals", "contains", "matches", "expr"}
        if not given:
            raise ValueError("give at least one of equals, contains, matches, expr")
        return self


class DebugExpect(Match):
    kind: Literal["debug"]
    node: str | None = None


class OutputExpect(Match):
    kind: Literal["output"]
    node: str
    port: str = "out"


class CallArgs(_Strict):
    equals: dict[str, Any] | None = None
    contains: dict[str, Any] | None = None


class ToolCallsExpect(_Strict):
    kind: Literal["tool_calls"]
    tools: list[str] | None = None
    order: Literal["exact", "any"] = "exact"
    count: int | None = Field(default=None, ge=0)
    args: list[CallArgs | None] | None = None
    never: list[str] = Field(default_factory=list)


class AnswerExpect(_Strict):
    kind: Literal["answer"]
    agent: str | None = None
    equals: str | None = None
    contains: str | None = None
    matches: str | None = None


class EndExpect(_Strict):
    kind: Literal["end"]
    reason: Literal["completed", "failed", "timeout"] | None = None
    exit_code: int | None = None


class NoNodeErrorExpect(_Strict):
    kind: Literal["no_node_error"]
    value: Literal[True] = True


Expectation = Annotated[DebugExpect | OutputExpect | ToolCallsExpect | AnswerExpect | EndExpect
                        | NoNodeErrorExpect | ScoreExpect, Field(discriminator="kind")]


class CaseInput(_Strict):
    node: str
    message: dict[str, Any] = Field(default_factory=dict)


class Mock(_Strict):
    output: dict[str, list[dict[str, Any]]] | None = None
    error: str | None = None

    @model_validator(mode="after")
    def _either(self) -> Mock:
        if (self.output is None) == (self.error is None):
            raise ValueError("give exactly one of output (port -> messages) or error (text)")
        if self.output is not None and not any(self.output.values()):
            raise ValueError("output holds no message")
        return self


class Case(_Strict):
    name: str = Field(min_length=1)
    input: CaseInput
    mocks: dict[str, Mock] = Field(default_factory=dict)
    expect: list[Expectation] = Field(default_factory=list, max_length=MAX_EXPECT)
    timeout_seconds: float = Field(default=60.0, gt=0, le=MAX_TIMEOUT)
    #: A .jsonl or .csv file (relative to the test file): one case per row (datasets.py).
    dataset: str | None = Field(default=None, min_length=1)


class TestFile(_Strict):
    __test__ = False  # not a pytest class
    format: Literal["switchboard.tests/1"]
    flow: str | None = None
    cases: list[Case] = Field(max_length=MAX_CASES)


_KINDS = ("debug", "output", "tool_calls", "answer", "end", "no_node_error", "score")


def _where(loc: tuple, data: Any) -> str:
    """A pydantic location as a path (``cases[0] ('name').expect[1].equals``)."""
    parts: list[str] = []
    for i, p in enumerate(loc):
        if isinstance(p, int) and parts:
            parts[-1] += f"[{p}]"
            if i == 1 and loc[0] == "cases" and isinstance(data, dict):
                case = data["cases"][p] if p < len(data.get("cases") or []) else None
                name = case.get("name") if isinstance(case, dict) else None
                if isinstance(name, str) and name:
                    parts[-1] += f" ('{name}')"
        elif i == 4 and p in _KINDS and loc[2:3] == ("expect",):
            continue  # the union member pydantic names: the kind says it
        else:
            parts.append(str(p))
    return ".".join(parts)
