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


# -- every first character, and any entropy after a known name -------------------------------------
#
# A key's random part may start with any character of its alphabet (an AWS secret key starts with ``/``
# or ``+`` one time in 32), and a random key with no digit is still a key, under any of its names. The
# credentials without a prefix of their own (AWS secret keys, Azure storage keys, Twilio auth tokens) are
# found by their context; after the name of that very credential
# (``aws_secret_access_key=``) a value of its shape is the credential whatever its entropy: one drawn
# from a handful of characters is still the key. Only documented placeholder shapes are not keys: ``x``
# runs and values of three distinct characters or fewer (either case), which the low-entropy values
# below avoid. (A prefixed key whose body is that regular is taken for a placeholder, on purpose.)


def _part(d: Draw, alphabet: str, n: int, first: str | None = None, mode: str = "random") -> str:
    """``n`` characters of ``alphabet``: uniform (``random``), without digits (``nodigit``, for an
    alphabet with other characters), or drawn from 4-6 of its characters, distinct case-insensitively
    and not ``x`` (``low``: about 2-2.6 bits per character, where a random key has 5-6); the first one
    ``first`` if given."""
    if mode == "nodigit" and not alphabet.isdigit():
        alphabet = "".join(c for c in alphabet if not c.isdigit())
    elif mode == "low" and len(alphabet) > 8:
        folded = sorted({c.lower() for c in alphabet} - {"x"})
        chosen = set(d.rng.sample(folded, d.rng.randint(4, 6)))
        pool = [c for c in alphabet if c.lower() in chosen]
        while True:
            value = d("".join(pool), n)
            if len({c.lower() for c in value}) >= 4:
                break
        return value if first is None else first + value[1:]
    value = d(alphabet, n)
    return value if first is None else first + value[1:]


Maker = Callable[..., str]


def _checksummed(d: Draw, first: str | None, mode: str) -> str:
    body = _part(d, ALNUM, 30, first, mode)
    return "ghp_" + body + _b62(zlib.crc32(body.encode()), 6)


def _jwt_signed(d: Draw, first: str | None, mode: str) -> str:
    head, payload, _sig = _jwt(d).split(".")
    return f"{head}.{payload}." + _part(d, URLSAFE, 43, first, mode)


def _azure(n: int, pad: str) -> Maker:
    return lambda d, first, mode: _part(d, B64, n, first, mode) + pad


def _prefixed(prefix: str, alphabet: str, n: int, suffix: str = "") -> Maker:
    return lambda d, first, mode: prefix + _part(d, alphabet, n, first, mode) + suffix


#: kind -> (the alphabet of the first random part, the ways its keys are written: ``make(draw, first,
#: mode)``), from the providers' published formats.
SHAPES: dict[str, tuple[str, list[Maker]]] = {
    "anthropic_api_key": (URLSAFE, [_prefixed("sk-ant-api03-", URLSAFE, 93, "AA"), _prefixed("sk-ant-admin01-", URLSAFE, 93, "AA")]),
    "openai_api_key": (
        ALNUM + "-_",
        [
            _prefixed("sk-", ALNUM, 48),
            lambda d, first, mode: "sk-" + _part(d, ALNUM, 20, first, mode) + "T3BlbkFJ" + _part(d, ALNUM, 20, None, mode),
            _prefixed("sk-proj-", URLSAFE, 156),
            _prefixed("sk-svcacct-", URLSAFE, 120),
        ],
    ),
    "aws_access_key_id": (B32, [_prefixed("AKIA", B32, 16), _prefixed("ASIA", B32, 16)]),
    "aws_secret_access_key": (B64, [_prefixed("", B64, 40)]),
    "google_api_key": (URLSAFE, [_prefixed("AIza", URLSAFE, 35)]),
    "azure_connection_string": (B64, [_azure(86, "=="), _azure(43, "=")]),
    "github_token": (
        ALNUM,
        [
            _checksummed,
            lambda d, first, mode: "github_pat_" + _part(d, ALNUM, 22, first, mode) + "_" + _part(d, ALNUM, 59, None, mode),
        ],
    ),
    "gitlab_token": (URLSAFE, [_prefixed("glpat-", URLSAFE, 20), _prefixed("gldt-", URLSAFE, 20)]),
    "slack_token": (
        ALNUM,
        [
            lambda d, first, mode: f"xoxb-{d(string.digits, 12)}-{d(string.digits, 13)}-" + _part(d, ALNUM, 24, first, mode),
            lambda d, first, mode: f"xoxp-{d(string.digits, 12)}-{d(string.digits, 12)}-{d(string.digits, 13)}-"
            + _part(d, HEX, 32, first if first is None or first in HEX else None, mode),
        ],
    ),
    "slack_webhook": (
        string.ascii_uppercase + string.digits,
        [
            lambda d, first, mode: "https://hooks.slack.com/services/T"
            + _part(d, string.ascii_uppercase + string.digits, 8, first, mode)
            + "/B" + d(string.ascii_uppercase + string.digits, 10) + "/" + _part(d, ALNUM, 24, None, mode),
        ],
    ),
    "stripe_key": (
        ALNUM,
        [_prefixed("sk_live_", ALNUM, 24), _prefixed("rk_live_", ALNUM, 99), _prefixed("sk_test_", ALNUM, 24), _prefixed("whsec_", ALNUM, 32)],
    ),
    "twilio_account_sid": (HEX, [_prefixed("AC", HEX, 32)]),
    "twilio_auth_token": (HEX, [_prefixed("", HEX, 32)]),
    "sendgrid_api_key": (
        URLSAFE,
        [lambda d, first, mode: "SG." + _part(d, URLSAFE, 22, first, mode) + "." + _part(d, URLSAFE, 43, None, mode)],
    ),
    "npm_token": (ALNUM, [_prefixed("npm_", ALNUM, 36)]),
    "pypi_token": (URLSAFE, [_prefixed("pypi-AgEIcHlwaS5vcmc", URLSAFE, 120)]),
    "jwt": (URLSAFE, [_jwt_signed]),
}  # fmt: skip

#: The names each credential goes by in environments, configuration and SDK responses (providers' docs).
KNOWN_NAMES: dict[str, list[str]] = {
    "anthropic_api_key": ["ANTHROPIC_API_KEY", "anthropicApiKey"],
    "openai_api_key": ["OPENAI_API_KEY", "openai_api_key"],
    "aws_access_key_id": ["AWS_ACCESS_KEY_ID", "aws_access_key_id", "AccessKeyId"],
    "aws_secret_access_key": ["AWS_SECRET_ACCESS_KEY", "aws_secret_access_key", "SecretAccessKey", "secretAccessKey"],
    "google_api_key": ["GOOGLE_API_KEY", "GEMINI_API_KEY"],
    "azure_connection_string": ["AccountKey", "AZURE_STORAGE_KEY", "SharedAccessKey"],
    "github_token": ["GITHUB_TOKEN", "GH_TOKEN"],
    "gitlab_token": ["GITLAB_TOKEN"],
    "slack_token": ["SLACK_BOT_TOKEN", "SLACK_TOKEN"],
    "stripe_key": ["STRIPE_SECRET_KEY", "STRIPE_API_KEY"],
    "twilio_account_sid": ["TWILIO_ACCOUNT_SID", "accountSid"],
    "twilio_auth_token": ["TWILIO_AUTH_TOKEN", "twilio_auth_token"],
    "sendgrid_api_key": ["SENDGRID_API_KEY"],
    "npm_token": ["NPM_TOKEN", "NODE_AUTH_TOKEN"],
    "pypi_token": ["PYPI_TOKEN", "TWINE_PASSWORD", "UV_PUBLISH_TOKEN"],
}

#: How a value is assigned to a name: environment, shell, YAML, JSON, code, XML, a command line, prose.
ASSIGNMENTS = [
    "{name}={value}",
    'export {name}="{value}"',
    "{name}: {value}",
    "  {name}: '{value}'",
    '{{"{name}": "{value}"}}',
    '{name} = "{value}"',
    "<{name}>{value}</{name}>",
    "docker run -e {name}={value} ghcr.io/acme/app",
    "Set `{name}={value}` on the runner.",
    "{name}={value} for the ci user",
]


def _masked_whole(scrubber: Scrubber, text: str, value: str) -> bool:
    start = text.index(value)
    return any(f.start <= start and f.end >= start + len(value) for f in scrubber.scan(text))


def test_every_kind_has_its_alphabet_covered() -> None:
    assert set(SHAPES) == set(rules.KEY_CHECKS)
    assert set(KNOWN_NAMES) <= set(SHAPES)


@pytest.mark.parametrize("kind", sorted(SHAPES))
def test_every_first_character_of_the_alphabet_is_masked(kind: str) -> None:
    """Each way of writing the kind, its random part starting with each character of its alphabet:
    masked whole in the kind's sentence, and after each of its names in each syntax."""
    alphabet, makers = SHAPES[kind]
    scrubber = Scrubber()
    draw = Draw(f"first/{kind}")
    missed: list[str] = []
    for first in alphabet:
        for make in [m for m in makers for _ in range(3)]:
            value = make(draw, first, "random")
            texts = [KEYS[kind][1].format(value)]
            texts += [a.format(name=n, value=value) for n in KNOWN_NAMES.get(kind, []) for a in ASSIGNMENTS]
            missed += [
                f"{first!r} in {t.replace(value, '<key>')!r}"
                for t in texts
                if not _masked_whole(scrubber, f"Note.\n{t}\nEnd.\n", value)
            ]
    # the failure names the first character and the context only: never a value
    assert not missed, f"{len(missed)} {kind} keys not masked whole, e.g. {missed[:5]}"


@pytest.mark.parametrize("first", ["/", "+"])
def test_aws_secrets_starting_with_a_slash_or_plus_after_their_name(first: str) -> None:
    """Random AWS secret keys right after ``aws_secret_access_key=``, starting with ``/`` or ``+`` (one
    key in 32): a value starting with ``/`` was taken for a path, and the AWS rule did not look right
    after ``=``."""
    scrubber = Scrubber()
    draw = Draw(f"aws-first/{first}")
    missed = 0
    for _ in range(200):
        value = _part(draw, B64, 40, first)
        missed += not _masked_whole(scrubber, f"[default]\naws_secret_access_key={value}\n", value)
    assert missed == 0, f"{missed} of 200 AWS secret keys starting with {first!r} not masked"


@pytest.mark.parametrize("joiner", ["_", "-", ".", " ", ""])
def test_every_spelling_of_the_aws_names_is_read(joiner: str) -> None:
    """The AWS secret key's names with each joiner between their words, in each case (``secret-access-key``,
    ``SECRET.ACCESS.KEY``, ``awsSecretAccessKey``): a value of the key's shape after any of them is masked,
    whatever its first character."""
    scrubber = Scrubber()
    draw = Draw(f"aws-names/{joiner!r}")
    missed: list[str] = []
    for words in (["aws", "secret", "access", "key"], ["secret", "access", "key"], ["aws", "secret", "key"]):
        for name in (joiner.join(words), joiner.join(words).upper(), words[0] + "".join(w.title() for w in words[1:])):
            for first in ("/", "+", "A", "z", "7"):
                value = _part(draw, B64, 40, first)
                for assignment in ("{name}={value}", "{name}: {value}", "--{name} {value}"):
                    text = assignment.format(name=name, value=value)
                    if not _masked_whole(scrubber, f"Note.\n{text}\nEnd.\n", value):
                        missed.append(f"{first!r} in {assignment.format(name=name, value='<key>')!r}")
    assert not missed, f"{len(missed)} AWS secret keys not masked whole, e.g. {missed[:5]}"


#: The credentials found by their context (no prefix of their own, or one that says little).
CONTEXT_KINDS = ["aws_secret_access_key", "azure_connection_string", "twilio_auth_token"]


@pytest.mark.parametrize(
    ("kind", "mode"),
    # (a Twilio account sid without digits is 32 of six letters: a value of two or three bits per
    # character, as regular as the low-entropy values, which only the context kinds are held to)
    [(k, "nodigit") for k in sorted(KNOWN_NAMES) if k != "twilio_account_sid"] + [(k, "low") for k in CONTEXT_KINDS],
)
def test_any_value_of_the_shape_after_a_known_name_is_masked(kind: str, mode: str) -> None:
    """Random values with no digit after each of the kind's names in each syntax, and for the
    credentials found by their context values of 2-2.6 bits per character: masked whole."""
    _alphabet, makers = SHAPES[kind]
    scrubber = Scrubber()
    draw = Draw(f"{mode}/{kind}")
    missed: list[str] = []
    for name in KNOWN_NAMES[kind]:
        for assignment in ASSIGNMENTS:
            for make in makers:
                for _ in range(3):
                    value = make(draw, None, mode)
                    text = "Note.\n" + assignment.format(name=name, value=value) + "\nEnd.\n"
                    if not _masked_whole(scrubber, text, value):
                        missed.append(assignment.format(name=name, value="<key>"))
    assert not missed, f"{len(missed)} {mode} {kind} values not masked whole, e.g. {missed[:5]}"


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
