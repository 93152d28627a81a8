"""No random, well-formed credential is let through.

The old placeholder rule rejected any value holding ``your``, ``here``, ``xxxx``... anywhere, the random
body of a real key included (45 of 200,000 random Anthropic keys, 21 of 200,000 AWS secrets passed).
Placeholders are now whole values of documented shapes only. Here, for every credential kind found by its
shape (and the bodies of those found by context), random keys of the real shape are drawn and each must
pass the check its detector applies (``rules.KEY_CHECKS``): zero misses. A sample of them goes through the
whole scrubber too, inside a sentence, and must be masked whole.

CI draws 100,000 keys per kind (about 2 s a kind); the long check draws a million::

    MEMVAULT_SCRUB_KEYS=1000000 python -m pytest -q -o addopts="" tests/scrub/test_scrub_keys.py

The generators below are written from the providers' published formats, not from the scrubber.
"""

from __future__ import annotations

import base64
import json
import os
import random
import string
import zlib
from collections.abc import Callable

import pytest

from memvault.scrub import Scrubber, rules

N_KEYS = int(os.environ.get("MEMVAULT_SCRUB_KEYS", "100000"))
N_SCANNED = 400

ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "-_"
B64 = ALNUM + "+/"
HEX = "0123456789abcdef"
B32 = string.ascii_uppercase + "234567"
B62 = string.digits + string.ascii_uppercase + string.ascii_lowercase


class Draw:
    """Uniform random strings over an alphabet, from one ``randbytes`` call at a time."""

    def __init__(self, seed: str) -> None:
        self.rng = random.Random(seed)
        self._tables: dict[str, tuple[bytes, bytes]] = {}

    def __call__(self, alphabet: str, n: int) -> str:
        table, keep = self._table(alphabet)
        out = b""
        while len(out) < n:
            raw = self.rng.randbytes(2 * n)
            out += raw.translate(None, keep).translate(table) if keep else raw.translate(table)
        return out[:n].decode("ascii")

    def _table(self, alphabet: str) -> tuple[bytes, bytes]:
        if alphabet not in self._tables:
            size = len(alphabet)
            usable = 256 - 256 % size  # bytes at or above this are dropped: no bias
            table = bytes(ord(alphabet[b % size]) if b < usable else 0 for b in range(256))
            self._tables[alphabet] = (table, bytes(range(usable, 256)))
        return self._tables[alphabet]


def _b62(n: int, width: int) -> str:
    out = ""
    while n:
        n, k = divmod(n, 62)
        out = B62[k] + out
    return out.rjust(width, "0")


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _github(d: Draw) -> str:
    if d.rng.random() < 0.3:
        return "github_pat_" + d(ALNUM, 22) + "_" + d(ALNUM, 59)
    body = d(ALNUM, 30)
    return d.rng.choice(["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]) + body + _b62(zlib.crc32(body.encode()), 6)


def _openai(d: Draw) -> str:
    shape = d.rng.randrange(4)
    if shape == 0:
        return "sk-" + d(ALNUM, 48)
    if shape == 1:
        return "sk-" + d(ALNUM, 20) + "T3BlbkFJ" + d(ALNUM, 20)
    if shape == 2:
        return "sk-proj-" + d(URLSAFE, 156)
    return "sk-svcacct-" + d(URLSAFE, 120)


def _jwt(d: Draw) -> str:
    head = d.rng.choice(['{"alg":"HS256","typ":"JWT"}', '{"alg":"RS256","typ":"JWT","kid":"' + d(HEX, 16) + '"}'])
    payload = json.dumps({"sub": d(ALNUM, 12), "iat": d.rng.randrange(2**31), "scope": d(string.ascii_lowercase, 6)})
    return f"{_b64url(head.encode())}.{_b64url(payload.encode())}.{_b64url(d.rng.randbytes(d.rng.choice([32, 256])))}"


#: kind -> (generator of one well-formed random value, sentence that gives the scrubber its context)
KEYS: dict[str, tuple[Callable[[Draw], str], str]] = {
    "anthropic_api_key": (
        lambda d: f"sk-ant-{d.rng.choice(['api03', 'admin01'])}-" + d(URLSAFE, 93) + "AA",
        "key: {}",
    ),
    "openai_api_key": (_openai, "OPENAI_API_KEY={}"),
    "aws_access_key_id": (lambda d: d.rng.choice(["AKIA", "ASIA"]) + d(B32, 16), "id {} for ci"),
    "aws_secret_access_key": (lambda d: d(B64, 40), "aws_secret_access_key = {}"),
    "google_api_key": (lambda d: "AIza" + d(URLSAFE, 35), "maps key {}"),
    "azure_connection_string": (
        lambda d: base64.b64encode(d.rng.randbytes(64)).decode(),
        "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={};EndpointSuffix=core.windows.net",
    ),
    "github_token": (_github, "GITHUB_TOKEN={}"),
    "gitlab_token": (lambda d: d.rng.choice(["glpat-", "gldt-", "glrt-"]) + d(URLSAFE, 20), "token {}"),
    "slack_token": (
        lambda d: f"{d.rng.choice(['xoxb', 'xoxp', 'xoxa'])}-{d(string.digits, 12)}-{d(string.digits, 13)}-"
        + d(ALNUM, 24),
        "bot token {}",
    ),
    "slack_webhook": (
        lambda d: "https://hooks.slack.com/services/T" + d(string.ascii_uppercase + string.digits, 8) + "/B"
        + d(string.ascii_uppercase + string.digits, 10) + "/" + d(ALNUM, 24),
        "alerts go to {}",
    ),
    "stripe_key": (
        lambda d: d.rng.choice(["sk_live_", "rk_live_", "sk_test_"]) + d(ALNUM, d.rng.choice([24, 99]))
        if d.rng.random() < 0.8
        else "whsec_" + d(ALNUM, 32),
        "stripe {}",
    ),
    "twilio_account_sid": (lambda d: "AC" + d(HEX, 32), "sid {}"),
    "twilio_auth_token": (lambda d: d(HEX, 32), "TWILIO_AUTH_TOKEN={}"),
    "sendgrid_api_key": (lambda d: "SG." + d(URLSAFE, 22) + "." + d(URLSAFE, 43), "mail {}"),
    "npm_token": (lambda d: "npm_" + d(ALNUM, 36), "npm {}"),
    "pypi_token": (lambda d: "pypi-AgEIcHlwaS5vcmc" + d(URLSAFE, d.rng.randrange(60, 200)), "twine -p {}"),
    "jwt": (_jwt, "token {}"),
}  # fmt: skip


def test_every_key_check_is_covered() -> None:
    assert set(KEYS) == set(rules.KEY_CHECKS)


@pytest.mark.parametrize("kind", sorted(KEYS))
def test_random_keys_are_never_let_through(kind: str) -> None:
    make, _context = KEYS[kind]
    check = rules.KEY_CHECKS[kind]
    draw = Draw(f"keys/{kind}")
    missed = [value for value in (make(draw) for _ in range(N_KEYS)) if not check(value)]
    # the failure names how many and their lengths only: never the values
    assert not missed, (
        f"{len(missed)} of {N_KEYS} random {kind} values fail the check (lengths {sorted(map(len, missed))[:10]})"
    )


@pytest.mark.parametrize("kind", sorted(KEYS))
def test_random_keys_are_masked_whole(kind: str) -> None:
    make, context = KEYS[kind]
    scrubber = Scrubber()
    draw = Draw(f"scan/{kind}")
    for _ in range(N_SCANNED):
        value = make(draw)
        text = "Note.\n" + context.format(value) + "\nEnd.\n"
        start = text.index(value)
        covering = [f for f in scrubber.scan(text) if f.start <= start and f.end >= start + len(value)]
        assert covering, f"a random {kind} of length {len(value)} is not masked whole"


@pytest.mark.parametrize(
    "value",
    [
        # real-looking bodies that hold a placeholder word, x run or marker by chance: still keys
        "sk-ant-api03-" + "Kq7vYourT2xWm9pL4rZ8bN1cHereF6gD3sJ0aQ5eUyI7oP2tR9wE4uM8kXxxxB1nV6" + "AA",
        "AKIA" + "XQ4VYOURZ7HEREK2",
        "Zx9Kexample/Wm2Rp8Lq+Tn4Vs7Yb1Hc5Jd3Gf6Qk",
    ],
)
def test_words_inside_random_values_do_not_make_placeholders(value: str) -> None:
    from memvault.scrub import is_placeholder

    assert not is_placeholder(value)


@pytest.mark.parametrize(
    "value",
    [
        "your-api-key-here", "YOUR_API_KEY", "<YOUR_API_KEY>", "{{ secrets.NPM_TOKEN }}", "${DB_PASSWORD}", "$TOKEN",
        "os.environ['OPENAI_API_KEY']", "vault:secret/data/app", "sk-ant-...abcd", "****", "xxxxxxxxxxxx1234",
        "changeme123", "insert-token-here", "[REDACTED]", "\u2022\u2022\u2022\u2022", "AKIAIOSFODNN7EXAMPLE",
    ],
)  # fmt: skip
def test_documented_placeholder_shapes_are_placeholders(value: str) -> None:
    from memvault.scrub import is_placeholder

    assert is_placeholder(value)
