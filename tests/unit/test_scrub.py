"""Scrubber rules: positives and hard negatives per kind, public examples, overlap, policy, settings."""

from __future__ import annotations

import json
import random
import string
import zlib
from pathlib import Path

import pytest
from pydantic import ValidationError

from memvault.scrub import (
    CREDENTIAL_KINDS,
    KINDS,
    PII_KINDS,
    Finding,
    Scrubber,
    github_checksum_valid,
    iban_valid,
    mask_marker,
    redaction_marker,
    validators,
)
from memvault.settings import CustomRule, ScrubSettings, StoreSettings

#: 40 labelled public example notes (fake credentials only).
PUBLIC = Path(__file__).resolve().parents[1] / "scrub" / "public_examples.jsonl"
DEV = Path(__file__).resolve().parents[1] / "scrub" / "dev_corpus.jsonl"
S = Scrubber()
R = random.Random(7)
ALNUM = string.ascii_letters + string.digits


def rnd(alphabet: str, n: int) -> str:
    return "".join(R.choice(alphabet) for _ in range(n))


def ghp() -> str:
    body = rnd(ALNUM, 30)
    n, out = zlib.crc32(body.encode()), ""
    b62 = string.digits + string.ascii_uppercase + string.ascii_lowercase
    while n:
        n, r = divmod(n, 62)
        out = b62[r] + out
    return "ghp_" + body + out.rjust(6, "0")


def kinds_of(text: str) -> list[str]:
    return [f.kind for f in S.scan(text)]


def value_of(text: str, kind: str) -> list[str]:
    return [text[f.start : f.end] for f in S.scan(text) if f.kind == kind]


AWS_SECRET = rnd(ALNUM + "/+", 40)
POSITIVES = [
    ("anthropic_api_key", "key: {}", "sk-ant-api03-" + rnd(ALNUM + "-_", 93) + "AA"),
    ("anthropic_api_key", "admin {}", "sk-ant-admin01-" + rnd(ALNUM + "-_", 93) + "AA"),
    ("openai_api_key", "OPENAI_API_KEY={}", "sk-proj-" + rnd(ALNUM, 120)),
    ("openai_api_key", "use {} here", "sk-" + rnd(ALNUM, 48)),
    ("aws_access_key_id", "id {} for ci", "AKIA" + rnd(string.ascii_uppercase + "234567", 16)),
    ("aws_secret_access_key", "aws_secret_access_key = {}", AWS_SECRET),
    ("google_api_key", "maps {}", "AIza" + rnd(ALNUM + "-_", 35)),
    ("azure_connection_string", "DefaultEndpointsProtocol=https;AccountName=x;AccountKey={};EndpointSuffix=core.windows.net",
     rnd(ALNUM + "+/", 86) + "=="),
    ("github_token", "GITHUB_TOKEN={}", ghp()),
    ("github_token", "pat {}", "github_pat_" + rnd(ALNUM, 22) + "_" + rnd(ALNUM, 59)),
    ("gitlab_token", "token {}", "glpat-" + rnd(ALNUM, 20)),
    ("slack_token", "bot {}", "xoxb-" + rnd(string.digits, 12) + "-" + rnd(string.digits, 13) + "-" + rnd(ALNUM, 24)),
    ("slack_webhook", "hook {}", "https://hooks.slack.com/services/T0ABCDEF1/B0ABCDEF12/" + rnd(ALNUM, 24)),
    ("stripe_key", "stripe {}", "sk_live_" + rnd(ALNUM, 99)),
    ("stripe_key", "restricted {}", "rk_live_" + rnd(ALNUM, 24)),
    ("twilio_account_sid", "sid {}", "AC" + rnd("0123456789abcdef", 32)),
    ("twilio_auth_token", "TWILIO_AUTH_TOKEN={}", rnd("0123456789abcdef", 32)),
    ("sendgrid_api_key", "mail {}", "SG." + rnd(ALNUM, 22) + "." + rnd(ALNUM, 43)),
    ("npm_token", "npm {}", "npm_" + rnd(ALNUM, 36)),
    ("npm_token", "//registry.npmjs.org/:_authToken={}", "51973bab-cf78-4d6d-a1c6-a432a2d33a27"),
    ("pypi_token", "twine -p {}", "pypi-AgEIcHlwaS5vcmc" + rnd(ALNUM, 100)),
    ("jwt", "token {}", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0." + rnd(ALNUM, 43)),
    ("basic_auth", "DATABASE_URL=postgres://app:{}@db.acme.io:5432/x", "Harbor740!"),
    ("basic_auth", "Authorization: Basic {}", "Z3JhY2U6SGFyYm9yNzQwIQ=="),
    ("password_assignment", "DB_PASSWORD={}", "Tr0ub4dor&3"),
    ("password_assignment", '  "password": "{}",', "Summer2024!"),
    ("password_assignment", "password: {}", "hunter22"),
    ("password_assignment", "dbPassword = '{}'", "Copper1234#"),
    ("bearer_token", "Authorization: Bearer {}", "ya29." + rnd(ALNUM + "-_", 60)),
    ("generic_secret", "SIGNING_KEY={}", rnd(ALNUM, 32)),
    ("email", "mail {} today", "tomas.patel@monarchsolutions.de"),
    ("phone", "call {} later", "(415) 555-0132"),
    ("phone", "call {} later", "+44 20 7946 0958"),
    ("phone", "Phone: {}", "843-896-0576"),
    ("credit_card", "card {} exp", "5399-4286-3254-7387"),
    ("credit_card", "card {} exp", "4757122800072026"),
    ("ssn", "SSN {}.", "125-86-5323"),
    ("iban", "IBAN {}", "DE89 3704 0044 0532 0130 00"),
    ("iban", "IBAN {}", "GB82WEST12345698765432"),
    ("ip", "host {} ok", "84.159.136.32"),
    ("ip", "host {} ok", "2a00:1450:4001:81c::200e"),
    ("dob", "Patient, born {}, ok", "21 July 1973"),
    ("dob", "DOB: {}", "1985-11-03"),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "ctx", "value"), POSITIVES, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(POSITIVES)])
def test_positive(kind: str, ctx: str, value: str) -> None:
    text = "Note line.\n" + ctx.format(value) + "\nEnd."
    findings = S.scan(text)
    start = text.index(value)
    hit = [f for f in findings if f.start <= start and f.end >= start + len(value)]
    assert hit, (kind, findings)
    assert hit[0].kind == kind
    assert value not in S.redact(text)


NEGATIVES = [
    "commit 3f9c2ab1d4e5f60718293a4b5c6d7e8f90a1b2c3 and b6e6896",
    "request_id=0dff9626-8f06-4702-81fa-368354891303",
    "digest=sha256:e170a291bb63c21ee4cf0bc94567c4f7accd674b94c3e89c2a0cb63661a1d4d4",
    "![x](data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==)",
    "Python 3.11.7, node v20.11.1, Windows build 10.0.19132.1835, version 1.2.3.4",
    "Ticket ORD-2025-17046450 and RMA JS-224102850, order #88412093",
    "Shipment tracking number 4715653373946229",
    "Set `STRIPE_SECRET_KEY=<YOUR_API_KEY>` before running",
    'stripe_secret_key = "your-api-key-here"',
    "github_token: ghp_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX",
    "docs use sk-ant-xxxxxxxxxxxxxxxxxxxxxxxx and sk-... as keys",
    "AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE\nAWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "password_file: /run/secrets/db_password\napi_key_env: DATABASE_URL",
    "password: ${DB_PASSWORD}\ntoken = os.environ['TOKEN']\napi_key: $API_KEY\nsecret: '***'\npassword=changeme",
    "Masked key sk-...abcd and ****1234",
    "The `--password-stdin` flag keeps the password out of shell history.",
    "uvicorn app:app --host 127.0.0.1 --port 8000; internal 10.0.0.12 and 192.168.1.1",
    "Rack position 52.38.51, case number 5577-833-0089, 09:00-18:00, 2025-11-15T06:24:03.598Z",
    "Contract started 2010-01-01; data before 1996-10-03 is archived.",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILkkdJrUA88ayERAzcIU/lK0lz/bsLY975MKW83gDVQ8 grace@laptop",
    "SSH as deploy@localhost; remote git@github.com:acme/infra.git; icon@2x.png; alice@example.com",
    "2^64 = 18446744073709551616; unix 1743497374987; sqrt(2) = 1.4142135623730951",
    "arn:aws:iam::751712760243:role/meridian-deployer",
    "go.sum h1:He783ZO9t+DReYtrLS/InnSSit8+gQCwvhdw/X4BLSk=",
    "SSN 000-12-3456 and 666-12-3456 and 912-12-3456 are invalid areas",
    "IBAN DE89 3704 0044 0532 0130 01 fails its checksum",
    "max_tokens: 4096\ntoken_count = 18234\nbypass: true",
    "`TransactionAwarePersistenceManagerFactoryProxy` and `PasswordResetTokenExpirationValidator`",
    "Authorization: Bearer <token> and Bearer $TOKEN",
]


@pytest.mark.parametrize("text", NEGATIVES)
def test_negative(text: str) -> None:
    assert S.scan(text) == []


def test_private_key_whole_block() -> None:
    body = "\n".join(rnd(ALNUM + "+/", 64) for _ in range(5))
    for kt in ("RSA ", "OPENSSH ", "ENCRYPTED ", "EC ", ""):
        block = f"-----BEGIN {kt}PRIVATE KEY-----\n{body}\n-----END {kt}PRIVATE KEY-----"
        text = f"key:\n```\n{block}\n```\n"
        (f,) = S.scan(text)
        assert (f.kind, text[f.start : f.end]) == ("private_key", block)
    truncated = f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n\nnext paragraph"
    (f,) = S.scan(truncated)
    assert truncated[f.start : f.end].endswith(body.splitlines()[-1])


def test_github_checksum() -> None:
    token = ghp()
    assert github_checksum_valid(token)
    assert not github_checksum_valid(token[:-1] + ("A" if token[-1] != "A" else "B"))
    # a valid checksum wins over the placeholder heuristic (low-entropy body)
    assert iban_valid("DE89370400440532013000") and not iban_valid("DE89370400440532013001")


def test_public_examples() -> None:
    for line in PUBLIC.read_text().splitlines():
        case = json.loads(line)
        text, findings = case["text"], S.scan(case["text"])
        if not case["spans"]:
            assert findings == [], case["id"]
        for span in case["spans"]:
            assert any(f.start < span["end"] and span["start"] < f.end for f in findings), (case["id"], span["kind"])
            assert text[span["start"] : span["end"]] not in S.redact(text)


def test_dev_corpus() -> None:
    rows = [json.loads(line) for line in DEV.read_text().splitlines()]
    assert len(rows) >= 300
    missed = fp_notes = 0
    for case in rows:
        findings = S.scan(case["text"])
        missed += sum(not any(f.start < s["end"] and s["start"] < f.end for f in findings) for s in case["spans"])
        fp_notes += bool(findings) and not case["spans"]
    assert missed == 0
    assert fp_notes == 0


def test_findings_sorted_nonoverlapping_and_repr_safe() -> None:
    secret = "sk_live_" + rnd(ALNUM, 30)
    text = f"api_key={secret} and Bearer {secret} mail a.b@acme.io 84.159.136.32"
    findings = S.scan(text)
    assert all(a.end <= b.start for a, b in zip(findings, findings[1:]))
    assert [f.kind for f in findings] == ["stripe_key", "stripe_key", "email", "ip"]
    assert secret not in repr(findings)
    with pytest.raises(AttributeError):
        findings[0].kind = "x"  # type: ignore[misc]


def test_overlap_merges_to_most_specific() -> None:
    # a JWT given as a bearer token is reported once, as jwt, covering the whole value
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0." + rnd(ALNUM, 43)
    text = f"Authorization: Bearer {jwt}"
    assert [(f.kind, text[f.start : f.end]) for f in S.scan(text)] == [("jwt", jwt)]
    # password assignment whose value is a Stripe key: stripe wins
    key = "sk_live_" + rnd(ALNUM, 40)
    assert kinds_of(f"password={key}") == ["stripe_key"]


def test_redact_and_apply() -> None:
    text = "mail tomas.patel@monarchsolutions.de, ssn 125-86-5323."
    assert S.redact(text) == "mail [REDACTED:email], ssn [REDACTED:ssn]."
    assert S.mask(text) == S.redact(text)  # mask is the new name; redact stays (the README uses it)
    assert mask_marker("ssn") == redaction_marker("ssn") == "[REDACTED:ssn]"
    res = S.apply(text)
    assert res.text == S.redact(text) and res.counts == {"email": 1, "ssn": 1} and res.rejected == []


def test_policy_reject_and_allow() -> None:
    text = "host 84.159.136.32 mail a.b@acme.io card 4757122800072026"
    s = Scrubber(ScrubSettings(policy={"ip": "allow", "credit_card": "reject"}))
    assert [f.kind for f in s.scan(text)] == ["email", "credit_card"]
    res = s.apply(text)
    assert res.rejected == ["credit_card"] and res.counts == {"email": 1}
    assert "84.159.136.32" in res.text and "4757122800072026" not in res.text
    assert Scrubber(StoreSettings(scrub=ScrubSettings(policy={"ip": "allow"}))).scan("84.159.136.32") == []
    assert Scrubber(ScrubSettings(enabled=False)).scan(text) == []
    with pytest.raises(ValidationError):
        ScrubSettings(policy={"no_such_kind": "redact"})
    with pytest.raises(ValidationError):
        ScrubSettings(policy={"ip": "maybe"})  # type: ignore[dict-item]


def test_allowlist() -> None:
    key = "sk_test_" + rnd(ALNUM, 24)
    s = Scrubber(ScrubSettings(allowlist=[key]))
    assert s.scan(f"key {key}") == []
    assert S.scan(f"key {key}") != []


def test_custom_rules() -> None:
    s = Scrubber(ScrubSettings(custom_rules=[CustomRule(kind="employee_id", pattern=r"\bEMP-(?P<value>\d{6})\b")]))
    text = "badge EMP-123456 issued"
    (f,) = s.scan(text)
    assert (f.kind, text[f.start : f.end]) == ("employee_id", "123456")
    assert s.apply(text).counts == {"employee_id": 1}
    luhn = Scrubber(ScrubSettings(custom_rules=[CustomRule(kind="acct", pattern=r"\bA(\d{16})\b", validator="luhn")]))
    assert [f.kind for f in luhn.scan("A4757122800072026")] == ["acct"]
    assert luhn.scan("A4757122800072027") == []
    ent = Scrubber(ScrubSettings(custom_rules=[CustomRule(kind="blob", pattern=r"blob:(\S+)", validator="entropy")]))
    assert ent.scan("blob:aaaaaaaaaaaaaaaa") == [] and ent.scan("blob:Zx8Qp2Lm9Vt4Rk7W") != []
    assert (
        Scrubber(
            ScrubSettings(custom_rules=[CustomRule(kind="blob", pattern="blob:x")], policy={"blob": "allow"})
        ).scan("blob:x")
        == []
    )


@pytest.mark.parametrize(
    "rule",
    [
        {"kind": "Bad Kind", "pattern": "x"},
        {"kind": "ok", "pattern": "("},
        {"kind": "ok", "pattern": "a*"},
        {"kind": "ok", "pattern": "(a+)+b"},
        {"kind": "ok", "pattern": "x" * 1001},
        {"kind": "ok", "pattern": "x", "validator": "crc"},
    ],
)
def test_custom_rule_validation(rule: dict[str, str]) -> None:
    with pytest.raises(ValidationError):
        CustomRule(**rule)  # type: ignore[arg-type]


def test_settings_roundtrip_and_default_omitted() -> None:
    assert "scrub" not in StoreSettings().model_dump()
    custom = StoreSettings(scrub=ScrubSettings(policy={"ip": "allow"}, allowlist=["x"]))
    assert StoreSettings(**custom.model_dump()) == custom
    assert set(ScrubSettings().policy) == set(KINDS) == set(CREDENTIAL_KINDS) | set(PII_KINDS)


def test_finding_api() -> None:
    f = Finding(kind="email", start=1, end=5)
    assert (f.kind, f.start, f.end) == ("email", 1, 5)
    with pytest.raises(TypeError):
        S.scan(b"bytes")  # type: ignore[arg-type]


def test_entropy_at_least_agrees_with_the_entropy() -> None:
    """The bounds that usually decide ``entropy_at_least`` never change its answer: checked on
    random strings of every length up to 200 over small and large alphabets, at thresholds that
    sit exactly on the entropy of uniform strings (8 distinct characters: exactly 3.0 bits)."""
    from memvault.scrub import entropy_at_least, shannon_entropy

    rng = random.Random(11)
    alphabets = ["ab", "abcd", "abcdefgh", string.hexdigits, string.ascii_letters + string.digits + "+/", "aab"]
    values = ["", "a", "abcdefgh", "abcdefgh" * 5, "abcd" * 9, "ab" * 30, "a" * 50 + "bcdefgh"]
    for n in range(1, 201):
        for alphabet in alphabets:
            values.append("".join(rng.choice(alphabet) for _ in range(n)))
    decided_by_bounds = 0
    for value in values:
        for bits in (0.0, 1.0, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5):
            assert entropy_at_least(value, bits) == (shannon_entropy(value) >= bits), (value, bits)
            low, high = (0.0, 0.0) if not value else validators._entropy_bounds(len(value), len(set(value)))
            decided_by_bounds += high < bits - 1e-9 or low > bits + 1e-9
    assert decided_by_bounds > len(values)  # the fast path is taken, not only the count
