"""The detectors of personal data: email addresses, phone numbers, payment cards, US SSNs, IP
addresses, IBANs and dates of birth (see :mod:`memvault.scrub.detectors` for what a detector is)."""

from __future__ import annotations

import bisect
import ipaddress
import re
import string
from collections.abc import Iterable
from typing import Final

from memvault.scrub.detectors import P_PII, Candidate
from memvault.scrub.prefilter import match_at
from memvault.scrub.validators import iban_length, iban_valid, iin_plausible, is_test_card, luhn_valid
from memvault.scrub.versions import Memo, version_context

#: An address: the local part and the domain may hold any letters (``åsa@företaget.se``), the top
#: label is letters or an IDNA label (``xn--p1ai``).
_EMAIL_RE: Final = re.compile(
    r"(?<![\w.%+\-])[^\W_][\w.%+\-]{0,63}@"
    r"((?:[^\W_](?:[\w\-]{0,61}[^\W_])?\.)+([^\W\d_]{2,24}|xn--[a-z0-9\-]{2,59}))(?![\w\-])"
)
_EMAIL_SKIP_DOMAINS: Final = ("example.com", "example.org", "example.net")
_EMAIL_SKIP_TLDS: Final = frozenset(
    {"test", "example", "invalid", "localhost", "local", "internal", "lan", "localdomain", "png", "jpg", "jpeg",
     "gif", "svg", "webp", "js", "ts", "tsx", "py", "rb", "go", "rs", "css", "html", "json", "yaml", "yml", "lock"}
)  # fmt: skip


#: Where ``_LOCAL_BACK_RE = [^\W_][\w.%+\-]{0,63}\Z`` first matches before an ``@`` (within 64
#: characters): at the first letter or digit after the last character that a local part cannot hold.
_NOT_LOCAL_RE: Final = re.compile(r"(?s).*[^\w.%+\-]")
_LOCAL_FIRST_RE: Final = re.compile(r"[^\W_]")


_ASSET_SCALE_RE: Final = re.compile(r"\d+x\.")


def detect_email(text: str, starts: tuple[list[int], ...]) -> Iterable[Candidate]:
    """Email addresses, except reserved example domains, asset names and ``git@host:`` remotes."""
    last = 0
    for q in starts[0]:  # (finditer_before, finding the local part without trying every offset)
        lo = max(0, q - 64)
        cut = _NOT_LOCAL_RE.match(text, lo, q)
        b = _LOCAL_FIRST_RE.search(text, lo if cut is None else cut.end(), q)
        if b is None or b.start() < last:
            continue
        m = _EMAIL_RE.match(text, b.start())
        if m is None:
            continue
        last = m.end()
        domain = m.group(1).lower()
        if m.group(2).lower() in _EMAIL_SKIP_TLDS or domain.endswith(_EMAIL_SKIP_DOMAINS):
            continue
        if _ASSET_SCALE_RE.match(domain):  # logo@2x.png
            continue
        if text.startswith(":", m.end()) and m.group().startswith("git@"):  # git@github.com:org/repo
            continue
        yield m.start(), m.end(), "email", P_PII["email"]


_NUM_RE: Final = re.compile(r"[+(\d](?<![\w.\-/:+#(][+(\d])[\d \-.()/]{5,24}\d(?![\w\-/]|\.\d|:\d)")
_PHONE_WORDS: Final = (
    r"phone|tel\b|tel\.|t\u00e9l|mobile|cell|call|fax|whatsapp|sms|handy|telefon|t\u00e9l\u00e9phone|portable|"
    r"m\u00f3vil|cellulare|\bph\b|contact|reach"
)
_NEG_WORDS: Final = (
    r"order|invoice|ticket|tracking|shipment|case|rma|ref|id\b|#|no\.|number|build|version|pid|\bport\b|po\b"
)
_CARD_WORDS: Final = r"card|visa|mastercard|amex|credit|debit|cc\b|pan\b|payment|charge|paid|pay\b"
_PHONE_CONTEXT_RE: Final = re.compile(f"(?i:{_PHONE_WORDS})")
_NEG_CONTEXT_RE: Final = re.compile(f"(?i:{_NEG_WORDS})")
_CARD_CONTEXT_RE: Final = re.compile(f"(?i:{_CARD_WORDS})")
#: The same words over an ASCII text in lower case (the same answer, several times faster: a
#: case-insensitive alternation is tried branch by branch at every offset); the look-ahead holds
#: the first letter of every word.
_PHONE_LOWER_RE: Final = re.compile(f"(?=[ptmcfwshr])(?:{_PHONE_WORDS})")
_NEG_LOWER_RE: Final = re.compile(f"(?=[oitscrn#bvp])(?:{_NEG_WORDS})")
_CARD_LOWER_RE: Final = re.compile(f"(?=[cvmadp])(?:{_CARD_WORDS})")


def _has_word(before: str, rx: re.Pattern[str], lower_rx: re.Pattern[str]) -> bool:
    """Whether ``rx`` (case-insensitive) matches in ``before``: ``lower_rx`` over it in lower case
    if it is ASCII."""
    if before.isascii():
        return lower_rx.search(before.lower()) is not None
    return rx.search(before) is not None


_NANP_RE: Final = re.compile(r"(?:\+?1[ \-.]?)?(?:\(([2-9]\d\d)\)[ \-.]?|([2-9]\d\d)([ \-.]))[2-9]\d\d[ \-.]\d{4}")
_INTL_RE: Final = re.compile(r"\+\d{1,3}(?:[ \-.]?\(\d{1,4}\))?(?:[ \-.]?\d{1,5}){1,6}")
_TRUNK_RE: Final = re.compile(r"\(?0\d{1,4}\)?(?:[ \-/.]\d{2,8}){1,5}")
_SSN_RE: Final = re.compile(r"(\d{3})([ \-]?)(\d{2})\2(\d{4})")
_DATE_LIKE_RE: Final = re.compile(r"\d{4}[\-/.]\d{1,2}[\-/.]\d{1,2}|\d{1,2}[\-/.]\d{1,2}[\-/.]\d{2,4}")
_CARD_GROUPS: Final = frozenset(
    {(4, 4, 4, 4), (4, 4, 4, 4, 3), (4, 6, 5), (4, 6, 4), (4, 4, 4, 1), (4, 4, 4, 2), (4, 4, 4, 3)}
)


def detect_numbers(text: str, starts: tuple[list[int], ...]) -> Iterable[Candidate]:
    """Phone numbers, payment cards and US SSNs: one scan of digit runs, each classified once."""
    match = _NUM_RE.match
    last = 0
    for pos in starts[0]:  # (match_at, inlined: this is the commonest rule by far)
        if pos < last:
            continue
        m = match(text, pos)
        if m is None:
            continue
        last = m.end()
        raw = m.group()
        start = pos
        if "(" in raw or ")" in raw:  # trim unbalanced parentheses at either end
            while raw.endswith(")") and raw.count(")") > raw.count("("):
                raw = raw[:-1]
            while raw.startswith("(") and raw.count("(") > raw.count(")"):
                raw, start = raw[1:], start + 1
        raw = raw.rstrip(" -./(")
        if not raw or len(raw) == 10 and raw[4] == "-" and raw[7] == "-" and _ISO_DATE_RE.fullmatch(raw):
            continue  # (the commonest number in notes: a date)
        if raw.count(".") > 2 and _DIGITS_DOTS_RE.fullmatch(raw):
            continue  # versions (what _classify_number concludes first)
        if len(raw.translate(_DROP_SEPARATORS)) < 7 and not raw.startswith(("0", "(0")):
            continue  # too few digits for any kind (only a trunk prefix after a phone word takes fewer)
        found = _classify_number(text, start, raw)
        if found is not None:
            yield found


_SSN_WORD_RE: Final = re.compile(r"(?i)ssn|social security")
_GROUP_SEP_RE: Final = re.compile(r"[ \-]")
_DIGITS: Final = frozenset(string.digits)
_DIGITS_DOTS_RE: Final = re.compile(r"[\d.]+")
_ISO_DATE_RE: Final = re.compile(r"\d{4}-\d\d-\d\d")
_DOTTED_QUAD_RE: Final = re.compile(r"\d\.\d+\.\d+\.\d")
_PHONE_CHARS_RE: Final = re.compile(r"\+?[\d ()\-.]+")
#: ``_NUM_RE`` matches hold ``\d`` characters (all ``str.isdigit``) and these separators only.
_DROP_SEPARATORS: Final = str.maketrans("", "", " -.()/+")


def _line_before(text: str, start: int) -> str:
    """Up to 40 characters before ``start`` on its line."""
    return text[max(0, start - 40) : start].rsplit("\n", 1)[-1]


def _classify_number(text: str, start: int, raw: str) -> Candidate | None:
    """The phone number, card or SSN that the digit run ``raw`` at ``start`` is, if any."""
    if raw.count(".") > 2 and _DIGITS_DOTS_RE.fullmatch(raw):
        return None  # versions (what the checks below conclude)
    end = start + len(raw)
    digits = raw.translate(_DROP_SEPARATORS)  # raw holds only \d characters and these separators
    # SSN
    sm = _SSN_RE.fullmatch(raw) if len(raw) in (9, 11) else None  # 9 digits, maybe 2 separators
    if sm and (sm.group(2) == "-" or _SSN_WORD_RE.search(_line_before(text, start))):
        area, group, serial = sm.group(1), sm.group(3), sm.group(4)
        if area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000":
            return start, end, "ssn", P_PII["ssn"]
    # card: a published test number is no one's; grouped as cards are printed, a number is a card
    # even after order or reference wording (plain digits there are an order or tracking number)
    if 13 <= len(digits) <= 19 and luhn_valid(digits) and iin_plausible(digits):
        if is_test_card(digits):
            return None
        grouped = tuple(len(g) for g in _GROUP_SEP_RE.split(raw)) in _CARD_GROUPS and len(set(raw) - _DIGITS) == 1
        line_before = _line_before(text, start)
        if (
            grouped
            or raw.isdigit()
            and not (
                _has_word(line_before[-20:], _NEG_CONTEXT_RE, _NEG_LOWER_RE)
                and not _has_word(line_before, _CARD_CONTEXT_RE, _CARD_LOWER_RE)
            )
        ):
            return start, end, "credit_card", P_PII["credit_card"]
    # dates, times, versions, decimals are not phone numbers
    if not raw.startswith("+") and (
        _DATE_LIKE_RE.search(raw)
        and len(_GROUP_SEP_RE.split(raw)) <= 4
        or _DIGITS_DOTS_RE.fullmatch(raw)
        and raw.count(".") != 2
    ):
        return None  # (a number with a country code is never a date)
    if _DOTTED_QUAD_RE.search(raw):  # dotted quad or version
        return None
    line_before = _line_before(text, start)
    context = _has_word(line_before[-30:], _PHONE_CONTEXT_RE, _PHONE_LOWER_RE)
    if not context and not raw.startswith("+") and _has_word(line_before[-20:], _NEG_CONTEXT_RE, _NEG_LOWER_RE):
        return None
    for rx in (_NANP_RE, _INTL_RE, _TRUNK_RE):
        pm = rx.fullmatch(raw)
        if pm is None:
            continue
        if rx is _NANP_RE and pm.group(3) is not None and pm.group(3) == "." and not context and raw.count(".") != 2:
            continue
        if rx is _TRUNK_RE and not (10 <= len(digits) <= 11) and not context:
            continue
        if rx is _INTL_RE and not 8 <= len(digits) <= 15:
            continue
        return start, end, "phone", P_PII["phone"]
    if context and 7 <= len(digits) <= 15 and _PHONE_CHARS_RE.fullmatch(raw):
        return start, end, "phone", P_PII["phone"]
    return None


_IPV4_RE: Final = re.compile(r"\d(?<![\w.\-]\d)\d{0,2}\.\d{1,3}\.\d{1,3}\.\d{1,3}(?![\w\-]|\.\d)")
_IPV6_RE: Final = re.compile(r"[23](?<![\w:.].)[0-9a-fA-F]{3}:[0-9a-fA-F:]{2,36}[0-9a-fA-F](?![\w:])")


def _private_v4(value: str) -> bool:
    """A quick answer for the common non-global IPv4 ranges (10/8, 127/8, 172.16/12, 192.168/16,
    100.64/10, 169.254/16, 0/8, 224/3); False means "ask :mod:`ipaddress`"."""
    a, _, rest = value.partition(".")
    b = rest.partition(".")[0]
    if len(a) > 3 or len(b) > 3:
        return False
    x, y = int(a), int(b)
    return (
        x in (0, 10, 127)
        or x >= 224
        or x == 172
        and 16 <= y <= 31
        or x == 192
        and y == 168
        or x == 100
        and 64 <= y <= 127
        or x == 169
        and y == 254
    )


def _v4_bounds() -> tuple[list[int], list[bool]] | None:
    """The IPv4 space cut where membership of the networks that decide ``is_global`` (those of
    :mod:`ipaddress`, and :func:`_private_v4`'s) changes: ``(cuts, report)``, ``report[i]`` (global
    and not one of :func:`_private_v4`'s) holding from ``cuts[i]`` up to the next cut. None if this
    Python's :mod:`ipaddress` keeps its networks elsewhere (then it is asked every time)."""
    consts = getattr(ipaddress.IPv4Address, "_constants", None)
    nets = [ipaddress.IPv4Network(n) for n in ("100.64.0.0/10", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16")]
    nets += [ipaddress.IPv4Network((x << 24, 8)) for x in (0, 10, 127, *range(224, 256))]
    for name in ("_public_network", "_private_networks", "_private_networks_exceptions"):
        got = getattr(consts, name, None)
        if isinstance(got, ipaddress.IPv4Network):
            nets.append(got)
        elif isinstance(got, list) and all(isinstance(n, ipaddress.IPv4Network) for n in got):
            nets.extend(got)
        elif name != "_private_networks_exceptions":
            return None
    ends = {int(n.broadcast_address) + 1 for n in nets}
    cuts = sorted(c for c in {0} | {int(n.network_address) for n in nets} | ends if c < 1 << 32)
    addrs = [ipaddress.IPv4Address(c) for c in cuts]
    return cuts, [a.is_global and not _private_v4(str(a)) for a in addrs]


_V4_BOUNDS: Final = _v4_bounds()
#: The value of each octet as :mod:`ipaddress` reads it (no leading zeros).
_OCTETS: Final[dict[str, int]] = {str(i): i for i in range(256)}


def _reported_v4(value: str) -> bool:
    """Whether the IPv4 address ``value`` (four runs of one to three digits joined by dots) is
    reported: not one of :func:`_private_v4`'s, an address to :mod:`ipaddress`, and global."""
    if _V4_BOUNDS is not None and value.isascii():
        a, b, c, d = map(_OCTETS.get, value.split("."))
        if a is None or b is None or c is None or d is None:
            return False  # (over 255, or a leading zero: ipaddress refuses those)
        n = a << 24 | b << 16 | c << 8 | d
        cuts, report = _V4_BOUNDS
        return report[bisect.bisect_right(cuts, n) - 1]
    if _private_v4(value):
        return False
    try:
        return ipaddress.IPv4Address(value).is_global
    except ValueError:
        return False


def detect_ip(text: str, starts: tuple[list[int], ...]) -> Iterable[Candidate]:
    """Globally routable IPv4 and IPv6 addresses (not version numbers)."""
    memo = Memo()  # (each quad is read once, also as another's neighbour)
    for m in match_at(_IPV4_RE, text, starts[0]):
        value = m.group()
        if _reported_v4(value) and not version_context(text, m.start(), m.end(), memo):
            yield m.start(), m.end(), "ip", P_PII["ip"]
    if starts[1] and ("::" in text or text.count(":") >= 7):
        for m in match_at(_IPV6_RE, text, starts[1]):
            try:
                addr6 = ipaddress.IPv6Address(m.group())
            except ValueError:
                continue
            if addr6.is_global:
                yield m.start(), m.end(), "ip", P_PII["ip"]


#: An IBAN as people write it: either case, in groups of four split by blanks or hyphens (the same
#: separator throughout), or none.
_IBAN_RE: Final = re.compile(
    r"[A-Za-z](?<![A-Za-z0-9][A-Za-z])[A-Za-z]\d{2}([ \-]?)[A-Za-z0-9]{4}(?:\1[A-Za-z0-9]{4}){1,6}"
    r"(?:\1[A-Za-z0-9]{1,3})?(?![A-Za-z0-9])"
)


def detect_iban(text: str, starts: tuple[list[int], ...]) -> Iterable[Candidate]:
    """IBANs with their country's length and a valid mod-97 check (the match may run on into a
    following group: the IBAN is its first characters of the country's length)."""
    for m in match_at(_IBAN_RE, text, starts[0]):
        value = m.group()
        length = iban_length(value[:2])
        if length is None:
            continue
        seen = 0
        for i, ch in enumerate(value):
            seen += ch.isalnum()
            if seen == length:
                cand = value[: i + 1]
                if iban_valid(cand):
                    yield m.start(), m.start() + len(cand), "iban", P_PII["iban"]
                break


_MONTHS: Final = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?|"
    r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?|januar|februar|märz|mai|juni|juli|oktober|dezember)\.?"
)
_DATE: Final = (
    r"(?:\d{4}[\-/.]\d{1,2}[\-/.]\d{1,2}|\d{1,2}[\-/.]\d{1,2}[\-/.](?:\d{4}|\d{2})|"
    r"\d{1,2}(?:st|nd|rd|th)?\.?\s+" + _MONTHS + r",?\s+\d{4}|" + _MONTHS + r"\s+\d{1,2}(?:st|nd|rd|th)?,?\s+\d{4})"
)
_DOB_RE: Final = re.compile(
    r"(?i)(?<![a-z])(?:d\.?o\.?b\.?|date[ _\-]?of[ _\-]?birth|birth[ _\-]?date|birthday|born|geburtsdatum|"
    r"geboren|fecha de nacimiento|date de naissance|née?|data di nascita|geb\.)(?![a-z])"
    r"[^\n\d]{0,40}?(?<!\d)(" + _DATE + r")(?![\d])"
)


def detect_dob(text: str, starts: tuple[list[int], ...]) -> Iterable[Candidate]:
    """Dates right after a birth-date word."""
    if not starts[0]:  # none of the words the rule is for
        return
    for m in match_at(_DOB_RE, text, starts[1]):
        yield m.start(1), m.end(1), "dob", P_PII["dob"]
