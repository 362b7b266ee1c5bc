"""Two example nodes: a plain RPA node and one that can also be an AI tool."""

from __future__ import annotations

import re
import unicodedata

from runtime.node import AI, CUSTOM, MESSAGE, Node, Output, Param, Tool, node


@node("textkit.slugify", name="Slugify", category="Text", icon="edit",
      tool=Tool("slugify_text", "Turn a title into a URL-safe slug"))
class Slugify(Node):
    """Turns text into a lowercase, dash-separated slug ("Hello, World!" ->
    "hello-world")."""

    text = Param(str, "The text to slugify", scope=AI, allow=AI | CUSTOM | MESSAGE,
                 path="payload")
    separator = Param(str, "What joins the words", default="-", allow=CUSTOM)
    slug = Output(str, "The slug")

    def on_message(self, msg):
        text = unicodedata.normalize("NFKD", str(self.text.get(msg) or ""))
        text = text.encode("ascii", "ignore").decode().lower()
        sep = self.separator.get(msg)
        self.slug.set(msg, re.sub(r"[^a-z0-9]+", sep, text).strip(sep))


@node("textkit.word_count", name="Word count", category="Text", icon="edit")
class WordCount(Node):
    """Counts the words of a text and writes the count to ``words``."""

    text = Param(str, "The text to count", scope=MESSAGE, allow=CUSTOM | MESSAGE,
                 path="payload")
    words = Output(int, "Number of words", path="words")

    def on_message(self, msg):
        self.words.set(msg, len(str(self.text.get(msg) or "").split()))
