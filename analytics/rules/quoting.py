"""PromQL text the rules compiler writes: quoted strings, the map's regexes as matchers, label copies.

Where Prometheus and :mod:`analytics.workloads` could read the same pattern differently, this
module makes them agree:

- both are RE2, anchored at both ends (Python ``fullmatch``; Prometheus wraps a matcher as
  ``^(?:...)$``);
- a rule's pattern is case-insensitive in Python (:func:`analytics.patterns.compile_pattern`): the matcher says ``(?i)``;
- ``.`` does not match a newline in Python's RE2; Prometheus 3 compiles matchers with ``(?s)``,
  so the matcher clears it (``(?-s)``), and 2.x agrees either way;
- a label Python sees as absent (``None`` or empty) never matches there, even ``.*``; in
  PromQL an absent label is ``""``, so every rule matcher also says ``label!=""``.
"""

from __future__ import annotations

from typing import Iterable

from analytics.patterns import rule_regex


def quote(value: str) -> str:
    """A PromQL double-quoted string literal of ``value`` (Go escapes: the lexer refuses a raw
    newline inside quotes).

    >>> quote('a"b\\\\c'), quote("x\\ny")
    ('"a\\\\"b\\\\\\\\c"', '"x\\\\ny"')
    """
    out = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{out}"'


def matchers(match: dict[str, str], label_of: dict[str, str]) -> list[str]:
    """Label matchers of one rule: ``label=~"(?i-s:pattern)", label!=""`` for each key."""
    out = []
    for key, pattern in match.items():
        label = label_of[key]
        out.append(f"{label}=~{quote(rule_regex(pattern))}")
        out.append(f'{label}!=""')
    return out


def selector(metric: str, parts: Iterable[str]) -> str:
    parts = list(parts)
    return f"{metric}{{{', '.join(parts)}}}" if parts else metric


def label_replace(expr: str, dst: str, replacement: str, src: str, regex: str) -> str:
    return f"label_replace({expr}, {quote(dst)}, {quote(replacement)}, {quote(src)}, {quote(regex)})"


def overwrite(expr: str, dst: str, src: str, regex: str = "(?s)(.+)") -> str:
    """``dst`` set from ``src`` where ``regex`` matches it, the old ``dst`` kept as
    ``tidelens_was_<dst>`` so that two series differing only in ``dst`` stay two (a vector
    with one label set twice is an error); the caller's aggregation drops it."""
    kept = label_replace(expr, f"tidelens_was_{dst}", "$1", dst, "(?s)(.*)")
    return label_replace(kept, dst, "$1", src, regex)


def set_label(expr: str, dst: str, value: str) -> str:
    """``expr`` with ``dst`` set to the fixed ``value`` (``$`` escaped for Go's Expand).

    >>> set_label("x", "class", "a$b")
    'label_replace(x, "class", "a$$b", "", "")'
    """
    return label_replace(expr, dst, value.replace("$", "$$"), "", "")


def first_present(expr: str, dst: str, spellings: tuple[str, ...]) -> str:
    """``dst`` set to the first non-empty of ``spellings`` (as :mod:`analytics.labels` picks):
    each later ``label_replace`` overwrites only where its source is non-empty, so the
    spellings are applied lowest priority first."""
    for src in reversed(spellings):
        expr = label_replace(expr, dst, "$1", src, "(?s)(.+)")
    return expr


def by(labels: Iterable[str]) -> str:
    return ", ".join(labels)
