"""Generate tests/scrub/dev_corpus.jsonl: labelled agent notes with fake (random) credentials.

    python tests/scrub/make_dev_corpus.py [--seed N] [--count N]

Every credential is generated from ``random`` with a fixed seed; none is real. Same format as
``tests/scrub/public_examples.jsonl`` (spans are code-point offsets, ``category`` names the
main payload or the look-alike of a negative sample).
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import string
import zlib
from pathlib import Path

B62 = string.digits + string.ascii_uppercase + string.ascii_lowercase
ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
URLSAFE = ALNUM + "-_"


class Gen:
    def __init__(self, rng: random.Random) -> None:
        self.r = rng

    def s(self, alphabet: str, n: int) -> str:
        return "".join(self.r.choice(alphabet) for _ in range(n))

    # -- credentials (value only) --
    def anthropic_api_key(self) -> str:
        kind = self.r.choice(["api03", "api03", "admin01"])
        return f"sk-ant-{kind}-" + self.s(URLSAFE, 93) + "AA"

    def openai_api_key(self) -> str:
        return self.r.choice(["sk-", "sk-proj-"]) + self.s(ALNUM, self.r.choice([48, 64, 120]))

    def aws_access_key_id(self) -> str:
        return self.r.choice(["AKIA", "ASIA"]) + self.s(string.ascii_uppercase + "234567", 16)

    def aws_secret_access_key(self) -> str:
        return self.s(ALNUM + "/+", 40)

    def google_api_key(self) -> str:
        return "AIza" + self.s(URLSAFE, 35)

    def azure_key(self) -> str:
        return base64.b64encode(self.r.randbytes(64)).decode()

    def github_token(self) -> str:
        if self.r.random() < 0.3:
            return "github_pat_" + self.s(ALNUM, 22) + "_" + self.s(ALNUM, 59)
        body = self.s(ALNUM, 30)
        n = zlib.crc32(body.encode())
        check = ""
        while n:
            n, r = divmod(n, 62)
            check = B62[r] + check
        return self.r.choice(["ghp_", "gho_", "ghs_", "ghu_"]) + body + check.rjust(6, "0")

    def gitlab_token(self) -> str:
        return "glpat-" + self.s(URLSAFE, 20)

    def slack_token(self) -> str:
        p = self.r.choice(["xoxb", "xoxp", "xoxa"])
        return f"{p}-{self.s(string.digits, 12)}-{self.s(string.digits, 13)}-{self.s(ALNUM, 24)}"

    def slack_webhook(self) -> str:
        up = string.ascii_uppercase + string.digits
        return f"https://hooks.slack.com/services/T{self.s(up, 8)}/B{self.s(up, 10)}/{self.s(ALNUM, 24)}"

    def stripe_key(self) -> str:
        return self.r.choice(["sk_live_", "rk_live_", "sk_test_"]) + self.s(ALNUM, self.r.choice([24, 99]))

    def twilio_account_sid(self) -> str:
        return "AC" + self.s(HEX, 32)

    def twilio_auth_token(self) -> str:
        return self.s(HEX, 32)

    def sendgrid_api_key(self) -> str:
        return f"SG.{self.s(URLSAFE, 22)}.{self.s(URLSAFE, 43)}"

    def npm_token(self) -> str:
        return "npm_" + self.s(ALNUM, 36)

    def pypi_token(self) -> str:
        return "pypi-AgEIcHlwaS5vcmc" + self.s(URLSAFE, 120)

    def jwt(self) -> str:
        def b(obj: dict[str, object]) -> str:
            return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

        head = b({"alg": self.r.choice(["HS256", "RS256"]), "typ": "JWT"})
        body = b({"sub": self.s(string.digits, 8), "iat": self.r.randint(1600000000, 1800000000)})
        return f"{head}.{body}.{self.s(URLSAFE, 43)}"

    def private_key(self) -> str:
        t = self.r.choice(["RSA ", "EC ", "OPENSSH ", "", "ENCRYPTED "])
        lines = [base64.b64encode(self.r.randbytes(48)).decode() for _ in range(self.r.randint(3, 8))]
        return f"-----BEGIN {t}PRIVATE KEY-----\n" + "\n".join(lines) + f"\n-----END {t}PRIVATE KEY-----"

    def password(self) -> str:
        words = ["Harbor", "Maple", "Copper", "Falcon", "Winter", "Orchid", "Granite", "Summer"]
        if self.r.random() < 0.5:
            return self.r.choice(words) + str(self.r.randint(10, 9999)) + self.r.choice("!#%&*?")
        return self.s(ALNUM + "!#%^*", self.r.randint(12, 24))

    def bearer(self) -> str:
        return self.s(URLSAFE + ".", self.r.randint(32, 80))

    def generic(self) -> str:
        return self.s(ALNUM, 32)

    # -- personal data --
    def email(self) -> str:
        first = self.r.choice(["maria", "jonas", "li", "amara", "theo", "ingrid", "sven", "priya", "omar"])
        last = self.r.choice(["novak", "okafor", "lindqvist", "tanaka", "haddad", "costa", "weber"])
        dom = self.r.choice(["gmail.com", "outlook.de", "proton.me", "acme-corp.io", "uni-hamburg.de"])
        return f"{first}{self.r.choice(['.', '_', ''])}{last}@{dom}"

    def phone(self) -> str:
        a, b = self.r.randint(201, 989), self.r.randint(201, 989)
        c = self.r.randint(0, 9999)
        return self.r.choice(
            [
                f"({a}) {b}-{c:04d}",
                f"{a}-{b}-{c:04d}",
                f"+1 {a} {b} {c:04d}",
                f"+44 20 {self.r.randint(7000, 8999)} {c:04d}",
                f"+49 30 {self.r.randint(1000000, 9999999)}",
                f"+33 6 {self.r.randint(10, 99)} {self.r.randint(10, 99)} {self.r.randint(10, 99)} {self.r.randint(10, 99)}",
                f"030 {self.r.randint(1000000, 9999999)}",
            ]
        )

    def credit_card(self) -> str:
        prefix = self.r.choice(["4", "51", "55", "37", "6011"])
        n = 15 if prefix == "37" else 16
        body = prefix + self.s(string.digits, n - len(prefix) - 1)
        for d in string.digits:
            total = 0
            for i, ch in enumerate(reversed(body + d)):
                v = int(ch) * (2 if i % 2 else 1)
                total += v - 9 if v > 9 else v
            if total % 10 == 0:
                body += d
                break
        sep = self.r.choice(["", " ", "-"])
        if n == 16 and sep:
            return sep.join(body[i : i + 4] for i in range(0, 16, 4))
        return body

    def ssn(self) -> str:
        return f"{self.r.randint(1, 665):03d}-{self.r.randint(1, 99):02d}-{self.r.randint(1, 9999):04d}"

    def iban(self) -> str:
        country, n = self.r.choice([("DE", 18), ("GB", 18), ("FR", 23), ("NL", 14)])
        if country == "GB":
            bban = self.s(string.ascii_uppercase, 4) + self.s(string.digits, 14)
        elif country == "NL":
            bban = self.s(string.ascii_uppercase, 4) + self.s(string.digits, 10)
        else:
            bban = self.s(string.digits, n)
        num = int("".join(str(int(c, 36)) for c in bban + country + "00"))
        iban = f"{country}{98 - num % 97:02d}{bban}"
        if self.r.random() < 0.5:
            return " ".join(iban[i : i + 4] for i in range(0, len(iban), 4))
        return iban

    def ip(self) -> str:
        while True:
            a = self.r.choice([23, 34, 52, 81, 89, 141, 185, 203, 212])
            ip = f"{a}.{self.r.randint(0, 255)}.{self.r.randint(0, 255)}.{self.r.randint(1, 254)}"
            if not ip.startswith("203.0.113"):
                return ip

    def dob(self) -> str:
        y, m, d = self.r.randint(1940, 2005), self.r.randint(1, 12), self.r.randint(1, 28)
        months = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
                  "October", "November", "December"]  # fmt: skip
        return self.r.choice([f"{y}-{m:02d}-{d:02d}", f"{d:02d}.{m:02d}.{y}", f"{m:02d}/{d:02d}/{y}",
                              f"{d} {months[m - 1]} {y}", f"{months[m - 1]} {d}, {y}"])  # fmt: skip


# (kind, contexts): each context has {v} for the value; every value is labelled with the kind.
SECRET_CONTEXTS: dict[str, list[str]] = {
    "anthropic_api_key": ["export ANTHROPIC_API_KEY={v}", "client = anthropic.Anthropic(api_key=\"{v}\")",
                          "The key Maria pasted for the eval harness: {v}"],
    "openai_api_key": ["OPENAI_API_KEY={v}", "-H \"Authorization: Bearer {v}\"", "openai.api_key = '{v}'"],
    "aws_access_key_id": ["aws_access_key_id = {v}", "Access key {v} belongs to the ci-deployer user."],
    "google_api_key": ["maps key: {v}", "GOOGLE_API_KEY=\"{v}\"", "https://maps.googleapis.com/maps/api/geocode/json?key={v}"],
    "github_token": ["GITHUB_TOKEN={v}", "git clone https://x-access-token:{v}@github.com/acme/infra.git",
                     "token for the release bot: {v}"],
    "gitlab_token": ["CI uses {v} to push tags.", "GITLAB_TOKEN: \"{v}\""],
    "slack_token": ["SLACK_BOT_TOKEN={v}", "bot token {v} (scopes: chat:write)"],
    "slack_webhook": ["webhook_url: \"{v}\"", "Alerts go to {v}"],
    "stripe_key": ["STRIPE_SECRET_KEY={v}", "stripe.api_key = \"{v}\"", "| prod | {v} | rotated last week |"],
    "sendgrid_api_key": ["SENDGRID_API_KEY={v}", "mail relay key is {v}"],
    "npm_token": ["//registry.npmjs.org/:_authToken={v}", "NPM_TOKEN={v}"],
    "pypi_token": ["password = {v}", "twine upload -u __token__ -p {v} dist/*"],
    "jwt": ["Cookie: session={v}", "id_token from the login flow: {v}", "-H \"Authorization: Bearer {v}\""],
    "private_key": ["deploy key:\n\n```\n{v}\n```", "```pem\n{v}\n```"],
    "password_assignment": ["DB_PASSWORD={v}", "  password: \"{v}\"", "\"password\": \"{v}\",",
                            "POSTGRES_PASSWORD: {v}", "mysql -u app --password={v} orders",
                            "admin_password = '{v}'", "The wifi password is {v}"],
    "bearer_token": ["curl -H 'Authorization: Bearer {v}' https://api.internal.acme.io/v2/jobs",
                     "Authorization: Bearer {v}"],
    "generic_secret": ["SIGNING_KEY={v}", "encryption_key: {v}", "WEBHOOK_SECRET = \"{v}\""],
    "basic_auth": ["DATABASE_URL=postgres://app:{v}@db.prod.acme.io:5432/orders",
                   "redis://default:{v}@cache-01.acme.io:6379/0", "amqp://svc:{v}@mq.acme.io/"],
    "azure_connection_string": ["DefaultEndpointsProtocol=https;AccountName=acmeprod;AccountKey={v};EndpointSuffix=core.windows.net"],
}  # fmt: skip
PII_CONTEXTS: dict[str, list[str]] = {
    "email": ["Contact: {v}", "Send the invoice to {v} (billing).", "reply-to: {v}", "user={v} mfa=totp"],
    "phone": ["Phone: {v}", "Call her at {v} after 3pm.", "mobile {v}", "Reach the on-site tech on {v}."],
    "credit_card": ["Card on file: {v}", "customer read out card number {v}", "cc: {v} exp 09/27"],
    "ssn": ["SSN: {v}", "social security number {v} on the W-9"],
    "iban": ["IBAN: {v}", "Refund goes to {v} (Sparkasse)."],
    "ip": ["Their office egress IP is {v}.", "Blocked {v} after the brute-force attempt.", "ssh ops@{v}"],
    "dob": ["DOB: {v}", "born {v}", "date of birth: {v}", "\"birthDate\": \"{v}\""],
}  # fmt: skip

FILLER = [
    "Prefers short answers with code first.",
    "Staging runs on Postgres 16; prod is still on 14.",
    "The flaky test is test_export_roundtrip; it fails about 1 in 40 runs.",
    "Decided to keep the retry budget at 3 with jittered backoff.",
    "On-call rotation changes every Monday at 09:00 CET.",
    "Ticket OPS-4821 tracks the certificate renewal.",
    "Latency p99 dropped from 840 ms to 310 ms after the index change.",
    "Nightly backup finished at 02:14; 1.2 GB compressed.",
    "Owner of the billing-worker is Theo Brennan; reviewer is Priya.",
    "Migration 0042_add_invoice_index is safe to re-run.",
    "User asked to always run `make lint` before proposing a commit.",
    "Release 2.14.3 went out on 2025-03-11; 2.15.0 is planned for April.",
    "Build 10.0.19045.3803 shows the bug, 10.0.22631.2861 does not.",
    "Order #88412093 was refunded on 2024-11-02.",
    "Commit 3f9c2ab1d4e5f60718293a4b5c6d7e8f90a1b2c3 introduced the regression.",
    "Request id 6f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b in the gateway logs.",
    "Docker image digest sha256:9b2f4e6a8c0d1e3f5a7b9c1d3e5f7a9b1c3d5e7f9a1b3c5d7e9f1a3b5c7d9e1f.",
    "Grafana dashboard uid abcd1234 shows the spike at 14:32:05.",
    "Set `OPENAI_API_KEY` and `ANTHROPIC_API_KEY` in your shell before running the evals.",
    "Keys are read from `os.environ['STRIPE_SECRET_KEY']`; never hard-code them.",
    "Use `password: ${DB_PASSWORD}` in the compose file, not a literal.",
    "The docs example uses sk-ant-api03-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx as the key.",
    "Masked key in the dashboard shows sk-...a1b2 only.",
    "Loopback: the service binds 127.0.0.1:8080 and 0.0.0.0:9090 in the container.",
    "Internal hosts are on 10.20.30.0/24 and 192.168.1.0/24.",
    "Tracking number 1Z999AA10123456784 for the replacement laptop.",
    "Invoice total was 1,234.56 EUR; VAT 19%.",
    "Cron `*/15 * * * *` triggers the sync; timeout 900 s.",
    "Meeting moved to 2025-06-17 15:30-16:00.",
    "Port range 30000-32767 is reserved for NodePorts.",
    "API rate limit: 600 requests per 60 s per token.",
    "Rotate the token every 90 days; the password policy requires 14 characters.",
    "Postgres URL for local dev: postgres://localhost:5432/orders (no credentials).",
    "ARN arn:aws:iam::123456789012:role/deployer assumes the ci role.",
    "The config key `max_tokens: 4096` caps the completion length.",
    "`password_file: /run/secrets/db_password` is mounted by the orchestrator.",
    "Placeholder in README: `GITHUB_TOKEN=<your-token>`.",
    "go.sum: golang.org/x/sys v0.15.0 h1:h48lPFYpsTvQJZF4EKyI4aLHaev3CxivZmv7yZig9pc=",
    "Base64 of the logo is in assets/logo.b64 (data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==).",
    "Python 3.12.1 and Node v20.11.1; pip 24.0.",
    "Coordinates 52.5200, 13.4050 for the Berlin office.",
    "Case 5577-833-0089 with the hardware vendor is still open.",
    "Unix time 1718031234 is when the lease expired.",
    "Version string 1.2.3.4 is what `app --version` prints.",
    "See https://docs.acme.io/auth#tokens for how tokens are issued.",
    "Email the team alias (team@example.com in the docs) for access.",
    "The SSH remote is git@github.com:acme/infra.git.",
    "Retina asset icon@2x.png is missing from the bundle.",
    "Phone extension 4471 rings the front desk.",
    "AWS example creds in the tutorial: AKIAIOSFODNN7EXAMPLE / wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY.",
    "JWT header eyJhbGciOiJIUzI1NiJ9 alone is not a token.",
    "`api_key_env: ANTHROPIC_API_KEY` names the variable to read.",
    "Token count for the prompt was 18234 tokens.",
    "Secret rotation is handled by Vault (secret/data/prod/db).",
    "The `--password-stdin` flag keeps the password out of history.",
    "Public key: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGq8pYxY0m3Jp7n2b6a3J6c4yF0pQ2lY7m0k5G9pW3rT ops@laptop",
    "SHA-1 of the release tarball: 2fd4e1c67a2d28fced849ee1bb76e7391b93eb12.",
    "MD5 of the dump is 9e107d9d372bb6826bd81d3542a419d6.",
    "UUID v4 for the tenant: 0b6f3c6e-2f4e-4a8a-9f1d-1e2c3d4e5f60.",
    "Stripe docs show sk_test_... as the prefix; we only keep the last 4 digits.",
    "Ticket JIRA-20231 mentions the 4111-1111-1111-1112 test number (fails Luhn).",
    "MAC address 00:1A:2B:3C:4D:5E is the build box.",
    "IPv6 loopback ::1 and link-local fe80::1 are fine.",
    "Born-again rollout plan: stage 1 in 2024-09, stage 2 in 2025-01.",
    "Q3 revenue grew 12.5% to 4,200,000 USD.",
]  # fmt: skip
HEADERS = ["## Session notes", "# MEMORY.md", "### Debug log", "## Runbook", "# Customer: Globex", "## Facts"]


def _note(rng: random.Random, payloads: list[tuple[str, str, str]]) -> dict[str, object]:
    """payloads: (kind, context, value) inserted among filler lines."""
    lines = [rng.choice(HEADERS), ""]
    filler = rng.sample(FILLER, rng.randint(3, 7))
    items: list[tuple[str, str, str] | str] = [*filler, *payloads]
    rng.shuffle(items)
    text = "\n".join(lines) + "\n"
    spans = []
    for item in items:
        if isinstance(item, str):
            text += f"- {item}\n"
            continue
        kind, ctx, value = item
        pre, post = ctx.split("{v}")
        text += "- " if "\n" not in ctx else "\n"
        start = len(text) + len(pre)
        text += pre + value + post + "\n"
        spans.append({"start": start, "end": start + len(value), "kind": kind})
    return {"text": text, "spans": spans}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=20250601)
    ap.add_argument("--count", type=int, default=420)
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("dev_corpus.jsonl"))
    args = ap.parse_args()
    rng = random.Random(args.seed)
    g = Gen(rng)
    values = {
        "password_assignment": g.password, "bearer_token": g.bearer, "generic_secret": g.generic,
        "basic_auth": g.password, "azure_connection_string": g.azure_key,
    }  # fmt: skip
    out = []
    kinds = list(SECRET_CONTEXTS) + list(PII_CONTEXTS)
    for i in range(args.count):
        payloads: list[tuple[str, str, str]] = []
        if i % 3 != 2:  # two of three notes carry something
            for kind in rng.sample(kinds, rng.choice([1, 1, 2])):
                contexts = SECRET_CONTEXTS.get(kind) or PII_CONTEXTS[kind]
                ctx = rng.choice(contexts)
                fn = values.get(kind) or getattr(g, kind)
                value = fn()
                if kind == "basic_auth":
                    value = value.replace("@", "x").replace("/", "x").replace(":", "x")
                payloads.append((kind, ctx, value))
            if rng.random() < 0.1:  # AWS pair
                payloads.append(("aws_access_key_id", "aws_access_key_id={v}", g.aws_access_key_id()))
                payloads.append(("aws_secret_access_key", "aws_secret_access_key={v}", g.aws_secret_access_key()))
            if rng.random() < 0.08:  # Twilio pair
                sid = g.twilio_account_sid()
                payloads.append(("twilio_account_sid", "TWILIO_ACCOUNT_SID={v}", sid))
                payloads.append(("twilio_auth_token", "TWILIO_AUTH_TOKEN={v}", g.twilio_auth_token()))
        note = _note(rng, payloads)
        main_kind = payloads[0][0] if payloads else None
        if main_kind is None:
            category = "negative:lookalike"
        elif main_kind in PII_CONTEXTS:
            category = "ip:ip" if main_kind == "ip" else f"pii:{main_kind}"
        else:
            category = f"secret:{main_kind}"
        out.append({"id": f"d{i:04d}", **note, "category": category})
    with args.out.open("w") as fh:
        for row in out:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
