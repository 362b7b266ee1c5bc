"""How the secrets a process knows are found in a text: every form a secret
leaves a process in (as is, JSON-escaped, URL-encoded, base64 alone, inside
a base64 blob, as an AUTH PLAIN token) and one precompiled search for them
(``_Masker``: anchors of the forms in a trie, each hit grown along its form).
It holds no secret: runtime.node keeps the registered ones and rebuilds the
masker from them (register_secret, redact)."""

from __future__ import annotations

import re
from typing import Any

#: The shortest piece of a secret that is masked on its own: any run of this
#: many characters or more of a registered secret (as is, JSON-escaped or
#: URL-encoded) is hidden wherever it appears, so a server that echoes a
#: token cut in two, or a log that cuts it short, shows none of it longer
#: than 7 characters. docs/credentials.md, "Masking", says why 8.
SECRET_RUN = 8
#: Length of the anchors redact() searches for: pieces of a secret spaced so
#: that every window of SECRET_RUN characters holds one whole (see _anchors).
_ANCHOR = 4


class _Masker:
    """What redact() needs of the registered secrets, built once per
    registration and swapped in whole (redact reads it without the lock).

    ``pattern`` finds anchors: pieces of _ANCHOR characters of the forms,
    chosen so that every run redact must hide holds one (see _anchors),
    and starting with as few and as rare first characters as can be (the
    regex engine passes over a position whose character starts no anchor
    with one table look-up). A hit is checked in Python: a whole form must
    be there whole around it; a text form's anchor is grown both ways along
    the form, and the run is hidden when it reaches SECRET_RUN characters,
    unless it reads like a word inside a secret that is not all letters
    (_WORD: "credential" in "sk-stored-credential-777" stays shown in "no
    credential named"; docs/credentials.md, "Masking")."""

    __slots__ = ("pattern", "search", "anchors", "starts", "runs")

    def __init__(self, whole: set[str], runs: set[str]) -> None:
        self.runs = tuple(sorted(runs))
        # The whole forms, longest first (redact_hold).
        self.starts = tuple(sorted(whole, key=lambda f: (-len(f), f)))
        # (form, where the anchor is in it, kind): _WHOLE, _RUN or _RUN_NOT_WORD.
        anchors: dict[str, list[tuple[str, int, int]]] = {}
        firsts: set[str] = set()
        for form in self.runs:
            kind = _RUN if _WORD.fullmatch(form.lower()) else _RUN_NOT_WORD
            for pos in _anchors(form, firsts):
                anchors.setdefault(form[pos:pos + _ANCHOR], []).append((form, pos, kind))
        for form in self.starts:
            # One anchor is enough for a form that must be there whole: the
            # cheapest anywhere in it.
            pos = _cheapest(form, range(len(form) - _ANCHOR, -1, -1), firsts)
            firsts.add(form[pos])
            anchors.setdefault(form[pos:pos + _ANCHOR], []).append((form, pos, _WHOLE))
        self.anchors = {a: tuple(v) for a, v in anchors.items()}
        self.pattern = re.compile(_trie(set(self.anchors)))
        self.search = self.pattern.search

    def mask(self, text: str, m: Any) -> str:
        """``text`` with every whole form and every run hidden; ``m`` is the
        pattern's first match in it."""
        search = self.search
        anchors, size, n = self.anchors, _ANCHOR, len(text)
        spans: list[tuple[int, int]] = []
        # The last run of SECRET_RUN or more grown along each form: (the hit
        # it was grown from, its end). A later hit of the form inside it is
        # not grown again, at any alignment (a form with a repeat, such as
        # "aaaaaaaa", has an alignment per character): a run of the form
        # that goes on past it by SECRET_RUN or more has an anchor past it,
        # and is grown from there, backwards too; one that goes on by less
        # may show those few characters.
        grown: dict[str, tuple[int, int]] = {}
        while m is not None:
            start = m.start()
            at = start + size
            for form, pos, kind in anchors[m.group()]:
                if kind == _WHOLE:
                    lo = start - pos
                    if lo >= 0 and text.startswith(form, lo):
                        spans.append((lo, lo + len(form)))
                    continue
                seen = grown.get(form)
                if seen is not None and seen[0] < start and at <= seen[1]:
                    continue
                b = 0
                limit = min(pos, start)
                while b < limit and text[start - 1 - b] == form[pos - 1 - b]:
                    b += 1
                f = 0
                limit = min(len(form) - pos - size, n - at)
                while f < limit and text[at + f] == form[pos + size + f]:
                    f += 1
                if b + size + f >= SECRET_RUN:
                    if seen is None or seen[0] < start or seen[1] < at + f:
                        grown[form] = (start, at + f)
                    if not (kind == _RUN_NOT_WORD and _WORD.fullmatch(text, start - b, at + f)):
                        spans.append((start - b, at + f))
            m = search(text, start + 1)
        if not spans:
            return text
        spans.sort()
        parts: list[str] = []
        done = 0
        for lo, hi in spans:
            if hi <= done:
                continue
            if lo > done:
                parts.append(text[done:lo])
                parts.append("***")
            elif not parts:
                parts.append("***")  # a span at the very start
            done = hi
        parts.append(text[done:])
        return "".join(parts)


_WHOLE, _RUN, _RUN_NOT_WORD = 0, 1, 2
#: What reads like a word: ASCII letters, lower case after the first. A
#: run like that of a secret that is more than letters is shown (see _Masker).
_WORD = re.compile("[A-Za-z][a-z]*")


#: Characters by how often they start a position of ordinary text (prose,
#: JSON, logs), most often first; the rest (capitals, rare punctuation) come
#: after them all. An anchor starting with a rare one lets the regex pass
#: over most of a text with one table look-up per character.
_COMMON = " etaoinsrhldcumfpgwybv\"\n,.:0123456789-_/kxjqz"
_COST = {c: len(_COMMON) - i for i, c in enumerate(_COMMON)}  # not in it: 0


def _cheapest(form: str, positions: range, firsts: set[str]) -> int:
    """The position among ``positions`` whose character costs least as an
    anchor's first: one another anchor starts with, else the rarest in
    ordinary text (_COMMON); at equal cost the first of ``positions``."""
    best, best_cost = positions[0], 1 << 30
    for p in positions:
        c = form[p]
        cost = -1 if c in firsts else _COST.get(c, 0)
        if cost < best_cost:
            best, best_cost = p, cost
    return best


def _anchors(form: str, firsts: set[str]) -> list[int]:
    """Where to take the anchors of a text form: positions such that every
    window of SECRET_RUN characters of the form holds one whole anchor (so
    every run redact must hide contains one), few of them (one per up to
    SECRET_RUN - _ANCHOR + 1 characters), each starting with the cheapest
    character of its choices (_cheapest). Adds their first characters to
    ``firsts``."""
    gap = SECRET_RUN - _ANCHOR  # an anchor at p serves windows starting at p - gap .. p
    out: list[int] = []
    window = 0  # the first window no anchor serves yet
    while window <= len(form) - SECRET_RUN:
        # Farthest first at equal cost: fewer anchors.
        pos = _cheapest(form, range(window + gap, window - 1, -1), firsts)
        out.append(pos)
        firsts.add(form[pos])
        window = pos + 1
    return out


def _trie(words: set[str]) -> str:
    """A regex matching any of ``words``, longest first at a position, with
    common prefixes written once (a plain alternation of a few hundred
    literals makes the regex engine try each at every character)."""
    root: dict[str, Any] = {}
    for w in words:
        d = root
        for c in w:
            d = d.setdefault(c, {})
        d[""] = {}

    def build(d: dict[str, Any]) -> str:
        # A chain of single children is one literal: the recursion goes as
        # deep as the branch points, not as the words are long.
        alts = []
        for c, sub in sorted(d.items()):
            if not c:
                continue
            chars = [c]
            while len(sub) == 1 and "" not in sub:
                [(c, sub)] = sub.items()
                chars.append(c)
            alts.append(re.escape("".join(chars)) + build(sub))
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        return f"(?:{body})?" if "" in d else body

    return build(root)


def _base64_cores(data: bytes) -> list[str]:
    """The parts of base64 that encode ``data`` alone, wherever in a base64
    stream ``data`` sits.

    base64 turns each 3-byte group into 4 characters of 6 bits each, so what
    the characters for ``data`` look like depends on its offset in the
    stream modulo 3 (0, 1 or 2 bytes of the group before it belong to
    something else) and, at both ends, on the neighbouring bytes that share a
    character with it. For each offset k we encode k filler bytes + data +
    filler up to the next group, and keep character j only when its bits
    [6j, 6j+6) lie entirely inside data's bits [8k, 8(k+n)): those
    characters are the same whatever the neighbours are, so one of the three
    cores is a substring of any base64 text that carries data (an AUTH PLAIN
    token, a MIME part, a JSON blob). What stays is at most one character at
    each end that mixes data's first or last byte with a neighbour: at most
    4 bits of that byte. A secret under 4 bytes is never registered, and 4
    bytes still give cores of 4 or more characters. (A core matched where
    data is not, by chance, is only over-redaction.)"""
    import base64

    n = len(data)
    cores = []
    for k in range(3):
        encoded = base64.b64encode(b"\0" * k + data + b"\0" * 2).decode("ascii")
        start = -(-8 * k // 6)  # first character wholly after the k filler bytes
        end = 8 * (k + n) // 6  # characters before this end inside data
        cores.append(encoded[start:end])
    return cores


def _secret_forms(secret: str, usernames: list[str]) -> tuple[set[str], set[str]]:
    """Every way the secret is known to leave a process in text, as (whole
    forms, text forms). Text forms: as is, escaped inside JSON, URL-encoded
    (urllib's quote and quote_plus, as in a query string or a form body);
    a piece of the secret is a piece of each, so any run of SECRET_RUN
    characters of one is hidden. Whole forms, hidden only whole: base64
    (AUTH LOGIN sends base64(password); base64url too), the three
    alignment-independent base64 cores (inside a larger base64 blob, see
    _base64_cores) and, with a username, the whole AUTH PLAIN token
    base64(authzid \\0 user \\0 password), authzid empty or the user; and
    the text forms shorter than SECRET_RUN."""
    import base64
    import json
    from urllib.parse import quote, quote_plus

    raw = secret.encode("utf-8")
    text = {secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1],
            quote(secret), quote(secret, safe=""), quote_plus(secret)}
    encoded = [base64.b64encode(raw).decode("ascii"), *_base64_cores(raw)]
    for user in usernames:
        u = user.encode("utf-8")
        encoded += [base64.b64encode(b"\0" + u + b"\0" + raw).decode("ascii"),
                    base64.b64encode(u + b"\0" + u + b"\0" + raw).decode("ascii")]
    forms = set(encoded)
    forms.update(e.replace("+", "-").replace("/", "_") for e in encoded)  # base64url
    forms.update(e.rstrip("=") for e in encoded)  # unpadded
    runs = {f for f in text if len(f) >= SECRET_RUN}
    forms.update(f for f in text if f not in runs)
    return {f for f in forms if len(f) >= 4}, runs
