"""The scrubber's one-pass prefilter: both engines agree, and it never hides a finding.

``Scrubber.scan`` runs each rule's Python regex only at the offsets its probes report (see
``memvault.scrub.prefilter`` and the comment above ``projections`` in ``memvault.scrub.rules``). These tests
check that this is an optimisation only: the findings equal those of running every rule at every
offset of the text, on the labelled corpora and on generated text full of the characters the
projection treats specially; and that Hyperscan and the ``re`` fallback report the same offsets.
"""

from __future__ import annotations

import json
import re
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memvault.scrub import Finding, Scrubber, engine, prefilter, rules, validators
from memvault.scrub.prefilter import Pattern, PatternSet
from memvault.settings import ScrubSettings

CORPORA = Path(__file__).resolve().parent.parent / "scrub"


def _corpus(name: str) -> list[str]:
    lines = (CORPORA / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["text"] for line in lines if line.strip()]


NOTES = _corpus("heldout_corpus.jsonl")[::8] + _corpus("dev_corpus.jsonl")[::6] + _corpus("public_examples.jsonl")


def exhaustive(scrubber: Scrubber, text: str) -> list[Finding]:
    """The findings with every probe reporting every offset: each rule runs everywhere."""
    if not text:
        return []
    everywhere = list(range(len(text) + 1))
    reported = {i: (everywhere if any(p.starts for p in probe) else [0]) for i, probe in enumerate(rules.PROBES)}
    return scrubber._findings(text, reported)


SCRUBBERS = {
    "default": Scrubber(),
    "no_ip_phone": Scrubber(ScrubSettings(policy={"ip": "allow", "phone": "allow"})),
}


@pytest.mark.parametrize("name", sorted(SCRUBBERS))
def test_prefilter_hides_nothing_on_the_corpora(name: str) -> None:
    scrubber = SCRUBBERS[name]
    found = 0
    for text in NOTES:
        got = scrubber.scan(text)
        assert got == exhaustive(scrubber, text), text[:80]
        found += len(got)
    assert found > 300  # the corpora are full of findings: the comparison is not vacuous


#: Characters the projection treats specially: case-equivalents of ASCII letters, other scripts'
#: digits and spaces, a lone surrogate, and ASCII ``?`` (what every non-ASCII character becomes).
_SPECIAL = "\u0130\u0131\u017f\u212a\u0663\uff11\u00a0\u2003\u00e9\u2014\ud800?"
_PIECES = [
    "sk-ant-api03-", "AKIA", "password", "Passwd", "token", "api_key", "secret", " = ", ": ", '"', "'", "@",
    "example.org", "://", "bearer ", "Basic ", "+1 ", "(212) ", "555-0142", "4111 1111 1111 1111", "DE89 3704",
    "0044 0532 0130 00", "192.168.", "8.8.8.8", "2001:db8::1", "dob ", "born ", "1990-01-02", "eyJhbGciOiJIUzI1NiJ9",
    ".", "-", "_", "/", "+", "\n", " ", "AccountKey=", "twilio", "AC", "aws", "ghp_", "xoxb-", "sig=",
    "date of birth ", "Date_of-Birth: ", "date de naissance ", "data di nascita ", "n\u00e9e le ", "https://",
    "u\u00e9:", "Pa55w0rdX@", "@db", "223.1.2.3", "224.1.", "\u0668.8.8.8", "8.8.8.\u0668", "01.", "100.64.",
    "aws_secret_access_key=", '"SecretAccessKey": "', "/Zq8wT3vLp0aB+kR9sUyE2nC7dF4gH1jM6xQ5tV0", "TWILIO_AUTH_TOKEN ",
    "9c27cf25710d0272b10c44d2fc92bba3", "account_sid=", "GITHUB_TOKEN: ", "ghp_", "section ", "version ", "to ",
    "secret-access-key ", "SECRET.ACCESS.KEY=", "AccountKey: ", " (iOS) and ",
]  # fmt: skip
_ALPHABET = st.sampled_from(list("aAzZ019xX-_./+=:") + list(_SPECIAL))
_TEXT = st.lists(st.one_of(st.sampled_from(_PIECES), st.text(_ALPHABET, min_size=1, max_size=12)), max_size=24).map(
    "".join
)


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(_TEXT)
def test_prefilter_hides_nothing_on_generated_text(text: str) -> None:
    scrubber = SCRUBBERS["default"]
    assert scrubber.scan(text) == exhaustive(scrubber, text)


def _snippets() -> list[tuple[str, int, int]]:
    """Text around findings of the corpora: (snippet, finding start, finding end) in the snippet."""
    out: dict[str, tuple[str, int, int]] = {}
    scrubber = SCRUBBERS["default"]
    for text in NOTES:
        for f in scrubber.scan(text):
            a = max(0, f.start - 24)
            snippet = text[a : f.end + 6]
            out.setdefault(f"{f.kind}{len(out) % 2}", (snippet, f.start - a, f.end - a))
    return list(out.values())


SNIPPETS = _snippets()
#: Around a finding's edges: ASCII ``?``, case-equivalents, a non-ASCII letter, digit and space.
_EDGE_CHARS = "?\u017f\u00e9\u0663."


def test_prefilter_hides_nothing_next_to_findings() -> None:
    """Each finding of the corpora with each special character replacing, or inserted at, the
    characters at its edges and just before a context word."""
    scrubber = SCRUBBERS["default"]
    assert len(SNIPPETS) > 40
    checked = 0
    for snippet, start, end in SNIPPETS:
        for pos in {start - 1, start, end - 1, end, max(0, start - 8)}:
            if not 0 <= pos < len(snippet):
                continue
            for ch in _EDGE_CHARS:
                for text in (snippet[:pos] + ch + snippet[pos + 1 :], snippet[:pos] + ch + snippet[pos:]):
                    assert scrubber.scan(text) == exhaustive(scrubber, text), repr(text)
                    checked += 1
    assert checked > 2000


def test_rules_run_only_when_every_probe_reports_need_them_all() -> None:
    """A rule marked ``every_probe`` is skipped unless each of its probes reports: its detector,
    given every offset for all its probes but one and nothing for that one, finds nothing."""
    gated = [r for r in rules.RULES if r.every_probe]
    assert {r.kind for r in gated} == {"aws_secret_access_key", "twilio_auth_token", "dob"}
    texts = [*NOTES, "\n".join(_PIECES), *(s for s, _, _ in SNIPPETS)]
    found = 0
    for rule in gated:
        for text in texts:
            everywhere = list(range(len(text) + 1))
            full = tuple(everywhere if any(p.starts for p in probe) else [0] for probe in rule.probes)
            found += len(list(rule.detect(text, full)))
            for missing in range(len(rule.probes)):
                starts = tuple([] if i == missing else got for i, got in enumerate(full))
                assert list(rule.detect(text, starts)) == [], (rule.kind, missing, text[:80])
    assert found > 20  # the same texts do give findings when every probe reports


_BOUNDARY_TEXTS = [
    *(
        f"db: postgres://{'u' * user}:{'Zq8wT3' * (password // 6) + 'x' * (password % 6)}@db.corp:5432/app"
        for user in (1, 127, 128, 129)
        for password in (1, 8, 255, 256, 257)
    ),
    "https://\u00fcser:p\u00e4ssw0rdXY9@h.io/ and ftp://a#b:c[d]e?f@host/",
    "dateofbirth 1990-01-02",
    "DateOfBirth: 02/03/1990",
    "date_of-birth 12 March 1990",
    "Date-of Birth: 1990-01-02",
    "date de naissance 02/03/1990",
    "Date De Naissance : 2 mars 1990",
    "data di nascita 02/03/1990",
    "DATA DI NASCITA 1990-01-02",
    "n\u00e9e le 02/03/1990, geb. 1.2.1990, born 1990-01-02",
    "d.ob 1990-01-02; do.b: 02/03/1990; D.O.B. 1990-01-02",
    "updated: date of the release 2024-01-02 (not a birth date)",
]


@pytest.mark.parametrize("text", _BOUNDARY_TEXTS)
def test_prefilter_hides_nothing_at_the_gates_bounds(text: str) -> None:
    """The URL-password gate at its length bounds, and every way a birth-date word can start."""
    scrubber = SCRUBBERS["default"]
    assert scrubber.scan(text) == exhaustive(scrubber, text)


def test_the_bound_texts_do_hold_findings() -> None:
    kinds = [{f.kind for f in SCRUBBERS["default"].scan(t)} for t in _BOUNDARY_TEXTS]
    assert sum("basic_auth" in k for k in kinds) >= 10  # (none beyond the detector's own bounds)
    assert sum("dob" in k for k in kinds) >= 9


def test_url_passwords_are_looked_for_only_where_the_gate_reports() -> None:
    """The basic_auth rule's URL part runs only when its fourth probe (a URL with a password
    somewhere) reports; its header and ``curl -u`` parts do not depend on it."""
    (rule,) = [r for r in rules.RULES if r.kind == "basic_auth"]
    text = (
        "db at postgres://admin:Zq8wT3vLp0@db.corp:5432; Authorization: Basic dXNlcjpQNHNzd29yZEhlcmU=;"
        " curl -u ops:Hunter22x"
    )
    everywhere = list(range(len(text) + 1))
    full = (everywhere, everywhere, everywhere, [0])
    values = {text[s:e] for s, e, _, _ in rule.detect(text, full)}
    assert values == {"Zq8wT3vLp0", "dXNlcjpQNHNzd29yZEhlcmU=", "Hunter22x"}
    without = {text[s:e] for s, e, _, _ in rule.detect(text, (*full[:3], []))}
    assert without == {"dXNlcjpQNHNzd29yZEhlcmU=", "Hunter22x"}
    assert rules.probe_ids(rule)[3] in engine._PROBE_SET.grouped((text.encode("ascii"),))


def test_odd_case_table_is_complete() -> None:
    """Every non-ASCII character that ``re.IGNORECASE`` equates with an ASCII letter, or whose
    ``str.lower`` holds one, is in ``_ODD_CASE`` mapped to that letter."""
    any_letter = re.compile("[a-z]", re.IGNORECASE)
    letters = {c: re.compile(c, re.IGNORECASE) for c in "abcdefghijklmnopqrstuvwxyz"}
    found: dict[int, set[str]] = {}
    for cp in range(128, sys.maxunicode + 1):
        if 0xD800 <= cp < 0xE000:
            continue
        ch = chr(cp)
        hits = {c for c in ch.lower() if c.isascii() and c.isalpha()}
        if any_letter.fullmatch(ch):
            hits |= {c for c, rx in letters.items() if rx.fullmatch(ch)}
        if hits:
            found[cp] = hits
    assert {cp: {letter} for cp, letter in rules._ODD_CASE.items()} == found


def _all_patterns() -> list[Pattern]:
    return [p for probe in rules.PROBES for p in probe]


@pytest.mark.skipif(not prefilter.HYPERSCAN, reason="compares Hyperscan with the re fallback")
def test_hyperscan_and_re_report_the_same_offsets() -> None:
    patterns = _all_patterns()
    fast, slow = PatternSet(patterns), PatternSet(patterns, hyperscan=False)
    texts = [*NOTES[:200], "?" * 50, "1" * 60, "A" * 45 + "=", "password=" * 30, "\n".join(_PIECES)]
    total = 0
    for text in texts:
        for data in rules.projections(text):
            got = sorted(fast.scan(data))
            assert got == sorted(slow.scan(data))
            total += len(got)
    assert total > 1000


def test_patterns_of_starts_probes_are_fixed_length() -> None:
    """Hyperscan reports only the leftmost start per end offset: a starts pattern must have one
    length, else a start could be lost. Checked with ``re``'s own width computation."""
    parser = getattr(re, "_parser", None) or __import__("sre_parse")
    for p in _all_patterns():
        if p.starts:
            lo, hi = parser.parse(p.regex).getwidth()
            assert lo == hi, p.regex


def test_gate_and_shift_semantics() -> None:
    ps = PatternSet(
        [Pattern("ab"), Pattern("[^x]ab", shift=1), Pattern("zz", starts=False), Pattern("AB", caseless=True)],
        hyperscan=prefilter.HYPERSCAN,
    )
    hits = sorted(ps.scan(b"ab xab yab zz zz"))
    assert hits == [(0, 0), (0, 4), (0, 8), (1, 8), (2, 0), (3, 0), (3, 4), (3, 8)]


def test_grouped_gathers_what_scan_reports() -> None:
    patterns = [Pattern("ab"), Pattern("[^x]ab", shift=1), Pattern("zz", starts=False), Pattern("AB", caseless=True)]
    for hyperscan in {False, prefilter.HYPERSCAN}:
        ps = PatternSet(patterns, groups=[7, 7, 3, 5], hyperscan=hyperscan)
        got = ps.grouped([b"ab xab yab zz zz", b"zzAB"])
        assert {g: sorted(v) for g, v in got.items()} == {7: [0, 4, 8, 8], 3: [0, 0], 5: [0, 2, 4, 8]}
        assert ps.grouped([b"nothing here"]) == {}
    with pytest.raises(ValueError, match="one group per pattern"):
        PatternSet(patterns, groups=[1, 2])


def test_scans_from_many_threads_agree() -> None:
    scrubber = Scrubber()
    texts = NOTES[:40]
    expected = [scrubber.scan(t) for t in texts]
    errors: list[BaseException] = []
    results: list[list[list[Finding]]] = []

    def work() -> None:
        try:
            results.append([scrubber.scan(t) for t in texts])
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert results == [expected] * 8


def test_scrubber_on_the_re_fallback_finds_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without Hyperscan (the ``re`` fallback engine) the scrubber reports the same findings."""
    scrubber = SCRUBBERS["default"]
    texts = [*NOTES[:150], "token: " + "Ab1" * 40, "\n".join(_PIECES)]
    expected = [scrubber.scan(t) for t in texts]
    assert sum(map(len, expected)) > 100
    monkeypatch.setattr(engine, "_PROBE_SET", rules.probe_set(hyperscan=False))
    assert [scrubber.scan(t) for t in texts] == expected


def test_placeholders_found_alike_with_and_without_aho_corasick(monkeypatch: pytest.MonkeyPatch) -> None:
    """``is_placeholder`` answers the same with or without ``pyahocorasick``, for short and long
    values. It judges whole values only: a placeholder word, ``xxxx``, ``<`` or ``vault:`` inside a
    random value does not make it a placeholder (real keys were let through that way)."""
    values = [
        "A1b2c3",
        "your-key",
        "A1b2...",
        "A1b2" * 30,
        "A1b2" * 30 + "xxxx",
        "your_" + "Zq9" * 40,
        "Zq9" * 40 + "\u2026",
        "k" * 200,
        "abc" + "Zq9" * 40 + "<",
        "Zq9" * 40 + "vault:",
    ]
    got = [validators.is_placeholder(v) for v in values]
    monkeypatch.setattr(validators, "_aho", None)
    assert [validators.is_placeholder(v) for v in values] == got
    assert got == [False, True, True, False, False, False, True, True, False, False]


def test_occurrences_alike_with_and_without_aho_corasick(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every occurrence of the credential values found is located with Aho-Corasick once there are
    several values, else with ``str.find``: the same occurrences (overlapping ones too) and the
    same findings either way."""
    values = ["abab", "bab", "Zq9Zq9Zq9", "x" * 3, *(f"v{i}w" for i in range(10))]
    text = "ababab Zq9Zq9Zq9Zq9 xxxx " + " ".join(f"v{i}w" for i in range(12))
    texts = [*NOTES[:150], "\n".join(_PIECES)]
    scrubber = SCRUBBERS["default"]
    expected = [scrubber.scan(t) for t in texts]
    for n in (2, len(values)):  # below and above the number of values that uses the automaton
        got = sorted(validators.occurrences(text, values[:n]))
        with monkeypatch.context() as m:
            m.setattr(validators, "_aho", None)
            assert sorted(validators.occurrences(text, values[:n])) == got
            assert [scrubber.scan(t) for t in texts] == expected
        assert got == sorted((i, v) for v in values[:n] for i in range(len(text)) if text.startswith(v, i))
