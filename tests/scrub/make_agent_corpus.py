#!/usr/bin/env python
"""Generate ``tests/scrub/agent_corpus.jsonl``: notes of the kind agents write, labelled, for the scrubber.

The second measurement corpus (the first is ``heldout_corpus.jsonl``). It is mostly **benign** notes
(support tickets, code reviews, runbooks, meeting notes, changelogs, infrastructure and incident notes,
session recaps, user preferences, payments and analytics notes) full of the harmless text agents write:
four-part version numbers, build numbers, ports, hashes, ids, published test card numbers, masked values,
placeholders, private and documentation addresses, and prose after a password label. Its labelled notes
hold the spellings people really use: card numbers, IBANs, SSNs and phone numbers with no-break spaces,
thin spaces or non-breaking hyphens; zero-width characters inside credentials; percent-encoded and
non-ASCII email addresses; lower-case IBANs and IBANs with dashes; PEM blocks with lower-case or irregular
headers and bare PEM bodies; OpenSSH, PuTTY, age and JWK private keys; AWS secrets whose AWS context comes
after them; card numbers after order or reference wording.

The templates were written from how such notes read, not from the scrubber's rules (see README.md for
what that does and does not guarantee). Every credential and every personal value is fake and random,
with its real shape (prefixes, lengths, charsets, Luhn, IBAN mod 97, GitHub CRC32, DER prefixes).

    python tests/scrub/make_agent_corpus.py            # rewrite agent_corpus.jsonl, print statistics
    python tests/scrub/make_agent_corpus.py --check    # is the committed file what this produces?
    python tests/scrub/make_agent_corpus.py --stats    # statistics only

Format: as ``heldout_corpus.jsonl``; a span may also carry ``"form"``, the spelling it tests.
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

SEED = 20251202
N_BENIGN = 1600
N_LABELLED = 1000
OUT = Path(__file__).with_name("agent_corpus.jsonl")

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

ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "-_"
B64 = ALNUM + "+/"
HEX = "0123456789abcdef"
B62 = string.digits + string.ascii_uppercase + string.ascii_lowercase
BASE32 = string.ascii_uppercase + "234567"
BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

NBSP, NNBSP, THIN, NBHY = "\u00a0", "\u202f", "\u2009", "\u2011"
ZERO_WIDTH = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff"]


class S:
    """A labelled value inside a note (``form``: the spelling it tests, if any)."""

    __slots__ = ("value", "kind", "form")

    def __init__(self, value: str, kind: str, form: str = "") -> None:
        self.value, self.kind, self.form = value, kind, form


# -- vocabulary ------------------------------------------------------------------------------------

PEOPLE = [
    "Priya", "Marcus", "Ingrid", "Kofi", "Mei", "Tomás", "Leila", "Sven", "Aiko", "Dana", "Jonas", "Rosa",
    "Yusuf", "Chloe", "Arjun", "Maren", "Omar", "Zoë", "Hugo", "Linnea", "Mateo", "Fatima", "Wei", "Elif",
    "Nikolai", "Beatriz", "Theo", "Uma", "Samir", "Hannah",
]  # fmt: skip
SURNAMES = [
    "Okafor", "Lindqvist", "Haddad", "Nakamura", "Brennan", "Costa", "Fischer", "Novak", "Moreau", "Singh",
    "Alvarez", "Kowalski", "Dubois", "Chen", "Rossi", "Andersen", "Yilmaz", "Mensah", "Petrov", "Walsh",
]  # fmt: skip
CUSTOMERS = [
    "Northwind Traders", "Bluefin Logistics", "Helios Health", "Kestrel Bank", "Orchard Foods", "Vantage Media",
    "Pioneer Freight", "Lumen Energy", "Granite Insurance", "Sable Studios", "Tidewater Labs", "Copperline",
    "Mosaic Retail", "Quarry Analytics", "Juniper Schools", "Harbor & Vale",
]  # fmt: skip
SERVICES = [
    "checkout-api", "auth-service", "billing-worker", "search-indexer", "notifications", "gateway", "ledger",
    "media-transcoder", "report-builder", "inventory-sync", "user-profile", "webhook-relay", "scheduler",
    "feature-flags", "export-jobs", "session-store",
]  # fmt: skip
TEAMS = ["platform", "payments", "growth", "infra", "data", "mobile", "support tooling", "security", "search"]
REPOS = ["acme/webapp", "acme/infra", "acme/billing", "acme/mobile-app", "acme/data-pipelines", "acme/docs"]
FILES = [
    "src/checkout/cart.ts", "app/models/invoice.rb", "internal/auth/session.go", "pkg/ledger/post.go",
    "services/billing/retry.py", "web/src/components/PriceTag.tsx", "deploy/helm/values.yaml",
    "terraform/modules/rds/main.tf", "scripts/backfill_orders.py", "lib/notifications/digest.ex",
    "src/main/java/com/acme/search/Indexer.java", "migrations/20250311_add_refunds.sql", ".github/workflows/ci.yml",
    "docker/Dockerfile", "src/utils/retry.rs", "config/settings/production.py",
]  # fmt: skip
TOOLS = [
    ("PostgreSQL", 3), ("Redis", 3), ("nginx", 3), ("Node.js", 3), ("Python", 3), ("Go", 3), ("Kubernetes", 3),
    ("Terraform", 3), ("Elasticsearch", 3), ("Kafka", 3), ("RabbitMQ", 3), ("Grafana", 3), ("Envoy", 3),
    ("Datadog Agent", 3), ("OpenSSL", 3), ("Java", 3),
]  # fmt: skip
MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
REGIONS = ["us-east-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-southeast-2", "ca-central-1"]
ENVS = ["prod", "staging", "dev", "qa", "sandbox", "perf"]

# Card numbers payment processors publish for testing (Stripe's and Visa's documentation, and the
# usual gateway test numbers): harmless by definition.
TEST_PANS = [
    "4242424242424242", "4000056655665556", "5555555555554444", "2223003122003222", "5200828282828210",
    "5105105105105100", "378282246310005", "371449635398431", "6011111111111117", "6011000990139424",
    "3056930009020004", "36227206271667", "3566002020360505", "6200000000000005", "4000002500003155",
    "4000000000000002", "4000000000009995", "4000000000000077", "4000000000003220", "4111111111111111",
    "4012888888881881", "4222222222222", "5454545454545454", "4005519200000004", "4009348888881881",
    "4012000033330026", "4217651111111119", "4500600000000061", "2223000048400011", "6304000000000000",
    "4000000000000069", "4000000000000127", "4000000000000119", "4000000000000341",
]  # fmt: skip


def rs(r: Random, alphabet: str, n: int) -> str:
    return "".join(r.choice(alphabet) for _ in range(n))


def person(r: Random) -> str:
    return f"{r.choice(PEOPLE)} {r.choice(SURNAMES)}"


def first(r: Random) -> str:
    return r.choice(PEOPLE)


def iso_date(r: Random, lo: int = 2023, hi: int = 2026) -> str:
    return f"{r.randint(lo, hi)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}"


def clock(r: Random) -> str:
    return f"{r.randint(0, 23):02d}:{r.choice([0, 5, 10, 15, 20, 30, 40, 45, 50]):02d}"


def timestamp(r: Random) -> str:
    return f"{iso_date(r)}T{clock(r)}:{r.randint(0, 59):02d}.{r.randint(0, 999):03d}Z"


# -- harmless values -------------------------------------------------------------------------------


def semver(r: Random) -> str:
    return f"{r.randint(0, 19)}.{r.randint(0, 40)}.{r.randint(0, 30)}"


def version4(r: Random) -> str:
    """Four-part build versions; many of them would also be valid public IPv4 addresses."""
    shape = r.random()
    if shape < 0.5:
        return f"{r.randint(1, 12)}.{r.randint(0, 9)}.{r.randint(0, 60)}.{r.randint(1, 250)}"
    if shape < 0.75:
        return f"{r.randint(1, 9)}.{r.randint(0, 20)}.{r.randint(0, 9)}.{r.randint(100, 255)}"
    return f"{r.randint(10, 130)}.0.{r.randint(1000, 20000)}.{r.randint(1, 300)}"


def git_sha(r: Random, n: int = 40) -> str:
    return rs(r, HEX, n)


def uuid(r: Random) -> str:
    h = rs(r, HEX, 32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{r.choice('89ab')}{h[17:20]}-{h[20:]}"


def ulid(r: Random) -> str:
    return "01" + rs(r, CROCKFORD, 24)


def private_ip(r: Random) -> str:
    c = r.random()
    if c < 0.4:
        return f"10.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)}"
    if c < 0.6:
        return f"172.{r.randint(16, 31)}.{r.randint(0, 255)}.{r.randint(1, 254)}"
    if c < 0.8:
        return f"192.168.{r.randint(0, 255)}.{r.randint(1, 254)}"
    if c < 0.9:
        return r.choice(["192.0.2", "198.51.100", "203.0.113"]) + f".{r.randint(1, 254)}"
    return f"100.{r.randint(64, 127)}.{r.randint(0, 255)}.{r.randint(1, 254)}"


def private_ip6(r: Random) -> str:
    c = r.random()
    if c < 0.4:
        return f"fd{rs(r, HEX, 2)}:{rs(r, HEX, 4)}:{rs(r, HEX, 4)}::{rs(r, HEX, 2)}"
    if c < 0.7:
        return f"2001:db8:{rs(r, HEX, 4)}::{r.randint(1, 99)}"
    return f"fe80::{rs(r, HEX, 4)}:{rs(r, HEX, 4)}:{rs(r, HEX, 4)}:{rs(r, HEX, 4)}"


def aws_resource(r: Random) -> str:
    return r.choice(
        [
            f"i-0{rs(r, HEX, 16)}",
            f"vpc-0{rs(r, HEX, 16)}",
            f"subnet-0{rs(r, HEX, 16)}",
            f"sg-0{rs(r, HEX, 16)}",
            f"ami-0{rs(r, HEX, 16)}",
            f"vol-0{rs(r, HEX, 16)}",
            f"eni-0{rs(r, HEX, 16)}",
        ]
    )


def account_id(r: Random) -> str:
    return str(r.randint(100000000000, 999999999999))


def arn(r: Random) -> str:
    return r.choice(
        [
            f"arn:aws:iam::{account_id(r)}:role/{r.choice(SERVICES)}-{r.choice(ENVS)}",
            f"arn:aws:s3:::acme-{r.choice(ENVS)}-{r.choice(['exports', 'backups', 'assets', 'logs'])}",
            f"arn:aws:sqs:{r.choice(REGIONS)}:{account_id(r)}:{r.choice(SERVICES)}-queue",
            f"arn:aws:lambda:{r.choice(REGIONS)}:{account_id(r)}:function:{r.choice(SERVICES)}",
            f"arn:aws:kms:{r.choice(REGIONS)}:{account_id(r)}:key/{uuid(r)}",
        ]
    )


def pod(r: Random) -> str:
    return (
        f"{r.choice(SERVICES)}-{rs(r, '0123456789bcdfghjklmnpqrstvwxz', 10)}-{rs(r, 'bcdfghjklmnpqrstvwxz2456789', 5)}"
    )


def digest(r: Random) -> str:
    return "sha256:" + rs(r, HEX, 64)


def integrity(r: Random) -> str:
    return "sha512-" + base64.b64encode(bytes(r.getrandbits(8) for _ in range(64))).decode()


def ticket(r: Random) -> str:
    return r.choice(
        [
            f"{r.choice(['PAY', 'OPS', 'SUP', 'PLAT', 'DATA', 'MOB', 'SEC'])}-{r.randint(100, 9999)}",
            f"#{r.randint(1000, 99999)}",
            f"ZD-{r.randint(100000, 2999999)}",
            f"INC{r.randint(1000000, 9999999)}",
        ]
    )


def order_no(r: Random) -> str:
    return r.choice(
        [
            f"ORD-{r.randint(2023, 2026)}-{r.randint(100000, 999999)}",
            f"#{r.randint(100000, 99999999)}",
            f"{r.randint(10**11, 10**12 - 1)}",
            f"SO{r.randint(1000000, 9999999)}",
            f"INV-{r.randint(10000, 99999)}",
            f"RMA-{r.randint(1000, 99999)}",
        ]
    )


def money(r: Random) -> str:
    return r.choice(["$", "€", "£"]) + f"{r.randint(1, 4999)}.{r.randint(0, 99):02d}"


def port(r: Random) -> int:
    return r.choice([22, 80, 443, 3000, 5432, 5672, 6379, 8080, 8443, 9090, 9200, 9092, 11211, 27017, 15672, 8125])


def test_pan(r: Random) -> str:
    pan = r.choice(TEST_PANS)
    style = r.random()
    if style < 0.5 and len(pan) == 16:
        return " ".join(pan[i : i + 4] for i in range(0, 16, 4))
    if style < 0.6 and len(pan) == 16:
        return "-".join(pan[i : i + 4] for i in range(0, 16, 4))
    return pan


def ssh_pubkey(r: Random) -> str:
    body = "AAAAC3NzaC1lZDI1NTE5AAAAI" + rs(r, B64, 43)
    return f"ssh-ed25519 {body} {r.choice(PEOPLE).lower()}@{r.choice(['laptop', 'workstation', 'build-01'])}"


# -- secret and personal values ------------------------------------------------------------------------


def b62(n: int, width: int) -> str:
    out = ""
    while n:
        n, k = divmod(n, 62)
        out = B62[k] + out
    return out.rjust(width, "0")


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


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


def gen_card_digits(r: Random) -> str:
    while True:
        brand = r.random()
        if brand < 0.45:
            partial, n = "4" + rs(r, string.digits, 14), 16
        elif brand < 0.8:
            partial, n = str(r.randint(51, 55)) + rs(r, string.digits, 13), 16
        elif brand < 0.9:
            partial, n = r.choice(["34", "37"]) + rs(r, string.digits, 12), 15
        else:
            partial, n = "6011" + rs(r, string.digits, 11), 16
        pan = partial + luhn_digit(partial)
        if len(pan) == n and pan not in TEST_PANS and len(set(pan)) > 4:
            return pan


def group_card(pan: str, sep: str) -> str:
    if len(pan) == 15:
        return sep.join((pan[:4], pan[4:10], pan[10:]))
    return sep.join(pan[i : i + 4] for i in range(0, 16, 4))


IBAN_SHAPES = {  # country: (bban length, alphabet of the bban)
    "DE": (18, string.digits),
    "FR": (23, string.digits),
    "GB": (18, None),
    "NL": (14, None),
    "ES": (20, string.digits),
    "IT": (23, None),
    "BE": (12, string.digits),
    "AT": (16, string.digits),
    "CH": (17, string.digits),
    "SE": (20, string.digits),
    "PL": (24, string.digits),
    "IE": (18, None),
}


def iban_check(country: str, bban: str) -> str:
    rearranged = bban + country + "00"
    number = int("".join(str(int(c, 36)) for c in rearranged))
    return f"{98 - number % 97:02d}"


def iban_ok(value: str) -> bool:
    compact = "".join(c for c in value if c.isalnum()).upper()
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


def gen_iban_compact(r: Random) -> str:
    country = r.choice(sorted(IBAN_SHAPES))
    n, alphabet = IBAN_SHAPES[country]
    if alphabet is None:  # bank code letters, then digits
        letters = 4 if country in ("GB", "NL", "IE") else 1
        bban = rs(r, string.ascii_uppercase, letters) + rs(r, string.digits, n - letters)
    else:
        bban = rs(r, alphabet, n)
    return country + iban_check(country, bban) + bban


def spaced(value: str, sep: str, size: int = 4) -> str:
    return sep.join(value[i : i + size] for i in range(0, len(value), size))


def gen_ssn(r: Random) -> tuple[str, str, str]:
    while True:
        area = r.randint(1, 899)
        if area != 666:
            break
    return f"{area:03d}", f"{r.randint(1, 99):02d}", f"{r.randint(1, 9999):04d}"


def gen_public_ip(r: Random) -> str:
    while True:
        a = r.choice([23, 31, 37, 45, 51, 62, 77, 81, 89, 94, 104, 109, 146, 151, 176, 185, 188, 195, 213, 217])
        ip = f"{a}.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)}"
        if ipaddress.ip_address(ip).is_global:
            return ip


def gen_public_ip6(r: Random) -> str:
    return f"2a0{r.randint(0, 9)}:{rs(r, HEX, 4)}:{rs(r, HEX, 4)}:{rs(r, HEX, 4)}::{rs(r, HEX, 3)}"


EMAIL_DOMAINS = [
    "northwind-traders.com", "bluefin-logistics.io", "helioshealth.org", "kestrelbank.co.uk", "orchardfoods.de",
    "vantagemedia.fr", "gmail.com", "outlook.com", "proton.me", "fastmail.fm", "sable-studios.net",
]  # fmt: skip
IDN_EMAILS = [
    ("josé.garcía", "correo-andino.es"), ("zoë.dubois", "librairie-café.fr"), ("åsa.lindqvist", "företaget.se"),
    ("jürgen.weiß", "bücherstube-köln.de"), ("ioana.ștefan", "firmă-exemplu.ro"), ("müller", "müller-bau.de"),
    ("łukasz.nowak", "przykład-sklep.pl"), ("søren", "kødbyen.dk"), ("山田太郎", "会社.jp"),
    ("ivan.petrov", "почта.рф"), ("nikos", "εταιρεία.gr"), ("ramón.núñez", "agencia.mx"),
]  # fmt: skip


def gen_email(r: Random) -> str:
    local = r.choice(
        [
            f"{r.choice(PEOPLE).lower()}.{r.choice(SURNAMES).lower()}",
            f"{r.choice(PEOPLE)[0].lower()}{r.choice(SURNAMES).lower()}",
            f"{r.choice(PEOPLE).lower()}{r.randint(1, 99)}",
            f"{r.choice(SURNAMES).lower()}+{r.choice(['billing', 'alerts', 'news'])}",
        ]
    )
    local = local.replace("é", "e").replace("ë", "e").replace("á", "a").replace("ö", "o").replace("ø", "o")
    return f"{local}@{r.choice(EMAIL_DOMAINS)}"


def gen_phone(r: Random, sep: str = " ") -> str:
    c = r.randint(0, 5)
    if c == 0:
        return f"+33{sep}{r.choice('67')}{sep}" + sep.join(f"{r.randint(10, 99)}" for _ in range(4))
    if c == 1:
        return "0" + r.choice("67") + sep + sep.join(f"{r.randint(10, 99)}" for _ in range(4))
    if c == 2:
        return f"+49{sep}{r.choice(['30', '40', '89', '151', '172'])}{sep}{r.randint(1000000, 99999999)}"
    if c == 3:
        return f"+44{sep}20{sep}{r.randint(7000, 8999)}{sep}{r.randint(1000, 9999)}"
    if c == 4:
        dash = sep if sep in ("-", NBHY) else "-"
        return f"({r.randint(201, 989)}){sep}{r.randint(201, 989)}{dash}{r.randint(1000, 9999)}"
    d = sep if sep in ("-", NBHY) else "-"
    return f"{r.randint(201, 989)}{d}{r.randint(201, 989)}{d}{r.randint(1000, 9999)}"


def gen_dob(r: Random) -> str:
    y, m, d = r.randint(1940, 2006), r.randint(1, 12), r.randint(1, 28)
    full = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
            "November", "December"]  # fmt: skip
    return r.choice(
        [
            f"{y}-{m:02d}-{d:02d}",
            f"{m:02d}/{d:02d}/{y}",
            f"{d:02d}.{m:02d}.{y}",
            f"{d} {full[m - 1]} {y}",
            f"{full[m - 1]} {d}, {y}",
        ]  # fmt: skip
    )


def gen_anthropic(r: Random) -> str:
    return f"sk-ant-{r.choice(['api03', 'api03', 'admin01'])}-" + rs(r, URLSAFE, 93) + "AA"


def gen_openai(r: Random) -> str:
    c = r.random()
    if c < 0.4:
        return "sk-proj-" + rs(r, URLSAFE, 156)
    if c < 0.7:
        return "sk-" + rs(r, ALNUM, 48)
    return "sk-svcacct-" + rs(r, URLSAFE, 120)


def gen_aws_id(r: Random) -> str:
    return r.choice(["AKIA", "AKIA", "ASIA"]) + rs(r, BASE32, 16)


def gen_aws_secret(r: Random) -> str:
    return rs(r, B64, 40)


def gen_google(r: Random) -> str:
    return "AIza" + rs(r, URLSAFE, 35)


def gen_github(r: Random) -> str:
    if r.random() < 0.3:
        return "github_pat_" + rs(r, ALNUM, 22) + "_" + rs(r, ALNUM, 59)
    body = rs(r, ALNUM, 30)
    return r.choice(["ghp_", "gho_", "ghs_", "ghu_"]) + body + b62(zlib.crc32(body.encode()), 6)


def gen_gitlab(r: Random) -> str:
    return r.choice(["glpat-", "glpat-", "gldt-", "glrt-"]) + rs(r, URLSAFE, 20)


def gen_slack_token(r: Random) -> str:
    p = r.choice(["xoxb", "xoxp", "xoxb"])
    return f"{p}-{r.randint(10**10, 10**13)}-{r.randint(10**10, 10**13)}-" + rs(r, ALNUM, 24)


def gen_slack_webhook(r: Random) -> str:
    return (
        "https://hooks.slack.com/services/T"
        + rs(r, string.ascii_uppercase + string.digits, 8)
        + "/B"
        + rs(r, string.ascii_uppercase + string.digits, 10)
        + "/"
        + rs(r, ALNUM, 24)
    )


def gen_stripe(r: Random) -> str:
    c = r.random()
    if c < 0.5:
        return "sk_live_" + rs(r, ALNUM, r.choice([24, 99]))
    if c < 0.8:
        return "rk_live_" + rs(r, ALNUM, r.choice([24, 99]))
    return "whsec_" + rs(r, ALNUM, 32)


def gen_sendgrid(r: Random) -> str:
    return "SG." + rs(r, URLSAFE, 22) + "." + rs(r, URLSAFE, 43)


def gen_npm(r: Random) -> str:
    return "npm_" + rs(r, ALNUM, 36)


def gen_pypi(r: Random) -> str:
    return "pypi-AgEIcHlwaS5vcmc" + rs(r, URLSAFE, 140)


def gen_jwt(r: Random) -> str:
    head = r.choice(['{"alg":"HS256","typ":"JWT"}', '{"alg":"RS256","kid":"' + rs(r, HEX, 12) + '","typ":"JWT"}'])
    payload = json.dumps(
        {"sub": uuid(r), "iat": r.randint(1_700_000_000, 1_760_000_000), "scope": r.choice(["read", "admin", "api"])},
        separators=(",", ":"),
    )
    sig = b64url(bytes(r.getrandbits(8) for _ in range(r.choice([32, 256]))))
    return f"{b64url(head.encode())}.{b64url(payload.encode())}.{sig}"


def gen_password(r: Random) -> str:
    return r.choice(
        [
            rs(r, ALNUM, 3).capitalize() + r.choice(["!", "#", "$", "%", "&"]) + rs(r, ALNUM + "!@#%^*", 10),
            r.choice(["Harbor", "Copper", "Maple", "Falcon", "Winter", "Orbit"])
            + str(r.randint(10, 9999))
            + r.choice(["!", "#", "?", "$"]),
            rs(r, ALNUM + "-_!.", r.randint(14, 24)),
        ]
    )


def gen_generic(r: Random) -> str:
    return r.choice(
        [rs(r, HEX, 64), rs(r, ALNUM, 32), base64.b64encode(bytes(r.getrandbits(8) for _ in range(32))).decode()]
    )


def gen_bearer(r: Random) -> str:
    return r.choice(["ya29." + rs(r, URLSAFE, 120), rs(r, ALNUM, 40), "pat_" + rs(r, URLSAFE, 48)])


def der_body(r: Random, shape: str) -> bytes:
    """The start of a private key's DER encoding (real ASN.1 headers), the rest random."""
    rand = bytes(r.getrandbits(8) for _ in range(1300))
    if shape == "pkcs1":
        return bytes.fromhex("308204a40201000282010100") + rand[:1180]
    if shape == "pkcs8":
        return (
            bytes.fromhex("308204be020100300d06092a864886f70d0101010500048204a8308204a40201000282010100") + rand[:1180]
        )
    if shape == "ec":
        return (
            bytes.fromhex("30770201010420")
            + rand[:32]
            + bytes.fromhex("a00a06082a8648ce3d030107a144034200")
            + rand[32:97]
        )
    return bytes.fromhex("302e020100300506032b657004220420") + rand[:32]  # ed25519 (PKCS#8)


def pem_lines(data: bytes, width: int = 64) -> list[str]:
    b = base64.b64encode(data).decode()
    return [b[i : i + width] for i in range(0, len(b), width)]


def openssh_body(r: Random) -> bytes:
    return (
        b"openssh-key-v1\x00"
        + b"\x00\x00\x00\x04none\x00\x00\x00\x04none"
        + bytes(r.getrandbits(8) for _ in range(380))
    )


def gen_pem(r: Random, form: str) -> str:
    if form == "openssh":
        label, data = "OPENSSH PRIVATE KEY", openssh_body(r)
        head, tail = f"-----BEGIN {label}-----", f"-----END {label}-----"
        return "\n".join([head, *pem_lines(data, 70), tail])
    shape = r.choice(["pkcs1", "pkcs8", "ec", "ed25519"])
    label = {"pkcs1": "RSA PRIVATE KEY", "pkcs8": "PRIVATE KEY", "ec": "EC PRIVATE KEY", "ed25519": "PRIVATE KEY"}[
        shape
    ]
    body = pem_lines(der_body(r, shape))
    if form == "pem_lower":
        head, tail = f"-----begin {label.lower()}-----", f"-----end {label.lower()}-----"
    elif form == "pem_irregular":
        dashes = r.choice(["----", "------", "-----"])
        spaced_label = label.replace(" ", r.choice(["  ", " "]))
        head = f"{dashes}BEGIN {spaced_label}{dashes}" if r.random() < 0.5 else f"{dashes} BEGIN {label} {dashes}"
        tail = f"{dashes}END {spaced_label}{dashes}"
    elif form == "pem_bare":
        return "\n".join(body)
    else:
        head, tail = f"-----BEGIN {label}-----", f"-----END {label}-----"
    return "\n".join([head, *body, tail])


def gen_ppk(r: Random) -> str:
    pub = "AAAAC3NzaC1lZDI1NTE5AAAAI" + rs(r, B64, 43)
    priv = base64.b64encode(b"\x00\x00\x00\x20" + bytes(r.getrandbits(8) for _ in range(32))).decode()
    return "\n".join(
        [
            f"PuTTY-User-Key-File-{r.choice([2, 3])}: ssh-ed25519",
            "Encryption: none",
            f"Comment: eddsa-key-{iso_date(r).replace('-', '')}",
            "Public-Lines: 2",
            pub[:64],
            pub[64:],
            "Private-Lines: 1",
            priv,
            f"Private-MAC: {rs(r, HEX, 64)}",
        ]
    )


def gen_age(r: Random) -> str:
    return "AGE-SECRET-KEY-1" + rs(r, BECH32, 58)


def with_zero_width(r: Random, value: str, start: int) -> str:
    """``value`` with one zero-width character inside it, after its first ``start`` characters."""
    i = r.randint(start, len(value) - 2)
    return value[:i] + r.choice(ZERO_WIDTH) + value[i:]


# -- prose of benign notes -----------------------------------------------------------------------------


def sentence_bank(r: Random) -> list[str]:
    """Sentences that fit any kind of note."""
    svc = r.choice(SERVICES)
    return [
        f"{first(r)} owns the follow-up; next check-in is {r.choice(DAYS)} at {clock(r)}.",
        f"p95 latency for {svc} went from {r.randint(200, 2000)} ms to {r.randint(40, 400)} ms after the change.",
        f"Error rate is back under {r.randint(1, 9)}.{r.randint(0, 9)}% since {clock(r)} UTC.",
        f"The {r.choice(TEAMS)} team agreed to revisit this after the {r.choice(MONTHS)} freeze.",
        f"Keep the retry budget at {r.randint(2, 6)} attempts with jittered backoff (base {r.randint(50, 500)} ms).",
        f"{svc} runs {r.randint(2, 24)} replicas in {r.choice(REGIONS)}; autoscaling caps at {r.randint(30, 80)}.",
        f"Dashboard: https://grafana.internal.acme.io/d/{rs(r, ALNUM, 9)}/{svc}?orgId=1&from=now-6h",
        f"Docs: https://wiki.acme.io/spaces/{r.choice(TEAMS).upper().replace(' ', '')}/pages/{r.randint(100000, 9999999)}",
        f"Budget for the quarter is {money(r)}k; we have used about {r.randint(10, 90)}% so far.",
        f"Logs are kept {r.choice([7, 14, 30, 90])} days in the {r.choice(ENVS)} cluster.",
        f"Queue depth peaked at {r.randint(1000, 900000):,} messages around {clock(r)}.",
        f"Cache hit ratio is {r.randint(60, 99)}.{r.randint(0, 9)}%; eviction policy allkeys-lru.",
        f"The nightly job finished in {r.randint(3, 59)} min {r.randint(0, 59)} s (previous run {r.randint(3, 59)} min).",
    ]


def render_blocks(r: Random, title: str, blocks: list[list]) -> list:
    """A markdown note: title, then the blocks (each a list of parts), with a blank line between."""
    parts: list = [f"{title}\n\n"]
    for b in blocks:
        parts += b
        last = b[-1] if b else "\n"
        if not (isinstance(last, str) and last.endswith("\n")):
            parts.append("\n")
        parts.append("\n")
    return parts


def bullets(items: list[str]) -> str:
    return "".join(f"- {x}\n" for x in items)


def support_ticket(r: Random) -> list[list]:
    cust = r.choice(CUSTOMERS)
    t = ticket(r)
    lines = [
        f"Customer: {cust} ({r.choice(['Enterprise', 'Business', 'Pro', 'Starter'])} plan)",
        f"Opened {iso_date(r)} by {person(r)}; priority {r.choice(['P1', 'P2', 'P3', 'P4'])}",
        f"Order {order_no(r)} shows as paid but the shipment never left the warehouse.",
        f"Refund of {money(r)} issued against invoice {order_no(r)}; customer notified.",
        f"They are on app version {semver(r)} (iOS) and {semver(r)} (Android).",
        f"Customer's card ending in {r.randint(1000, 9999)} was declined with code {r.choice(['05', '51', '54', '61'])}.",
        f"Tracking number {r.randint(10**11, 10**12 - 1)} ({r.choice(['UPS', 'DHL', 'FedEx'])}), last scan {iso_date(r)}.",
        f"Reproduced on staging with the test card {test_pan(r)}; the 3-D Secure popup never loads.",
        f"Linked the duplicate tickets {ticket(r)} and {ticket(r)}.",
        f"Account id {r.randint(100000, 9999999)}, workspace {uuid(r)}.",
        f"RMA {order_no(r)} approved; return label expires {iso_date(r)}.",
        f"Customer asked us to call back on {r.choice(DAYS)}; {first(r)} has the phone number in the CRM record.",
        f"Browser: Chrome {r.randint(110, 131)}.0.{r.randint(5000, 6999)}.{r.randint(10, 200)} on Windows 11 build 10.0.{r.randint(22000, 26100)}.{r.randint(100, 4000)}.",
        f"Their admin contact is listed in Salesforce (account {rs(r, ALNUM, 15)}).",
        "Password reset link re-sent; they confirmed they can log in now.",
        f"Case {r.randint(1000, 9999)}-{r.randint(100, 999)}-{r.randint(1000, 9999)} escalated to tier 2.",
    ]
    r.shuffle(lines)
    blocks = [
        [
            f"**Summary:** {r.choice(['Checkout fails', 'Missing shipment', 'Double charge', 'Login loop', 'Export times out', 'Webhook not firing'])} for {cust}.\n"
        ],
        [bullets(lines[: r.randint(4, 8)])],
    ]
    if r.random() < 0.5:
        blocks.append([f"### Next steps\n\n{bullets([r.choice(sentence_bank(r)) for _ in range(r.randint(1, 3))])}"])
    return [f"# Ticket {t}: {cust}", *blocks]


def code_review(r: Random) -> list[list]:
    pr = r.randint(100, 9999)
    f1, f2 = r.sample(FILES, 2)
    lines = [
        f"`{f1}` line {r.randint(10, 900)}: the retry loop never resets `attempt` after a success.",
        f"`{f2}`: prefer `{r.choice(['Optional', 'Result', 'dataclass', 'context manager'])}` here; current code hides the error.",
        f"Commit {git_sha(r, 7)} reverts part of {git_sha(r, 7)}; squash before merging.",
        f"Base is {git_sha(r)}; rebase onto main, there is a conflict in `{r.choice(FILES)}`.",
        "The migration adds an index on `orders(customer_id, created_at)`; run it with `CONCURRENTLY`.",
        f"Tests: {r.randint(100, 3000)} passed, {r.randint(0, 5)} skipped in {r.randint(20, 400)} s.",
        f'`api_key` is read from `os.environ["{r.choice(["STRIPE_API_KEY", "OPENAI_API_KEY", "SENDGRID_API_KEY"])}"]`, good; do not log it.',
        f"Bumps {r.choice(TOOLS)[0]} from {semver(r)} to {semver(r)}; changelog has no breaking changes.",
        "The config sample uses `password: ${DB_PASSWORD}`, which is what we want in the repo.",
        f"`token_ttl_seconds` default changed from 3600 to {r.choice([900, 1800, 7200])}; call that out in the release notes.",
        f"Lockfile integrity for left-pad: {integrity(r)}",
        f"Coverage dropped from {r.randint(70, 90)}.{r.randint(0, 9)}% to {r.randint(60, 89)}.{r.randint(0, 9)}%.",
        "The `PasswordResetTokenValidator` name is fine; rename `tmp2` though.",
        f"Benchmark: {r.randint(1000, 90000):,} ops/s before, {r.randint(1000, 90000):,} ops/s after.",
        f"Nit: `max_tokens = {r.choice([1024, 2048, 4096, 8192])}` should come from settings.",
    ]
    r.shuffle(lines)
    blocks = [[f"Reviewed PR #{pr} in {r.choice(REPOS)} for {first(r)}.\n"], [bullets(lines[: r.randint(4, 8)])]]
    if r.random() < 0.4:
        lang = r.choice(["python", "go", "ts"])
        code = {
            "python": "def backoff(attempt: int) -> float:\n    return min(30.0, 0.5 * 2 ** attempt) + random.random()\n",
            "go": f"ctx, cancel := context.WithTimeout(ctx, {r.randint(2, 30)}*time.Second)\ndefer cancel()\n",
            "ts": 'const apiKey = process.env.PAYMENTS_API_KEY ?? "";\nif (!apiKey) throw new Error("missing key");\n',
        }[lang]
        blocks.append([f"```{lang}\n{code}```\n"])
    verdict = r.choice(["Approved with nits.", "Requested changes.", "Needs a second reviewer from security."])
    return [f"## Code review: PR #{pr}", *blocks, [verdict + "\n"]]


def runbook(r: Random) -> list[list]:
    svc = r.choice(SERVICES)
    ip1, ip2 = private_ip(r), private_ip(r)
    steps = [
        f"SSH to the bastion `bastion.{r.choice(ENVS)}.acme.internal` ({ip1}) and then to {ip2}.",
        f"`kubectl -n {svc} rollout restart deploy/{svc}` and watch `kubectl get pods -w`.",
        f"Check `curl -s http://{private_ip(r)}:{port(r)}/healthz` returns `ok`.",
        f"Drain the node: `kubectl drain ip-{ip2.replace('.', '-')}.{r.choice(REGIONS)}.compute.internal --ignore-daemonsets`.",
        f"Failover target is the replica in {r.choice(REGIONS)} (instance {aws_resource(r)}).",
        f"Postgres listens on {r.choice(['5432', '6432'])} (pgbouncer); max_connections = {r.choice([200, 400, 800])}.",
        f"The DB password is in Vault at `secret/data/{svc}/{r.choice(ENVS)}/db`; never paste it here.",
        f"If the disk is above {r.randint(80, 95)}%, run `journalctl --vacuum-time=3d`.",
        f"Image pinned to `registry.acme.io/{svc}@{digest(r)}`.",
        f"Helm chart {svc}-{semver(r)} (app version {semver(r)}).",
        f"Rollback: `helm rollback {svc} {r.randint(2, 90)}`.",
        f"Open port {port(r)} only to {private_ip(r)}/32 in security group {aws_resource(r)}.",
        f"Role to assume: {arn(r)}",
        f"IPv6: the service also binds [{private_ip6(r)}]:{port(r)}.",
        "password: (prompted at login)",
        f'Admin password: see the 1Password vault "{r.choice(TEAMS).title()} on-call".',
    ]
    r.shuffle(steps)
    n = r.randint(4, 8)
    numbered = "".join(f"{i}. {s}\n" for i, s in enumerate(steps[:n], 1))
    blocks = [
        [f"When {svc} {r.choice(['stops consuming', 'returns 502s', 'runs out of connections', 'lags behind'])}:\n"],
        [numbered],
    ]
    if r.random() < 0.5:
        blocks.append(
            [
                f"```sh\nexport KUBECONFIG=~/.kube/{r.choice(ENVS)}.yaml\nkubectl -n {svc} logs -l app={svc} --since=15m | grep -c ERROR\n```\n"
            ]
        )
    return [f"# Runbook: {svc}", *blocks]


def meeting_notes(r: Random) -> list[list]:
    who = ", ".join(sorted(set(first(r) for _ in range(r.randint(3, 6)))))
    items = [
        f"Decided to ship the {r.choice(['pricing page', 'SSO flow', 'bulk export', 'new onboarding', 'audit log'])} behind a flag first.",
        f"{first(r)} will draft the RFC by {iso_date(r)}.",
        f"Q{r.randint(1, 4)} target: {r.randint(90, 99)}.{r.randint(0, 9)}% availability for {r.choice(SERVICES)}.",
        f"Headcount: {r.randint(1, 4)} open roles on {r.choice(TEAMS)}.",
        f"Vendor renewal ({r.choice(['Datadog', 'PagerDuty', 'Snowflake', 'Sentry'])}) is {money(r)}k/yr, due {iso_date(r)}.",
        f"Customer {r.choice(CUSTOMERS)} wants a call about the outage on {iso_date(r)}.",
        f"Retro action from {ticket(r)}: add an alert on queue age > {r.randint(2, 30)} min.",
        f"Next meeting {r.choice(DAYS)} {clock(r)}, room {r.randint(1, 9)}.{r.randint(1, 40)}.",
        f"Demo recording: https://drive.acme.io/file/d/{rs(r, URLSAFE, 33)}/view",
        f"We keep the release train at every {r.choice(['Tuesday', 'Thursday'])}, cut at {clock(r)}.",
        f"Action: {first(r)} to rotate the staging API key after the contractor leaves (owner: security).",
        f"Ops numbers: {r.randint(10, 300)} pages last month, MTTR {r.randint(10, 200)} min.",
    ]
    r.shuffle(items)
    return [
        f"# {r.choice(['Weekly sync', 'Planning', 'Architecture review', 'Incident review', '1:1 notes'])}: {iso_date(r)}",
        [f"Attendees: {who}\n"],
        [bullets(items[: r.randint(3, 7)])],
    ]


def changelog(r: Random) -> list[list]:
    out: list[list] = []
    major = r.randint(1, 12)
    for _ in range(r.randint(2, 4)):
        v = r.choice(
            [
                f"{major}.{r.randint(0, 9)}.{r.randint(0, 60)}.{r.randint(1, 250)}",
                f"{major}.{r.randint(0, 20)}.{r.randint(0, 30)}",
                f"v{major}.{r.randint(0, 9)}.{r.randint(0, 40)}.{r.randint(1, 200)}",
            ]
        )
        items = [
            f"Fixed a crash when {r.choice(['the cart is empty', 'the locale is tr_TR', 'a webhook retries', 'the token expires mid-upload'])} ({ticket(r)}).",
            f"Upgraded {r.choice(TOOLS)[0]} to {semver(r)}.",
            f"Build {version4(r)} is the first with the new installer.",
            f"Dropped support for version {version4(r)} and older.",
            f"Release {version4(r)} rolled out to {r.randint(5, 100)}% of devices.",
            f"Security: bumped OpenSSL to 3.{r.randint(0, 4)}.{r.randint(0, 15)} (CVE-{r.randint(2022, 2025)}-{r.randint(1000, 49999)}).",
            f"Performance: cold start {r.randint(200, 900)} ms faster.",
            f"Changed default port from {port(r)} to {port(r)}.",
            f"Firmware {version4(r)} required for the new sensors.",
            f"Known issue: versions {version4(r)} to {version4(r)} may show a blank settings page.",
        ]
        r.shuffle(items)
        out.append([f"## {v} ({iso_date(r)})\n\n{bullets(items[: r.randint(2, 5)])}"])
    return [f"# Changelog: {r.choice(['desktop client', 'agent', 'mobile app', 'API', 'CLI', 'SDK'])}", *out]


def infra_note(r: Random) -> list[list]:
    rows = []
    for _ in range(r.randint(2, 5)):
        rows.append(
            f"| {r.choice(SERVICES)} | {private_ip(r)} | {port(r)} | {version4(r) if r.random() < 0.4 else semver(r)} |"
        )
    table = "| service | address | port | version |\n| --- | --- | --- | --- |\n" + "\n".join(rows) + "\n"
    facts = [
        f"VPC {aws_resource(r)} ({r.choice(['10.0.0.0/16', '10.20.0.0/16', '172.16.0.0/12', '192.168.0.0/20'])}), subnets in {r.choice(REGIONS)}a/b/c.",
        f"Agent version {version4(r)} is installed on every node.",
        f"Kernel 5.15.0-{r.randint(60, 130)}-generic; containerd {semver(r)}.",
        f"Load balancer listens on 443 and forwards to {port(r)}; idle timeout {r.choice([60, 120, 350])} s.",
        f"AMI {aws_resource(r)} built by Packer on {iso_date(r)}.",
        f"Terraform state in s3://acme-tf-state/{r.choice(ENVS)}/{r.choice(SERVICES)}.tfstate (lock table tf-locks).",
        f"Account {account_id(r)} is the {r.choice(ENVS)} account; {account_id(r)} is shared services.",
        f"Node pool uses m6i.{r.choice(['large', 'xlarge', '2xlarge'])}; max pods {r.choice([58, 110])}.",
        f"Redis {semver(r)} on {private_ip(r)}:6379, maxmemory {r.choice([2, 4, 8, 16])}gb.",
        f"Pod {pod(r)} restarted {r.randint(2, 40)} times (OOMKilled).",
        f"Certificate fingerprint SHA256:{rs(r, B64, 43)}",
        f"ssh host key: `{ssh_pubkey(r)}`",
        f"DNS: {r.choice(SERVICES)}.internal -> {private_ip(r)} (TTL {r.choice([30, 60, 300])}).",
        f"Internal IPv6 range {private_ip6(r)}/64.",
        f"Build {version4(r)} of the controller fixed the leader-election bug.",
        f"Object lock on the backup bucket; retention {r.choice([30, 90, 365])} days. KMS key {arn(r)}.",
    ]
    r.shuffle(facts)
    return [
        f"# Infra: {r.choice(ENVS)} {r.choice(['cluster', 'network', 'database tier', 'edge'])}",
        [table],
        [bullets(facts[: r.randint(3, 7)])],
    ]


def incident(r: Random) -> list[list]:
    svc = r.choice(SERVICES)
    trace = rs(r, HEX, 32)
    timeline = [
        f"{clock(r)} alert: {svc} 5xx above {r.randint(1, 20)}%",
        f"{clock(r)} {first(r)} acked the page",
        f"{clock(r)} rolled back to build {version4(r)}",
        f"{clock(r)} error rate normal",
    ]
    facts = [
        f"Trace id {trace} shows the time going into the {r.choice(['auth', 'token refresh', 'session lookup'])} call.",
        f"request_id={uuid(r)} failed with `{r.choice(['ECONNRESET', 'context deadline exceeded', 'deadlock detected', 'SSL handshake timeout'])}`.",
        f"Auth service span {rs(r, HEX, 16)} took {r.randint(2, 30)} s.",
        f"First bad deploy: {git_sha(r, 12)} at {timestamp(r)}.",
        f"{r.randint(100, 90000):,} requests failed; {r.randint(1, 900)} customers affected.",
        f"Root cause: the connection pool ({r.choice([10, 20, 50])} connections) was exhausted after the failover.",
        f"auth_token refresh calls spiked to {r.randint(2, 40)}x normal (no tokens were exposed).",
        f"Epoch of the first error: {r.randint(1_700_000_000_000, 1_760_000_000_000)}.",
        f"Pager incident {ticket(r)}; postmortem doc due {iso_date(r)}.",
        f"Upstream status page said degraded from {clock(r)} to {clock(r)} UTC.",
    ]
    r.shuffle(facts)
    return [
        f"# Incident {iso_date(r)}: {svc}",
        [f"## Timeline (UTC)\n\n{bullets(timeline)}"],
        [f"## Findings\n\n{bullets(facts[: r.randint(3, 6)])}"],
    ]


def user_memory(r: Random) -> list[list]:
    facts = [
        f"Prefers answers in {r.choice(['bullet points', 'short paragraphs', 'tables'])}; dislikes long preambles.",
        f"Timezone {r.choice(['Europe/Berlin', 'America/Chicago', 'Asia/Tokyo', 'Europe/Lisbon', 'America/Toronto'])}; works {clock(r)}-{clock(r)}.",
        f"Uses {r.choice(['VS Code', 'Neovim', 'IntelliJ', 'Zed'])} with {r.choice(['Black', 'Prettier', 'gofmt', 'rustfmt'])} on save.",
        f"Main repo is {r.choice(REPOS)}; default branch `main`, PRs need {r.randint(1, 2)} approvals.",
        f"Runs Python {r.choice(['3.11', '3.12', '3.13'])}.{r.randint(0, 9)} via pyenv; Node {r.randint(18, 22)}.{r.randint(0, 19)}.{r.randint(0, 9)}.",
        "Test account for demos: demo@example.com (password in the team vault, not here).",
        f"Their manager is {person(r)}; skip-level is {person(r)}.",
        f"Do not suggest {r.choice(['Docker Desktop', 'ORMs', 'GraphQL', 'microservices'])}; they have strong opinions.",
        f"Likes the {r.choice(['Monday', 'Friday'])} summary of open PRs.",
        f"API keys live in `~/.config/{r.choice(['acme', 'work', 'tools'])}/credentials` (never ask them to paste one).",
        f"Laptop: {r.choice(['MacBook Pro M3', 'ThinkPad X1', 'Framework 13'])}, macOS/OS build {version4(r)}.",
        "Birthday lunch for the team is on the calendar; no action needed.",
    ]
    r.shuffle(facts)
    return ["# MEMORY.md", [f"## About the user\n\n{bullets(facts[: r.randint(3, 7)])}"]]


def payments_dev(r: Random) -> list[list]:
    items = [
        f"Stripe test card {test_pan(r)} succeeds; {test_pan(r)} is declined.",
        f"Use {test_pan(r)} with any future expiry (e.g. 12/34) and any CVC for the happy path.",
        f"3-D Secure test card: {test_pan(r)}.",
        "Publishable key comes from `STRIPE_PUBLISHABLE_KEY`; the secret key from `STRIPE_SECRET_KEY` (never in the repo).",
        f"Webhook endpoint https://{r.choice(ENVS)}.acme.io/webhooks/stripe, events checkout.session.completed and charge.refunded.",
        f"Idempotency-Key: {uuid(r)}",
        f"PaymentIntent pi_{rs(r, ALNUM, 24)} stuck in requires_action.",
        f"Customer cus_{rs(r, ALNUM, 14)} has {r.randint(2, 9)} saved cards.",
        "Amounts are in minor units: 1999 = $19.99.",
        f"Masked card **** **** **** {r.randint(1000, 9999)} shown on the receipt.",
        f"Refund re_{rs(r, ALNUM, 24)} for {money(r)}.",
        f"Visa test PAN {test_pan(r)} triggers the insufficient-funds path in the sandbox.",
        f"Order {order_no(r)} used test card {test_pan(r)} in staging.",
    ]
    r.shuffle(items)
    return [f"# Payments integration notes ({r.choice(ENVS)})", [bullets(items[: r.randint(3, 7)])]]


def session_recap(r: Random) -> list[list]:
    items = [
        f"Refactored `{r.choice(FILES)}`; tests pass locally ({r.randint(50, 900)} tests).",
        f"Left a TODO in `{r.choice(FILES)}` about the {r.choice(['N+1 query', 'timezone bug', 'flaky retry', 'missing index'])}.",
        f"Upgraded {r.choice(TOOLS)[0]} {semver(r)} -> {semver(r)} in the lockfile.",
        f"CI run {r.randint(1000, 99999)} failed on `{r.choice(['lint', 'unit', 'e2e', 'build'])}`; rerun passed.",
        f"Opened PR #{r.randint(100, 9999)}; waiting on {first(r)}.",
        "The user asked to keep the `--dry-run` default.",
        f"Pinned the base image to {digest(r)}.",
        "Password field in the signup form now shows strength; label says `password: (min 12 chars)`.",
        f"Ran the migration on {r.choice(ENVS)}: {r.randint(1000, 900000):,} rows in {r.randint(2, 300)} s.",
        f"Generated a UUID for the new tenant: {uuid(r)}.",
        f"Version string is now read from `__version__` ({semver(r)}).",
        f"Feature flag `{r.choice(['new_checkout', 'fast_search', 'beta_export', 'dark_mode'])}` at {r.randint(1, 100)}%.",
    ]
    r.shuffle(items)
    return [f"# Session recap {iso_date(r)}", [bullets(items[: r.randint(3, 7)])]]


def data_note(r: Random) -> list[list]:
    items = [
        f"Cohort {r.choice(MONTHS)}-{r.randint(23, 25)}: retention {r.randint(20, 70)}.{r.randint(0, 9)}% at day 30.",
        f"Query ran {r.randint(2, 600)} s on the {r.choice(['XS', 'S', 'M', 'L'])} warehouse and scanned {r.randint(1, 900)} GB.",
        f"Table `analytics.orders_daily` has {r.randint(10**6, 10**9):,} rows; partitioned by `order_date`.",
        f"Median basket {money(r)}, mean {money(r)}, p99 {money(r)}.",
        f"Outliers: store ids {r.randint(100, 999)}, {r.randint(100, 999)} and {r.randint(100, 999)}.",
        f"Coordinates of the new warehouse: {r.uniform(-60, 60):.5f}, {r.uniform(-120, 120):.5f}.",
        f"ISBN of the reference book: 978-{r.randint(0, 1)}-{r.randint(100, 999)}-{r.randint(10000, 99999)}-{r.randint(0, 9)}.",
        f"Snapshot id {ulid(r)} taken at {timestamp(r)}.",
        f"Model v{r.randint(1, 9)}.{r.randint(0, 9)} AUC {r.uniform(0.7, 0.95):.3f} vs baseline {r.uniform(0.6, 0.8):.3f}.",
        f"Hash of the export file: md5 {rs(r, HEX, 32)}, sha1 {rs(r, HEX, 40)}.",
        f"Row count matches between source ({r.randint(10**5, 10**7)}) and target.",
    ]
    r.shuffle(items)
    return [
        f"# Analysis: {r.choice(['churn', 'checkout funnel', 'search quality', 'refund rate', 'delivery times'])}",
        [bullets(items[: r.randint(3, 6)])],
    ]


def access_note(r: Random) -> list[list]:
    env = r.choice(ENVS)
    items = [
        "password: (prompted at login)",
        "password: see vault",
        f'Password: stored in 1Password under "{env} database".',
        "DB password: rotated monthly by the Vault database engine; nothing to keep here.",
        f"password - ask {first(r)} (she has the break-glass envelope).",
        "Root password: not set; SSH key auth only.",
        "passphrase: the one from the onboarding doc (not written down here)",
        f"API key: in SSM Parameter Store at /{env}/{r.choice(SERVICES)}/api-key",
        "token: generated per session by `acme login`, expires after 12 h",
        f"secret: lives in the Kubernetes Secret `{r.choice(SERVICES)}-env` (namespace {r.choice(SERVICES)})",
        "Username: deploy; password: same as the staging one, in the vault",
        "The admin password must be at least 16 characters and is rotated every 90 days.",
        f"SSO via Okta; MFA required. Break-glass account documented in {ticket(r)}.",
        "client_secret: ${OAUTH_CLIENT_SECRET} (injected by the deploy pipeline)",
        f"`DATABASE_URL=postgres://app@{private_ip(r)}:5432/app` (password from PGPASSFILE)",
        "api_key: <YOUR_API_KEY>",
        'Example request: `curl -H "Authorization: Bearer $TOKEN" https://api.acme.io/v2/ping`',
        "Key for docs examples: `sk-ant-api03-...` (the real one is in the secret manager).",
    ]
    r.shuffle(items)
    return [
        f"# Access: {env} {r.choice(['database', 'admin console', 'CI', 'support tools'])}",
        [bullets(items[: r.randint(3, 7)])],
    ]


GENRES = {
    "support_ticket": support_ticket,
    "code_review": code_review,
    "runbook": runbook,
    "meeting_notes": meeting_notes,
    "changelog": changelog,
    "infra_note": infra_note,
    "incident": incident,
    "user_memory": user_memory,
    "payments_dev": payments_dev,
    "session_recap": session_recap,
    "data_note": data_note,
    "access_note": access_note,
}


# -- labelled payloads ---------------------------------------------------------------------------------

#: (kind, form) pairs of the labelled notes: every kind in ordinary agent phrasing, and the spellings.
PAYLOADS: list[tuple[str, str]] = [(k, "plain") for k in ALL_KINDS] * 2 + [
    ("credit_card", "nbsp"), ("credit_card", "narrow_nbsp"), ("credit_card", "thin_space"),
    ("credit_card", "nb_hyphen"), ("credit_card", "after_order"), ("iban", "nbsp"), ("iban", "lower"),
    ("iban", "dashes"), ("ssn", "nb_hyphen"), ("ssn", "nbsp"), ("phone", "nbsp"), ("phone", "thin_space"),
    ("phone", "nb_hyphen"), ("email", "percent"), ("email", "idn"), ("private_key", "pem_lower"),
    ("private_key", "pem_irregular"), ("private_key", "pem_bare"), ("private_key", "openssh"),
    ("private_key", "ppk"), ("private_key", "age"), ("private_key", "jwk"), ("aws_secret_access_key", "aws_after"),
    ("anthropic_api_key", "zero_width"), ("openai_api_key", "zero_width"), ("github_token", "zero_width"),
    ("aws_access_key_id", "zero_width"), ("stripe_key", "zero_width"), ("slack_token", "zero_width"),
    ("google_api_key", "zero_width"), ("sendgrid_api_key", "zero_width"), ("npm_token", "zero_width"),
]  # fmt: skip

SEPARATORS = {"nbsp": NBSP, "narrow_nbsp": NNBSP, "thin_space": THIN, "nb_hyphen": NBHY}


def credential_value(r: Random, kind: str) -> str:
    return {
        "anthropic_api_key": gen_anthropic,
        "openai_api_key": gen_openai,
        "aws_access_key_id": gen_aws_id,
        "aws_secret_access_key": gen_aws_secret,
        "google_api_key": gen_google,
        "github_token": gen_github,
        "gitlab_token": gen_gitlab,
        "slack_token": gen_slack_token,
        "stripe_key": gen_stripe,
        "sendgrid_api_key": gen_sendgrid,
        "npm_token": gen_npm,
        "pypi_token": gen_pypi,
        "jwt": gen_jwt,
    }[kind](r)


def env_name(kind: str) -> str:
    return {
        "anthropic_api_key": "ANTHROPIC_API_KEY",
        "openai_api_key": "OPENAI_API_KEY",
        "aws_access_key_id": "AWS_ACCESS_KEY_ID",
        "google_api_key": "GOOGLE_MAPS_API_KEY",
        "github_token": "GH_TOKEN",
        "gitlab_token": "GITLAB_TOKEN",
        "slack_token": "SLACK_BOT_TOKEN",
        "stripe_key": "STRIPE_SECRET_KEY",
        "sendgrid_api_key": "SENDGRID_API_KEY",
        "npm_token": "NPM_TOKEN",
        "pypi_token": "TWINE_PASSWORD",
        "jwt": "SERVICE_JWT",
    }[kind]


def payload(r: Random, kind: str, form: str) -> list:
    """The sentences holding one labelled value of ``kind`` spelled as ``form``."""
    who = first(r)
    if kind in ("anthropic_api_key", "openai_api_key", "aws_access_key_id", "google_api_key", "github_token",
                "gitlab_token", "slack_token", "stripe_key", "sendgrid_api_key", "npm_token", "pypi_token", "jwt"):  # fmt: skip
        value = credential_value(r, kind)
        if form == "zero_width":
            prefix = value.index("_") + 1 if "_" in value[:8] else (3 if kind != "aws_access_key_id" else 4)
            value = with_zero_width(r, value, prefix)
        c = r.randint(0, 4)
        if c == 0:
            return [f"{who} pasted the key into the chat: ", S(value, kind, form), " (asked them to rotate it).\n"]
        if c == 1:
            return ["```sh\nexport ", env_name(kind), "=", S(value, kind, form), "\n```\n"]
        if c == 2:
            return [
                f"- {env_name(kind).lower().replace('_', ' ')} for {r.choice(ENVS)}: `",
                S(value, kind, form),
                "`\n",
            ]
        if c == 3:
            return ["```yaml\nenv:\n  - name: ", env_name(kind), '\n    value: "', S(value, kind, form), '"\n```\n']
        return [f"Working key from {who}'s shell history: ", S(value, kind, form), "\n"]
    if kind == "aws_secret_access_key":
        aid, secret = gen_aws_id(r), gen_aws_secret(r)
        if form == "aws_after":
            return r.choice(
                [
                    [
                        "Found this in the old deploy script: `",
                        S(secret, kind, form),
                        "` (the AWS secret key of the ci-deployer user).\n",
                    ],
                    [
                        f"{r.choice(['secret', 'key'])}: ",
                        S(secret, kind, form),
                        "   # aws, account ",
                        account_id(r),
                        "\n",
                    ],
                    ["- ", S(secret, kind, form), " <- secret access key for AWS (rotate!)\n"],
                ]
            )
        return r.choice(
            [
                [
                    "```ini\n[default]\naws_access_key_id = ",
                    S(aid, "aws_access_key_id"),
                    "\naws_secret_access_key = ",
                    S(secret, kind),
                    "\n```\n",
                ],
                ["AWS creds for the backup job: ", S(aid, "aws_access_key_id"), " / ", S(secret, kind), "\n"],
                ["`AWS_SECRET_ACCESS_KEY=", S(secret, kind), "` was committed in ", git_sha(r, 7), ".\n"],
            ]
        )
    if kind == "azure_connection_string":
        key = base64.b64encode(bytes(r.getrandbits(8) for _ in range(64))).decode()
        acct = r.choice(["acmeexports", "acmelogs", "stgbackup01"])
        return [
            f"Storage connection string ({r.choice(ENVS)}):\n`DefaultEndpointsProtocol=https;AccountName={acct};AccountKey=",
            S(key, kind),
            ";EndpointSuffix=core.windows.net`\n",
        ]
    if kind == "slack_webhook":
        return [f"Alerts go to #{r.choice(TEAMS).replace(' ', '-')}-alerts via ", S(gen_slack_webhook(r), kind), "\n"]
    if kind == "twilio_account_sid":
        return [
            "Twilio account SID ",
            S("AC" + rs(r, HEX, 32), kind),
            f" sends the {r.choice(['OTP', 'reminder'])} texts.\n",
        ]
    if kind == "twilio_auth_token":
        return r.choice(
            [
                ["TWILIO_AUTH_TOKEN=", S(rs(r, HEX, 32), kind), "\n"],
                ["Twilio auth token (", r.choice(ENVS), "): ", S(rs(r, HEX, 32), kind), "\n"],
            ]
        )
    if kind == "private_key":
        if form == "ppk":
            return [f"{who}'s PuTTY key for the Windows jump host:\n\n```\n", S(gen_ppk(r), kind, form), "\n```\n"]
        if form == "age":
            return [
                f"# created: {iso_date(r)}T{clock(r)}:00Z\n# public key: age1{rs(r, BECH32.lower(), 58)}\n",
                S(gen_age(r), kind, form),
                "\n",
            ]
        if form == "jwk":
            d = b64url(bytes(r.getrandbits(8) for _ in range(32)))
            x, y = (
                b64url(bytes(r.getrandbits(8) for _ in range(32))),
                b64url(bytes(r.getrandbits(8) for _ in range(32))),
            )
            return [
                f'Signing key ({r.choice(ENVS)}):\n```json\n{{"kty":"EC","crv":"P-256","kid":"{rs(r, HEX, 8)}","x":"{x}","y":"{y}","d":"',
                S(d, kind, form),
                '"}\n```\n',
            ]
        pem = gen_pem(r, form if form != "plain" else "plain")
        return [
            f"Key for the {r.choice(['deploy', 'backup', 'sftp', 'signing'])} user:\n\n```\n",
            S(pem, kind, form),
            "\n```\n",
        ]
    if kind == "basic_auth":
        pw = gen_password(r).replace("@", "#").replace("/", "_").replace(":", "!")
        return r.choice(
            [
                ["DATABASE_URL=postgres://app_user:", S(pw, kind), f"@db.{r.choice(ENVS)}.acme.io:5432/app\n"],
                ["The old Jenkins URL had the creds in it: https://deploy:", S(pw, kind), "@ci.acme.io/job/release\n"],
                ["Authorization: Basic ", S(base64.b64encode(f"svc:{pw}".encode()).decode(), kind), "\n"],
            ]
        )
    if kind == "password_assignment":
        pw = gen_password(r)
        return r.choice(
            [
                ["DB_PASSWORD=", S(pw, kind), "\n"],
                ['```yaml\ndatabase:\n  user: app\n  password: "', S(pw, kind), '"\n```\n'],
                [f"{who}'s wifi password: ", S(pw, kind), "\n"],
                ["mysql -u root --password=", S(pw, kind), " app_db\n"],
            ]
        )
    if kind == "bearer_token":
        return ['`curl -H "Authorization: Bearer ', S(gen_bearer(r), kind), '" https://api.acme.io/v2/orders`\n']
    if kind == "generic_secret":
        name = r.choice(["SESSION_SECRET", "encryption_key", "JWT_SIGNING_KEY", "client_secret", "webhook_secret"])
        return [f'{name} = "', S(gen_generic(r), kind), '"\n']
    if kind == "email":
        if form == "percent":
            email = gen_email(r)
            enc = email.replace("@", "%40").replace("+", "%2B")
            return ["Search link from the CRM: https://crm.acme.io/contacts?q=", S(enc, kind, form), "&tab=activity\n"]
        if form == "idn":
            local, dom = r.choice(IDN_EMAILS)
            return [f"Contact at {r.choice(CUSTOMERS)}: ", S(f"{local}@{dom}", kind, form), "\n"]
        return r.choice(
            [
                [f"Billing contact is {person(r)} <", S(gen_email(r), kind), ">.\n"],
                ["Send the invoice copy to ", S(gen_email(r), kind), " by Friday.\n"],
            ]
        )
    if kind == "phone":
        sep = SEPARATORS.get(form, " ")
        return r.choice(
            [
                [f"{who} prefers a call: ", S(gen_phone(r, sep), kind, form if form != "plain" else ""), "\n"],
                ["Tel. ", S(gen_phone(r, sep), kind, form if form != "plain" else ""), f" (after {clock(r)})\n"],
            ]
        )
    if kind == "credit_card":
        pan = gen_card_digits(r)
        if form in SEPARATORS:
            return [
                "Customer read their card out on the call: ",
                S(group_card(pan, SEPARATORS[form]), kind, form),
                ", exp 08/27.\n",
            ]
        if form == "after_order":
            return r.choice(
                [
                    [f"Order {order_no(r)} — ", S(group_card(pan, " "), kind, form), " was charged twice.\n"],
                    [
                        "Reference: ",
                        S(group_card(pan, "-"), kind, form),
                        " (the customer typed their card into the order reference field)\n",
                    ],
                    [f"Invoice {order_no(r)} ref ", S(group_card(pan, " "), kind, form), "\n"],
                ]
            )
        return r.choice(
            [
                ["Card on file: ", S(group_card(pan, " "), kind), "\n"],
                ["They want us to charge ", S(pan, kind), " for the renewal.\n"],
            ]
        )
    if kind == "ssn":
        a, g, s = gen_ssn(r)
        if form == "nb_hyphen":
            return ["SSN ", S(f"{a}{NBHY}{g}{NBHY}{s}", kind, form), " on the W-9.\n"]
        if form == "nbsp":
            return ["Social security number: ", S(f"{a}{NBSP}{g}{NBSP}{s}", kind, form), "\n"]
        return ["Employee SSN ", S(f"{a}-{g}-{s}", kind), " for payroll.\n"]
    if kind == "iban":
        compact = gen_iban_compact(r)
        if form == "nbsp":
            value = spaced(compact, NBSP)
        elif form == "lower":
            value = spaced(compact, " ").lower() if r.random() < 0.5 else compact.lower()
        elif form == "dashes":
            value = spaced(compact, "-")
        else:
            value = spaced(compact, " ") if r.random() < 0.6 else compact
        return ["Refund goes to IBAN ", S(value, kind, form if form != "plain" else ""), f" ({person(r)}).\n"]
    if kind == "ip":
        value = gen_public_ip(r) if r.random() < 0.75 else gen_public_ip6(r)
        return r.choice(
            [
                ["Customer's office egress IP is ", S(value, kind), "; allow-list it.\n"],
                ["Suspicious logins from ", S(value, kind), f" at {clock(r)}.\n"],
            ]
        )
    if kind == "dob":
        return r.choice(
            [
                [f"Patient {person(r)}, DOB ", S(gen_dob(r), kind), ".\n"],
                ["Date of birth: ", S(gen_dob(r), kind), "\n"],
                [f"{who} (born ", S(gen_dob(r), kind), ") needs the pediatric form.\n"],
            ]
        )
    raise AssertionError(kind)


# -- notes -----------------------------------------------------------------------------------------------


def render(parts: list) -> tuple[str, list]:
    text, spans, pos = [], [], 0
    for p in parts:
        if isinstance(p, S):
            span = {"start": pos, "end": pos + len(p.value), "kind": p.kind}
            if p.form and p.form != "plain":
                span["form"] = p.form
            spans.append((span, p.value))
            text.append(p.value)
            pos += len(p.value)
        else:
            text.append(p)
            pos += len(p)
    out = "".join(text)
    for span, value in spans:
        assert out[span["start"] : span["end"]] == value
    return out, [s for s, _ in spans]


def build(r: Random, genre: str, payloads: list[tuple[str, str]]) -> tuple[str, list]:
    title, *blocks = GENRES[genre](r)
    for kind, form in payloads:
        blocks.insert(r.randint(0, len(blocks)), payload(r, kind, form))
    return render(render_blocks(r, title, blocks))


def generate(seed: int = SEED) -> list[dict]:
    r = Random(seed)
    genres = sorted(GENRES)
    notes = []
    for i in range(N_BENIGN):
        genre = genres[i % len(genres)]
        text, spans = build(r, genre, [])
        notes.append({"text": text, "spans": spans, "category": f"negative:{genre}"})
    for i in range(N_LABELLED):
        kind, form = PAYLOADS[i % len(PAYLOADS)]
        extra = [(r.choice(ALL_KINDS), "plain") for _ in range(r.choice([0, 0, 0, 1]))]
        text, spans = build(r, r.choice(genres), [(kind, form), *extra])
        category = ("ip:" if kind == "ip" else "pii:" if kind in PERSONAL_KINDS else "secret:") + kind
        notes.append({"text": text, "spans": spans, "category": category})
    r.shuffle(notes)
    out = [{"id": f"a{n:04d}", **note} for n, note in enumerate(notes, 1)]
    for note in out:
        note["spans"].sort(key=lambda s: s["start"])
    validate(out)
    return out


def validate(notes: list[dict]) -> None:
    counts = collections.Counter(s["kind"] for n in notes for s in n["spans"])
    for kind in ALL_KINDS:
        assert counts[kind] >= 20, (kind, counts[kind])
    for n in notes:
        end = 0
        for s in n["spans"]:
            v = n["text"][s["start"] : s["end"]]
            assert s["start"] >= end and v and v == v.strip(), (n["id"], s)
            end = s["end"]
            bare = "".join(c for c in v if c not in ZERO_WIDTH)
            if s["kind"] == "credit_card":
                digits = "".join(c for c in bare if c.isdigit())
                assert luhn_ok(digits) and digits not in TEST_PANS, n["id"]
            if s["kind"] == "iban":
                assert iban_ok(bare), n["id"]
            if s["kind"] == "ip":
                assert ipaddress.ip_address(bare).is_global, n["id"]
            if s["kind"] == "github_token" and bare[:4] in ("ghp_", "gho_", "ghs_", "ghu_"):
                assert b62(zlib.crc32(bare[4:34].encode()), 6) == bare[34:], n["id"]
    assert len({n["id"] for n in notes}) == len(notes)


def dumps(notes: list[dict]) -> str:
    return "".join(json.dumps(n, ensure_ascii=False) + "\n" for n in notes)


def stats(notes: list[dict]) -> str:
    labelled = [n for n in notes if n["spans"]]
    counts = collections.Counter(s["kind"] for n in notes for s in n["spans"])
    forms = collections.Counter(s.get("form", "plain") for n in notes for s in n["spans"])
    size = sum(len(n["text"].encode()) for n in notes)
    return "\n".join(
        [
            f"notes: {len(notes)}  labelled: {len(labelled)}  benign: {len(notes) - len(labelled)}  "
            f"text: {size / 1e6:.2f} MB (UTF-8)",
            "spans per kind: " + ", ".join(f"{k} {counts[k]}" for k in ALL_KINDS),
            "spans per form: " + ", ".join(f"{k} {v}" for k, v in sorted(forms.items())),
        ]
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="fail if the file on disk differs from a fresh generation")
    ap.add_argument("--stats", action="store_true", help="print statistics, write nothing")
    a = ap.parse_args()
    notes = generate()
    data = dumps(notes)
    if a.check:
        same = OUT.exists() and OUT.read_text(encoding="utf-8") == data
        print("up to date" if same else f"{OUT} differs from a fresh generation")
        return 0 if same else 1
    if not a.stats:
        OUT.write_text(data, encoding="utf-8")
        print(f"wrote {OUT}")
    print(stats(notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
