"""A run's workspace: the folder where its tools write files, and the
documents agents pass to each other (seed 001's documents).

A file a file-writing node creates during a run is recorded as a document:
its path, type, size, who made it (node, agent, tool) and a short summary.
A child agent hands documents to its parent (``handoff``); a parent gives
them to a child (``delegate``'s ``documents``). Whoever receives documents
gets small text ones inline and a listing with summaries for the rest.
``{workspace}`` in a node's fixed text is this run's folder.
"""

from __future__ import annotations

import mimetypes
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .node import NodeConfigError
from .paths import data_dir

#: Text inlined per document, and for all documents of one hand-over.
INLINE_BYTES = 20_000
INLINE_TOTAL = 100_000
MAX_DOCUMENTS = 1000
TEXT_TYPES = ("text/", "application/json", "application/xml", "application/csv")


@dataclass
class Document:
    path: str  # absolute
    mime: str
    size: int
    node: str = ""
    agent: str = ""
    tool: str = ""
    summary: str = ""
    created: float = field(default_factory=time.time)

    def card(self, root: Path) -> dict[str, Any]:
        shown = os.path.relpath(self.path, root) if self.path.startswith(str(root)) else self.path
        out: dict[str, Any] = {"path": shown, "mime": self.mime, "size": self.size}
        who = {k: v for k, v in (("node", self.node), ("agent", self.agent), ("tool", self.tool))
               if v}
        if who:
            out["created_by"] = who
        if self.summary:
            out["summary"] = self.summary
        return out


class Workspace:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.documents: dict[str, Document] = {}

    def folder(self) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        return self.root

    def record(self, path: str | Path, *, node: str = "", msg: dict | None = None,
               summary: str = "") -> Document | None:
        """Note a file a node wrote (``msg``: the message it wrote it for;
        in a tool call it names the agent and the tool)."""
        p = Path(path).resolve()
        try:
            size = p.stat().st_size
        except OSError:
            return None
        if len(self.documents) >= MAX_DOCUMENTS and str(p) not in self.documents:
            return None
        msg = msg or {}
        mime = mimetypes.guess_type(p.name)[0] or "application/octet-stream"
        if p.suffix.lower() == ".csv":
            mime = "text/csv"
        doc = Document(str(p), mime, size, node=node, agent=str(msg.get("__agent_node_id__", "")),
                       tool=str(msg.get("__tool_name__", "")), summary=summary[:500] or
                       _summary(p, mime))
        self.documents[str(p)] = doc
        return doc

    def find(self, name: str) -> Document | None:
        """A document by the path an agent gave: relative to the workspace,
        absolute, or a recorded file's name."""
        candidates = [Path(name)] if os.path.isabs(name) else [self.root / name]
        for c in candidates:
            doc = self.documents.get(str(c.resolve()))
            if doc is not None:
                return doc
            if c.resolve().is_file() and str(c.resolve()).startswith(str(self.root.resolve())):
                return self.record(c)
        matches = [d for d in self.documents.values() if Path(d.path).name == name]
        return matches[0] if len(matches) == 1 else None

    def missing(self, names: list[str]) -> str | None:
        """Why some of these are not documents of this run, or None."""
        unknown = [n for n in names if self.find(n) is None]
        if not unknown:
            return None
        known = ", ".join(d.card(self.root)["path"] for d in self.documents.values()) or "none"
        return (f"no document {', '.join(repr(n) for n in unknown[:5])} in this run's "
                f"workspace (documents: {known[:1000]})")

    def deliver(self, names: list[str]) -> list[dict[str, Any]]:
        """The documents as the receiving agent sees them: a card each, with
        the text of small text files inline (bounded per file and in all)."""
        out, budget = [], INLINE_TOTAL
        for name in names:
            doc = self.find(name)
            if doc is None:
                continue
            card = doc.card(self.root)
            if doc.mime.startswith(TEXT_TYPES) and doc.size <= INLINE_BYTES \
                    and doc.size <= budget:
                try:
                    card["content"] = Path(doc.path).read_text(encoding="utf-8",
                                                               errors="replace")
                    budget -= doc.size
                except OSError:
                    pass
            else:
                card["note"] = "not inlined: too large or not text; read it with a file tool"
            out.append(card)
        return out

    def attach(self, names: list[str]) -> str:
        """``delivered`` documents as text to append to a task."""
        import json

        if self.missing(names):
            raise NodeConfigError(self.missing(names) or "")
        docs = self.deliver(names)
        return "\n\nDocuments:\n" + json.dumps(docs, ensure_ascii=False, indent=1)


def _summary(p: Path, mime: str) -> str:
    if not mime.startswith(TEXT_TYPES):
        return ""
    try:
        with p.open("r", encoding="utf-8", errors="replace") as f:
            head = f.read(2000)
    except OSError:
        return ""
    lines = head.splitlines()
    if mime == "text/csv" and lines:
        return f"CSV, columns: {lines[0][:200]}"
    return (lines[0][:200] if lines else "")


def workspace_root(run_id: str) -> Path:
    return data_dir() / "workspaces" / run_id


def workspace_of(engine: Any) -> Workspace:
    """The run's workspace (one per run, made on first use)."""
    if engine is None:
        return Workspace(workspace_root("no-run"))
    return engine.resource("workspace", lambda: Workspace(workspace_root(engine.run_id)))
