"""What a user (or the LLM) is told when a node raises (``error_text``),
and the redacted traceback the log gets at DEBUG.
"""

from __future__ import annotations

import logging

from ..node import NodeConfigError, redact

log = logging.getLogger("runtime.engine")  # the name its log lines had as one module


def _log_traceback(what: str, node_id: str, exc: BaseException) -> None:
    """The traceback at DEBUG, redacted: an exception's text may quote a
    secret the node resolved (a server echoing a password)."""
    if log.isEnabledFor(logging.DEBUG):
        import traceback

        log.debug(what + "\n%s", node_id, redact("".join(traceback.format_exception(exc))).rstrip())


def error_text(exc: BaseException) -> str:
    """What a user (or the LLM) is told about an exception: its message, no
    traceback, no secret."""
    text = str(exc).strip() or type(exc).__name__
    if not isinstance(exc, NodeConfigError) and type(exc).__name__ not in text:
        text = f"{type(exc).__name__}: {text}" if str(exc).strip() else text
    return redact(text)[:2000]
