"""A workload-map pattern as both engines read it: RE2 in Python (the map's own matching,
google-re2, C++ RE2) and Go's ``regexp`` (Prometheus, Thanos, Mimir and vmalert: the map's
recording rules, :mod:`analytics.rules`).

The two share RE2's syntax but not all of it, and Prometheus does not compile the pattern alone:

- the rules compiler writes a pattern as ``(?i-s:PATTERN)`` (:func:`rule_regex`) and Prometheus
  wraps a matcher as ``^(?:...)$``: ``\\Q`` without ``\\E`` quotes to the end, so ``\\Qchat)``,
  which Python reads as the literal ``chat)``, swallows the wrapper's closing parentheses there;
- C++ RE2 accepts constructs Go's ``regexp`` refuses: ``\\C`` (one byte), ``(?<name>...)`` (Go
  1.22 and later only), capture names beyond ASCII word characters, and the Unicode scripts of
  Unicode 14 and 15 (``\\p{Kawi}``) that Go's tables before 1.21 lack.

The oldest engine the rules are for is Prometheus 2.42 (Debian's, built with Go 1.19: the
``promtool`` the tests run): :func:`check_pattern` accepts what both Python's RE2 and that engine
accept, and ``tests/test_rules_patterns.py`` holds it to ``promtool check rules`` on a corpus.
"""

from __future__ import annotations

import re
from typing import Any

import re2

from analytics.errors import ConfigError

# A pattern longer than this is refused before either engine compiles it: a hand-written rule is
# a few hundred characters (an alternation of 300 namespaces a few thousand), and one of 2 MB cost
# the rules' export 19 s.
MAX_PATTERN_CHARS = 65_536

# Groups nested deeper than this are refused: Go's regexp refuses an expression more than 1,000
# nodes high (C++ RE2 takes more), and a group can add a few nodes (a repeat, an alternation); no
# hand-written pattern nests 100 groups.
MAX_NESTING = 100

# The Unicode classes ``\p{...}`` Go 1.19's regexp knows: ``Any``, the general categories, and
# the scripts of Unicode 13.0 (its ``unicode.Scripts``). C++ RE2 knows Unicode 15's.
GO_UNICODE_CLASSES = frozenset("""
Any C Cc Cf Co Cs L Ll Lm Lo Lt Lu M Mc Me Mn N Nd Nl No P Pc Pd Pe Pf Pi Po Ps S Sc Sk Sm So Z Zl Zp Zs
Adlam Ahom Anatolian_Hieroglyphs Arabic Armenian Avestan Balinese Bamum Bassa_Vah Batak Bengali
Bhaiksuki Bopomofo Brahmi Braille Buginese Buhid Canadian_Aboriginal Carian Caucasian_Albanian
Chakma Cham Cherokee Chorasmian Common Coptic Cuneiform Cypriot Cyrillic Deseret Devanagari
Dives_Akuru Dogra Duployan Egyptian_Hieroglyphs Elbasan Elymaic Ethiopic Georgian Glagolitic
Gothic Grantha Greek Gujarati Gunjala_Gondi Gurmukhi Han Hangul Hanifi_Rohingya Hanunoo Hatran
Hebrew Hiragana Imperial_Aramaic Inherited Inscriptional_Pahlavi Inscriptional_Parthian Javanese
Kaithi Kannada Katakana Kayah_Li Kharoshthi Khitan_Small_Script Khmer Khojki Khudawadi Lao Latin
Lepcha Limbu Linear_A Linear_B Lisu Lycian Lydian Mahajani Makasar Malayalam Mandaic Manichaean
Marchen Masaram_Gondi Medefaidrin Meetei_Mayek Mende_Kikakui Meroitic_Cursive
Meroitic_Hieroglyphs Miao Modi Mongolian Mro Multani Myanmar Nabataean Nandinagari New_Tai_Lue
Newa Nko Nushu Nyiakeng_Puachue_Hmong Ogham Ol_Chiki Old_Hungarian Old_Italic Old_North_Arabian
Old_Permic Old_Persian Old_Sogdian Old_South_Arabian Old_Turkic Oriya Osage Osmanya Pahawh_Hmong
Palmyrene Pau_Cin_Hau Phags_Pa Phoenician Psalter_Pahlavi Rejang Runic Samaritan Saurashtra
Sharada Shavian Siddham SignWriting Sinhala Sogdian Sora_Sompeng Soyombo Sundanese Syloti_Nagri
Syriac Tagalog Tagbanwa Tai_Le Tai_Tham Tai_Viet Takri Tamil Tangut Telugu Thaana Thai Tibetan
Tifinagh Tirhuta Ugaritic Vai Wancho Warang_Citi Yezidi Yi Zanabazar_Square
""".split())

# What the scan stops at (everything else is a literal to both engines): an escape, a class's
# brackets (its first ] is literal), a group's opening and closing. ``\Q...\E`` is one token (its
# text is literal).
_TOKEN = re.compile(r"\\Q.*?(?:\\E|\Z)|\\[pP](?:\{[^}]*\}?|.)?|\\.|\[:\^?[a-z]*:\]|\[\^?\]?|\]"
                    r"|\(\?P?<[^>]*>?|\(|\)", re.S)
_GO_NAME = re.compile(r"[A-Za-z0-9_]+")


def rule_regex(pattern: str) -> str:
    """A workload-map pattern as Prometheus must read it to match what Python's RE2 matches
    (case-insensitive, ``.`` not matching a newline: :mod:`analytics.rules.quoting`).

    >>> rule_regex("chat-.*")
    '(?i-s:chat-.*)'
    """
    return f"(?i-s:{pattern})"


def compile_pattern(pattern: str, what: str, *, ignore_case: bool = True) -> Any:
    """A pattern from ``tidelens.toml`` compiled with RE2: matching takes linear time whatever the
    pattern (``(a+)+$`` cannot freeze a server), which Python's ``re`` cannot promise.

    Raises
    ------
    ConfigError
        A pattern longer than :data:`MAX_PATTERN_CHARS`, or one RE2 cannot compile
        (backreferences, lookarounds), with the reason.
    """
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ConfigError(f"{what}: a pattern of {len(pattern):,} characters; at most {MAX_PATTERN_CHARS:,} "
                          "(name the values with a shorter pattern, or split the rule)")
    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = not ignore_case
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise ConfigError(f"{what} = {pattern!r} is not a pattern Tidelens accepts (RE2 syntax: no "
                          f"backreferences or lookarounds): {reason}") from None


def check_go_pattern(pattern: str, what: str) -> None:
    """Refuse a pattern (one Python's RE2 compiles) that Prometheus' Go regexp would refuse or
    read otherwise in the recording rules, naming ``what`` (the rule and its key) and the part.

    >>> check_go_pattern("chat-(?P<n>v[0-9]+)", "rule 'x': pod")
    >>> check_go_pattern("(?<n>x)", "rule 'x': pod")
    Traceback (most recent call last):
    ...
    analytics.errors.ConfigError: rule 'x': pod = '(?<n>x)': Prometheus' Go regexp refuses (?<n>: write a named group as (?P<name>...)
    """
    wrapped = f"^(?:{rule_regex(pattern)})$"  # as Prometheus compiles the matcher
    try:
        compile_pattern(wrapped, what)
    except ConfigError:
        raise ConfigError(f"{what} = {pattern!r}: inside the rules' matcher {wrapped!r} it does not parse "
                          "(a \\Q without \\E quotes to the end of the matcher): close every \\Q with \\E") from None
    deepest, refused = _scan(pattern)
    if deepest > MAX_NESTING:
        raise ConfigError(f"{what} = {pattern[:80]!r}...: groups nested more than {MAX_NESTING} deep; Go's regexp "
                          "refuses deep nesting (1,000 levels): write it flatter")
    if refused:
        token, why = refused
        raise ConfigError(f"{what} = {pattern!r}: Prometheus' Go regexp refuses {token[:40]}: {why}")


def _scan(pattern: str) -> tuple[int, tuple[str, str] | None]:
    """How deep the pattern's groups nest, and the first token Go's regexp refuses with why
    (``None``): one pass over the tokens, character classes apart (inside one, ``(`` is a literal
    and only the escapes can differ).

    >>> _scan("(a(b)[(((?<])(c)")
    (2, None)
    >>> _scan("x(?<n>y)")[1][0]
    '(?<n>'
    """
    depth = deepest = 0
    in_class = False
    for m in _TOKEN.finditer(pattern):
        t = m.group()
        if in_class:
            in_class = t != "]"
            if t.startswith("\\") and _go_refuses(t):
                return deepest, (t, _go_refuses(t))
            continue
        if t.startswith("[") and not t.startswith("[:"):
            in_class = True
            continue
        if t.startswith("("):
            depth += 1
            deepest = max(deepest, depth)
        elif t == ")":
            depth -= 1
        why = _go_refuses(t)
        if why:
            return deepest, (t, why)
    return deepest, None


def _go_refuses(token: str) -> str:
    """Why Go's regexp (1.19) refuses ``token`` where C++ RE2 accepts it, else ``""``. A token
    inside a character class is read as outside it: the only ones that differ there (``\\C``,
    ``\\p{...}``) differ the same way, and ``(?`` inside a class is refused by RE2 already
    unless it is plain text, where Go agrees."""
    if token == "\\C":
        return "\\C (any byte) has no PromQL equivalent; use . (any character) instead"
    if token[:2] in ("\\p", "\\P") and len(token) > 2:
        name = token[3:-1] if token[2] == "{" else token[2]
        name = name[1:] if name.startswith("^") else name
        if name not in GO_UNICODE_CLASSES:
            return (f"Go's Unicode tables (Unicode 13) have no class {name!r}: name the characters "
                    "or a range (\\x{...}-\\x{...}) instead")
    if token == "(?<" or (token.startswith("(?<") and not token.startswith("(?<=") and not token.startswith("(?<!")):
        return "write a named group as (?P<name>...)"
    if token.startswith("(?P<") and not _GO_NAME.fullmatch(token[4:-1]):
        return "a group's name is ASCII letters, digits and _ there"
    return ""
