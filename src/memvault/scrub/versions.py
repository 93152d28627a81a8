"""When a dotted quad is a version or a section number, not an IPv4 address.

``8.4.15.160``, ``4.2.1.3`` and ``84.159.136.32`` are all valid IPv4 addresses by shape; notes hold
far more version, build and section numbers than addresses. :func:`version_context` reads the text
around a dotted quad for what binds it to a version; a quad nothing binds stays an address (a missed
address is a leak, a masked version only a nuisance):

* **Bound to a version** (decides alone): right after a version word (``version``, ``build``,
  ``firmware``, ``v`` but not ``curl -v``...) with nothing between them that is another number or an
  address word; right after a section word (``section``, ``§``, ``clause``, ``step``...), a software
  noun (``app``, ``plugin``, ``driver``, ``BIOS``...), a network operating system's name (``Junos``,
  ``FortiOS``...), an identifier naming a version (``"fileVersion": "``, ``<ProductVersion>``) or a
  version operator (``==``, ``>=``, ``^``, ``~``); in a range with a version (``8.4.15 to
  8.4.15.160``); opening a markdown heading, or an outline line (``4.2.1.3 Log retention``, every part
  under 31); in a table column whose header names versions (``version``, ``build``, ``installed``,
  ``latest``...) and not addresses.
* **Read as a version** unless its clause names an address (below): every part under 31 (a section
  number's shape: ``4.2.1.3``; about one public address in 5,000 is shaped so); a version word earlier
  on its line with no other number between them; ``since``, ``before``, ``older than``... before it,
  ``or later``, ``hotfix``, ``is the build``... after it; the target of an upgrade (``upgraded the edge
  routers to 5.1.2.3``); another build of a version on its line (the same first two parts:
  ``Firmware 2.4.10.1 fixes it; 2.4.9.7 still has it``); an item of a list, comparison or range
  with a version (``Affected builds: 4.9.26.133, 93.1.0.7 and 40.2.5.1``, ``2.4.1.1 vs 93.1.0.7``);
  a cell of a table column holding a version.
* **An address** wins over the second group: an address word in its clause (``ip``, ``address``,
  ``host``, ``dns``, ``record``, ``resolver``, ``ssh``, ``curl``, ``traffic``, ``logins``,
  ``allow-list``, ``blocked``, ``at``, ``allow``...; a list item's clause includes the line above the
  list, ``allowed_ips:``), a port or prefix length after it (``:8443``, ``/24``), a log line's
  ``- - [`` after it, or a table column whose header names addresses.

Everything is read on the quad's line, at most 160 characters before it and 80 after, the line above
a list, the rows of its table column up to its header and 240 characters below: what an edit's window
holds (:data:`memvault.scrub.engine.LINE_CONTEXT`, and a table up to its header).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Final

__all__ = ["version_context", "section_shaped"]

#: A version word (``v`` not as a command-line flag: ``curl -v http://...``).
_VERSION_WORDS: Final = (
    r"(?<![-\w])v|(?<![a-z0-9])(?:versions?|ver|builds?|releases?|released|rev|revision|firmware|fw|oid|sdk|hotfix)"
)
#: A version word, then at most 24 characters holding no digit-dot run, up to the quad.
_VERSION_BEFORE_RE: Final = re.compile(rf"(?:{_VERSION_WORDS})\b(?:(?!\d\.\d)[^\n]){{0,24}}$")
#: How far before a quad a ``_VERSION_BEFORE_RE`` match can start (its longest word, 24 more, and one).
_VERSION_WORD_REACH: Final = 33
#: A version word earlier on the line with no other number between it and the quad.
_VERSION_WORD_RE: Final = re.compile(
    rf"(?:{_VERSION_WORDS}|(?<![a-z0-9])(?:supported|compatible|compatibility))\b(?:(?!\d\.\d)[^\n])*$"
)
#: Words right before a quad that make it a section, a software component's or an OS's version.
_DIRECT_WORDS_RE: Final = re.compile(
    r"(?:\b(?:sections?|sect|sec|clauses?|chapters?|ch|paragraphs?|para|articles?|art|appendix|annex|"
    r"requirements?|req|controls?|steps?|items?|case|wbs|tasks?|figures?|fig|rules?|recommendations?|"
    r"criterion|subsection|apps?|application|agent|plugin|plug-in|add-in|addin|add-on|addon|extension|"
    r"drivers?|bios|uefi|image|software|package|library|lib|module|runtime|installer|toolkit|patch|"
    r"update|edition|os|ios|macos|ipados|tvos|watchos|chromeos|junos|fortios|pan-os|nx-os|eos|routeros)"
    r"\.?|§)[ \t]*(?:no\.|number|#)?[ \t:#(]*$"
)
#: An identifier holding ``Version``, ``Build`` or ``Release`` in mixed case right before a quad, then
#: what assigns it (``"fileVersion": "``, ``<ProductVersion>``, ``CFBundleShortVersionString = ``).
_CAMEL_VERSION_RE: Final = re.compile(
    r"(?:[a-z]|\b)(?:Version|Build|Release)(?:[A-Z][A-Za-z]*)?[\"'>]?[ \t]*(?:[:=]|\(\"?)?[ \t]*[\"']?$"
)
#: A version operator right before a quad (``pkg==1.2.3.4``, ``>= 1.2.3.4``, ``"^1.2.3.4"``).
_OPERATOR_RE: Final = re.compile(r"(?:==|>=|<=|~=|!=|\^|~>?)[ \t]*$")
#: Words before and after a quad that compare versions.
_COMPARE_BEFORE_RE: Final = re.compile(
    r"\b(?:since|before|prior to|older than|newer than|earlier than|later than|new in|changes in|notes for)[ \t]+$"
)
_COMPARE_AFTER_RE: Final = re.compile(
    r"\+|[ \t]+(?:or|and)[ \t]+(?:newer|later|above|higher|up|older|earlier|below|lower)\b"
    r"|[ \t]+\(?(?:build|release|hotfix|patch|update|version|firmware|beta|rc|lts)\b"
    r"|[ \t]+(?:is|was)[ \t]+the[ \t]+(?:\w+[ \t]+)?(?:build|release|version|hotfix|patch)\b"
)
#: The verb of an upgrade in a clause that ends with ``to`` (``upgraded the routers to ...``).
_UPGRADE_RE: Final = re.compile(
    r"\b(?:upgrad|updat|bump|pin(?:s|ned|ning)?\b|downgrad|roll(?:s|ed|ing)?\b|rollback|revert|patch|flash|"
    r"promot)[^\n]*\b(?:to|onto)[ \t]+$"
)
#: Words that name or act on network addresses (``at`` only right before the quad; ``ip``, ``vpn``,
#: ``nat``, ``wan``, ``dns`` not as the modifier of another noun: ``IP cameras``, ``VPN client``).
_ADDRESS_WORDS_RE: Final = re.compile(
    r"(?<![a-z0-9])(?:ip|vpn|nat|wan|dns)(?![a-z0-9])"
    r"(?![ \t]+(?!(?:is|was|of|for|to|at|on|in|and|or|from|via)\b)[a-z]{3,})|"
    r"(?<![a-z0-9])(?:ips|ipv4|address|addresses|addr|hosts?|hostname|servers?|records?|resolvers?|nameservers?|"
    r"proxy|egress|ingress|endpoints?|peers?|origin|upstream|vip|eip|waf|allow[- ]?list(?:ed)?|"
    r"white[- ]?list(?:ed)?|block[- ]?list(?:ed)?|black[- ]?list(?:ed)?|deny[- ]?list(?:ed)?|"
    r"security group|block(?:ed|ing)?|ban(?:ned)?|deny|denied|subnet|cidr|"
    r"route[ds]?|ssh|scp|sftp|rsync|ping(?:ed)?|curl|wget|dig|nslookup|traceroute|telnet|"
    r"connect(?:s|ed|ion|ions)?|logins?|logged|traffic|requests?|hits|via|src|dst|source|destination|"
    r"x-forwarded-for|xff|remote|attackers?|attacks?|scanners?|scanning|abuse|bots?|"
    r"suspicious|malicious|spam|whois|geo|geoip|geolocation|asn|as\d+|"
    r"port|listen(?:s|ing)?|bind|forward(?:ed)?|pointed|"
    r"ptr|cname|mx|public|static|external|elastic|floating|dhcp|lease|headers?)(?![a-z0-9])"
    r"|(?:\b(?:at|behind|allow)|(?<![\w-])(?:-s|--source))[ \t]+$"
)
#: An address's port, prefix length or log line after the quad.
_ADDRESS_AFTER_RE: Final = re.compile(r":\d|/\d{1,2}\b| - - \[")
#: Where a clause begins (the quad's clause is read back to it).
_CLAUSE_END_RE: Final = re.compile(r"[\n;|]|[.!?](?=[ \t])")
#: Where the clause after a quad ends (a colon opens another one: ``since 2.9.5.91: the login screen``).
_AFTER_CLAUSE_END_RE: Final = re.compile(r"[\n;|:]|[.!?](?=[ \t])")
#: A dotted number of three or four parts (the other numbers on a quad's line).
_DOTTED_RE: Final = re.compile(r"(?<![\w.])v?\d{1,5}(?:\.\d{1,5}){2,3}(?![\w]|\.\d)")
#: A list separator, comparison or range word between two numbers.
_LIST_SEP_RE: Final = re.compile(
    r"[ \t]*(?:,[ \t]*(?:and|or)?|/|&|\band\b|\bor\b|\bvs\.?|\bversus\b|\bagainst\b|\bto\b|\bthrough\b"
    r"|->|\u2192|\u2013|\.\.)[ \t]*"
)
#: The range words of ``_RANGE_BEFORE_RE`` (which the text before a dotted quad must end with).
_RANGE_WORDS: Final = ("to", "->", "\u2192", "\u2013", "..")
#: A version and a range word before a dotted quad (``8.4.15 to 8.4.16.2``, ``v8.4.15.160 -> ...``).
_RANGE_BEFORE_RE: Final = re.compile(r"(v?)(\d+(?:\.\d+){2,3})[ \t]*(?:to|->|\u2192|\u2013|\.\.)[ \t]*$")
#: A range word and a version after a dotted quad.
_RANGE_AFTER_RE: Final = re.compile(r"[ \t]*(?:to|->|\u2192|\u2013|\.\.)[ \t]*(v?)(\d+(?:\.\d+){2,3})")
#: A markdown heading that opens with the dotted quad: a release heading (``## 8.4.15.160 (date)``).
_HEADING_BEFORE_RE: Final = re.compile(r"(?i)[ \t]*#{1,6}[ \t]+(?:\[|v|version[ \t]+|release[ \t]+)?$")
#: What may open an outline line before its number (indentation, a list marker).
_OUTLINE_BEFORE_RE: Final = re.compile(r"[ \t]*(?:[-*+][ \t]+)?$")
#: A list item's line.
_LIST_ITEM_RE: Final = re.compile(r"[ \t]*[-*+][ \t]")
#: An outline line's title after its number.
_OUTLINE_AFTER_RE: Final = re.compile(r"\.?[ \t]+[A-Z]")
#: Table column headers naming versions, and naming addresses.
_VERSION_HEADER_RE: Final = re.compile(r"(?i)version|build|release|firmware|\bver\b|installed|latest|current|target")
_ADDRESS_HEADER_RE: Final = re.compile(r"(?i)\bips?\b|address|\bhosts?\b|\bservers?\b|\bpeers?\b|egress|ingress")
_TABLE_RULE_RE: Final = re.compile(r"[ \t]*\|?[ \t:\-|]*-[ \t:\-|]*$")
#: How far back a line is followed to its start (a longer line is not a heading or a table row).
_LINE_REACH: Final = 1024
#: How far before and after a quad its line is read.
_BEFORE: Final = 160
_AFTER: Final = 80
#: How far after a quad the rows below it in its table are read (within an edit's window).
_BELOW: Final = 240
#: Parts under this make a version's shape (first two parts) or an outline number's (all four).
_SMALL: Final = 31


def section_shaped(quad: str) -> bool:
    """Whether the dotted quad ``quad`` has the shape of a section or outline number: every part
    under 31 (``4.2.1.3``; about one public address in 5,000 is shaped so)."""
    return all(len(p) <= 2 and int(p) < _SMALL for p in quad.split("."))


def version_context(text: str, start: int, end: int) -> bool:
    """Whether the dotted quad ``text[start:end]`` reads as a version or a section number, not an
    address (the rules are in this module's docstring).

    Args:
        text: the whole text.
        start, end: the dotted quad's span.

    Returns:
        True for a version, build, section or outline number.
    """
    return _reads_as_version(text, start, end, near=True)


def _reads_as_version(text: str, start: int, end: int, *, near: bool) -> bool:
    """:func:`version_context`; the other numbers on the line are consulted only if ``near``."""
    nl = text.rfind("\n", max(0, start - _LINE_REACH), start)
    line_start = nl + 1 if nl >= 0 or start <= _LINE_REACH else -1  # -1: a line too long to follow
    lo = max(0, start - _BEFORE, line_start)
    nl = text.find("\n", end, end + _AFTER)
    hi = min(len(text), end + _AFTER) if nl < 0 else nl
    before = text[lo:start]
    low_before = before.lower()
    header, above = _table_column(text, line_start, start)
    if _bound(text, start, end, line_start, before, low_before, header):
        return True
    clause = low_before[max((m.end() for m in _CLAUSE_END_RE.finditer(low_before)), default=0) :]
    if line_start >= 0 and _OUTLINE_BEFORE_RE.fullmatch(text, line_start, start):
        clause = _list_key(text, line_start) + " " + clause  # an item of a list: its key line is its clause
    after = text[end:hi]
    cut = _AFTER_CLAUSE_END_RE.search(after)
    if (
        _ADDRESS_WORDS_RE.search(clause) is not None
        or _ADDRESS_WORDS_RE.search(after[: cut.start() if cut else 40].lower()[:40]) is not None
        or _ADDRESS_AFTER_RE.match(after) is not None
        or _ADDRESS_HEADER_RE.search(header) is not None
    ):
        return False
    return (
        section_shaped(text[start:end])
        or _VERSION_WORD_RE.search(low_before) is not None
        or _VERSION_WORD_RE.search(clause) is not None
        or _COMPARE_BEFORE_RE.search(low_before) is not None
        or _COMPARE_AFTER_RE.match(after) is not None
        or _UPGRADE_RE.search(clause) is not None
        or near
        and (
            _near_a_version(text, start, end, lo, hi)
            or bool(header or above)
            and _version_in_column(text, above + _cells_below(text, line_start, start))
        )
    )


def _version_in_column(text: str, cells: list[tuple[int, int]]) -> bool:
    """Whether another cell of the quad's table column holds a version (a column holds one kind of value)."""
    for a, b in cells[:8]:
        m = _DOTTED_RE.search(text, a, b)
        if m is not None and text[a:b].strip() == m.group() and _is_version(text, m):
            return True
    return False


def _list_key(text: str, line_start: int) -> str:
    """The line above the list whose item starts at ``line_start`` (``allowed_ips:``, ``Affected
    builds:``), in lower case; "" if it is more than ``_BEFORE`` characters up."""
    pos = line_start
    while pos > 0 and line_start - pos <= _BEFORE:
        prev = text.rfind("\n", 0, pos - 1) + 1
        line = text[prev : pos - 1]
        if _LIST_ITEM_RE.match(line) is None:
            return line.lower() if line_start - prev <= _BEFORE + len(line) else ""
        pos = prev
    return ""


def _bound(text: str, start: int, end: int, line_start: int, before: str, low_before: str, header: str) -> bool:
    """The first group of the module's docstring: what makes the quad a version on its own."""
    # (searched from a position, not in a slice: ``\b`` sees the character before it)
    near = max(0, len(low_before) - _VERSION_WORD_REACH)
    m = _VERSION_BEFORE_RE.search(low_before, near)
    if m is not None and _ADDRESS_WORDS_RE.search(low_before, m.start()) is None:
        return True
    if (
        _DIRECT_WORDS_RE.search(low_before, near) is not None
        or _OPERATOR_RE.search(before) is not None
        or _CAMEL_VERSION_RE.search(before, max(0, len(before) - 64)) is not None
    ):
        return True
    if before.rstrip(" \t").endswith(_RANGE_WORDS):  # (else _RANGE_BEFORE_RE cannot match)
        r = _RANGE_BEFORE_RE.search(before[-40:])
        if r is not None and _version_token(r.group(1), r.group(2)):
            return True
    r = _RANGE_AFTER_RE.match(text, end)
    if r is not None and _version_token(r.group(1), r.group(2)):
        return True
    if line_start < 0:
        return False
    if _HEADING_BEFORE_RE.match(text, line_start, start):
        return True
    if (
        _OUTLINE_BEFORE_RE.match(text, line_start, start)
        and _OUTLINE_AFTER_RE.match(text, end)
        and section_shaped(text[start:end])
    ):
        return True
    return _VERSION_HEADER_RE.search(header) is not None and _ADDRESS_HEADER_RE.search(header) is None


def _near_a_version(text: str, start: int, end: int, lo: int, hi: int) -> bool:
    """Another build of a version on the quad's line (the same first two parts), or an item of a
    list of versions (``builds 2.4.1.1, 93.1.0.7 and ...``, ``93.1.0.7 vs 2.4.1.1``: the items before
    and after it, up to a version)."""
    prefix = text[start:end].split(".", 2)[:2]
    others = [m for m in _DOTTED_RE.finditer(text, lo, hi) if m.start() != start][:8]
    for m in others:
        if m.group().lstrip("v").split(".", 2)[:2] == prefix and _is_version(text, m):
            return True
    pos = start
    for m in reversed([m for m in others if m.end() <= start]):
        if _LIST_SEP_RE.fullmatch(text, m.end(), pos) is None:
            break
        if _is_version(text, m):
            return True
        pos = m.start()
    pos = end
    for m in [m for m in others if m.start() >= end]:
        if _LIST_SEP_RE.fullmatch(text, pos, m.start()) is None:
            break
        if _is_version(text, m):
            return True
        pos = m.end()
    return False


def _is_version(text: str, m: re.Match[str]) -> bool:
    """Whether the dotted number ``m`` is a version: not an IPv4 address by shape, or read as one."""
    value = m.group()
    if value.startswith("v") or value.count(".") != 3:
        return True
    try:
        ipaddress.IPv4Address(value)
    except ValueError:
        return True
    return _reads_as_version(text, m.start(), m.end(), near=False)


def _version_token(prefix: str, token: str) -> bool:
    """Whether ``token`` (with its ``v`` prefix, if any) is a version and not an IPv4 address."""
    if prefix:
        return True
    try:
        ipaddress.IPv4Address(token)
    except ValueError:
        return True
    return False


def _table_column(text: str, line_start: int, pos: int) -> tuple[str, list[tuple[int, int]]]:
    """The header cell of the markdown table column ``pos`` is in, and the spans of that column's
    cells in the rows above (``("", [])`` if not in a table, or the table is more than 64 rows or its
    lines more than ``_LINE_REACH`` characters long)."""
    if line_start < 0 or not text[line_start:pos].lstrip().startswith("|"):
        return "", []
    column = text.count("|", line_start, pos)
    cells: list[tuple[int, int]] = []
    end = line_start - 1
    for _ in range(64):  # walk up the table to its rule line; the header is the line above it
        if end <= 0:
            return "", []
        start = text.rfind("\n", max(0, end - _LINE_REACH), end) + 1
        line = text[start:end]
        if not start and end > _LINE_REACH or not line.lstrip().startswith("|"):
            return "", []
        if _TABLE_RULE_RE.fullmatch(line):
            head_start = text.rfind("\n", max(0, start - 1 - _LINE_REACH), max(0, start - 1)) + 1
            head = text[head_start : max(head_start, start - 1)].split("|")
            return (head[column] if column < len(head) else ""), cells
        bars = [i for i, ch in enumerate(line) if ch == "|"]
        if column < len(bars):
            cells.append((start + bars[column - 1] + 1, start + bars[column]))
        end = start - 1
    return "", []


def _cells_below(text: str, line_start: int, pos: int) -> list[tuple[int, int]]:
    """The spans of the cells of ``pos``'s table column in the rows below it, up to ``_BELOW``
    characters after ``pos``."""
    column = text.count("|", line_start, pos)
    cells: list[tuple[int, int]] = []
    start = text.find("\n", pos, pos + _BELOW) + 1
    while 0 < start < pos + _BELOW and text.startswith("|", start):
        end = text.find("\n", start, pos + _BELOW)
        if end < 0:
            break
        bars = [i for i, ch in enumerate(text[start:end]) if ch == "|"]
        if column < len(bars):
            cells.append((start + bars[column - 1] + 1, start + bars[column]))
        start = end + 1
    return cells
