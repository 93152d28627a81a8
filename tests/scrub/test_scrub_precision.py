"""Harmless text agents write is left alone; and the agent-notes corpus targets.

Classes of harmless text the scrubber used to flag: four-part version numbers read as IP addresses,
payment processors' published test card numbers read as cards, prose after a password label read as a
password, trace ids near an auth word read as Twilio tokens. Each case here is a pair: the harmless text,
and the nearest text that must still be flagged.
"""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from pathlib import Path

import pytest

from memvault.scrub import Scrubber

S = Scrubber()
HERE = Path(__file__).resolve().parent


def kinds(text: str) -> list[str]:
    return [f.kind for f in S.scan(text)]


@pytest.mark.parametrize(
    "text",
    [
        "Upgraded the agent to version 8.4.15.160 last night.",
        "Rolled back to build 8.4.15.160 after the crash.",
        "v 8.4.15.160 and release 8.4.15.161 both ship the fix.",
        "Known issue: versions 8.4.15.160 to 8.4.15.170 show a blank page.",
        "Upgraded 8.4.15 -> 8.4.15.160 overnight.",
        "## 8.4.15.160 (2024-05-02)\n\n- Fixed the crash on start.",
        "| host | version |\n| --- | --- |\n| gateway-1 | 8.4.15.160 |\n| gateway-2 | 8.4.16.2 |",
        "Firmware 2.4.11.184 is required for the new sensors.",
    ],
)
def test_version_numbers_are_not_addresses(text: str) -> None:
    assert "ip" not in kinds(text)


@pytest.mark.parametrize(
    "text",
    [
        "Suspicious logins from 84.159.136.32 at 03:10.",
        "| host | address |\n| --- | --- |\n| gateway-1 | 84.159.136.32 |",
        "## Incident: traffic from 84.159.136.32",
        "Allow-list 84.159.136.32 (the customer's office) in the WAF.",
    ],
)
def test_addresses_near_the_same_shapes_are_still_found(text: str) -> None:
    assert kinds(text) == ["ip"]


@pytest.mark.parametrize(
    "text",
    [
        # section and outline numbers
        "See section 4.2.1.3 of the SOC 2 report for log retention.",
        "The auditor flagged 4.2.1.3 (access reviews) as partially met.",
        "Clause 7.1.2.4 of the MSA limits liability; \u00a74.2.1.3 covers audits.",
        "Draft outline:\n4.2.1.1 Scope\n4.2.1.2 Roles\n4.2.1.3 Log retention",
        # a second version further along the sentence than the version word's reach
        "Firmware 2.4.10.1 fixes the crash on boot for everyone; 2.4.9.7 still has it.",
        "Affected builds: 93.1.0.7, 40.2.5.1 and 60.3.1.1.",
        "Release 93.4.1.2 is out, and 93.4.1.3 follows next week.",
        "Known issue: versions 9.2.9.248 to 11.8.15.69 may show a blank page.",
        "Tested build 8.8.21.174 against 48.7.203.239; no difference in boot time.",
        "Build numbers: 14.0.5.117 (Android) and 5.8.7.40 (iOS).",
        "Tested on builds 6.1.4.13 (lab), 52.7.65.170 (pilot) and 49.3.92.165 (prod).",
        # upgrades and comparisons
        "Upgraded the edge routers to 5.1.2.3 last night.",
        "Rolled the badge readers back to 52.7.65.170 after the reboot loop.",
        "Please update your copy of the scanner SDK to 93.2.1.4 or newer.",
        "Everything older than 93.2.1.4 is out of support.",
        "The 78.9.119.97 hotfix went out on Friday.",
        # names that hold a version
        "Our iOS app 5.16.2.3 crashes on launch.",
        "`pip install lxml==93.2.1.4` reproduces it.",
        '"fileVersion": "95.1.183.60",',
        "| device | installed | latest |\n| --- | --- | --- |\n| kiosks | 42.6.164.132 | 87.7.182.22 |",
    ],
)
def test_section_numbers_and_versions_in_a_sentence_are_not_addresses(text: str) -> None:
    assert "ip" not in kinds(text)


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("Updated the A record for api.acme.io to 13.249.188.62.", "13.249.188.62"),
        ("Switched the resolvers to 8.8.8.8 and 9.9.9.9.", "8.8.8.8"),
        ("Upgraded the SAN firmware to 4.5.7.192 on 67.251.144.78.", "67.251.144.78"),
        ("Upgraded the scanner SDK to 9.9.37.67 on 8.198.241.95.", "8.198.241.95"),
        ("Firmware 2.4.10.1 is on the gateway; its WAN address is 3.12.45.7.", "3.12.45.7"),
        ("`curl -v http://15.188.159.25:8443/health` returns 503.", "15.188.159.25"),
        ("```yaml\nallowed_ips:\n  - 1.10.135.45\n```", "1.10.135.45"),
        ("Release train uses the host 84.1.2.3 for staging.", "84.1.2.3"),
        ("See section 4.2 of the runbook: 84.159.136.32 stays blocked.", "84.159.136.32"),
        ("Moved the DNS from 84.1.2.3 to 84.1.2.4.", "84.1.2.4"),
        ("Attacker rotated between 5.7.157.65 and 8.33.72.228.", "5.7.157.65"),
        ("iptables -A INPUT -s 4.22.247.133 -j DROP", "4.22.247.133"),
        ("Build 14.0.5.117 (Android) and the host 84.1.2.3 (staging) both fail.", "84.1.2.3"),
        ("Build 14.0.5.117 (Android) crashed; requests came from 84.1.2.3 (staging) and 5.8.7.40.", "5.8.7.40"),
    ],
)
def test_addresses_next_to_versions_and_section_words_are_still_found(text: str, address: str) -> None:
    found = [text[f.start : f.end] for f in S.scan(text) if f.kind == "ip"]
    assert address in found


@pytest.mark.parametrize(
    "text",
    [
        "Stripe test card 4242 4242 4242 4242 succeeds; 4000 0000 0000 0002 is declined.",
        "Use 4111111111111111 with any future expiry for the happy path.",
        "3-D Secure test card: 4000 0027 6000 3184.",
        "Mastercard test PAN 5555 5555 5555 4444 in the sandbox; Amex 3782 822463 10005.",
        "Visa test PAN 4012888888881881 triggers the insufficient-funds path.",
        "Masked card **** **** **** 4242 shown on the receipt.",
    ],
)
def test_published_test_cards_are_not_cards(text: str) -> None:
    assert "credit_card" not in kinds(text)


def test_a_real_card_next_to_test_cards_is_found() -> None:
    text = "Test card 4242 4242 4242 4242 worked; the customer's own card 4539 1488 0343 6467 did not."
    assert [(f.kind, text[f.start : f.end]) for f in S.scan(text)] == [("credit_card", "4539 1488 0343 6467")]


@pytest.mark.parametrize(
    "text",
    [
        "password: (prompted at login)",
        "password: see vault",
        "Password: stored in 1Password under the staging entry.",
        "DB password: rotated monthly by the Vault database engine.",
        "Username: deploy; password: same as the staging one, in the vault",
        "secret: lives in the Kubernetes Secret `checkout-env`",
        "token: generated per session by `acme login`, expires after 12 h",
        "label says `password: (min 12 chars)`",
        "api_key: <YOUR_API_KEY>",
        "client_secret: ${OAUTH_CLIENT_SECRET} (injected by the pipeline)",
    ],
)
def test_prose_after_a_password_label_is_not_a_password(text: str) -> None:
    assert kinds(text) == []


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("password: Tr0ub4dor&3", "Tr0ub4dor&3"),
        ("wifi password: sunshine", "sunshine"),
        ("password: hunter22 (rotate it)", "hunter22"),
        ('password: "stored in the vault"', "stored in the vault"),
        ("Wei's wifi password: OTg0pfept.F2Gvk38pst8wA", "OTg0pfept.F2Gvk38pst8wA"),
    ],
)
def test_passwords_after_a_label_are_still_found(text: str, value: str) -> None:
    assert [(f.kind, text[f.start : f.end]) for f in S.scan(text)] == [("password_assignment", value)]


def test_trace_ids_near_auth_words_are_not_twilio_tokens() -> None:
    text = "auth_token refresh calls spiked (no tokens exposed).\n- Trace id 4bf92f3577b34da6a3ce929d0e0e4736 shows it."
    assert kinds(text) == []
    token = "9c27cf25710d0272b10c44d2fc92bba3"
    assert kinds(f'variable "auth_token" {{\n  default = "{token}"\n}}') == ["twilio_auth_token"]


# -- the agent-notes corpus ---------------------------------------------------------------------------


def _generator():  # noqa: ANN202 - a module loaded from a file path
    spec = importlib.util.spec_from_file_location("make_agent_corpus", HERE / "make_agent_corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATOR = _generator()
CORPUS = HERE / "agent_corpus.jsonl"


@pytest.fixture(scope="module")
def scanned() -> list[tuple[dict, list[tuple[int, int, str]]]]:
    notes = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [(n, [(f.start, f.end, f.kind) for f in S.scan(n["text"])]) for n in notes]


def test_agent_corpus_matches_its_generator() -> None:
    assert GENERATOR.dumps(GENERATOR.generate()) == CORPUS.read_text(encoding="utf-8"), (
        "agent_corpus.jsonl is stale: python tests/scrub/make_agent_corpus.py"
    )


def test_agent_corpus_benign_notes_are_left_alone(scanned) -> None:
    benign = [(n, fs) for n, fs in scanned if not n["spans"]]
    assert len(benign) >= 1500
    flagged = [(n, fs) for n, fs in benign if fs]
    by_kind = Counter(k for _, fs in flagged for _, _, k in fs)
    assert len(flagged) <= 0.02 * len(benign), (
        f"{len(flagged)}/{len(benign)} benign notes flagged; by kind {dict(by_kind)}; first {[n['id'] for n, _ in flagged[:10]]}"
    )


@pytest.mark.parametrize(("group", "target"), [("credential", 0.97), ("personal", 0.95)])
def test_agent_corpus_recall(scanned, group: str, target: float) -> None:
    kinds_ = set(GENERATOR.CREDENTIAL_KINDS if group == "credential" else GENERATOR.PERSONAL_KINDS)
    caught = total = 0
    missed = []
    for note, fs in scanned:
        for s in note["spans"]:
            if s["kind"] in kinds_:
                total += 1
                hit = any(s["start"] < f1 and f0 < s["end"] for f0, f1, _ in fs)
                caught += hit
                if not hit:
                    missed.append(f"{note['id']}:{s['kind']}:{s.get('form', 'plain')}")
    assert caught / total >= target, f"recall {caught}/{total}; missed {missed[:15]}"


def test_agent_corpus_every_spelling_is_caught(scanned) -> None:
    caught, total = Counter(), Counter()
    for note, fs in scanned:
        for s in note["spans"]:
            form = s.get("form", "plain")
            total[form] += 1
            caught[form] += any(s["start"] < f1 and f0 < s["end"] for f0, f1, _ in fs)
    assert len(total) >= 19
    low = {form: f"{caught[form]}/{total[form]}" for form in total if caught[form] < 0.95 * total[form]}
    assert not low, low
