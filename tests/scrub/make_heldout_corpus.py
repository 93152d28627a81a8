#!/usr/bin/env python
"""Generate ``tests/scrub/heldout_corpus.jsonl``: a large, labelled, held-out corpus for the scrubber.

The corpus is built independently of ``memvault.scrub`` (its author did not read the scrubber or its
dev corpus), so it can judge it. Every credential is fake and random, with the real-world shape of its
kind (prefix, length, charset; Luhn, IBAN mod-97, GitHub/npm CRC32 checksums where the format has one).

    python tests/scrub/make_heldout_corpus.py            # rewrites tests/scrub/heldout_corpus.jsonl
    python tests/scrub/make_heldout_corpus.py --check    # regenerate in memory, fail if the file differs
    python tests/scrub/make_heldout_corpus.py --stats    # print statistics only

Deterministic: same seed, same bytes (only ``random.Random(seed)`` is used; no hash-order dependence).

Format (one JSON object per line, same as tests/scrub/public_examples.jsonl)::

    {"id": "h0001", "text": "...", "spans": [{"start": 10, "end": 50, "kind": "github_token"}],
     "category": "secret:github_token" | "pii:email" | "ip:ip" | "negative:<look-alike type>"}
"""

from __future__ import annotations

import argparse
import base64
import collections
import ipaddress
import json
import string
import sys
import zlib
from pathlib import Path
from random import Random

SEED = 20250604
N_POSITIVE = 1000
N_NEGATIVE = 1500
OUT = Path(__file__).with_name("heldout_corpus.jsonl")

CREDENTIAL_KINDS = [
    "anthropic_api_key",
    "openai_api_key",
    "aws_access_key_id",
    "aws_secret_access_key",
    "google_api_key",
    "azure_connection_string",
    "github_token",
    "gitlab_token",
    "slack_token",
    "slack_webhook",
    "stripe_key",
    "twilio_account_sid",
    "twilio_auth_token",
    "sendgrid_api_key",
    "npm_token",
    "pypi_token",
    "jwt",
    "private_key",
    "basic_auth",
    "password_assignment",
    "bearer_token",
    "generic_secret",
]
PERSONAL_KINDS = ["email", "phone", "credit_card", "ssn", "iban", "ip", "dob"]
ALL_KINDS = CREDENTIAL_KINDS + PERSONAL_KINDS

B62 = string.digits + string.ascii_uppercase + string.ascii_lowercase
ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "-_"
B64 = ALNUM + "+/"
HEX = "0123456789abcdef"


class S:
    """A labelled value inside a note."""

    __slots__ = ("value", "kind")

    def __init__(self, value: str, kind: str) -> None:
        self.value = value
        self.kind = kind


# ----------------------------------------------------------------------------------------------
# vocabulary
# ----------------------------------------------------------------------------------------------

FIRST = [
    "Ana",
    "Arjun",
    "Aiko",
    "Amara",
    "Beatriz",
    "Chloe",
    "Dana",
    "Diego",
    "Elif",
    "Fatima",
    "Felix",
    "Grace",
    "Hannah",
    "Ingrid",
    "Jonas",
    "Kwame",
    "Lars",
    "Leila",
    "Lena",
    "Mei",
    "Marcus",
    "Nadia",
    "Nikolai",
    "Olivia",
    "Omar",
    "Priya",
    "Ravi",
    "Rosa",
    "Samir",
    "Sofia",
    "Sven",
    "Theo",
    "Tomás",
    "Uma",
    "Wei",
    "Yusuf",
    "Zoë",
    "Hugo",
    "Maren",
    "Joaquín",
    "Ines",
    "Kofi",
    "Linnea",
    "Mateo",
]
LAST = [
    "Alvarez",
    "Brennan",
    "Chen",
    "Costa",
    "Dubois",
    "Fischer",
    "Haddad",
    "Hughes",
    "Kim",
    "Larsen",
    "Lindqvist",
    "Moreau",
    "Müller",
    "Nakamura",
    "Novak",
    "Okafor",
    "Patel",
    "Reyes",
    "Schmidt",
    "Silva",
    "Tanaka",
    "Weber",
    "Whitfield",
    "Yilmaz",
    "Kowalski",
    "O'Neill",
    "Rossi",
    "Andersen",
    "Mensah",
    "Ito",
]
COMPANIES = [
    "Acme Corp",
    "Globex",
    "Initech",
    "Umbrella Health",
    "Wonka Retail",
    "Vandelay Imports",
    "Massive Dynamic",
    "Stark Logistics",
    "Hooli",
    "Pied Piper",
    "Duff Beverages",
    "Soylent Foods",
    "Tyrell Systems",
    "Wayne Freight",
    "Cyberdyne Labs",
    "Oscorp Clinics",
    "Nakatomi Trading",
    "Gringotts Credit",
    "Monarch Solutions",
    "Blue Sun Energy",
]
PROJECTS = [
    "kestrel",
    "juniper",
    "basalt",
    "nimbus",
    "quartz",
    "lighthouse",
    "tundra",
    "cactus",
    "falcon",
    "meridian",
    "orchid",
    "halcyon",
    "sparrow",
    "granite",
    "lumen",
]
SERVICES = [
    "billing-worker",
    "checkout-api",
    "auth-service",
    "ingest-pipeline",
    "notifications",
    "admin-portal",
    "reporting-etl",
    "ml-scorer",
    "export-jobs",
    "gateway",
    "invoice-renderer",
    "webhooks-relay",
    "search-indexer",
    "memvault-sync",
]
TECH = [
    "Postgres",
    "Redis",
    "Kafka",
    "Celery",
    "Sidekiq",
    "DuckDB",
    "SQLite",
    "Kubernetes",
    "Terraform",
    "Docker Compose",
    "RabbitMQ",
    "Elasticsearch",
    "pgbouncer",
    "nginx",
    "FastAPI",
    "Django",
]
ENVS = ["production", "staging", "dev", "qa", "sandbox"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
DOMAINS = [
    "gmail.com",
    "outlook.com",
    "hotmail.co.uk",
    "yahoo.com",
    "proton.me",
    "icloud.com",
    "web.de",
    "acme-corp.com",
    "globex.io",
    "initech.net",
    "umbrella-health.org",
    "wonkaretail.com",
    "vandelay.co",
    "stark-logistics.de",
    "hooli.xyz",
    "monarchsolutions.de",
    "gringotts.bank",
    "oscorp-clinics.com",
    "posteo.de",
    "fastmail.fm",
    "nakatomi.co.jp",
    "blue-sun.energy",
]
PATHS = [
    "src/auth/password_reset.py",
    "deploy/helm/values.yaml",
    "infra/main.tf",
    "cmd/worker/main.go",
    "app/models/invoice.rb",
    "scripts/backfill_orders.py",
    "web/src/api/client.ts",
    "docker-compose.yml",
    "config/settings.toml",
    ".github/workflows/ci.yml",
    "src/lib/tokens.rs",
    "Makefile",
]


def person(r: Random) -> str:
    return f"{r.choice(FIRST)} {r.choice(LAST)}"


def date(r: Random, lo: int = 2019, hi: int = 2026) -> str:
    return f"{r.randint(lo, hi)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}"


def rs(r: Random, alphabet: str, n: int) -> str:
    return "".join(r.choice(alphabet) for _ in range(n))


def b62(n: int, width: int) -> str:
    out = ""
    while n:
        n, d = divmod(n, 62)
        out = B62[d] + out
    return out.rjust(width, "0")


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


# ----------------------------------------------------------------------------------------------
# value generators (all fake, all random, real-world shapes)
# ----------------------------------------------------------------------------------------------


def luhn_digit(partial: str) -> str:
    total = 0
    for i, ch in enumerate(reversed(partial)):
        d = int(ch)
        if i % 2 == 0:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return str((10 - total % 10) % 10)


def luhn_ok(num: str) -> bool:
    return luhn_digit(num[:-1]) == num[-1]


IBAN_FORMATS = {  # country: (length, bban generator)
    "DE": lambda r: rs(r, string.digits, 18),
    "GB": lambda r: rs(r, string.ascii_uppercase, 4) + rs(r, string.digits, 14),
    "FR": lambda r: (
        rs(r, string.digits, 10) + rs(r, string.ascii_uppercase + string.digits, 11) + rs(r, string.digits, 2)
    ),
    "NL": lambda r: rs(r, string.ascii_uppercase, 4) + rs(r, string.digits, 10),
    "ES": lambda r: rs(r, string.digits, 20),
    "IT": lambda r: rs(r, string.ascii_uppercase, 1) + rs(r, string.digits, 10) + rs(r, string.digits, 12),
    "CH": lambda r: rs(r, string.digits, 17),
    "BE": lambda r: rs(r, string.digits, 12),
    "AT": lambda r: rs(r, string.digits, 16),
    "PL": lambda r: rs(r, string.digits, 24),
}


def iban_check(country: str, bban: str) -> str:
    s = bban + country + "00"
    num = int("".join(str(int(c, 36)) for c in s))
    return f"{98 - num % 97:02d}"


def iban_valid(iban: str) -> bool:
    s = iban.replace(" ", "")
    s = s[4:] + s[:4]
    return int("".join(str(int(c, 36)) for c in s)) % 97 == 1


def gen_iban(r: Random, valid: bool = True) -> str:
    country = r.choice(sorted(IBAN_FORMATS))
    bban = IBAN_FORMATS[country](r)
    check = iban_check(country, bban)
    if not valid:
        check = f"{(int(check) + r.randint(1, 90)) % 100:02d}"
        if iban_valid(country + check + bban):  # pragma: no cover - cannot happen, mod 97 is injective here
            check = f"{(int(check) + 1) % 100:02d}"
    iban = country + check + bban
    assert iban_valid(iban) == valid
    if r.random() < 0.6:
        iban = " ".join(iban[i : i + 4] for i in range(0, len(iban), 4))
    return iban


def gen_card(r: Random, valid: bool = True) -> str:
    brand = r.choice(["visa", "visa", "mc", "mc2", "amex", "discover"])
    if brand == "visa":
        body = "4" + rs(r, string.digits, 14)
    elif brand == "mc":
        body = str(r.randint(51, 55)) + rs(r, string.digits, 13)
    elif brand == "mc2":
        body = str(r.randint(2221, 2720)) + rs(r, string.digits, 11)
    elif brand == "amex":
        body = r.choice(["34", "37"]) + rs(r, string.digits, 12)
    else:
        body = "6011" + rs(r, string.digits, 11)
    check = luhn_digit(body)
    if not valid:
        check = str((int(check) + r.randint(1, 9)) % 10)
    num = body + check
    assert luhn_ok(num) == valid
    sep = r.choice(["", "", " ", "-"])
    if len(num) == 15:
        groups = [num[:4], num[4:10], num[10:]]
    else:
        groups = [num[i : i + 4] for i in range(0, 16, 4)]
    return sep.join(groups)


def gen_ssn(r: Random) -> str:
    while True:
        area = r.randint(1, 899)
        if area != 666:
            break
    group, serial = r.randint(1, 99), r.randint(1, 9999)
    sep = r.choice(["-", "-", "-", "-", " "])
    return f"{area:03d}{sep}{group:02d}{sep}{serial:04d}"


def gen_phone(r: Random) -> str:
    def nanp() -> tuple[str, str, str]:
        return (
            f"{r.randint(2, 9)}{r.randint(0, 8)}{r.randint(0, 9)}",
            f"{r.randint(2, 9)}{r.randint(0, 9)}{r.randint(0, 9)}",
            rs(r, string.digits, 4),
        )

    k = r.randrange(12)
    if k == 0:
        a, b, c = nanp()
        return f"({a}) {b}-{c}"
    if k == 1:
        a, b, c = nanp()
        return f"{a}-{b}-{c}"
    if k == 2:
        a, b, c = nanp()
        return f"+1 {a} {b} {c}"
    if k == 3:
        a, b, c = nanp()
        return f"+1-{a}-{b}-{c}"
    if k == 4:
        a, b, c = nanp()
        return f"{a}.{b}.{c}"
    if k == 5:
        return (
            f"+44 {r.choice(['20', '161', '131', '7700', '7911'])} {rs(r, string.digits, 3)} {rs(r, string.digits, 4)}"
        )
    if k == 6:
        return f"07{r.randint(300, 999)} {rs(r, string.digits, 6)}"
    if k == 7:
        return f"+49 {r.choice(['30', '89', '40', '151', '170', '221'])} {rs(r, string.digits, 7)}"
    if k == 8:
        return f"+33 {r.randint(1, 7)} {rs(r, string.digits, 2)} {rs(r, string.digits, 2)} {rs(r, string.digits, 2)} {rs(r, string.digits, 2)}"
    if k == 9:
        return f"+91 {r.randint(70, 99)}{rs(r, string.digits, 3)} {rs(r, string.digits, 5)}"
    if k == 10:
        return f"+61 4{rs(r, string.digits, 2)} {rs(r, string.digits, 3)} {rs(r, string.digits, 3)}"
    a, b, c = nanp()
    return f"+1{a}{b}{c}"


def gen_email(r: Random) -> str:
    f = r.choice(FIRST).lower().replace("é", "e").replace("á", "a").replace("ë", "e").replace("í", "i")
    last = r.choice(LAST).lower().replace("ü", "ue").replace("'", "")
    local = r.choice(
        [
            f"{f}.{last}",
            f"{f[0]}{last}",
            f"{f}{r.randint(1, 99)}",
            f"{f}_{last}",
            f"{last}.{f}",
            f"{f}+memvault",
            f"{f}.{last}{r.randint(70, 99)}",
        ]
    )
    return f"{local}@{r.choice(DOMAINS)}"


def gen_ip(r: Random) -> str:
    if r.random() < 0.15:
        prefix = r.choice(["2a01:4f8", "2001:41d0", "2600:1f18", "2a00:1450", "2604:a880"])
        if r.random() < 0.5:  # full form, 8 groups
            return prefix + ":" + ":".join(f"{r.randint(1, 0xFFFF):x}" for _ in range(6))
        head = [prefix] + [f"{r.randint(1, 0xFFFF):x}" for _ in range(r.randint(0, 2))]
        return ":".join(head) + "::" + f"{r.randint(1, 0xFFFF):x}"
    while True:
        a = r.randint(1, 223)
        if a in (10, 127, 100, 169, 172, 192, 198, 203, 0):
            continue
        return f"{a}.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)}"


def gen_dob(r: Random) -> str:
    y, m, d = r.randint(1938, 2006), r.randint(1, 12), r.randint(1, 28)
    return r.choice(
        [
            f"{y}-{m:02d}-{d:02d}",
            f"{m:02d}/{d:02d}/{y}",
            f"{d:02d}.{m:02d}.{y}",
            f"{d} {MONTHS[m - 1]} {y}",
            f"{MONTHS[m - 1]} {d}, {y}",
            f"{d:02d}/{m:02d}/{y}",
            f"{MONTHS[m - 1][:3]} {d}, {y}",
        ]
    )


def gen_anthropic(r: Random) -> str:
    if r.random() < 0.2:
        return "sk-ant-admin01-" + rs(r, URLSAFE, 93) + "AA"
    return "sk-ant-api03-" + rs(r, URLSAFE, 93) + "AA"


def gen_openai(r: Random) -> str:
    k = r.randrange(4)
    if k == 0:
        return "sk-" + rs(r, ALNUM, 20) + "T3BlbkFJ" + rs(r, ALNUM, 20)
    if k == 1:
        return "sk-proj-" + rs(r, URLSAFE, 74) + "T3BlbkFJ" + rs(r, URLSAFE, 74)
    if k == 2:
        return "sk-svcacct-" + rs(r, URLSAFE, 74) + "T3BlbkFJ" + rs(r, URLSAFE, 74)
    return "sk-" + rs(r, ALNUM, 48)


def gen_aws_id(r: Random) -> str:
    return r.choice(["AKIA", "AKIA", "AKIA", "ASIA"]) + rs(r, string.ascii_uppercase + "234567", 16)


def gen_aws_secret(r: Random) -> str:
    return rs(r, B64, 40)


def gen_google(r: Random) -> str:
    return "AIza" + rs(r, URLSAFE, 35)


def gen_azure(r: Random) -> str:
    acct = r.choice(PROJECTS) + r.choice(["prod", "stg", "data", "logs", "backup"]) + str(r.randint(1, 99))
    if r.random() < 0.7:
        key = base64.b64encode(bytes(r.getrandbits(8) for _ in range(64))).decode()
        return f"DefaultEndpointsProtocol=https;AccountName={acct};AccountKey={key};EndpointSuffix=core.windows.net"
    key = base64.b64encode(bytes(r.getrandbits(8) for _ in range(32))).decode()
    return (
        f"Endpoint=sb://{acct}.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;"
        f"SharedAccessKey={key}"
    )


def gen_github(r: Random) -> str:
    if r.random() < 0.25:
        return (
            "github_pat_" + rs(r, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ", 1) + rs(r, ALNUM, 21) + "_" + rs(r, ALNUM, 59)
        )
    prefix = r.choice(["ghp_", "ghp_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_"])
    entropy = rs(r, ALNUM, 30)
    return prefix + entropy + b62(zlib.crc32(entropy.encode()), 6)


def gen_gitlab(r: Random) -> str:
    k = r.randrange(5)
    if k <= 1:
        return "glpat-" + rs(r, URLSAFE, 20)
    if k == 2:
        return "gldt-" + rs(r, URLSAFE, 20)
    if k == 3:
        return "glptt-" + rs(r, HEX, 40)
    return "glrt-" + rs(r, URLSAFE, 20)


def gen_slack_token(r: Random) -> str:
    k = r.randrange(4)
    if k == 0:
        return f"xoxb-{rs(r, string.digits, 12)}-{rs(r, string.digits, 13)}-{rs(r, ALNUM, 24)}"
    if k == 1:
        return f"xoxp-{rs(r, string.digits, 12)}-{rs(r, string.digits, 12)}-{rs(r, string.digits, 13)}-{rs(r, HEX, 32)}"
    if k == 2:
        return (
            f"xapp-1-A{rs(r, string.ascii_uppercase + string.digits, 10)}-{rs(r, string.digits, 13)}-{rs(r, HEX, 64)}"
        )
    return f"xoxe.xoxp-1-{rs(r, ALNUM, 140)}"


def gen_slack_webhook(r: Random) -> str:
    up = string.ascii_uppercase + string.digits
    if r.random() < 0.85:
        return f"https://hooks.slack.com/services/T{rs(r, up, 8)}/B{rs(r, up, r.choice([8, 10]))}/{rs(r, ALNUM, 24)}"
    return f"https://hooks.slack.com/triggers/T{rs(r, up, 8)}/{rs(r, string.digits, 13)}/{rs(r, HEX, 32)}"


def gen_stripe(r: Random) -> str:
    k = r.randrange(4)
    if k == 0:
        return "sk_live_" + rs(r, ALNUM, 24)
    if k == 1:
        return "sk_live_51" + rs(r, ALNUM, 97)
    if k == 2:
        return "rk_live_" + rs(r, ALNUM, r.choice([24, 99]))
    return "sk_test_51" + rs(r, ALNUM, 97)


def gen_twilio_sid(r: Random) -> str:
    return "AC" + rs(r, HEX, 32)


def gen_twilio_token(r: Random) -> str:
    return rs(r, HEX, 32)


def gen_sendgrid(r: Random) -> str:
    return "SG." + rs(r, URLSAFE, 22) + "." + rs(r, URLSAFE, 43)


def gen_npm(r: Random) -> str:
    if r.random() < 0.7:
        entropy = rs(r, ALNUM, 30)
        return "npm_" + entropy + b62(zlib.crc32(entropy.encode()), 6)
    return gen_uuid(r)  # legacy npm tokens are UUIDs; only labelled in an _authToken context


def gen_pypi(r: Random) -> str:
    ident = gen_uuid(r).encode()
    caveat = r.choice(
        [
            b'{"permissions": "user", "version": 1}',
            ('{"permissions": {"projects": ["' + r.choice(PROJECTS) + '"]}, "version": 1}').encode(),
        ]
    )
    raw = (
        b"\x02\x01\x08pypi.org\x02"
        + bytes([len(ident)])
        + ident
        + b"\x00\x02"
        + bytes([len(caveat)])
        + caveat
        + b"\x00\x00\x06 "
        + bytes(r.getrandbits(8) for _ in range(32))
    )
    return "pypi-" + b64url(raw)


def gen_jwt(r: Random) -> str:
    alg = r.choice(["HS256", "RS256", "ES256"])
    header = json.dumps({"alg": alg, "typ": "JWT"}, separators=(",", ":")).encode()
    iat = r.randint(1_690_000_000, 1_760_000_000)
    payload = {
        "sub": gen_uuid(r) if r.random() < 0.5 else str(r.randint(1000, 99999)),
        "iat": iat,
        "exp": iat + r.choice([900, 3600, 86400]),
    }
    if r.random() < 0.5:
        payload["name"] = person(r)
    if r.random() < 0.5:
        payload["scope"] = r.choice(["read:orders", "admin", "openid profile email", "write:invoices"])
    sig_len = {"HS256": 32, "RS256": 256, "ES256": 64}[alg]
    return (
        b64url(header)
        + "."
        + b64url(json.dumps(payload, separators=(",", ":")).encode())
        + "."
        + b64url(bytes(r.getrandbits(8) for _ in range(sig_len)))
    )


def gen_private_key(r: Random, indent: str = "") -> str:
    k = r.randrange(4)
    if k == 0:
        label, head, nbytes, width = "RSA PRIVATE KEY", "MIIEpAIBAAKCAQEA", 1190, 64
    elif k == 1:
        label, head, nbytes, width = "PRIVATE KEY", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQ", 1218, 64
    elif k == 2:
        label, head, nbytes, width = "EC PRIVATE KEY", "MHcCAQEEI", 121, 64
    else:
        label, head, nbytes, width = (
            "OPENSSH PRIVATE KEY",
            "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW",
            399,
            70,
        )
    body = head + base64.b64encode(bytes(r.getrandbits(8) for _ in range(nbytes))).decode()[len(head) :]
    lines = [body[i : i + width] for i in range(0, len(body), width)]
    sep = "\n" + indent
    return f"-----BEGIN {label}-----" + sep + sep.join(lines) + sep + f"-----END {label}-----"


def gen_password(r: Random) -> str:
    k = r.randrange(5)
    words = [
        "Harbor",
        "Falcon",
        "Summer",
        "Winter",
        "Maple",
        "Orbit",
        "Copper",
        "Violet",
        "Tango",
        "Pixel",
        "Granite",
        "Saturn",
        "Meadow",
        "Rocket",
        "Lantern",
    ]
    if k == 0:
        return r.choice(words) + str(r.randint(10, 9999)) + r.choice("!#$%?*")
    if k == 1:
        return "-".join(r.choice(words).lower() for _ in range(r.randint(3, 4))) + str(r.randint(1, 99))
    if k == 2:
        return rs(r, ALNUM + "!#%^*", r.randint(12, 24))
    if k == 3:
        return r.choice(words) + r.choice(["_", ".", "@"]) + r.choice(words) + str(r.randint(1, 999))
    return rs(r, ALNUM, r.randint(16, 32))


def gen_generic_secret(r: Random) -> str:
    k = r.randrange(4)
    if k == 0:
        return rs(r, HEX, r.choice([32, 40, 64]))
    if k == 1:
        return base64.b64encode(bytes(r.getrandbits(8) for _ in range(r.choice([24, 32, 48])))).decode()
    if k == 2:
        return rs(r, ALNUM, r.randint(32, 50))
    return b64url(bytes(r.getrandbits(8) for _ in range(32)))


def gen_bearer(r: Random) -> str:
    k = r.randrange(3)
    if k == 0:
        return "ya29." + rs(r, URLSAFE, r.randint(120, 170))
    if k == 1:
        return rs(r, ALNUM, r.randint(32, 64))
    return rs(r, URLSAFE + ".~", r.randint(40, 90)).strip(".~") + rs(r, ALNUM, 2)


def gen_uuid(r: Random) -> str:
    h = rs(r, HEX, 32)
    h = h[:12] + "4" + h[13:16] + r.choice("89ab") + h[17:]
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# ----------------------------------------------------------------------------------------------
# filler: realistic lines of agent notes without sensitive values
# ----------------------------------------------------------------------------------------------


def filler(r: Random) -> str:
    svc, proj, tech = r.choice(SERVICES), r.choice(PROJECTS), r.choice(TECH)
    n = r.randint(2, 60)
    return r.choice(
        [
            f"Latency p95 went from {r.randint(300, 2000)} ms to {r.randint(80, 290)} ms after enabling request batching.",
            f"Could not reproduce with a single worker; needs at least {n} concurrent requests.",
            f"Root cause: connection pool exhausted after the {tech} failover.",
            f"Decided to keep {tech} for now and revisit after the {r.choice(ENVS)} migration.",
            f"{person(r)} owns the {svc} rollout; next check-in on {r.choice(DAYS)}.",
            f"Prefers small PRs (under {r.randint(2, 6)}00 lines); avoid suggesting otherwise.",
            f"Timezone: {r.choice(['Europe/Berlin', 'America/New_York', 'Asia/Tokyo', 'Europe/London'])}; usually online 09:00-18:00.",
            f"Flaky test: test_{proj}_roundtrip in {r.choice(PATHS)}.",
            f"PR #{r.randint(100, 4000)} is blocked on review from {r.choice(FIRST)}.",
            f"Cache hit rate dropped to {r.randint(30, 95)}% after the schema change.",
            f"Heap grows by about {n} MB per hour; suspect the LRU is never evicting.",
            f"Dashboards for {svc} are under the {proj} folder in Grafana.",
            f"The {svc} deploy on {date(r)} was rolled back after {n} minutes.",
            f"User is working on {proj}, a side project around {tech}.",
            f"Backfill finished; {n} batches, no errors.",
            f"Symptom: intermittent 502s from {svc} under load.",
            f"We agreed to timebox the spike to {n} hours.",
            f"Upgrade path documented in {r.choice(PATHS)}.",
            "Likes answers that cite the file and line.",
            f"Tests pass locally but flake in CI roughly 1 in {n} runs.",
            f"Ongoing: migrating {svc} from {tech} to {r.choice(TECH)}.",
            "Remember to update the changelog before tagging the release.",
            "User prefers British spelling in docs.",
            f"Staging is on {tech} {r.randint(3, 16)}; production still runs the old setup.",
            f"{r.choice(FIRST)} confirmed the fix in {r.choice(ENVS)} this morning.",
            f"Usage grew {n}% month over month since onboarding.",
            f"Pain point: exports time out for workspaces with more than {n}k rows.",
            f"Action: {r.choice(FIRST)} to write the incident review by {r.choice(DAYS)}.",
            f"Next sync moved to {r.choice(DAYS)}.",
            f"The timeout was {n}s on the client but {r.randint(5, 30)}s on the load balancer.",
            f"Asked me to remember that {r.choice(FIRST)} is the reviewer for infra changes.",
            f"Health check lives at https://{svc}.{r.choice(ENVS)}.internal/healthz.",
            f"Do not touch the legacy cron until {r.choice(COMPANIES)} signs off.",
            f"Runs `make test` before every commit; the suite takes about {n} seconds.",
        ]
    )


def header(r: Random, flavour: str) -> str:
    proj, svc, comp = r.choice(PROJECTS), r.choice(SERVICES), r.choice(COMPANIES)
    return {
        "customer": f"## Customer: {comp}\n\n**Owner:** {person(r)} · **Plan:** {r.choice(['Team', 'Business', 'Enterprise'])} · **Renewal:** {date(r)}\n",
        "incident": f"## Incident notes: {svc} errors ({date(r)})\n",
        "memory": "# MEMORY.md\n",
        "project": f"# Project {proj}: working notes\n",
        "meeting": f"# {r.choice(['Weekly', 'Platform', 'Infra', 'Design'])} sync — {date(r)}\n\nAttendees: {person(r)}, {person(r)}, {person(r)}\n",
        "crm": f"## CRM note — {comp}\n\nAccount manager: {person(r)}. Stage: {r.choice(['Discovery', 'Negotiation', 'Closed won', 'Renewal'])}.\n",
        "runbook": f"## Runbook — restoring {svc}\n",
        "recap": f"### Session recap — {proj}\n",
        "health": f"## Patient intake notes ({r.choice(['Dr.', 'Nurse'])} {r.choice(LAST)})\n",
        "finance": f"## Finance: {r.choice(['vendor payments', 'payroll setup', 'refund requests', 'expense audit'])} for {comp}\n",
        "legal": f"## Legal matter: {comp} v. {r.choice(COMPANIES)}\n\nPrivileged & confidential. Counsel: {person(r)}.\n",
        "snippet": f"### Snippet: {svc} client\n",
        "config": f"## {proj} config notes\n",
    }[flavour]


FLAVOURS = [
    "customer",
    "incident",
    "memory",
    "project",
    "meeting",
    "crm",
    "runbook",
    "recap",
    "health",
    "finance",
    "legal",
    "snippet",
    "config",
]


def bullets(r: Random, n: int) -> str:
    mark = r.choice(["- ", "* ", "1. "])
    out = []
    for i in range(n):
        m = f"{i + 1}. " if mark == "1. " else mark
        out.append(m + filler(r))
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------------------------
# contexts for sensitive values
# ----------------------------------------------------------------------------------------------

NAMES = {
    "anthropic_api_key": ["ANTHROPIC_API_KEY", "anthropic_api_key", "CLAUDE_KEY", "llm_key"],
    "openai_api_key": ["OPENAI_API_KEY", "openai_key", "OPENAI_TOKEN", "llm_api_key"],
    "aws_access_key_id": ["AWS_ACCESS_KEY_ID", "aws_access_key_id", "accessKeyId", "access_key"],
    "aws_secret_access_key": ["AWS_SECRET_ACCESS_KEY", "aws_secret_access_key", "secretAccessKey", "secret_key"],
    "google_api_key": ["GOOGLE_API_KEY", "MAPS_API_KEY", "firebase_api_key", "apiKey", "GEMINI_API_KEY"],
    "azure_connection_string": [
        "AZURE_STORAGE_CONNECTION_STRING",
        "AzureWebJobsStorage",
        "connectionString",
        "SERVICEBUS_CONNECTION",
    ],
    "github_token": ["GITHUB_TOKEN", "GH_TOKEN", "github_pat", "token", "HOMEBREW_GITHUB_API_TOKEN"],
    "gitlab_token": ["GITLAB_TOKEN", "CI_JOB_TOKEN_OVERRIDE", "gitlab_private_token", "GL_TOKEN"],
    "slack_token": ["SLACK_BOT_TOKEN", "SLACK_TOKEN", "slack_app_token", "botToken"],
    "slack_webhook": ["SLACK_WEBHOOK_URL", "slack_webhook", "webhook_url", "ALERTS_WEBHOOK"],
    "stripe_key": ["STRIPE_SECRET_KEY", "STRIPE_API_KEY", "stripe_key", "stripeSecret"],
    "twilio_account_sid": ["TWILIO_ACCOUNT_SID", "account_sid", "accountSid"],
    "twilio_auth_token": ["TWILIO_AUTH_TOKEN", "twilio_auth_token", "authToken", "auth_token"],
    "sendgrid_api_key": ["SENDGRID_API_KEY", "SMTP_API_KEY", "sendgrid_key", "mail_api_key"],
    "npm_token": ["NPM_TOKEN", "NODE_AUTH_TOKEN", "npm_token"],
    "pypi_token": ["PYPI_TOKEN", "TWINE_PASSWORD", "UV_PUBLISH_TOKEN", "pypi_api_token"],
    "jwt": ["ACCESS_TOKEN", "id_token", "jwt", "SESSION_JWT", "refreshToken"],
    "password_assignment": [
        "password",
        "DB_PASSWORD",
        "passwd",
        "POSTGRES_PASSWORD",
        "admin_password",
        "pwd",
        "MYSQL_ROOT_PASSWORD",
        "smtp_password",
        "REDIS_PASSWORD",
        "secret",
        "api_key",
        "keystore_password",
        "ldap_bind_password",
    ],
    "generic_secret": [
        "SECRET_KEY",
        "JWT_SECRET",
        "client_secret",
        "SESSION_SECRET",
        "signing_key",
        "WEBHOOK_SECRET",
        "encryption_key",
        "HMAC_SECRET",
        "APP_KEY",
        "private_token",
        "DJANGO_SECRET_KEY",
        "NEXTAUTH_SECRET",
        "master_key",
        "api_secret",
        "CLIENT_SECRET",
        "ENCRYPTION_PASSPHRASE",
        "service_token",
        "auth_secret",
    ],
}

LABEL = {
    "anthropic_api_key": "Anthropic API key",
    "openai_api_key": "OpenAI key",
    "aws_access_key_id": "AWS access key id",
    "aws_secret_access_key": "AWS secret access key",
    "google_api_key": "Google Maps API key",
    "azure_connection_string": "Azure storage connection string",
    "github_token": "GitHub token",
    "gitlab_token": "GitLab token",
    "slack_token": "Slack bot token",
    "slack_webhook": "Slack webhook",
    "stripe_key": "Stripe secret key",
    "twilio_account_sid": "Twilio account SID",
    "twilio_auth_token": "Twilio auth token",
    "sendgrid_api_key": "SendGrid key",
    "npm_token": "npm publish token",
    "pypi_token": "PyPI token",
    "jwt": "JWT",
    "password_assignment": "password",
    "generic_secret": "signing secret",
}


def fence(lang: str, body: list) -> list:
    return [f"```{lang}\n", *body, "\n```\n"]


def ctx_assign(r: Random, kind: str, value: str) -> list:
    """The value assigned to a name, in one of many config/code syntaxes."""
    name = r.choice(NAMES[kind])
    up, low = name.upper(), name.lower() if not any(c.isupper() for c in name[1:]) or name.isupper() else name
    v = S(value, kind)
    k = r.randrange(11)
    if k == 0:
        return fence(r.choice(["bash", "sh", "console"]), [f'export {up}="', v, '"'])
    if k == 1:
        return fence(
            r.choice(["", "dotenv", "ini"]),
            [f"# .env.{r.choice(ENVS)}\nDEBUG=false\n{up}=", v, f"\nPORT={r.randint(3000, 9000)}"],
        )
    if k == 2:
        q = r.choice(["", '"', "'"])
        return fence(
            "yaml",
            [f"{r.choice(SERVICES)}:\n  env: {r.choice(ENVS)}\n  {low}: {q}", v, f"{q}\n  replicas: {r.randint(1, 6)}"],
        )
    if k == 3:
        return fence(
            "json",
            [f'{{\n  "service": "{r.choice(SERVICES)}",\n  "{low}": "', v, f'",\n  "timeout": {r.randint(5, 60)}\n}}'],
        )
    if k == 4:
        return fence(
            "toml", [f'[{r.choice(["auth", "secrets", "client", "default"])}]\n{low} = "', v, '"\nretries = 3']
        )
    if k == 5:
        return fence("python", [f'{up} = "', v, '"  # TODO move to vault'])
    if k == 6:
        return [f"Set `{up}=", v, f"` on the {r.choice(ENVS)} runner.\n"]
    if k == 7:
        return [f"- `{up}` is ", v, "\n"]
    if k == 8:
        return fence("js", [f"const config = {{ {low}: '", v, "', region: 'eu-west-1' };"])
    if k == 9:
        return fence("shell", [f"docker run -e {up}=", v, f" ghcr.io/acme/{r.choice(PROJECTS)}:latest"])
    return fence("hcl", [f'variable "{low}" {{\n  default = "', v, '"\n}'])


def ctx_prose(r: Random, kind: str, value: str) -> list:
    """A self-identifying (prefixed) value in prose, lists, tables, quotes, next to punctuation."""
    v = S(value, kind)
    label, env, svc = LABEL.get(kind, kind), r.choice(ENVS), r.choice(SERVICES)
    k = r.randrange(9)
    if k == 0:
        return [f"The {label} for {svc} is ", v, ".\n"]
    if k == 1:
        return [f"User pasted their {label} ({r.choice(ENVS)}): ", v, " — told them to rotate it.\n"]
    if k == 2:
        return [f"> {person(r)}: here's the key `", v, f"`, use it for {env}\n"]
    if k == 3:
        return [
            "| env | service | key | note |\n|---|---|---|---|\n",
            f"| {env} | {svc} | ",
            v,
            f" | rotated {date(r)} |\n",
        ]
    if k == 4:
        return [f"* {label}: ", v, "\n"]
    if k == 5:
        return ['Key ("', v, f'") belongs to the {r.choice(PROJECTS)} bot account.\n']
    if k == 6:
        return [v, f" is the {label} the user keeps using for {svc}; remind them it is in the vault.\n"]
    if k == 7:
        return [f"Used {label}=", v, ", which worked on the first try.\n"]
    return [f"Remember: {label} → ", v]


def ctx_cli(r: Random, kind: str, value: str) -> list:
    v = S(value, kind)
    if kind == "anthropic_api_key":
        return fence(
            "bash",
            [
                'curl https://api.anthropic.com/v1/messages \\\n  -H "x-api-key: ',
                v,
                '" \\\n  -H "anthropic-version: 2023-06-01" -H "content-type: application/json"',
            ],
        )
    if kind == "openai_api_key":
        return fence("python", ['from openai import OpenAI\nclient = OpenAI(api_key="', v, '")'])
    if kind == "github_token":
        return fence("bash", ["git clone https://", v, f"@github.com/acme/{r.choice(PROJECTS)}.git"])
    if kind == "gitlab_token":
        return fence("bash", ['curl --header "PRIVATE-TOKEN: ', v, '" "https://gitlab.example.com/api/v4/projects"'])
    if kind == "slack_token":
        return fence("python", ['from slack_sdk import WebClient\nclient = WebClient(token="', v, '")'])
    if kind == "slack_webhook":
        return fence(
            "bash", ["curl -X POST -H 'Content-type: application/json' --data '{\"text\":\"deploy done\"}' ", v]
        )
    if kind == "stripe_key":
        return fence("bash", ["curl https://api.stripe.com/v1/charges -u ", v, ":"])
    if kind == "sendgrid_api_key":
        return fence("python", ['sg = SendGridAPIClient("', v, '")'])
    if kind == "npm_token":
        return fence(
            "ini", ["# ~/.npmrc\n//registry.npmjs.org/:_authToken=", v, "\n@acme:registry=https://npm.pkg.github.com"]
        )
    if kind == "pypi_token":
        return fence("bash", ["twine upload -u __token__ -p ", v, " dist/*"])
    if kind == "google_api_key":
        return ["Maps embed: https://maps.googleapis.com/maps/api/js?key=", v, "&callback=initMap\n"]
    if kind == "aws_access_key_id":
        return fence("ini", ["[default]\naws_access_key_id = ", v, "\nregion = eu-central-1"])
    if kind == "jwt":
        return fence("http", ["GET /v1/orders HTTP/1.1\nHost: api.internal\nCookie: session=", v, "; theme=dark"])
    if kind == "twilio_account_sid":
        return fence("python", ['client = Client("', v, '", os.environ["TWILIO_AUTH_TOKEN"])'])
    return ctx_prose(r, kind, value)


def ctx_self_identifying(r: Random, kind: str, value: str) -> list:
    k = r.randrange(3)
    if k == 0:
        return ctx_assign(r, kind, value)
    if k == 1:
        return ctx_prose(r, kind, value)
    return ctx_cli(r, kind, value)


def ctx_aws_secret(r: Random, value: str) -> list:
    v = S(value, "aws_secret_access_key")
    k = r.randrange(5)
    if k == 0:
        return fence(
            "ini",
            [
                f"[{r.choice(['default', 'prod', 'deploy'])}]\naws_access_key_id = ",
                S(gen_aws_id(r), "aws_access_key_id"),
                "\naws_secret_access_key = ",
                v,
            ],
        )
    if k == 1:
        return ["AWS secret access key: ", v, "\n"]
    if k == 2:
        return fence(
            "json",
            ['{\n  "AccessKeyId": "', S(gen_aws_id(r), "aws_access_key_id"), '",\n  "SecretAccessKey": "', v, '"\n}'],
        )
    return ctx_assign(r, "aws_secret_access_key", value)


def ctx_twilio_token(r: Random, value: str) -> list:
    v = S(value, "twilio_auth_token")
    k = r.randrange(4)
    if k == 0:
        return fence("python", ['client = Client("', S(gen_twilio_sid(r), "twilio_account_sid"), '", "', v, '")'])
    if k == 1:
        return ["Twilio auth token is ", v, " (account owner: ", person(r), ").\n"]
    return ctx_assign(r, "twilio_auth_token", value)


def ctx_azure(r: Random, value: str) -> list:
    v = S(value, "azure_connection_string")
    k = r.randrange(4)
    if k == 0:
        return fence(
            "json",
            [
                '{\n  "IsEncrypted": false,\n  "Values": {\n    "AzureWebJobsStorage": "',
                v,
                '",\n    "FUNCTIONS_WORKER_RUNTIME": "python"\n  }\n}',
            ],
        )
    if k == 1:
        return ["Storage account connection string: ", v, "\n"]
    return ctx_assign(r, "azure_connection_string", value)


def ctx_private_key(r: Random) -> list:
    k = r.randrange(5)
    if k == 0:
        return fence("", [S(gen_private_key(r), "private_key")])
    if k == 1:
        return ["Deploy key (do not commit):\n\n", S(gen_private_key(r), "private_key"), "\n"]
    if k == 2:
        return fence(
            "yaml", ["tls:\n  cert: /etc/ssl/app.crt\n  key: |\n    ", S(gen_private_key(r, "    "), "private_key")]
        )
    if k == 3:
        pem = gen_private_key(r).replace("\n", "\\n") + "\\n"
        return fence(
            "json",
            [
                '{\n  "type": "service_account",\n  "project_id": "',
                r.choice(PROJECTS),
                '-prod",\n  "private_key_id": "',
                rs(r, HEX, 40),
                '",\n  "private_key": "',
                S(pem, "private_key"),
                '",\n  "client_email": "',
                S(f"deployer@{r.choice(PROJECTS)}-prod.iam.gserviceaccount.com", "email"),
                '"\n}',
            ],
        )
    return fence(
        "bash",
        ["cat > ~/.ssh/id_deploy <<'EOF'\n", S(gen_private_key(r), "private_key"), "\nEOF\nchmod 600 ~/.ssh/id_deploy"],
    )


def ctx_basic_auth(r: Random) -> list:
    pw = S(
        gen_password(r).replace("@", "9").replace("/", "x").replace("#", "3").replace("?", "7").replace("%", "5"),
        "basic_auth",
    )
    user = r.choice(["admin", "app_rw", "deploy", "grace", "svc_etl", "root", "ci"])
    host = r.choice(
        [
            "db.internal",
            "pg-prod.acme.io",
            "db-primary.eu.internal",
            "mq.globex.io",
            "cluster0.x7k2p.mongodb.net",
            "registry.acme.dev",
            "cache.internal",
        ]
    )
    k = r.randrange(7)
    if k == 0:
        return fence("", ["DATABASE_URL=postgres://", user, ":", pw, f"@{host}:5432/{r.choice(PROJECTS)}"])
    if k == 1:
        return ["Connect with `mongodb+srv://", user, ":", pw, f"@{host}/orders?retryWrites=true`.\n"]
    if k == 2:
        return [f"- Broker: amqp://{user}:", pw, f"@{host}:5672/%2F\n"]
    if k == 3:
        return fence("yaml", ["redis:\n  url: redis://:", pw, f"@{host}:6379/0"])
    if k == 4:
        token = base64.b64encode(f"{user}:{gen_password(r)}".encode()).decode()
        return fence(
            "",
            [
                f"{date(r)}T0{r.randint(0, 9)}:12:44.101Z DEBUG {r.choice(SERVICES)} upstream headers: Authorization: Basic ",
                S(token, "basic_auth"),
            ],
        )
    if k == 5:
        return ["The user's private index is https://", user, ":", pw, f"@{host}/simple/ (pip --index-url).\n"]
    return fence(
        "bash", ["git remote set-url origin https://", user, ":", pw, f"@{host}/acme/{r.choice(PROJECTS)}.git"]
    )


def ctx_password(r: Random) -> list:
    v = S(gen_password(r), "password_assignment")
    name = r.choice(NAMES["password_assignment"])
    k = r.randrange(9)
    if k == 0:
        return fence("yaml", ["database:\n  host: db.internal\n  user: app_rw\n  ", name.lower(), ": ", v])
    if k == 1:
        return fence("", [name.upper(), "=", v])
    if k == 2:
        return fence("json", ['{"user": "admin", "', name.lower(), '": "', v, '"}'])
    if k == 3:
        return [f"Wi-Fi for the office: SSID `{r.choice(PROJECTS)}-guest`, password: ", v, "\n"]
    if k == 4:
        return fence("python", ['conn = psycopg.connect(host="db", user="app", password="', v, '")'])
    if k == 5:
        return fence("toml", ['[smtp]\nhost = "smtp.mailgun.org"\n', name.lower(), ' = "', v, '"'])
    if k == 6:
        return [f"- Admin login for the {r.choice(SERVICES)} panel is `admin` / password=", v, "\n"]
    if k == 7:
        return fence("bash", ["mysql -u root --password='", v, "' orders"])
    return fence("xml", ['<add key="', name, '" value="', v, '" />'])


def ctx_bearer(r: Random) -> list:
    v = S(gen_bearer(r), "bearer_token")
    k = r.randrange(5)
    if k == 0:
        return fence(
            "bash",
            [
                f'curl -X GET "https://api.{r.choice(["vandelay.com", "globex.io", "hooli.xyz"])}/v1/invoices" \\\n  -H "Authorization: Bearer ',
                v,
                '"',
            ],
        )
    if k == 1:
        return fence("python", ['headers = {"Authorization": "Bearer ', v, '", "Accept": "application/json"}'])
    if k == 2:
        return fence(
            "http",
            [
                "POST /api/v2/sync HTTP/1.1\nHost: partner.example.net\nAuthorization: Bearer ",
                v,
                "\nContent-Type: application/json",
            ],
        )
    if k == 3:
        return ["Partner gave us a static token; send `Authorization: Bearer ", v, "` on every call.\n"]
    return fence("js", ["fetch(url, { headers: { authorization: `Bearer ", v, "` } });"])


def ctx_generic(r: Random) -> list:
    v = S(gen_generic_secret(r), "generic_secret")
    name = r.choice(NAMES["generic_secret"])
    k = r.randrange(7)
    if k == 0:
        return fence("", [name.upper(), "=", v])
    if k == 1:
        return fence("yaml", ["auth:\n  issuer: https://login.acme.dev\n  ", name.lower(), ': "', v, '"'])
    if k == 2:
        return fence("json", ['{"client_id": "', r.choice(PROJECTS), '-web", "', name.lower(), '": "', v, '"}'])
    if k == 3:
        return fence("python", [f'app.config["{name.upper()}"] = "', v, '"'])
    if k == 4:
        return [f"- `{name}` for {r.choice(SERVICES)}: ", v, "\n"]
    if k == 5:
        return fence("bash", [f"export {name.upper()}='", v, "'"])
    return fence("toml", [f'{name.lower()} = "', v, '"'])


def ctx_email(r: Random) -> list:
    v = S(gen_email(r), "email")
    who = person(r)
    k = r.randrange(8)
    if k == 0:
        return [f"Main contact is {who} (", v, ").\n"]
    if k == 1:
        return ["- Email: ", v, "\n"]
    if k == 2:
        return ["Send the signed contract to <", v, ">.\n"]
    if k == 3:
        return fence("json", ['{"name": "', who, '", "email": "', v, '"}'])
    if k == 4:
        return [f"> From: {who} <", v, ">\n> Subject: Re: renewal\n"]
    if k == 5:
        return ["| name | email |\n|---|---|\n", f"| {who} | ", v, " |\n"]
    if k == 6:
        return [v, " asked to be cc'd on every incident summary.\n"]
    return [f"Reach {who.split()[0]} at mailto:", v, "."]


def ctx_phone(r: Random) -> list:
    v = S(gen_phone(r), "phone")
    who = person(r)
    k = r.randrange(7)
    if k == 0:
        return [f"Call {who} on ", v, " if the pager fails.\n"]
    if k == 1:
        return ["- Phone: ", v, "\n"]
    if k == 2:
        return fence("", [f"BEGIN:VCARD\nFN:{who}\nTEL;TYPE=cell:", v, "\nEND:VCARD"])
    if k == 3:
        return [f"{who}, mobile ", v, ", prefers WhatsApp.\n"]
    if k == 4:
        return fence("yaml", [f'contact:\n  name: {who}\n  phone: "', v, '"'])
    if k == 5:
        return ["| contact | tel |\n|---|---|\n", f"| {who} | ", v, " |\n"]
    return ["Emergency contact (spouse): tel. ", v]


def ctx_card(r: Random) -> list:
    v = S(gen_card(r), "credit_card")
    k = r.randrange(6)
    if k == 0:
        return ["Customer read out card ", v, " over the phone; do NOT store — flagged to compliance.\n"]
    if k == 1:
        return ["- Card on file: ", v, f" exp {r.randint(1, 12):02d}/{r.randint(26, 31)}\n"]
    if k == 2:
        return fence(
            "json", ['{"customer": "', person(r), '", "pan": "', v, '", "cvc": "', str(r.randint(100, 999)), '"}']
        )
    if k == 3:
        return [f"Refund went to the corporate card ({r.choice(['Visa', 'Mastercard', 'Amex'])} ", v, ").\n"]
    if k == 4:
        return ["| holder | number |\n|---|---|\n", f"| {person(r)} | ", v, " |\n"]
    return [v, " was declined twice on the renewal; customer will call the bank.\n"]


def ctx_ssn(r: Random) -> list:
    v = S(gen_ssn(r), "ssn")
    k = r.randrange(5)
    if k == 0:
        return ["- SSN: ", v, "\n"]
    if k == 1:
        return [f"Employee {person(r)} (social security number ", v, ") needs the W-2 reissued.\n"]
    if k == 2:
        return fence("json", ['{"employee": "', person(r), '", "ssn": "', v, '"}'])
    if k == 3:
        return ["Patient SSN ", v, " on the intake form does not match the insurer's records.\n"]
    return ["| name | SSN |\n|---|---|\n", f"| {person(r)} | ", v, " |\n"]


def ctx_iban(r: Random) -> list:
    v = S(gen_iban(r), "iban")
    k = r.randrange(5)
    if k == 0:
        return [f"Payout account for {person(r)}: IBAN ", v, "\n"]
    if k == 1:
        return [
            "- IBAN: ",
            v,
            f" (BIC {rs(r, string.ascii_uppercase, 6)}{rs(r, string.ascii_uppercase + string.digits, 2)})\n",
        ]
    if k == 2:
        return fence("yaml", [f'vendor:\n  name: {r.choice(COMPANIES)}\n  iban: "', v, '"'])
    if k == 3:
        return ["Refund to ", v, f" approved by {r.choice(FIRST)}.\n"]
    return ["Bankverbindung: ", v]


def ctx_ip(r: Random) -> list:
    v = S(gen_ip(r), "ip")
    k = r.randrange(7)
    if k == 0:
        return ["Bastion host is ", v, "; it only accepts keys, no passwords.\n"]
    if k == 1:
        return fence(
            "", [f"{date(r)}T11:0{r.randint(0, 9)}:31Z WARN {r.choice(SERVICES)} too many requests from ", v, " (429)"]
        )
    if k == 2:
        return ["- Customer's egress IP (allowlist it): ", v, "\n"]
    if k == 3:
        return fence("ini", ["[prod]\n", v, " ansible_user=deploy"])
    if k == 4:
        return fence("bash", ["ssh deploy@", v, " -p 22"])
    if k == 5:
        return ["Login from ", v, f" flagged as suspicious by {r.choice(COMPANIES)} security.\n"]
    return fence("yaml", ["allowed_ips:\n  - ", v])


def ctx_dob(r: Random) -> list:
    v = S(gen_dob(r), "dob")
    who = person(r)
    k = r.randrange(7)
    if k == 0:
        return [
            f"Patient {who.split()[0]}, born ",
            v,
            f", allergic to {r.choice(['penicillin', 'latex', 'peanuts'])}.\n",
        ]
    if k == 1:
        return ["- DOB: ", v, "\n"]
    if k == 2:
        return ["- Geburtsdatum: ", v, "\n"]
    if k == 3:
        return [f"{who} (date of birth ", v, ") asked us to update the policy holder.\n"]
    if k == 4:
        return fence("json", ['{"name": "', who, '", "date_of_birth": "', v, '"}'])
    if k == 5:
        return ["Birthday: ", v, " — send a card from the team.\n"]
    return [f"| name | d.o.b. |\n|---|---|\n| {who} | ", v, " |\n"]


def payload(r: Random, kind: str) -> list:
    if kind == "aws_secret_access_key":
        return ctx_aws_secret(r, gen_aws_secret(r))
    if kind == "twilio_auth_token":
        return ctx_twilio_token(r, gen_twilio_token(r))
    if kind == "azure_connection_string":
        return ctx_azure(r, gen_azure(r))
    if kind == "private_key":
        return ctx_private_key(r)
    if kind == "basic_auth":
        return ctx_basic_auth(r)
    if kind == "password_assignment":
        return ctx_password(r)
    if kind == "bearer_token":
        return ctx_bearer(r)
    if kind == "generic_secret":
        return ctx_generic(r)
    if kind == "npm_token":
        tok = gen_npm(r)
        if not tok.startswith("npm_"):  # a bare UUID is only a token in its .npmrc context
            return fence("ini", ["//registry.npmjs.org/:_authToken=", S(tok, "npm_token")])
        return ctx_self_identifying(r, kind, tok)
    personal = {
        "email": ctx_email,
        "phone": ctx_phone,
        "credit_card": ctx_card,
        "ssn": ctx_ssn,
        "iban": ctx_iban,
        "ip": ctx_ip,
        "dob": ctx_dob,
    }
    if kind in personal:
        return personal[kind](r)
    gen = {
        "anthropic_api_key": gen_anthropic,
        "openai_api_key": gen_openai,
        "aws_access_key_id": gen_aws_id,
        "google_api_key": gen_google,
        "github_token": gen_github,
        "gitlab_token": gen_gitlab,
        "slack_token": gen_slack_token,
        "slack_webhook": gen_slack_webhook,
        "stripe_key": gen_stripe,
        "twilio_account_sid": gen_twilio_sid,
        "sendgrid_api_key": gen_sendgrid,
        "pypi_token": gen_pypi,
        "jwt": gen_jwt,
    }[kind]
    return ctx_self_identifying(r, kind, gen(r))


# ----------------------------------------------------------------------------------------------
# benign look-alikes (hard negatives)
# ----------------------------------------------------------------------------------------------


def neg_block(r: Random, typ: str) -> str:
    svc, proj = r.choice(SERVICES), r.choice(PROJECTS)
    if typ == "git_sha":
        sha = rs(r, HEX, 40)
        return r.choice(
            [
                f"Regression introduced in commit {sha} (merged {date(r)}).\n",
                f"- Pin the dependency to `{sha}` until upstream tags a release.\n",
                f"```\ncommit {sha}\nAuthor: {person(r)}\nDate:   {date(r)}\n\n    fix: retry on 503\n```\n",
                f"Bisected to {sha[: r.choice([7, 8, 12])]}; reverting it fixes the flake.\n",
            ]
        )
    if typ == "uuid":
        return r.choice(
            [
                f"- Idempotency-Key used by the retry: {gen_uuid(r)}\n",
                f"```\n{date(r)}T06:24:03.598Z ERROR {svc} request_id={gen_uuid(r)} status=500\n```\n",
                f"Workspace id `{gen_uuid(r)}` is the one with the broken export.\n",
                f'```json\n{{"tenant_id": "{gen_uuid(r)}", "trace_id": "{rs(r, HEX, 32)}"}}\n```\n',
            ]
        )
    if typ == "sha256":
        return r.choice(
            [
                f"Artifact checksum (sha256): {rs(r, HEX, 64)}\n",
                f"```\nFROM python:3.12-slim@sha256:{rs(r, HEX, 64)}\n```\n",
                f"- `{rs(r, HEX, 64)}  dist/{proj}-1.{r.randint(0, 9)}.0.tar.gz`\n",
                f"Image digest in prod: ghcr.io/acme/{proj}@sha256:{rs(r, HEX, 64)}\n",
            ]
        )
    if typ == "base64_image":
        data = base64.b64encode(
            b"\x89PNG\r\n\x1a\n" + bytes(r.getrandbits(8) for _ in range(r.randint(90, 300)))
        ).decode()
        return f'```html\n<img alt="screenshot of the error" src="data:image/png;base64,{data}" />\n```\n'
    if typ == "version_string":
        return r.choice(
            [
                f"Upgraded {r.choice(TECH)} from {r.randint(1, 9)}.{r.randint(0, 20)}.{r.randint(0, 30)} to {r.randint(1, 9)}.{r.randint(0, 20)}.{r.randint(0, 30)}.\n",
                f"Windows build 10.0.{r.randint(17000, 26100)}.{r.randint(1000, 5000)} reproduces it; macOS 14.{r.randint(0, 6)}.{r.randint(0, 3)} does not.\n",
                f"- Chrome {r.randint(110, 130)}.0.{r.randint(5000, 6800)}.{r.randint(50, 250)} renders the chart blank.\n",
                f"Firmware v{r.randint(1, 9)}.{r.randint(0, 12)}.{r.randint(0, 9)}.{r.randint(0, 30)} fixes the reboot loop.\n",
                f'```toml\n[dependencies]\nserde = "1.0.{r.randint(100, 220)}"\ntokio = {{ version = "1.{r.randint(20, 45)}.0", features = ["full"] }}\n```\n',
                f"OID 1.2.840.113549.1.1.{r.randint(1, 14)} is the signature algorithm in the cert.\n",
            ]
        )
    if typ == "order_number":
        return r.choice(
            [
                f"- Ticket ORD-{r.randint(2021, 2025)}-{rs(r, string.digits, 8)}: customer wants the delivery address changed.\n",
                f"Invoice INV-{rs(r, string.digits, 6)} was paid twice; refund pending.\n",
                f"RMA {rs(r, string.ascii_uppercase, 2)}-{rs(r, string.digits, 9)} opened for the broken scanner.\n",
                f"Order #{rs(r, string.digits, 10)} shipped on {date(r)}.\n",
                f"Zendesk ticket {r.randint(100000, 999999)}, Jira {proj.upper()}-{r.randint(10, 9999)}.\n",
            ]
        )
    if typ == "luhn_fail_number":
        num = gen_card(r, valid=False)
        return r.choice(
            [
                f"- Shipment tracking number {num} (carrier says in transit).\n",
                f"Card-like test value {num} fails the Luhn check, so the form rejects it as expected.\n",
                f"Batch reference {num} appears twice in the settlement file.\n",
            ]
        )
    if typ == "placeholder_key":
        return r.choice(
            [
                "Set `ANTHROPIC_API_KEY=<YOUR_API_KEY>` in `.env` before running the examples.\n",
                '```toml\n[client]\napi_key = "your-api-key-here"\n```\n',
                f"The docs show `sk-ant-api03-{'x' * r.choice([4, 20, 93])}` as the key format; ours lives in 1Password.\n",
                "```yaml\nconfig:\n  github_token: ghp_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX\n  smtp_port: 587\n```\n",
                "- `OPENAI_API_KEY=sk-...` (placeholder in the README)\n",
                "```bash\nexport STRIPE_SECRET_KEY=sk_live_...\nexport SLACK_BOT_TOKEN=xoxb-your-token\n```\n",
                '```json\n{"password": "<PASSWORD>", "api_key": "${API_KEY}"}\n```\n',
                "Use `Authorization: Bearer <token>` for every request.\n",
                "DATABASE_URL=postgres://USER:PASSWORD@HOST:5432/DB is the template in the onboarding doc.\n",
                "```\nSENDGRID_API_KEY=SG.xxxxxxxxxxxxxxxxxxxxxx.xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n```\n",
                "`AWS_SECRET_ACCESS_KEY=YOUR_SECRET_ACCESS_KEY` goes in ~/.aws/credentials.\n",
            ]
        )
    if typ == "public_test_value":
        return r.choice(
            [
                "AWS documentation examples use AKIAIOSFODNN7EXAMPLE / wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY; our linter allowlists them.\n",
                "```yaml\nenvironment:\n  - AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE\n  - AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n```\n",
                "```ini\n[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n```\n",
            ]
        )
    if typ == "masked_value":
        return r.choice(
            [
                "- `STRIPE_SECRET_KEY=sk_live_****************************` (masked in the dashboard)\n",
                f"Card ending in {rs(r, string.digits, 4)} (**** **** **** {rs(r, string.digits, 4)}) was charged.\n",
                '```yaml\ndatabase:\n  password: "********"\n```\n',
                f"The key shown in the console is `sk-ant-api03-...{rs(r, ALNUM, 4)}`; full value only in the vault.\n",
                f"SSN on file: ***-**-{rs(r, string.digits, 4)} (masked by the HR system).\n",
                "`DB_PASSWORD=[REDACTED]` in the pasted log.\n",
            ]
        )
    if typ == "env_var_name":
        return r.choice(
            [
                '```python\napi_key = os.environ["API_KEY"]\npassword = os.getenv("DB_PASSWORD")\n```\n',
                "- Needs `GITHUB_TOKEN`, `NPM_TOKEN` and `AWS_SECRET_ACCESS_KEY` exported in CI.\n",
                "```yaml\nenv:\n  DB_PASSWORD: ${{ secrets.DB_PASSWORD }}\n  STRIPE_KEY: ${{ secrets.STRIPE_KEY }}\n```\n",
                '```bash\nexport API_TOKEN="$(vault kv get -field=token secret/ci)"\n```\n',
                "```python\nclient = Anthropic(api_key=settings.anthropic_api_key)\n```\n",
                "```js\nconst secret = process.env.JWT_SECRET;\n```\n",
                "`password = getpass.getpass()` prompts instead of reading a file.\n",
                "```\nDATABASE_URL=postgres://app:${DB_PASSWORD}@db.internal:5432/orders\n```\n",
                '```toml\npassword = ""\ntoken = "env:GITLAB_TOKEN"\n```\n',
            ]
        )
    if typ == "timestamp":
        return r.choice(
            [
                f"```\n{date(r)}T{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}.{r.randint(0, 999):03d}Z INFO {svc} worker {r.randint(1, 40)} picked up batch\n```\n",
                f"Epoch {r.randint(1_600_000_000, 1_760_000_000)} ({r.randint(1_600_000_000_000, 1_760_000_000_000)} ms) is when the cron stopped.\n",
                f"- Run took 00:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}.{r.randint(0, 999):03d}; cron is `{r.randint(0, 59)} {r.randint(0, 23)} * * *`.\n",
            ]
        )
    if typ == "date_non_dob":
        return r.choice(
            [
                f"- Data before {date(r, 1990, 2010)} is archived to cold storage.\n",
                f"Contract started {date(r, 2005, 2020)} and auto-renews yearly.\n",
                f"Company founded on {r.randint(1, 28)} {r.choice(MONTHS)} {r.randint(1950, 2010)}.\n",
                f"Deadline: {r.randint(1, 12):02d}/{r.randint(1, 28):02d}/{r.randint(2024, 2026)} for the audit evidence.\n",
                f"Policy effective {r.randint(1, 28):02d}.{r.randint(1, 12):02d}.{r.randint(1995, 2026)} per the renewal letter.\n",
            ]
        )
    if typ == "phone_like_code":
        return r.choice(
            [
                f"- Case number {rs(r, string.digits, 4)}-{rs(r, string.digits, 3)}-{rs(r, string.digits, 4)} with the hardware vendor.\n",
                f"Rack position {r.randint(10, 60)}.{r.randint(10, 60)}.{r.randint(10, 60)}, patch panel port {r.randint(1, 96)}.\n",
                f"ISBN 978-{r.randint(0, 1)}-{rs(r, string.digits, 3)}-{rs(r, string.digits, 5)}-{r.randint(0, 9)} is the book they recommended.\n",
                f"Part no. {rs(r, string.digits, 3)}-{rs(r, string.digits, 4)}-{rs(r, string.digits, 2)} is back-ordered.\n",
                f"Throughput: {r.randint(1, 9)},{rs(r, string.digits, 3)},{rs(r, string.digits, 3)} rows in {r.randint(2, 60)} s.\n",
            ]
        )
    if typ == "loopback_ip":
        return r.choice(
            [
                "```console\nuvicorn app:app --host 127.0.0.1 --port 8000 --reload\n```\n",
                "Bind to 0.0.0.0 inside the container, 127.0.0.1 on the host.\n",
                "- SSH as deploy@localhost for the local Vagrant box.\n",
                "`curl http://localhost:8080/healthz` returns ok.\n",
            ]
        )
    if typ == "public_key_material":
        body = base64.b64encode(
            b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00 " + bytes(r.getrandbits(8) for _ in range(32))
        ).decode()
        return r.choice(
            [
                f"Add this public key to authorized_keys: `ssh-ed25519 {body} {r.choice(FIRST).lower()}@laptop`\n",
                "```\n-----BEGIN PUBLIC KEY-----\n"
                + "\n".join(rs(r, B64, 64) for _ in range(3))
                + "\n"
                + rs(r, B64, 20)
                + "==\n-----END PUBLIC KEY-----\n```\n",
                "```\n-----BEGIN CERTIFICATE-----\n"
                + "\n".join(rs(r, B64, 64) for _ in range(6))
                + "\n-----END CERTIFICATE-----\n```\n",
            ]
        )
    if typ == "high_entropy_nonsecret":
        return r.choice(
            [
                f"- go.sum: `golang.org/x/net v0.{r.randint(10, 30)}.0 h1:{base64.b64encode(bytes(r.getrandbits(8) for _ in range(32))).decode()}`\n",
                f'```json\n"integrity": "sha512-{base64.b64encode(bytes(r.getrandbits(8) for _ in range(64))).decode()}"\n```\n',
                f'```html\n<script src="https://cdn.example.com/lib.js" integrity="sha384-{base64.b64encode(bytes(r.getrandbits(8) for _ in range(48))).decode()}" crossorigin="anonymous"></script>\n```\n',
                f"Cache key is `{proj}-{rs(r, HEX, 16)}`; CI restores it from the previous run.\n",
                "2^64 = 18446744073709551616, so the counter cannot overflow in practice.\n",
            ]
        )
    if typ == "password_word":
        return r.choice(
            [
                "- The `--password-stdin` flag keeps the password out of shell history.\n",
                "Password reset emails were delayed by the queue backlog.\n",
                "Ask the user to rotate the password themselves; we never store it.\n",
                "`password_reset_token_ttl: 3600` controls how long the link lives.\n",
                "Secret scanning is enabled on the org; push protection blocks tokens.\n",
                "The API key rotation runbook is in docs/security/rotation.md.\n",
            ]
        )
    if typ == "email_like":
        return r.choice(
            [
                f"Mentioned @{r.choice(FIRST).lower()} in the PR so they see the change.\n",
                f"```\ngit clone git@github.com:acme/{proj}.git\n```\n",
                f"- npm package is `@acme/{proj}@{r.randint(1, 5)}.{r.randint(0, 9)}.{r.randint(0, 9)}`.\n",
                f"Decorator `@{r.choice(['retry', 'cached', 'login_required'])}` wraps the handler.\n",
            ]
        )
    if typ == "url_no_creds":
        return r.choice(
            [
                f"- Staging DB is postgres://pg-staging.internal:5432/{proj} (credentials from Vault).\n",
                f"Discussion in https://github.com/acme/{proj}/pull/{r.randint(100, 4000)}#issuecomment-{r.randint(10**9, 2 * 10**9)}\n",
                f"Dashboard: https://grafana.acme.dev/d/{rs(r, ALNUM, 9)}/{svc}?orgId=1&from=now-6h\n",
                "- Redis: redis://cache.internal:6379/0\n",
            ]
        )
    if typ == "iban_like":
        return r.choice(
            [
                f"IBAN {gen_iban(r, valid=False)} from the scanned form fails its checksum; asked the vendor to resend.\n",
                "The sample IBAN in the form help text is `XX00 0000 0000 0000 0000 00`.\n",
            ]
        )
    if typ == "aws_resource_id":
        return r.choice(
            [
                f"- Instance i-{rs(r, HEX, 17)} in subnet-{rs(r, HEX, 17)} is the noisy neighbour.\n",
                f"ARN: arn:aws:iam::{rs(r, string.digits, 12)}:role/{proj}-deployer\n",
                f"CloudFront distribution E{rs(r, string.ascii_uppercase + string.digits, 13)} serves the docs.\n",
            ]
        )
    if typ == "math":
        return r.choice(
            [
                f"p = {r.random():.6f}, n = {r.randint(100, 99999)}, σ = {r.random() * 10:.4f}\n",
                f"Budget: ${r.randint(1, 999)},{rs(r, string.digits, 3)}.{rs(r, string.digits, 2)} across {r.randint(2, 12)} vendors.\n",
                f"Coordinates {r.uniform(-80, 80):.6f}, {r.uniform(-170, 170):.6f} (the warehouse).\n",
            ]
        )
    raise ValueError(typ)


NEG_TYPES = [
    "git_sha",
    "uuid",
    "sha256",
    "base64_image",
    "version_string",
    "order_number",
    "luhn_fail_number",
    "placeholder_key",
    "public_test_value",
    "masked_value",
    "env_var_name",
    "timestamp",
    "date_non_dob",
    "phone_like_code",
    "loopback_ip",
    "public_key_material",
    "high_entropy_nonsecret",
    "password_word",
    "email_like",
    "url_no_creds",
    "iban_like",
    "aws_resource_id",
    "math",
]


# ----------------------------------------------------------------------------------------------
# assembly
# ----------------------------------------------------------------------------------------------


def render(parts: list) -> tuple[str, list]:
    text, spans, pos = [], [], 0
    for p in parts:
        if isinstance(p, S):
            spans.append({"start": pos, "end": pos + len(p.value), "kind": p.kind, "_v": p.value})
            text.append(p.value)
            pos += len(p.value)
        else:
            text.append(p)
            pos += len(p)
    out = "".join(text)
    for s in spans:
        assert out[s["start"] : s["end"]] == s.pop("_v"), s
    return out, spans


# kinds recognisable without any surrounding context (used for values at the very start of a note)
STANDALONE = {
    "anthropic_api_key",
    "openai_api_key",
    "aws_access_key_id",
    "google_api_key",
    "azure_connection_string",
    "github_token",
    "gitlab_token",
    "slack_token",
    "slack_webhook",
    "stripe_key",
    "twilio_account_sid",
    "sendgrid_api_key",
    "pypi_token",
    "jwt",
    "private_key",
    "email",
    "credit_card",
    "iban",
    "ip",
}


def unfence(parts: list) -> list:
    if parts and isinstance(parts[0], str) and parts[0].startswith("```") and parts[-1] == "\n```\n":
        return parts[1:-1]
    return parts


def build_note(r: Random, kinds: list, neg_types: list) -> tuple[str, list]:
    flavour = r.choice(FLAVOURS)
    blocks: list[list] = [[bullets(r, r.randint(1, 4))]]
    if r.random() < 0.5:
        blocks.append([filler(r) + " " + filler(r) + "\n"])
    for k in kinds:
        blocks.append(payload(r, k))
    for t in neg_types:
        blocks.append([neg_block(r, t)])
    r.shuffle(blocks)
    parts: list = []
    start_bare = bool(kinds) and kinds[0] in STANDALONE and r.random() < 0.12  # value is the note's first char
    if not start_bare:
        parts += [header(r, flavour), "\n", filler(r), "\n\n"]
    for b in blocks:
        parts += b
        if not (isinstance(b[-1], str) and b[-1].endswith("\n")):
            parts.append("\n")
        parts.append("\n")
    if kinds and r.random() < 0.07:  # value is the note's last char (no trailing newline)
        parts += [f"{r.choice(['Next', 'TODO', 'Follow-up'])}: {filler(r)}\n\n"]
        tail = unfence(payload(r, kinds[0]))
        while isinstance(tail[-1], str):
            tail.pop()
        parts += tail
    else:
        parts.append(filler(r) + "\n")
    if start_bare:
        lead = unfence(payload(r, kinds[0]))
        while isinstance(lead[0], str):
            lead.pop(0)
        first_line: list = []  # keep only the rest of the value's line
        for x in lead:
            if isinstance(x, str) and "\n" in x:
                first_line.append(x.split("\n", 1)[0])
                break
            first_line.append(x)
        parts = first_line + ["\n\n"] + parts
    return render(parts)


def category_of(kind: str) -> str:
    if kind == "ip":
        return "ip:ip"
    return ("pii:" if kind in PERSONAL_KINDS else "secret:") + kind


def generate(seed: int = SEED) -> list[dict]:
    r = Random(seed)
    notes = []
    for i in range(N_POSITIVE):
        main = ALL_KINDS[i % len(ALL_KINDS)]
        kinds = [main]
        while r.random() < 0.45 and len(kinds) < 4:
            kinds.append(r.choice(ALL_KINDS))
        negs = [r.choice(NEG_TYPES) for _ in range(r.choice([0, 0, 1, 1, 2]))]
        text, spans = build_note(r, kinds, negs)
        assert spans, (i, kinds)
        notes.append({"text": text, "spans": spans, "category": category_of(main)})
    for i in range(N_NEGATIVE):
        main = NEG_TYPES[i % len(NEG_TYPES)]
        negs = [main] + [r.choice(NEG_TYPES) for _ in range(r.choice([0, 1, 1, 2, 3]))]
        text, spans = build_note(r, [], negs)
        assert not spans
        notes.append({"text": text, "spans": [], "category": "negative:" + main})
    r.shuffle(notes)
    out = []
    for n, note in enumerate(notes, 1):
        note["spans"].sort(key=lambda s: s["start"])
        out.append({"id": f"h{n:04d}", "text": note["text"], "spans": note["spans"], "category": note["category"]})
    validate(out)
    return out


def validate(notes: list[dict]) -> None:
    counts = collections.Counter(s["kind"] for n in notes for s in n["spans"])
    for kind in ALL_KINDS:
        assert counts[kind] >= 40, (kind, counts[kind])
    assert set(counts) <= set(ALL_KINDS), set(counts) - set(ALL_KINDS)
    for n in notes:
        prev_end = 0
        for s in n["spans"]:
            assert 0 <= s["start"] < s["end"] <= len(n["text"])
            assert s["start"] >= prev_end, ("overlapping spans", n["id"])
            prev_end = s["end"]
            v = n["text"][s["start"] : s["end"]]
            assert v == v.strip(), (n["id"], v)
            if s["kind"] == "credit_card":
                assert luhn_ok(v.replace(" ", "").replace("-", ""))
            if s["kind"] == "iban":
                assert iban_valid(v)
            if s["kind"] == "github_token" and v[:4] in ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"):
                assert len(v) == 40 and b62(zlib.crc32(v[4:34].encode()), 6) == v[34:]
            if s["kind"] == "aws_access_key_id":
                assert len(v) == 20
            if s["kind"] == "aws_secret_access_key":
                assert len(v) == 40
            if s["kind"] == "pypi_token":
                assert v.startswith("pypi-AgEIcHlwaS5vcmc"), v
            if s["kind"] == "ip":
                ipaddress.ip_address(v)
    assert len({n["id"] for n in notes}) == len(notes)


def dumps(notes: list[dict]) -> str:
    return "".join(json.dumps(n, ensure_ascii=False) + "\n" for n in notes)


def stats(notes: list[dict]) -> str:
    pos = [n for n in notes if n["spans"]]
    counts = collections.Counter(s["kind"] for n in notes for s in n["spans"])
    negcats = collections.Counter(n["category"] for n in notes if not n["spans"])
    size = sum(len(n["text"].encode()) for n in notes)
    lines = [
        f"notes: {len(notes)}  positive: {len(pos)} ({len(pos) / len(notes):.1%})  negative: {len(notes) - len(pos)}",
        f"labelled spans: {sum(counts.values())}  text: {size / 1e6:.2f} MB (UTF-8), mean note {size / len(notes):.0f} B",
        "spans per kind: " + ", ".join(f"{k} {counts[k]}" for k in ALL_KINDS),
        "negative notes by main look-alike: "
        + ", ".join(f"{k.split(':', 1)[1]} {v}" for k, v in sorted(negcats.items())),
    ]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--check", action="store_true", help="fail if the file on disk differs from a fresh generation")
    ap.add_argument("--stats", action="store_true", help="print statistics, write nothing")
    a = ap.parse_args()
    notes = generate(a.seed)
    data = dumps(notes)
    if a.check:
        same = a.out.exists() and a.out.read_text(encoding="utf-8") == data
        print("up to date" if same else f"{a.out} differs from a fresh generation")
        return 0 if same else 1
    if not a.stats:
        a.out.write_text(data, encoding="utf-8")
        print(f"wrote {a.out}")
    print(stats(notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
