"""Secrets (tokens, passwords, secret header values): read as one line, and never shown.

- :func:`secret_from_env` and :func:`secret_from_file` read a secret the one way every command
  does: one line, surrounding whitespace stripped, an empty value, a second line or a character no
  HTTP header carries refused with a message naming the variable or file, never its content;
- :class:`Redactor` takes a set of secrets out of any text, in every form a server may echo
  them in: as given and line-stripped, base64 of any text holding them (so ``Bearer <token>``
  and ``user:<password>`` as a header carries them), hex, URL- or JSON-escaped, reversed, in any
  case, in full-width or other compatibility characters, and each of those spaced out (its letters
  and digits in order with anything but letters and digits between them: ``g l s a _ T o k``,
  ``g.l.s.a``, one per line); :meth:`Redactor.snippet` is how a server's own text enters a message
  (one line, control characters out, bounded, redacted). No redactor knows every encoding a
  hostile server can invent: where a request carried a secret and the answer is not needed in a
  message, the message describes the answer instead of quoting it (:mod:`analytics.grafana`).

:mod:`analytics.outbound` (every request) and its callers, live pulls and Grafana, use these only.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
import unicodedata
from pathlib import Path
from typing import Iterable
from urllib.parse import quote, quote_plus

from analytics.errors import ConfigError
from analytics.text import visible

# Shorter secrets would blank out ordinary words in a message; a secret that short is not one.
MIN_REDACTED_LEN = 3
# What of a server's own text a message quotes.
SNIPPET_CHARS = 300
# A token file is a token, not a document: refuse anything bigger before reading it whole.
MAX_SECRET_BYTES = 64 << 10
REDACTED = "[redacted]"
# A form spaced out is matched by its letters and digits alone, so it needs this many of them: a
# shorter run would match across ordinary words ("a-b-c" in "a bad cat").
MIN_SPACED_ALNUM = 8
# What may stand between two characters of a spaced-out secret: anything but a letter or a digit.
_GAP = "[^0-9a-z]*"
# A terminal's escape sequences (colours, cursor moves, title changes), dropped whole.
_ANSI = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)?|[@-Z\\-_])")


def _b64_cores(raw: bytes) -> set[str]:
    """The base64 characters that ``raw`` alone decides, at each of the three byte offsets it
    can sit at inside a longer encoded text (``Bearer <token>``, ``user:<password>``)."""
    out = set()
    for k in range(3):
        enc = base64.b64encode(b"\0" * k + raw).decode()
        core = enc[-(-8 * k // 6):(8 * (k + len(raw))) // 6]
        out |= {core, core.replace("+", "-").replace("/", "_")}
    return out


def _forms(secret: str) -> set[str]:
    raw = secret.encode()
    forms = {secret, quote(secret, safe=""), quote_plus(secret), raw.hex(), json.dumps(secret)[1:-1],
             html.escape(secret)}
    whole = base64.b64encode(raw).decode()
    for core in _b64_cores(raw) | {whole, whole.replace("+", "-").replace("/", "_")}:
        forms |= {core, quote(core, safe="")}
    return forms | {f[::-1] for f in forms}


def _skeleton(form: str) -> str:
    """The ASCII letters and digits of ``form``, in order: what survives its being spaced out."""
    return "".join(c for c in form if c.isascii() and c.isalnum())


class Redactor:
    """Replaces every secret in a text, in every form a server may echo it back, by ``[redacted]``.

    Matching ignores case, so an upper-cased echo goes too (and base64 read without its case,
    which can only redact more).

    >>> r = Redactor(["s3cret-tok\\n"])
    >>> r("a s3cret-tok b S3CRET-TOK kot-terc3s " + base64.b64encode(b"Bearer s3cret-tok").decode())
    'a [redacted] b [redacted] [redacted] QmVhcmVyIH[redacted]s='
    """

    def __init__(self, secrets: Iterable[str]) -> None:
        forms: set[str] = set()
        for s in secrets:
            for v in {s, s.strip()}:
                if len(v) >= MIN_REDACTED_LEN:
                    forms |= _forms(v)
        ordered = sorted((f for f in forms if len(f) >= MIN_REDACTED_LEN), key=len, reverse=True)
        self.longest = len(ordered[0]) if ordered else 0
        self._pattern = re.compile("|".join(map(re.escape, ordered)), re.IGNORECASE) if ordered else None
        skeletons = sorted({k for f in ordered if len(k := _skeleton(f)) >= MIN_SPACED_ALNUM}, key=len, reverse=True)
        self._spaced = (re.compile("|".join(_GAP.join(map(re.escape, k)) for k in skeletons), re.IGNORECASE)
                        if skeletons else None)

    def __call__(self, text: str) -> str:
        if self._pattern is None:
            return text
        # full-width and other compatibility characters read as the ASCII they stand for
        text = self._pattern.sub(REDACTED, unicodedata.normalize("NFKC", text))
        return self._spaced.sub(REDACTED, text) if self._spaced is not None else text

    def snippet(self, text: str | bytes, limit: int = SNIPPET_CHARS) -> str:
        """A server's text as a message may quote it: control characters out, secrets redacted,
        at most ``limit`` characters (a secret cut by the window it is read from goes too)."""
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        window = text[:16 * limit + self.longest]
        shown = self(printable(window))
        if len(window) < len(text):
            shown = shown[:max(0, len(shown) - self.longest)]
        return shown if len(shown) <= limit else shown[:limit] + "..."


def printable(text: str) -> str:
    """``text`` on one line: line breaks as spaces, other control and format characters out
    (an escape sequence must not reach a terminal; dropping them also rejoins a secret a
    server split with them, so the redactor finds it)."""
    text = _ANSI.sub("", text)
    text = re.sub(r"[\r\n\t]+", " ", text)
    return "".join(c for c in text if not unicodedata.category(c).startswith("C"))


def check_secret(value: str, where: str) -> str:
    """``value`` stripped, if it is one line of what an HTTP header carries; else a
    :class:`ConfigError` naming ``where``, never the value."""
    value = value.strip()
    if not value:
        raise ConfigError(f"{where} is empty: it should hold the secret alone, on one line")
    if "\n" in value or "\r" in value:
        raise ConfigError(f"{where} holds more than one line: it should hold the secret alone, on "
                          "one line (its content is not shown)")
    if any(not (" " <= c <= "~") for c in value):
        raise ConfigError(f"{where} holds control or non-ASCII characters, which no HTTP header "
                          "carries: it should hold the secret alone (its content is not shown)")
    return value


def secret_from_env(var: str, what: str) -> str:
    """The secret in environment variable ``var``: one line, surrounding whitespace stripped."""
    value = os.environ.get(var)
    if not value:
        raise ConfigError(f"the {what} comes from environment variable {var}, which is not set")
    return check_secret(value, f"environment variable {var} (the {what})")


def secret_from_file(path: str | Path, what: str) -> str:
    """The secret in file ``path``, read as one line: surrounding whitespace stripped, a second
    line, an empty file or more than 64 KiB refused with a message naming the file, never its
    content."""

    shown = visible(str(path))
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_SECRET_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read the {what} from {shown}: {exc.strerror}") from None
    if len(raw) > MAX_SECRET_BYTES:
        raise ConfigError(f"{shown} (the {what}) is over {MAX_SECRET_BYTES >> 10} KiB: it should "
                          "hold the secret alone, on one line")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ConfigError(f"{shown} (the {what}) is not UTF-8 text: it should hold the secret "
                          "alone, on one line") from None
    return check_secret(text, f"{shown} (the {what})")
