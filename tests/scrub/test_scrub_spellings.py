"""The spellings people really use are found, and masked as they were written.

The scrubber folds the text before matching (no-break, narrow no-break and thin spaces and Unicode hyphens
to ASCII ones, zero-width characters and soft hyphens dropped, ``%40`` to ``@``) and maps offsets back:
every expectation below is the exact span of the value in the text as written. Every value is fake.
"""

from __future__ import annotations

import pytest

from memvault.scrub import Scrubber, engine

S = Scrubber()
NBSP, NNBSP, THIN, NBHY, ZWSP, ZWJ, BOM, SHY = (
    "\u00a0",
    "\u202f",
    "\u2009",
    "\u2011",
    "\u200b",
    "\u200d",
    "\ufeff",
    "\u00ad",
)

RSA_BODY = (
    "MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2Ox8qR4Ls6sLHNyEEvpQYqGVm8kz\n"
    "Q2bB9rT4YWbfbcLf2y0dHqM8wXsY9Wh0cKp4fUaNrXtDMlqzqbWxlC9XZJoMa7Pe\n"
    "Hs1xgBb3YtDoWx+4kSJ8ZqPWeiQh7Fd0a8VtCk3RmyLHu2Tn5XoQrEbi9DG6OsM1\n"
    "AbPcWzWJq0l4N8XrR2t/5hYgKmVs3Ee7Iu1oTdLfC9y6zQaBp4GwnMjHkR2x8Ubv"
)
PKCS8_BODY = (
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n"
    "MzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu\n"
    "NMoSfm76oqFvAp8Gy0iz5sxjZmSnXyCdPEovGhLa0VzMaQ8s+CLOyS56YyCFGeJZ"
)
OPENSSH_BODY = (
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "QyNTUxOQAAACCq3j0r5h8VQm2y0PfZbXcKuYp9e4WsR1tOgLnAJ6dI8wAAAJjM1xk3zNcZ"
)
PUTTY = (
    "PuTTY-User-Key-File-3: ssh-ed25519\n"
    "Encryption: none\n"
    "Comment: eddsa-key-20240312\n"
    "Public-Lines: 2\n"
    "AAAAC3NzaC1lZDI1NTE5AAAAIOq0mZt8wJ2xVb7rYk3FQ9cH1sLpN5aUeD4gTjW6\n"
    "yR0X\n"
    "Private-Lines: 1\n"
    "AAAAIBk7Rq1nV3cZp8XyW2eT5uMhL9oD4aJfK6sG0bQ1iEtY\n"
    "Private-MAC: 5f3b8c1d2e4a6f7091b2c3d4e5f60718293a4b5c6d7e8f9012345678abcdef01"
)
AGE_KEY = "AGE-SECRET-KEY-1QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7LQPZRY9X8GF2TVDW0S3JN54KHCE"  # 58 after "1"


def spans(text: str) -> list[tuple[str, str]]:
    """``(kind, text of the finding)`` for every finding."""
    return [(f.kind, text[f.start : f.end]) for f in S.scan(text)]


CASES = [
    # cards copied from PDFs and French/German formats
    ("Card read out on the call: {} exp 08/27", f"4539{NBSP}1488{NBSP}0343{NBSP}6467", "credit_card"),
    ("Carte : {} (Visa)", f"4539{NNBSP}1488{NNBSP}0343{NNBSP}6467", "credit_card"),
    ("Karte {} gültig bis 08/27", f"5425{THIN}2334{THIN}3010{THIN}9903", "credit_card"),
    ("card {} on file", f"5425{NBHY}2334{NBHY}3010{NBHY}9903", "credit_card"),
    ("Amex {} on file", f"3401{NBSP}234567{NBSP}89014", "credit_card"),
    # IBANs: no-break spaces, lower case, dashes
    ("IBAN {} (Müller)", f"DE89{NBSP}3704{NBSP}0044{NBSP}0532{NBSP}0130{NBSP}00", "iban"),
    ("iban {} please", "de89 3704 0044 0532 0130 00", "iban"),
    ("Compte {} merci", "fr1420041010050500013m02606", "iban"),
    ("IBAN {}", "GB82-WEST-1234-5698-7654-32", "iban"),
    # SSNs and phone numbers
    ("SSN {} on the W-9", f"123{NBHY}45{NBHY}6789", "ssn"),
    ("Social security number: {}", f"123{NBSP}45{NBSP}6789", "ssn"),
    ("Portable : {}", f"06{NNBSP}12{NNBSP}34{NNBSP}56{NNBSP}78", "phone"),
    ("Tel. {} (Büro)", f"+49{THIN}30{THIN}12345678", "phone"),
    ("call {} after 6", f"(415){NBSP}555{NBHY}0132", "phone"),
    ("Mobile {}", "+33-6-12-34-56-78", "phone"),
    # zero-width characters inside credentials
    ("key {} rotated", f"sk-ant-api03-Qm3vT8xLp2Zr9Ks4Wb{ZWSP}7Ny1Jd6Hc0Fg5Ua8Ve3Ti2Ro4Pl9Mk1Xq7Sw6Yt2Bz5Cn8Dh3Ej0Gf4Ia9Lb6Oc1Ud7We2Rf5Tg8Yh3Ui0AA", "anthropic_api_key"),
    ("id {} for ci", f"AKIAQ7VX{ZWJ}K2JD4NRP3W6T", "aws_access_key_id"),
    ("token {}", f"ghp_R8mKq2LvX9p{BOM}T4wZb7NcY3hJf6sDg1aEo5uQi", "github_token"),
    ("stripe {}", f"sk_live_51Hx{SHY}Yq8Lm3Np7Rt2Vw6Za9Kc4Fg1Jd5", "stripe_key"),
    ("mail {} now", f"tomas.patel@{ZWSP}monarchsolutions.de", "email"),
    # e-mail addresses percent-encoded in URLs, and with non-ASCII local parts and domains
    ("https://crm.acme.io/contacts?q={}&tab=activity", "jane.doe%40northwind-traders.com", "email"),
    ("https://crm.acme.io/?email={}", "brennan%2Bnews%40proton.me", "email"),
    ("Contact: {}", "åsa.lindqvist@företaget.se", "email"),
    ("Contact: {}", "jürgen.weiß@bücherstube-köln.de", "email"),
    ("連絡先 {} まで", "山田太郎@会社.jp", "email"),
    ("почта {}", "ivan.petrov@почта.рф", "email"),
    # private keys written every which way
    ("key:\n{}\nend", f"-----begin rsa private key-----\n{RSA_BODY}\n-----end rsa private key-----", "private_key"),
    ("key:\n{}\nend", f"----BEGIN RSA  PRIVATE KEY----\n{RSA_BODY}\n----END RSA  PRIVATE KEY----", "private_key"),
    ("key:\n{}\nend", f"----- BEGIN PRIVATE KEY -----\n{PKCS8_BODY}\n----- END PRIVATE KEY -----", "private_key"),
    ("the body alone:\n{}\n\nnext paragraph", RSA_BODY, "private_key"),
    ("```\n{}\n```", PKCS8_BODY, "private_key"),
    ("bare openssh key:\n{}\n", OPENSSH_BODY, "private_key"),
    ("windows jump host key:\n\n{}\n\nthanks", PUTTY, "private_key"),
    ("# public key: age1qlrq2grgx3mmd9rdcxfjuv6ktpqklf3t0acgwz8fzcyqyja6mjvs53j3ng\n{}\n", AGE_KEY, "private_key"),
    ('{{"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","d":"{}"}}', "jpsQnnGQmL-YBIffH1136cspYG6-0iY7X1fCE9-E9LI", "private_key"),
    # an AWS secret whose AWS context comes after it
    ("Found in the old deploy script: `{}` (the AWS secret key of the ci user).", "Kq7vT2xWm9pL4rZ8bN1cF6gD3sJ0aQ5eUyI7oP2t", "aws_secret_access_key"),
    ("- {} <- secret access key, rotate it", "Zx9KeWm2Rp8Lq+Tn4Vs7Yb1Hc5Jd3Gf6QkAb0Cd2", "aws_secret_access_key"),
    # a card number after order or reference wording
    ("Order 10442 — {} was charged twice", "4539 1488 0343 6467", "credit_card"),
    ("Reference: {} (typed into the order reference field)", "5425-2334-3010-9903", "credit_card"),
    ("Invoice INV-2291 ref {}", "4716 2345 6789 0126", "credit_card"),
]  # fmt: skip


@pytest.mark.parametrize(("template", "value", "kind"), CASES, ids=[f"{k}-{i}" for i, (_, _, k) in enumerate(CASES)])
def test_spelling_is_found_and_masked_as_written(template: str, value: str, kind: str) -> None:
    text = template.format(value)
    assert (kind, value) in spans(text), spans(text)
    assert value not in S.mask(text)


def test_fold_maps_offsets_back() -> None:
    text = f"a{ZWSP}b%40c{NBSP}d{SHY}{SHY}e"
    folded = engine.fold(text)
    assert folded is not None
    assert folded.text == "ab@c de"
    # each folded character, mapped back to the original span it came from: a, b, %40, c, NBSP, d, e
    spans = [(folded.start(i), folded.end(i + 1)) for i in range(len(folded.text))]
    assert spans == [(0, 1), (2, 3), (3, 6), (6, 7), (7, 8), (8, 9), (11, 12)]
    assert engine.fold("plain ascii text") is None
    assert engine.fold("café au lait") is None


def test_what_stays_out_of_scope() -> None:
    """Deliberate obfuscation is not folded (documented): base64, reversed, look-alike letters."""
    key = "ghp_R8mKq2LvX9pT4wZb7NcY3hJf6sDg1aEo5uQi"
    assert S.scan(key[::-1]) == []
    assert S.scan(key.replace("p", "\u0440")) == []  # Cyrillic er for p
