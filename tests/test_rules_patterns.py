"""Map patterns read as the engine the rules are for reads them (issue 50): a pattern the map
takes is one Prometheus' Go regexp takes inside the rules' matcher, and one it refuses is refused
with its rule's name when the map is loaded, saved or exported.

The judge is the real engine: ``promtool check rules`` (Debian's Prometheus 2.42, Go 1.19) on a
corpus of patterns, one rules file each, in one run: the map's accept/refuse agrees with it on
every pattern, but the few that Python's RE2 cannot hold (refused by the map's own matching, which
Go would take). And the rules grow linearly with the map (500 rules were 27 MB of PromQL).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from plugins.prometheus import promtool  # noqa: F401 (a fixture)
from analytics.cli import main
from analytics.errors import ConfigError
from analytics.patterns import GO_UNICODE_CLASSES, MAX_PATTERN_CHARS, rule_regex
from analytics.rules import rules_yaml
from analytics.workloads import Rule, WorkloadMap, load_map, save_map

# Unicode 14 and 15 scripts: C++ RE2 has them, Go 1.19's tables do not.
NEWER_SCRIPTS = ("Cypro_Minoan", "Old_Uyghur", "Tangsa", "Toto", "Vithkuqi", "Kawi", "Nag_Mundari")
CORPUS = [
    "chat-.*", "", ".*", "a|b", "a|", "(?:x)", "(a)(b)", "[a-z]+", "[^a-z]", "[]a]", "[^]a]", "x{2,5}", "x{1000}",
    "x{1001}", "x{2}{3}", "x{,3}", "a**", "a*?", "a+?", "a??", "x*+", "(?i)A", "(?s).", "(?m)^a$", "(?U)a*",
    "(?i-s:x)", "(?i)(?-i)", "(?)", "(?P<name>x)", "(?P<n>a)(?P<n>b)", "(?P<1x>a)", "(?P<a_b9>x)", "(?P<名>a)",
    "(?P<>a)", "(?P<a b>x)", "(?<name>x)", "(?<=a)b", "(?=a)", "(?!a)", "(?P=n)", "\\1", "\\0", "\\012", "\\8",
    "\\x41", "\\x{41}", "\\x{10FFFF}", "\\x{110000}", "\\C", "[\\C]", "\\Q\\C\\E", "\\Qchat)", "\\Q(a", "\\Qa\\E)",
    "\\Qa.b\\E", "\\Q\\E", "\\Qa\\Eb\\Q)\\E", "x\\Q", "\\z", "\\Z", "\\A", "\\b", "\\B", "\\v", "\\e", "\\a", "\\f",
    "\\t", "\\pN", "\\PN", "\\pX", "\\p{L}", "\\p{^L}", "\\P{^Greek}", "\\p{Greek}", "\\p{Cn}", "\\p{LC}",
    "\\p{greek}", "[\\p{Greek}\\d]", "[\\pN]", "[^\\P{Han}]", "[[:alpha:]]", "[[:^alpha:]]", "[[:word:]]",
    "[[:foo:]]", "[a-\\d]", "[z-a]", "(", ")", "a)(b", "[", "\\", "(a", "[\\Qa]\\E]", "(?P<n>(?P<m>x))",
    "\\p{Kawi}-(?P<n>x)", "(?i)\\p{Lu}", "[(?<]", "[(?P<名>]", "(?:(?i)x)", "[(]((x))", "ſerve", "ünï.*",
    "\\d+\\s\\w", "\\pZ\\pz",
    "(" * 100 + "a" + ")" * 100, "(" * 1000 + "a" + ")" * 1000, "(" * 1001 + "a" + ")" * 1001, "((a{100}){100}){100}",
    *(f"\\p{{{name}}}" for name in sorted(GO_UNICODE_CLASSES)), *(f"\\p{{{name}}}" for name in NEWER_SCRIPTS),
    *(f"[\\P{{{name}}}x]" for name in NEWER_SCRIPTS[:2]),
]
# Patterns Go's regexp takes and the map refuses because Python's RE2 (the map's own matching)
# cannot hold them: the map never writes a rule its own classifier cannot run.
PYTHON_CANNOT = {"a)(b"}  # unbalanced alone; balanced only inside the rules' (?i-s:...)


def _map_takes(pattern: str) -> bool:
    try:
        Rule("r", {"pod": pattern}, cls="batch")
    except ConfigError:
        return False
    return True


def _promtool_takes(promtool: str, folder: Path, patterns: list[str]) -> list[bool]:
    """Whether ``promtool check rules`` accepts each pattern as the rules write it (a matcher of
    ``rule_regex(pattern)``), one file per pattern, all in one run."""
    files = []
    for i, pattern in enumerate(patterns):
        path = folder / f"p{i:04d}.yml"
        expr = f"up{{pod=~{json.dumps(rule_regex(pattern))}}}"  # JSON's escapes are PromQL's here
        path.write_text(json.dumps({"groups": [{"name": "g", "rules": [{"record": "x:y:z", "expr": expr}]}]}),
                        encoding="utf-8")
        files.append(path)
    run = subprocess.run([promtool, "check", "rules", *map(str, files)], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, timeout=120)  # one stream: its order kept
    said = run.stdout
    verdicts = dict(re.findall(r"Checking (\S+)\n\s+(SUCCESS|FAILED)", said))
    assert len(verdicts) == len(files), said[-2000:]
    return [verdicts[str(f)] == "SUCCESS" for f in files]


def test_the_map_takes_a_pattern_exactly_when_promtool_does(promtool, tmp_path) -> None:
    engine = _promtool_takes(promtool, tmp_path, CORPUS)
    ours = [_map_takes(p) for p in CORPUS]
    differ = [(p[:60], o, e) for p, o, e in zip(CORPUS, ours, engine) if o != e and p not in PYTHON_CANNOT]
    assert not differ, differ
    for p in PYTHON_CANNOT:
        assert engine[CORPUS.index(p)] and not ours[CORPUS.index(p)]
    # the corpus has teeth: the engine refuses some that C++ RE2 alone accepts, and takes many
    assert not engine[CORPUS.index("\\Qchat)")] and not engine[CORPUS.index("(?<name>x)")]
    assert not engine[CORPUS.index("\\p{Kawi}")] and sum(engine) > 200


@pytest.mark.parametrize(("pattern", "words"), [
    ("\\Qchat)", "close every \\Q with \\E"),
    ("(?<name>x)", "write a named group as (?P<name>...)"),
    ("\\p{Kawi}", "Go's Unicode tables (Unicode 13) have no class 'Kawi'"),
    ("a" * (MAX_PATTERN_CHARS + 1), "a pattern of 65,537 characters; at most 65,536"),
])
def test_a_pattern_go_refuses_is_refused_by_rule_name_on_load_save_and_export(tmp_path, capsys, pattern, words) -> None:
    cfg = tmp_path / "tidelens.toml"
    cfg.write_text(f'[[rule]]\nname = "chat serves"\npod = {json.dumps(pattern)}\nclass = "inference"\n',
                   encoding="utf-8")
    with pytest.raises(ConfigError, match=re.escape(f"{cfg}:") + r".*rule 'chat serves': pod") as refused:
        load_map(cfg)
    assert words in str(refused.value)
    with pytest.raises(ConfigError, match="rule 'chat serves': pod"):  # what the Data page's editor saves
        save_map(WorkloadMap(rules=[Rule("chat serves", {"pod": pattern}, cls="inference")]), tmp_path / "saved.toml")
    assert not (tmp_path / "saved.toml").exists()
    out = tmp_path / "rules.yml"
    assert main(["export", "rules", "--out", str(out), "--config", str(cfg), "--json"]) == 2
    assert "rule 'chat serves': pod" in json.loads(capsys.readouterr().out)["error"] and not out.exists()


def test_the_rules_grow_linearly_with_the_map() -> None:
    """Twice the rules, about twice the text (each rule less every earlier one's matches was
    four times: 200 rules 7 MB, 400 rules 27.5 MB)."""
    def size(n: int) -> int:
        rules = [Rule(f"rule {i}", {"namespace": f"team-{i}-.*", "pod": f"pod-{i}-[a-z]+"},
                      cls=("batch", "inference", "other")[i % 3], team=f"t{i}") for i in range(n)]
        return len(rules_yaml(WorkloadMap(rules=rules)))

    base, small, large = size(0), size(100), size(200)
    assert (large - base) / (small - base) < 2.05, (base, small, large)
