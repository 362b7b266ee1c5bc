"""Flow tests (``switchboard test``): ``FLOW.tests.json`` beside a flow,
format ``switchboard.tests/1`` (docs/testing.md). ``cases`` is its model,
``reading`` reads and checks a test file (and expands its datasets, ``datasets``),
``runner`` runs its cases and judges their expectations."""

from .cases import MAX_CASES, MAX_EXPECT, MAX_FILE_BYTES, TestFile, TestFileError
from .reading import read_tests
from .runner import CaseResult, run_case, run_file

__all__ = ["MAX_CASES", "MAX_EXPECT", "MAX_FILE_BYTES", "CaseResult", "TestFile",
           "TestFileError", "read_tests", "run_case", "run_file"]
