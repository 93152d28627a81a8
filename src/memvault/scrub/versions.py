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
  with a version, its items' labels in parentheses or not (``Affected builds: 4.9.26.133, 93.1.0.7 and
  40.2.5.1``, ``Build numbers: 14.0.5.117 (Android) and 5.8.7.40 (iOS)``, ``2.4.1.1 vs 93.1.0.7``);
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

import itertools
import re
from typing import Final, NamedTuple

__all__ = ["version_context", "section_shaped", "Memo", "Alone"]

#: A version word (``v`` not as a command-line flag: ``curl -v http://...``).
_VERSION_WORDS: Final = (
    r"(?=[vbrfosh])(?:(?<![-\w])v|(?<![a-z0-9])"
    r"(?:versions?|ver|builds?|releases?|released|rev|revision|firmware|fw|oid|sdk|hotfix))"
)
#: What may stand between a version word and its number with no word between them (``version: ``).
_GAP_MARKS: Final = " \t:=#(\"'`"
#: A version word, then at most 24 characters holding no digit-dot run, or a version and a range word
#: (``versions 8.4.15.160 to ``), up to the quad.
_VERSION_BEFORE_RE: Final = re.compile(
    rf"(?:{_VERSION_WORDS})\b(?:(?P<gap>(?:(?!\d\.\d)[^\n]){{0,24}})"
    r"|[ \t:]*v?\d+(?:\.\d+){2,3}[ \t]*(?:to|->|\u2192|\u2013|\.\.)[ \t]*)$"
)
#: How far before a quad a ``_VERSION_BEFORE_RE`` match can start (its longest word, 24 more, and one).
_VERSION_WORD_REACH: Final = 33
#: A version word earlier on the line with no other number between it and the quad.
_VERSION_WORD_RE: Final = re.compile(
    rf"(?:{_VERSION_WORDS}|(?<![a-z0-9])(?:supported|compatible|compatibility))\b(?:(?!\d\.\d)[^\n])*$"
)
#: Words right before a quad that make it a section, a software component's or an OS's version.
_DIRECT_WORDS_RE: Final = re.compile(
    r"(?=[a-fij-prstuw\xa7])(?:\b(?:sections?|sect|sec|clauses?|chapters?|ch|paragraphs?|para|articles?|art|appendix|annex|"
    r"requirements?|req|controls?|steps?|items?|case|wbs|tasks?|figures?|fig|rules?|recommendations?|"
    r"criterion|subsection|apps?|application|agent|plugin|plug-in|add-in|addin|add-on|addon|extension|"
    r"drivers?|bios|uefi|image|software|package|library|lib|module|runtime|installer|toolkit|patch|"
    r"update|edition|os|ios|macos|ipados|tvos|watchos|chromeos|junos|fortios|pan-os|nx-os|eos|routeros)"
    r"\.?|§)[ \t]*(?:no\.|number|#)?[ \t:#(]*$"
)
#: An identifier holding ``Version``, ``Build`` or ``Release`` in mixed case right before a quad, then
#: what assigns it (``"fileVersion": "``, ``<ProductVersion>``, ``CFBundleShortVersionString = ``).
_CAMEL_VERSION_RE: Final = re.compile(
    r"(?<![A-Z0-9_])(?:Version|Build|Release)(?:[A-Z][A-Za-z]*)?[\"'>]?[ \t]*(?:[:=]|\(\"?)?[ \t]*[\"']?$"
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
    r"(?<![a-z0-9])(?=[a-z-])(?:"
    r"(?:ip|vpn|nat|wan|dns)(?![a-z0-9])"
    r"(?![ \t]+(?!(?:is|was|of|for|to|at|on|in|and|or|from|via)\b)[a-z]{3,})|"
    r"(?:ips|ipv4|address|addresses|addr|hosts?|hostname|servers?|records?|resolvers?|nameservers?|"
    r"proxy|egress|ingress|endpoints?|peers?|origin|upstream|vip|eip|waf|allow[- ]?list(?:ed)?|"
    r"white[- ]?list(?:ed)?|block[- ]?list(?:ed)?|black[- ]?list(?:ed)?|deny[- ]?list(?:ed)?|"
    r"security group|block(?:ed|ing)?|ban(?:ned)?|deny|denied|subnet|cidr|"
    r"route[ds]?|ssh|scp|sftp|rsync|ping(?:ed)?|curl|wget|dig|nslookup|traceroute|telnet|"
    r"connect(?:s|ed|ion|ions)?|logins?|logged|traffic|requests?|hits|via|src|dst|source|destination|"
    r"x-forwarded-for|xff|remote|attackers?|attacks?|scanners?|scanning|abuse|bots?|"
    r"suspicious|malicious|spam|whois|geo|geoip|geolocation|asn|as\d+|"
    r"port|listen(?:s|ing)?|bind|forward(?:ed)?|pointed|"
    r"ptr|cname|mx|public|static|external|elastic|floating|dhcp|lease|headers?)(?![a-z0-9])"
    r"|(?:at|behind|allow|(?<![\w-])(?:-s|--source))[ \t]+$)"
)
#: An address's port, prefix length or log line after the quad.
_ADDRESS_AFTER_RE: Final = re.compile(r":\d|/\d{1,2}\b| - - \[")
#: The text up to the last digit-dot run (a version word binds the first number after it).
_LAST_NUMBER_RE: Final = re.compile(r"(?s).*\d\.\d")
#: The parts of an IPv4 address as :mod:`ipaddress` reads them (no leading zeros).
_OCTETS: Final = frozenset(str(i) for i in range(256))
#: Where the clause after a quad ends (a colon opens another one: ``since 2.9.5.91: the login screen``).
_AFTER_CLAUSE_END_RE: Final = re.compile(r"[\n;|:]|[.!?](?=[ \t])")
#: A dotted number of three or four parts (the other numbers on a quad's line).
_DOTTED_RE: Final = re.compile(r"(?<![\w.])v?\d{1,5}(?:\.\d{1,5}){2,3}(?![\w]|\.\d)")
#: A list separator, comparison or range word between two numbers, after the first one's label in
#: parentheses if it has one (``14.0.5.117 (Android) and 5.8.7.40 (iOS)``).
_LIST_SEP_RE: Final = re.compile(
    r"(?:[ \t]*\([^()\n]{1,40}\))?"
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
#: How far back a quad's clause is read for words (an address word, an upgrade).
_CLAUSE: Final = 80
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


class Alone(NamedTuple):
    """What a number reads as without its neighbours, and what its neighbours' reading needs."""

    #: Read as a version without its neighbours.
    version: bool
    #: Its clause names an address (no neighbour makes it a version then).
    address: bool = False
    line_start: int = 0
    lo: int = 0
    hi: int = 0
    header: str = ""
    above: tuple[tuple[int, int], ...] = ()


#: A table line's walk up to its header: the header's cells (None: not in a table within reach), the
#: spans of the (at most 8) rows above, and how many lines up its rule line is.
_Walk = tuple[list[str] | None, list[tuple[int, int]], int]
_NO_TABLE: Final[_Walk] = (None, [], 0)


class Memo:
    """What :func:`version_context` keeps between its calls for one text: each number's :class:`Alone`
    by offset, and each table line's walk up to its header by the line's start (a row's walk ends
    where the row above it was walked)."""

    __slots__ = ("alone", "walks")

    def __init__(self) -> None:
        self.alone: dict[int, Alone] = {}
        self.walks: dict[int, _Walk] = {}


_BOUND: Final = Alone(True)


def version_context(text: str, start: int, end: int, memo: Memo | None = None) -> bool:
    """Whether the dotted quad ``text[start:end]`` reads as a version or a section number, not an
    address (the rules are in this module's docstring).

    Args:
        text: the whole text.
        start, end: the dotted quad's span.
        memo: kept between the calls for one text (each number is read once, also as a neighbour).

    Returns:
        True for a version, build, section or outline number.
    """
    memo = Memo() if memo is None else memo
    alone = memo.alone.get(start)  # (_alone, inlined: this runs for every global dotted quad)
    if alone is None:
        alone = memo.alone[start] = _read_alone(text, start, end, memo)
    if alone.version or alone.address:
        return alone.version
    line_start = alone.line_start
    return (
        _near_a_version(text, start, end, alone.lo, alone.hi, memo)
        or bool(alone.header or alone.above)
        and _version_in_column(
            text, _cells_above(text, list(alone.above), line_start, start) + _cells_below(text, line_start, start), memo
        )
    )


def _alone(text: str, start: int, end: int, memo: Memo) -> Alone:
    """What the number ``text[start:end]`` reads as without its neighbours (kept in ``memo``)."""
    got = memo.alone.get(start)
    if got is None:
        got = memo.alone[start] = _read_alone(text, start, end, memo)
    return got


def _read_alone(text: str, start: int, end: int, memo: Memo) -> Alone:
    if _after_version_word(text, start):  # (the commonest: first, on the least text)
        return _BOUND
    nl = text.rfind("\n", max(0, start - _LINE_REACH), start)
    line_start = nl + 1 if nl >= 0 or start <= _LINE_REACH else -1  # -1: a line too long to follow
    header, above = _table_column(text, line_start, start, memo.walks)
    if header and _VERSION_HEADER_RE.search(header) is not None and _ADDRESS_HEADER_RE.search(header) is None:
        return _BOUND
    lo = max(0, start - _BEFORE, line_start)
    nl = text.find("\n", end, end + _AFTER)
    hi = min(len(text), end + _AFTER) if nl < 0 else nl
    before = text[lo:start]
    low_before = before.lower()
    if _bound(text, start, end, line_start, before, low_before):
        return _BOUND
    clause = low_before[_clause_start(low_before) :][-_CLAUSE:]
    if line_start >= 0 and _OUTLINE_BEFORE_RE.fullmatch(text, line_start, start):
        clause = _list_key(text, line_start) + " " + clause  # an item of a list: its key line is its clause
    after = text[end : min(hi, end + 40)]
    address = _address_named(clause, after, header)
    read = not address and (
        section_shaped(text[start:end])
        or _version_word_before(low_before)
        or _version_word_before(clause)
        or _COMPARE_BEFORE_RE.search(low_before, max(0, len(low_before) - 20)) is not None
        or _COMPARE_AFTER_RE.match(after) is not None
        or _upgraded_to(clause)
    )
    return Alone(read, address, line_start, lo, hi, header, tuple(above))


def _clause_start(s: str) -> int:
    """Where the last clause of ``s`` starts: after its last line break, ``;`` or ``|``, or ``.``,
    ``!``, ``?`` before a blank (0 if none)."""
    f = s.rfind
    return 1 + max(f("\n"), f(";"), f("|"), f(". "), f(".\t"), f("! "), f("!\t"), f("? "), f("?\t"))


def _version_word_before(low: str) -> bool:
    """Whether a version word in ``low`` (in lower case) has no other number after it (a version word
    binds the first number after it: it can only be after the last one)."""
    last = _LAST_NUMBER_RE.match(low)
    return _VERSION_WORD_RE.search(low, 0 if last is None else last.end()) is not None


def _upgraded_to(clause: str) -> bool:
    """Whether ``clause`` (in lower case) is an upgrade's, ending with ``to`` (``upgraded the routers to``)."""
    head = clause.rstrip(" \t")
    return len(head) < len(clause) and head.endswith("to") and _UPGRADE_RE.search(clause) is not None


def _address_named(clause: str, after: str, header: str) -> bool:
    """Whether the quad's clause (in lower case), the text after it or its table column's header
    names an address (the third group of the module's docstring)."""
    stop = _AFTER_CLAUSE_END_RE.search(after)
    return (
        _ADDRESS_WORDS_RE.search(clause) is not None
        or _ADDRESS_WORDS_RE.search((after if stop is None else after[: stop.start()]).lower()) is not None
        or _ADDRESS_AFTER_RE.match(after) is not None
        or _ADDRESS_HEADER_RE.search(header) is not None
    )


def _version_in_column(text: str, cells: list[tuple[int, int]], memo: Memo) -> bool:
    """Whether another cell of the quad's table column holds a version (a column holds one kind of value)."""
    for a, b in cells[:8]:
        m = _DOTTED_RE.search(text, a, b)
        if m is not None and text[a:b].strip() == m.group() and _is_version(text, m, memo):
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


def _after_version_word(text: str, start: int) -> bool:
    """Whether a version word is right before the quad at ``start`` on its line, with nothing
    between them that is another number or an address word."""
    lo = max(0, start - _VERSION_WORD_REACH)
    nl = text.rfind("\n", lo, start)
    lo = nl + 1 if nl >= 0 else max(0, lo - 1)  # (with the character ``\b`` looks at, if not a line's start)
    window = text[lo:start].lower()
    m = _VERSION_BEFORE_RE.search(window, 0 if nl >= 0 or lo == 0 else 1)
    if m is None:
        return False
    gap = m.group("gap")
    return gap is None or not gap.strip(_GAP_MARKS) or _ADDRESS_WORDS_RE.search(window, m.start()) is None


def _bound(text: str, start: int, end: int, line_start: int, before: str, low_before: str) -> bool:
    """The first group of the module's docstring, but a version word and a table's header: what
    makes the quad a version on its own."""
    if line_start >= 0:
        if _HEADING_BEFORE_RE.match(text, line_start, start):
            return True
        if (
            _OUTLINE_BEFORE_RE.match(text, line_start, start)
            and _OUTLINE_AFTER_RE.match(text, end)
            and section_shaped(text[start:end])
        ):
            return True
    if before.rstrip(" \t").endswith(_RANGE_WORDS):  # (else _RANGE_BEFORE_RE cannot match)
        r = _RANGE_BEFORE_RE.search(before[-40:])
        if r is not None and (
            _version_token(r.group(1), r.group(2)) or _after_version_word(text, start - len(before[-40:]) + r.start(2))
        ):
            return True
    r = _RANGE_AFTER_RE.match(text, end)
    if r is not None and _version_token(r.group(1), r.group(2)):
        return True
    # (searched from a position, not in a slice: ``\b`` sees the character before it)
    near = max(0, len(low_before) - _VERSION_WORD_REACH)
    return (
        _DIRECT_WORDS_RE.search(low_before, near) is not None
        or _OPERATOR_RE.search(before, max(0, len(before) - 12)) is not None
        or _CAMEL_VERSION_RE.search(before, max(0, len(before) - 64)) is not None
    )


def _near_a_version(text: str, start: int, end: int, lo: int, hi: int, memo: Memo) -> bool:
    """Another build of a version on the quad's line (the same first two parts), or an item of a
    list of versions (``builds 2.4.1.1, 93.1.0.7 and ...``, ``93.1.0.7 vs 2.4.1.1``: the items before
    and after it, up to a version); the four nearest numbers each side."""
    prefix = text[start:end].split(".", 2)[:2]
    before = list(_DOTTED_RE.finditer(text, lo, start))[-4:]
    after = list(itertools.islice(_DOTTED_RE.finditer(text, end, hi), 4))
    for m in before + after:
        if m.group().lstrip("v").split(".", 2)[:2] == prefix and _is_version(text, m, memo):
            return True
    pos = start
    for m in reversed(before):
        if _LIST_SEP_RE.fullmatch(text, m.end(), pos) is None:
            break
        if _is_version(text, m, memo):
            return True
        pos = m.start()
    pos = end
    for m in after:
        if _LIST_SEP_RE.fullmatch(text, pos, m.start()) is None:
            break
        if _is_version(text, m, memo):
            return True
        pos = m.end()
    return False


def _is_version(text: str, m: re.Match[str], memo: Memo) -> bool:
    """Whether the dotted number ``m`` is a version: not an IPv4 address by shape, or read as one
    without its neighbours (remembered in ``memo`` by its offset)."""
    got = memo.alone.get(m.start())
    if got is None:
        value = m.group()
        if value.startswith("v") or value.count(".") != 3 or not _ipv4(value):
            got = memo.alone[m.start()] = _BOUND
        else:
            got = _alone(text, m.start(), m.end(), memo)
    return got.version


def _ipv4(value: str) -> bool:
    """Whether ``value`` (digits and dots) is an IPv4 address as :mod:`ipaddress` reads one."""
    parts = value.split(".")
    return len(parts) == 4 and all(p in _OCTETS for p in parts)


def _version_token(prefix: str, token: str) -> bool:
    """Whether ``token`` (with its ``v`` prefix, if any) is a version and not an IPv4 address."""
    return bool(prefix) or not _ipv4(token)


def _table_column(text: str, line_start: int, pos: int, walks: dict[int, _Walk]) -> tuple[str, list[tuple[int, int]]]:
    """The header cell of the markdown table column ``pos`` is in, and the spans of the (at most 8)
    rows above (``("", [])`` if not in a table, or the table is more than 64
    rows or its lines more than ``_LINE_REACH`` characters long); ``walks`` keeps each line's walk."""
    if line_start < 0 or not text[line_start:pos].lstrip().startswith("|"):
        return "", []
    walk = walks.get(line_start)
    if walk is None:
        walk = walks[line_start] = _walk_up(text, line_start, walks)
    head, rows, _ = walk
    if head is None:
        return "", []
    column = text.count("|", line_start, pos)
    return (head[column] if column < len(head) else ""), rows


def _walk_up(text: str, line_start: int, walks: dict[int, _Walk]) -> _Walk:
    """The walk up the table from the line at ``line_start`` to its rule line (the header is the line
    above it), at most 64 lines, or to a line walked before."""
    rows: list[tuple[int, int]] = []
    end = line_start - 1
    for n in range(64):
        if end <= 0:
            return _NO_TABLE
        start = text.rfind("\n", max(0, end - _LINE_REACH), end) + 1
        line = text[start:end]
        if not start and end > _LINE_REACH or not line.lstrip().startswith("|"):
            return _NO_TABLE
        if _TABLE_RULE_RE.fullmatch(line):
            head_start = text.rfind("\n", max(0, start - 1 - _LINE_REACH), max(0, start - 1)) + 1
            return text[head_start : max(head_start, start - 1)].split("|"), rows, n + 1
        if len(rows) < 8:
            rows.append((start, end))
        above = walks.get(start)
        if above is not None:  # (the row above was walked: its walk goes on from here)
            head, more, depth = above
            if head is None or n + 1 + depth > 64:
                return _NO_TABLE
            return head, (rows + more)[:8], n + 1 + depth
        end = start - 1
    return _NO_TABLE


def _cell(text: str, row: tuple[int, int], column: int) -> tuple[int, int] | None:
    """The span of cell ``column`` (counted from 1 after the first ``|``) of the table row ``row``."""
    start, end = row
    bar = start - 1
    for _ in range(column):
        bar = text.find("|", bar + 1, end)
        if bar < 0:
            return None
    nxt = text.find("|", bar + 1, end)
    return None if nxt < 0 else (bar + 1, nxt)


def _cells_above(text: str, rows: list[tuple[int, int]], line_start: int, pos: int) -> list[tuple[int, int]]:
    """The spans of the cells of ``pos``'s table column in ``rows`` (from :func:`_table_column`)."""
    column = text.count("|", line_start, pos)
    return [c for r in rows if (c := _cell(text, r, column)) is not None]


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
        cell = _cell(text, (start, end), column)
        if cell is not None:
            cells.append(cell)
        start = end + 1
    return cells
