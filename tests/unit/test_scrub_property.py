"""Property tests: redaction removes every reported span, keeps the rest, and scanning stays fast."""

from __future__ import annotations

import json
import time
from pathlib import Path

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from memvault.scrub import CREDENTIAL_KINDS, Scrubber

S = Scrubber()
DEV = Path(__file__).resolve().parents[1] / "scrub" / "dev_corpus.jsonl"
ROWS = [json.loads(line) for line in DEV.read_text().splitlines()]
NOTES = [r["text"] for r in ROWS if not r["spans"]]
SECRETS = [r["text"][s["start"] : s["end"]] for r in ROWS for s in r["spans"]]
SELF_IDENTIFYING = frozenset(CREDENTIAL_KINDS) - {
    "password_assignment",
    "generic_secret",
    "bearer_token",
    "aws_secret_access_key",
    "twilio_auth_token",
    "basic_auth",
} | {"email", "iban"}
ALPHABET = st.characters(codec="utf-8", exclude_categories=("Cs",))
B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="


def _check(text: str) -> None:
    findings = S.scan(text)
    assert all(0 <= f.start < f.end <= len(text) for f in findings)
    assert all(a.end <= b.start for a, b in zip(findings, findings[1:]))
    red = S.redact(text)
    # text outside findings is unchanged and in order
    pos, cursor = 0, 0
    for f in findings:
        outside = text[pos : f.start]
        assert red.startswith(outside, cursor)
        cursor += len(outside)
        marker = f"[REDACTED:{f.kind}]"
        assert red.startswith(marker, cursor)
        cursor += len(marker)
        pos = f.end
    assert red[cursor:] == text[pos:]
    # no credential value that was reported survives (re-scan finds none of the same value)
    again = {red[g.start : g.end] for g in S.scan(red)}
    for f in findings:
        if f.kind in CREDENTIAL_KINDS:
            value = text[f.start : f.end]
            assert value not in again
            if len(value) >= 8:
                assert value not in red


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=ALPHABET, max_size=400))
def test_any_text(text: str) -> None:
    _check(text)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(NOTES), st.lists(st.tuples(st.sampled_from(SECRETS), st.floats(0, 1)), max_size=4))
def test_notes_with_inserted_secrets(note: str, inserts: list[tuple[str, float]]) -> None:
    # positions in the original note, applied right to left: an insert never splits another one
    text = note
    for secret, where in sorted(inserts, key=lambda x: -x[1]):
        i = int(where * len(note))
        text = text[:i] + " " + secret + " " + text[i:]
    _check(text)
    for secret, _ in inserts:
        alone = S.scan(f" {secret} ")
        # self-identifying formats only: a bare password, phone or card number depends on context
        if alone and alone[0].kind in SELF_IDENTIFYING:
            assert secret not in S.redact(text)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["a", "A1+/", B64, "\"'", "password=", "-----BEGIN RSA PRIVATE KEY-----\n", "1-", "@a.", "eyJ"]),
       st.integers(1000, 20000))  # fmt: skip
def test_adversarial_is_fast(unit: str, n: int) -> None:
    text = (unit * (n // len(unit) + 1))[:n]
    t = time.perf_counter()
    _check(text)
    assert time.perf_counter() - t < 2.0


# -- the credentials found by their context, right after their own name -----------------------------
#
# After the name of the very credential, a value of its shape is that credential whatever its first
# character and however few distinct characters it holds (an AWS secret key starts with ``/`` one time
# in 64, and one in 110 was missed). Each example tries every first character of the kind's alphabet.
# Values are drawn from 4-8 distinct characters (case-insensitively), never ``x``: a value of three
# distinct characters or fewer, an ``x`` run and AWS's ``EXAMPLE`` keys are documented placeholders.

#: kind -> (alphabet, length, padding, names), from the providers' formats and SDKs.
NAMED = {
    "aws_secret_access_key": (
        B64[:-1],
        40,
        "",
        [
            "aws_secret_access_key",
            "AWS_SECRET_ACCESS_KEY",
            "SecretAccessKey",
            "secretAccessKey",
            "aws-secret-access-key",
        ],
    ),
    "azure_connection_string": (B64[:-1], 86, "==", ["AccountKey", "AZURE_STORAGE_KEY", "SharedAccessKey"]),
    "twilio_auth_token": ("0123456789abcdef", 32, "", ["TWILIO_AUTH_TOKEN", "twilio_auth_token", "twilioAuthToken"]),
}
ASSIGNED = [
    "{n}={v}", 'export {n}="{v}"', "{n}: {v}", "  {n}: '{v}'", '{{"{n}": "{v}"}}', "<{n}>{v}</{n}>",
    "{n} = {v}", "docker run -e {n}={v} app", "aws configure set {n} {v}",
]  # fmt: skip


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(NAMED)), st.sampled_from(NOTES), st.floats(0, 1), st.data())
def test_every_first_character_after_its_name_is_masked(
    kind: str, note: str, where: float, data: st.DataObject
) -> None:
    alphabet, length, pad, names = NAMED[kind]
    name = data.draw(st.sampled_from(names))
    assignment = data.draw(st.sampled_from(ASSIGNED))
    letters = sorted({c.lower() for c in alphabet} - {"x"})
    chosen = data.draw(st.sets(st.sampled_from(letters), min_size=4, max_size=8))
    pool = [c for c in alphabet if c.lower() in chosen]
    body = data.draw(st.text(st.sampled_from(pool), min_size=length - 1, max_size=length - 1))
    assume(len({c.lower() for c in body}) >= 4 and "EXAMPLE" not in body)
    lines = note.split("\n")
    at = int(where * len(lines))
    missed = []
    for first in alphabet:
        value = first + body + pad
        text = "\n".join([*lines[:at], assignment.format(n=name, v=value), *lines[at:]])
        start = text.index(value)
        if not any(f.start <= start and f.end >= start + len(value) for f in S.scan(text)):
            missed.append(first)
    # the failure names the first characters and the syntax only: never a value
    assert not missed, f"{kind} after {assignment.format(n=name, v='<key>')!r} missed with first characters {missed}"
