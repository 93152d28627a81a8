#!/usr/bin/env python
"""Generate ``tests/scrub/quads_corpus.jsonl``: notes holding dotted quads, for the scrubber's ``ip`` rule.

A dotted quad (``A.B.C.D``, each part 0-255) is an IPv4 address or something else written the same way:
a four-part version or build number, a section or clause number, an outline number, a work-breakdown or
test-case number. This corpus measures both sides of that line on notes of the kind people and agents
write, in three parts of 1,200 **benign notes** (dotted quads that are not addresses, most of them valid
global IPv4 addresses by shape) and 600 **notes with addresses** (global IPv4 addresses, labelled ``ip``,
in the places addresses really appear, many next to the same wording as the versions):

- ``dev`` (ids ``q``): section numbers in compliance, contract and spec notes ("see section 4.2.1.3"),
  outline headings, several versions in one sentence with the version word only before the first
  ("Firmware 2.4.10.1 fixes it; 2.4.9.7 still has it"), upgrades and rollbacks ("upgraded the edge
  routers to 5.1.2.3"), a product's name before its version, lists of builds, package pins, "what's new
  in", version tables; addresses after "to" (DNS records, failovers, resolvers), in notes that also hold
  versions or section numbers, with the small first parts of cloud and resolver ranges. Written before
  the rule was changed, from how such notes read and the classes a review named; the rule was then
  changed against it.
- ``heldout-a`` (ids ``h``): other genres, phrasings and products (release notes, standards, chat,
  configuration files, hardware, comparisons). Written after the first change, measured once, then
  looked at; the rule was changed again.
- ``heldout-b`` (ids ``b``): yet other genres (support tickets, commit messages, meetings, people's
  preferences, inventories, docs) and versions drawn as products number them; addresses with fewer
  telltale words. Written after the second change, measured once, then looked at; the rule's last
  change (an address wins whenever nothing binds a quad to a version) followed.

All by the author of the rule's change: independent of the rule's details, not of its author. The
figures of each part, before and after, are in README.md.

    python tests/scrub/make_quads_corpus.py            # rewrite quads_corpus.jsonl, print statistics
    python tests/scrub/make_quads_corpus.py --check    # is the committed file what this produces?
    python tests/scrub/make_quads_corpus.py --stats    # statistics only

Format: as ``heldout_corpus.jsonl``; ``category`` is ``negative:<class>`` or ``ip:ip``; ``split`` names the part.
"""

from __future__ import annotations

import argparse
import collections
import ipaddress
import json
import sys
from collections.abc import Callable
from pathlib import Path
from random import Random

SEED = 20261206
HELDOUT_SEED = 20261207
HELDOUT_B_SEED = 20261208
N_BENIGN = 1200
N_ADDRESS = 600
OUT = Path(__file__).with_name("quads_corpus.jsonl")


class S:
    """A labelled value inside a note."""

    __slots__ = ("value", "kind")

    def __init__(self, value: str, kind: str = "ip") -> None:
        self.value, self.kind = value, kind


# -- vocabulary ------------------------------------------------------------------------------------

PEOPLE = [
    "Anika", "Bruno", "Carmen", "Dmitri", "Esi", "Felix", "Grace", "Hamid", "Ines", "Jun", "Kirsten", "Luca",
    "Mariam", "Nils", "Olu", "Paula", "Quentin", "Rania", "Stefan", "Tara", "Ulrich", "Valentina", "Wen", "Yara",
]  # fmt: skip
PRODUCTS = [
    "FortiOS", "the UniFi controller", "the Zebra printer firmware", "iDRAC", "the Dell BIOS", "HP iLO",
    "Synology DSM", "the Android app", "the iOS app", "the desktop client", "the Windows agent", "the VPN client",
    "PAN-OS", "the thermostat firmware", "the badge reader firmware", "the POS terminal software",
    "the Jenkins plugin", "the Outlook add-in", "the label printer driver", "the SAN firmware", "Junos",
    "the camera firmware", "the kiosk image", "the scanner SDK",
]  # fmt: skip
DEVICES = [
    "edge routers", "core switches", "access points", "store printers", "kiosks", "badge readers", "POS terminals",
    "NAS boxes", "hypervisors", "firewalls", "thermostats", "IP cameras", "lab laptops", "build agents",
]  # fmt: skip
DOCS = [
    "the SOC 2 controls matrix", "the MSA", "the DPA", "the security questionnaire", "the RFP", "the API spec",
    "the design doc", "the runbook", "the ISO 27001 SoA", "the HIPAA risk assessment", "the vendor contract",
    "the PCI DSS self-assessment", "the architecture review", "the test plan", "the requirements doc",
]  # fmt: skip
TOPICS = [
    "log retention", "access reviews", "key rotation", "backup restore tests", "incident response",
    "vendor risk", "data deletion", "change management", "encryption at rest", "password policy",
    "session timeouts", "audit logging", "disaster recovery", "least privilege", "patch management",
]  # fmt: skip
PACKAGES = [
    "pywin32-ctypes", "grpcio-tools", "pyodbc", "psycopg", "lxml", "cryptography", "Npgsql", "Serilog",
    "Newtonsoft.Json", "AutoMapper", "Dapper", "log4net", "Polly", "jackson-databind", "netty-handler",
]  # fmt: skip
SITES = ["Lisbon", "Austin", "Nairobi", "Osaka", "Leeds", "Dortmund", "Monterrey", "Perth", "Gdansk", "Calgary"]
HOSTS = ["api", "www", "mail", "vpn", "sftp", "status", "cdn", "auth", "portal", "git"]
DOMAINS = ["acme.io", "northwind.example.net", "helios-health.com", "kestrelbank.co.uk", "orchard.de"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]


def who(r: Random) -> str:
    return r.choice(PEOPLE)


def date(r: Random) -> str:
    return f"{r.randint(2024, 2026)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}"


def clock(r: Random) -> str:
    return f"{r.randint(0, 23):02d}:{r.choice([0, 5, 15, 20, 30, 45]):02d}"


# -- dotted quads that are not addresses -------------------------------------------------------------


def section(r: Random) -> str:
    """An outline number: small parts, as documents number their sections."""
    return ".".join(str(r.randint(1, n)) for n in (14, 9, 9, 9))


def version(r: Random) -> str:
    """A four-part version or build number as products number them."""
    shape = r.random()
    if shape < 0.45:
        return f"{r.randint(1, 20)}.{r.randint(0, 20)}.{r.randint(0, 40)}.{r.randint(0, 250)}"
    if shape < 0.75:
        return f"{r.randint(1, 9)}.{r.randint(0, 9)}.{r.randint(0, 9)}.{r.randint(0, 99)}"
    return f"{r.randint(2, 99)}.{r.randint(0, 12)}.{r.randint(0, 255)}.{r.randint(1, 255)}"


def sibling(r: Random, v: str) -> str:
    """Another build of the same line as ``v`` (same first two parts)."""
    a, b, c, d = v.split(".")
    return f"{a}.{b}.{max(0, int(c) + r.choice([-2, -1, 1, 2]))}.{r.randint(0, 250)}"


def private_ip(r: Random) -> str:
    c = r.random()
    if c < 0.5:
        return f"10.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)}"
    if c < 0.75:
        return f"192.168.{r.randint(0, 255)}.{r.randint(1, 254)}"
    return f"172.{r.randint(16, 31)}.{r.randint(0, 255)}.{r.randint(1, 254)}"


def filler(r: Random) -> str:
    return r.choice(
        [
            f"{who(r)} will follow up on {r.choice(DAYS)}.",
            f"Next review is in {r.choice(MONTHS)}.",
            "No customer impact reported so far.",
            f"Ticket OPS-{r.randint(1000, 9999)} tracks the remaining work.",
            f"Change window is {r.choice(DAYS)} {clock(r)}-{clock(r)} UTC.",
            f"Rollout is at {r.randint(5, 100)}% of the fleet.",
            "{} and {} signed off.".format(*r.sample(PEOPLE, 2)),
            f"See the thread from {date(r)} for the background.",
            f"Spent about {r.randint(1, 6)} h on this today.",
            "Nothing else changed in the config.",
            f"The {r.choice(SITES)} office is the pilot site.",
            f"Internal host is {private_ip(r)} (not reachable from outside).",
        ]
    )


# Each benign class: a sentence or block holding one or more dotted quads that are not addresses.


def b_section(r: Random) -> str:
    s, doc, topic = section(r), r.choice(DOCS), r.choice(TOPICS)
    return r.choice(
        [
            f"See section {s} of {doc} for {topic}.",
            f"Per section {s}, {topic} must be reviewed quarterly.",
            f"The auditor flagged {s} ({topic}) as partially met.",
            f"{doc[0].upper() + doc[1:]} answers {topic} in {s}; {who(r)} is updating it.",
            f"Clause {s} covers {topic}; legal wants it reworded.",
            f"Requirement {s} ({topic}) is out of scope for phase one.",
            f"As described in §{s}, {topic} applies to contractors too.",
            f"Control {s} — {topic}: evidence uploaded {date(r)}.",
            f"Customer asked about {s} in {doc}; we answered yes with a link to the policy.",
            f"Step {s} of the runbook ({topic}) needs a screenshot.",
            f"Open questions in {doc}: {s}, {section(r)} and {section(r)}.",
            f"Moved the {topic} text from {s} to {section(r)} in the new draft.",
            f"Test case {s} failed on the {r.choice(['staging', 'QA', 'pre-prod'])} run.",
            f"WBS {s} ({topic}) slipped by {r.randint(1, 3)} weeks.",
            f"Article {s} of the agreement limits {topic}.",
        ]
    )


def b_outline(r: Random) -> str:
    base = section(r).split(".")[:3]
    items = [f"{'.'.join(base)}.{i} {r.choice(TOPICS).capitalize()}" for i in range(1, r.randint(3, 6))]
    head = r.choice(["Draft outline:", "Sections still to write:", "TOC of the policy update:", ""])
    mark = r.choice(["", "- ", "  "])
    return (head + "\n" if head else "") + "\n".join(mark + item for item in items)


def b_siblings(r: Random) -> str:
    v = version(r)
    w, u = sibling(r, v), sibling(r, v)
    word = r.choice(["Firmware", "Version", "Build", "Release", "v", "Agent version", "Hotfix"])
    return r.choice(
        [
            f"{word} {v} fixes it; {w} still has it.",
            f"{word} {v} is fine, but anyone still on {w} sees the crash at startup.",
            f"{word} {v} was pulled after an hour; {w} is the one to install, not {u}.",
            f"We tested {word.lower()} {v} on the {r.choice(DEVICES)}, then {w} and {u} in the lab.",
            f"{word} {v} introduced the memory leak and {w} fixed it.",
            f"The vendor says {word.lower()} {v} is affected; {w} and later are patched.",
            f"{word} {v} broke printing. Going back to {w} fixed it.",
        ]
    )


def b_upgrade(r: Random) -> str:
    v, dev, prod = version(r), r.choice(DEVICES), r.choice(PRODUCTS)
    return r.choice(
        [
            f"Upgraded the {dev} to {v} last night.",
            f"Upgraded {prod} on all {dev} to {v}.",
            f"Rolled the {dev} back to {v} after the reboot loop.",
            f"Bumped {prod} to {v} in the golden image.",
            f"Pinned {prod} to {v} until the vendor ships a fix.",
            f"Downgraded the {r.choice(SITES)} {dev} to {v}.",
            f"Patched every one of the {dev} to {v} before the audit.",
            f"Moved the whole fleet of {dev} to {v}.",
            f"Updated {prod} to {v}; no reboot needed.",
            f"{who(r)} upgraded the {dev} in {r.choice(SITES)} to {v} on {r.choice(DAYS)}.",
            f"Please update your copy of {prod} to {v} or newer.",
            f"The {dev} auto-updated overnight to {v}.",
        ]
    )


def b_product(r: Random) -> str:
    v, prod = version(r), r.choice(PRODUCTS)
    cap = prod[0].upper() + prod[1:]
    return r.choice(
        [
            f"{cap} {v} crashes on launch for users with a proxy.",
            f"The customer runs {prod} {v}.",
            f"{cap} {v} adds the SSO option they asked for.",
            f"Known bug in {prod} {v}: the settings page is blank.",
            f"{who(r)}'s laptop still has {prod} {v}.",
            f"Installed {prod} {v} from the vendor portal.",
            f"Screenshot attached ({prod} {v}, {r.choice(['light', 'dark'])} mode).",
        ]
    )


def b_list(r: Random) -> str:
    vs = [version(r) for _ in range(r.randint(2, 4))]
    joined = ", ".join(vs[:-1]) + " and " + vs[-1]
    return r.choice(
        [
            f"Affected builds: {joined}.",
            f"Supported: {joined}.",
            f"Tested on {joined}; all passed.",
            f"Still in the field: {joined}.",
            f"Crash reports came from {joined}.",
            f"Compatible with {' / '.join(vs)}.",
        ]
    )


def b_pin(r: Random) -> str:
    v, pkg = version(r), r.choice(PACKAGES)
    return r.choice(
        [
            f"`requirements.txt` now has `{pkg}=={v}`.",
            f"Constraint `{pkg}>={v}` breaks the Windows build.",
            f'package.json: `"{pkg.lower()}": "^{v}"`',
            f"`pip install {pkg}=={v}` reproduces it.",
            f"Lock file resolved {pkg} to {v}.",
            f"Dependabot wants {pkg} {v}; holding until the tests pass.",
            f"`{pkg}@{v}` is the last one without the regression.",
        ]
    )


def b_whats_new(r: Random) -> str:
    v = version(r)
    return r.choice(
        [
            f"What's new in {v}:\n- faster sync\n- fixed the export button",
            f"### What's new in {v}\n\n- New dashboard\n- Fewer crashes",
            f"Changes since {v}: the login screen and the offline mode.",
            f"Notes for {v} are in the shared drive.",
            f"Everything before {v} is out of support.",
            f"Anything older than {v} must be replaced by {r.choice(MONTHS)}.",
        ]
    )


def b_table(r: Random) -> str:
    header = r.choice([("current", "target"), ("installed", "latest"), ("from", "to"), ("old", "new")])
    rows = "".join(f"| {r.choice(DEVICES)} | {version(r)} | {version(r)} |\n" for _ in range(r.randint(2, 5)))
    return f"| device | {header[0]} | {header[1]} |\n| --- | --- | --- |\n{rows}"


BENIGN: dict[str, Callable[[Random], str]] = {
    "section": b_section,
    "outline": b_outline,
    "siblings": b_siblings,
    "upgrade": b_upgrade,
    "product": b_product,
    "list": b_list,
    "pin": b_pin,
    "whats_new": b_whats_new,
    "table": b_table,
}


# -- addresses ---------------------------------------------------------------------------------------


def public_ip(r: Random) -> str:
    """A global IPv4 address; a third of them with a first part under 20 (cloud and resolver ranges)."""
    while True:
        if r.random() < 0.33:
            a = r.choice([1, 2, 3, 4, 5, 8, 9, 12, 13, 15, 18])
        else:
            a = r.randint(20, 223)
        ip = f"{a}.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)}"
        addr = ipaddress.ip_address(ip)
        if addr.is_global and not addr.is_multicast:
            return ip


def a_context(r: Random) -> list:
    ip, host, dom = public_ip(r), r.choice(HOSTS), r.choice(DOMAINS)
    v, s = version(r), section(r)
    return r.choice(
        [
            [f"Updated the A record for {host}.{dom} to ", S(ip), "."],
            [f"Pointed {host}.{dom} to ", S(ip), " for the cut-over."],
            ["Moved the DNS from ", S(ip), " to ", S(public_ip(r)), "."],
            ["Traffic failed over to ", S(ip), f" at {clock(r)}."],
            ["Forward port 443 on the firewall to ", S(ip), "."],
            ["Switched the resolvers to ", S(ip), " and ", S(public_ip(r)), "."],
            ["Suspicious logins from ", S(ip), f" at {clock(r)}; blocked at the WAF."],
            ["Allow-list ", S(ip), " (the customer's office egress)."],
            ["Failed password for root from ", S(ip), f" port {r.randint(30000, 65000)} ssh2"],
            ["`ssh deploy@", S(ip), "` works again after the key change."],
            ["`curl -v http://", S(ip), f":{r.choice([80, 8080, 8443])}/health` returns 503."],
            ["X-Forwarded-For: ", S(ip), f", {private_ip(r)}"],
            [S(ip), f' - - [12/Mar/2025:{clock(r)}:07 +0000] "GET /api/v1/orders HTTP/1.1" 200 512'],
            ["EC2 public IP is ", S(ip), "; the Elastic IP is not attached yet."],
            [f"Upgraded the {r.choice(DEVICES)} to {v}; the one at ", S(ip), " did not come back."],
            [f"Firmware {v} is on the gateway; its WAN address is ", S(ip), "."],
            [f"Per section {s} of {r.choice(DOCS)}, ", S(ip), " stays blocked."],
            [f"Upgraded {r.choice(PRODUCTS)} to {v} on ", S(ip), "."],
            [f"The {r.choice(SITES)} office connects from ", S(ip), "."],
            ["Customer asked us to whitelist ", S(ip), " and ", S(public_ip(r)), "."],
            ["| host | public IP |\n| --- | --- |\n| vpn-1 | ", S(ip), " |\n| vpn-2 | ", S(public_ip(r)), " |"],
            ["Scanner hits came from ", S(ip), f" (AS{r.randint(1000, 64000)})."],
            ["Abuse report: ", S(ip), " sent 40k requests in a minute."],
            [f"Migrated the VM to {r.choice(['the new host', 'Hetzner', 'OVH'])}; new address ", S(ip), "."],
            ["NAT gateway egress: ", S(ip), "."],
            ["Set the syslog target to ", S(ip), f":{r.choice([514, 6514])}."],
        ]
    )


# -- the first held-out templates (heldout-a) ----------------------------------------------------------
#
# Written after the rule was changed against the templates above (the dev part), before the rule met
# these: other genres, phrasings and products. Not edited after their first measurement.

H_PRODUCTS = [
    "Citrix Workspace", "GlobalProtect", "Sophos Connect", "Tableau Server", "the Lenovo dock firmware",
    "Jabra Direct", "the Epson driver", "Ubiquiti EdgeOS", "SonicOS", "MikroTik RouterOS", "ArubaOS",
    "the Cisco ASA image", "Zoom Rooms", "the Honeywell scanner firmware", "Veeam Agent", "the HP printer firmware",
    "the Polycom phones", "Bitdefender", "the Brother label maker", "the Meraki MX",
]  # fmt: skip
H_STANDARDS = [
    "RFC 5280", "PCI DSS v4", "the CIS benchmark", "OWASP ASVS", "IEC 62443-3-3", "the NIST CSF profile",
    "our ISMS manual", "the employee handbook", "the onboarding guide", "the SLA appendix",
]  # fmt: skip


def h_benign(r: Random) -> tuple[str, str]:
    """A held-out benign sentence and its class."""
    v, w, s, prod = version(r), version(r), section(r), r.choice(H_PRODUCTS)
    cls = r.choice(["release", "standard", "chat", "config", "hardware", "compare"])
    if cls == "release":
        text = r.choice(
            [
                f"Shipped {v} to the beta ring this morning.",
                f"The {v} hotfix went out on {r.choice(DAYS)}.",
                f"{v} is the build QA signed off on.",
                f"Customers on {v} need the manual patch.",
                f"Crash rate on {v} is {r.randint(1, 9)}.{r.randint(0, 9)}% (target under 1%).",
                f"Build numbers: {v} (Android) and {w} (iOS).",
                f"{prod} {v} is rolling out through the update channel.",
            ]
        )
    elif cls == "standard":
        text = r.choice(
            [
                f"{r.choice(H_STANDARDS)} {s} says the extension must be marked critical.",
                f"Items {s} through {section(r)} are done; the rest are for next sprint.",
                f"Comments on {s}: too vague, needs an owner.",
                f"Per {s} in {r.choice(H_STANDARDS)}, {r.choice(TOPICS)} is mandatory.",
                f"We map {r.choice(TOPICS)} to {s} and {section(r)}.",
                f"Gap analysis: {s} not met, {section(r)} partially met.",
            ]
        )
    elif cls == "chat":
        text = r.choice(
            [
                f"we're still on {v} lol",
                f"anyone else seeing this on {v}?",
                f"{v} or bust",
                f"tbh {v} was the last good one",
                f"can confirm {v} fixes it for me",
            ]
        )
    elif cls == "config":
        text = r.choice(
            [
                f'[assembly: AssemblyFileVersion("{v}")]',
                f'"fileVersion": "{v}",',
                f"appVersion: {v}",
                f"image: registry.acme.io/agent:{v}",
                f"<ProductVersion>{v}</ProductVersion>",
                f"Bundle-Version: {v}",
                f"CFBundleShortVersionString = {v}",
            ]
        )
    elif cls == "hardware":
        text = r.choice(
            [
                f"BMC on the new nodes reports {v}.",
                f"Model XR-500, hardware rev {v}.",
                f"The docks came with {prod} {v} preinstalled.",
                f"Flashed {prod} {v} onto the spares.",
                f"Label on the box says {v}.",
            ]
        )
    else:
        text = r.choice(
            [
                f"Tested {v} against {w}; no difference in boot time.",
                f"{v} vs {w}: memory use down by a third.",
                f"Diff between {v} and {w} is mostly translations.",
                f"Benchmarks for {v}, {w} and {version(r)} are in the sheet.",
            ]
        )
    return text, cls


def h_address(r: Random) -> list:
    ip, dom, v = public_ip(r), r.choice(DOMAINS), version(r)
    return r.choice(
        [
            ["Our egress NAT is ", S(ip), "."],
            ["Blocklisted ", S(ip), " for credential stuffing."],
            ["Geo lookup on ", S(ip), " says Frankfurt."],
            [S(ip), " hammered the login endpoint overnight."],
            ["Customer's static IP: ", S(ip)],
            ["Please add ", S(ip), " to the security group."],
            ["The office moved; the new public address is ", S(ip), "."],
            ["`ping ", S(ip), "` times out from the bastion."],
            ["Connection refused from ", S(ip), "."],
            ["Rate-limited ", S(ip), " after 500 requests a minute."],
            ["Office router WAN: ", S(ip)],
            [S(ip), " is the Hetzner box we rent for backups."],
            ["Add `", S(ip), "/32` to the allow list."],
            [f"DNS A: app.{dom} → ", S(ip)],
            ["The pen tester's IP was ", S(ip), "."],
            ["Attacker rotated between ", S(ip), " and ", S(public_ip(r)), "."],
            [f"mail.{dom} resolves to ", S(ip), "."],
            ["Home IP of the on-call engineer: ", S(ip), " (do not share)."],
            ["Login from an unusual location (", S(ip), ")."],
            ["sshd[2211]: Accepted publickey for ops from ", S(ip), f" port {r.randint(30000, 65000)} ssh2"],
            ["fail2ban banned ", S(ip), " again."],
            [f"After upgrading to {v}, ", S(ip), " could no longer connect."],
            [f"Running {r.choice(H_PRODUCTS)} {v} on ", S(ip), "."],
            ["Their VPN concentrator is at ", S(ip), "."],
            ["Whois for ", S(ip), " points to a residential ISP."],
        ]
    )


# -- the second held-out templates (heldout-b) ----------------------------------------------------------
#
# Written after the rule's second change (made after heldout-a had been measured and looked at), before
# the rule met these: yet other genres, phrasings and version numbers drawn as products number them, and
# addresses with fewer telltale words. Not edited after their first measurement.

B_APPS = [
    "Slack desktop", "the Okta Verify app", "Notion", "the Garmin watch", "the Sonos app", "Figma", "Miro",
    "the Logitech hub", "the Dexcom receiver", "the Tesla app", "Obsidian", "the Kindle", "1Password",
    "the Brother printer", "the Yubico authenticator", "Docker Desktop", "Postman", "the Fitbit app",
]  # fmt: skip


def b_version(r: Random) -> str:
    """A four-part version as products number them: small majors and minors, patches and builds anywhere."""
    major = r.choice([r.randint(1, 9), r.randint(1, 9), r.randint(10, 30), r.randint(30, 60)])
    minor = r.choice([r.randint(0, 9), r.randint(0, 9), r.randint(10, 25)])
    return f"{major}.{minor}.{r.randint(0, 255)}.{r.randint(0, 255)}"


def b_benign(r: Random) -> tuple[str, str]:
    """A second held-out benign sentence and its class."""
    v, w, app = b_version(r), b_version(r), r.choice(B_APPS)
    cls = r.choice(["support", "commit", "meeting", "personal", "inventory", "docs"])
    if cls == "support":
        text = r.choice(
            [
                f"User reports {app} {v} freezes when they open a shared file.",
                f"Asked the customer which {app} they have; they sent a screenshot showing {v}.",
                f"Known issue with {v}, fixed in {w}.",
                f"Told them to reinstall; they were on {v}, which the vendor pulled.",
                f"Reproduced on {v} but not on {w}.",
            ]
        )
    elif cls == "commit":
        text = r.choice(
            [
                f"chore(deps): bump {r.choice(PACKAGES).lower()} from {v} to {w}",
                f"fix: guard against nil session (regression from {v})",
                f"Tagged {v} and pushed the tag.",
                f"Cherry-picked the fix onto the {v} branch.",
                f"Merged the release branch; next tag is {v}.",
            ]
        )
    elif cls == "meeting":
        text = r.choice(
            [
                f"Decision: freeze on {v} until after the audit.",
                f"{who(r)} will check whether {v} still supports SSO.",
                f"Action item: confirm {v} with the vendor before Friday.",
                f"Agreed to skip {v} entirely.",
                f"Open point: do we ship {v} to the pilot group first?",
            ]
        )
    elif cls == "personal":
        text = r.choice(
            [
                f"Prefers the old layout from {v}.",
                f"Likes to stay one release behind; currently {v}.",
                f"Their {app} is stuck at {v} because of the company policy.",
                f"Uses {app} ({v}) on the work laptop only.",
            ]
        )
    elif cls == "inventory":
        text = r.choice(
            [
                f"{r.randint(3, 40)} laptops still report {v}.",
                f"Spare units ship with {v} out of the box.",
                f"Asset tag {r.randint(10000, 99999)}: {app}, {v}.",
                f"Counted {r.randint(2, 30)} devices below {v}.",
            ]
        )
    else:
        text = r.choice(
            [
                f"The admin guide for {v} has the new screenshots.",
                f"Docs still describe {v}; update them after the rollout.",
                f"Section numbering changed: old {section(r)} is now {section(r)}.",
                f"Quote from {section(r)}: access must be reviewed yearly.",
            ]
        )
    return text, cls


def b_address(r: Random) -> list:
    ip = public_ip(r)
    return r.choice(
        [
            ["Can you whitelist ", S(ip), " for the demo?"],
            ['cidr_blocks = ["', S(ip), '/32"]'],
            ["allow ", S(ip), ";"],
            ["iptables -A INPUT -s ", S(ip), " -j DROP"],
            ['"ip": "', S(ip), '",'],
            [S(ip), ",DE,Frankfurt,residential"],
            ["Visited the pricing page from ", S(ip), " three times."],
            ["Alert: impossible travel, last sign-in from ", S(ip), "."],
            ["remote_addr=", S(ip), " status=403"],
            ["SIEM flagged ", S(ip), " (TOR exit node)."],
            ["Their firewall NATs everything behind ", S(ip), "."],
            ["Thanks, ", S(ip), " works now."],
            [S(ip), " again today, same user agent."],
            ["Customer email came with headers showing ", S(ip), "."],
            ["The webhook calls come from ", S(ip), " and ", S(public_ip(r)), "."],
            ["Firewall change request: open 443 from ", S(ip), "."],
            ["Host: ", S(ip)],
            ["They share ", S(ip), " with the whole coworking space."],
        ]
    )


# -- notes -------------------------------------------------------------------------------------------

TITLES = [
    "Ops notes", "Weekly sync", "Incident follow-up", "Audit prep", "Vendor call", "Support escalation",
    "Change log", "Session recap", "Fleet status", "Compliance review", "Release checklist", "Site visit",
]  # fmt: skip


def render(parts: list) -> tuple[str, list]:
    text, spans, pos = [], [], 0
    for p in parts:
        if isinstance(p, S):
            spans.append({"start": pos, "end": pos + len(p.value), "kind": p.kind})
            text.append(p.value)
            pos += len(p.value)
        else:
            text.append(p)
            pos += len(p)
    out = "".join(text)
    return out, spans


def note(r: Random, payload: list) -> tuple[str, list]:
    """A short note: a title, a few filler sentences, the payload somewhere among them."""
    title = f"{r.choice(['# ', '## ', ''])}{r.choice(TITLES)} — {date(r)}\n\n"
    lines: list[list] = [[filler(r)] for _ in range(r.randint(1, 4))]
    lines.insert(r.randint(0, len(lines)), payload)
    bullet = r.choice(["", "- "])
    parts: list = [title]
    for line in lines:
        block = any(isinstance(p, str) and "\n" in p for p in line)
        parts += ([] if block else [bullet]) + line + ["\n" if not block else "\n\n"]
    return render(parts)


def generate() -> list[dict]:
    """The dev part (ids ``q``), the first held-out part (ids ``h``) and the second (ids ``b``), each
    1,200 benign notes and 600 notes with addresses."""
    return (
        _dev(SEED)
        + _heldout(HELDOUT_SEED, h_benign, h_address, "heldout-a", "h")
        + _heldout(HELDOUT_B_SEED, b_benign, b_address, "heldout-b", "b")
    )


def _heldout(
    seed: int,
    benign: Callable[[Random], tuple[str, str]],
    address: Callable[[Random], list],
    split: str,
    prefix: str,
) -> list[dict]:
    r = Random(seed)
    notes = []
    for _ in range(N_BENIGN):
        sentence, cls = benign(r)
        text, spans = note(r, [sentence])
        notes.append({"text": text, "spans": spans, "category": f"negative:{cls}", "split": split})
    for _ in range(N_ADDRESS):
        payload = address(r)
        if r.random() < 0.3:
            payload = payload + [" " + benign(r)[0]]
        text, spans = note(r, payload)
        notes.append({"text": text, "spans": spans, "category": "ip:ip", "split": split})
    r.shuffle(notes)
    out = [{"id": f"{prefix}{n:04d}", **n_} for n, n_ in enumerate(notes, 1)]
    validate(out)
    return out


def _dev(seed: int) -> list[dict]:
    r = Random(seed)
    classes = sorted(BENIGN)
    notes = []
    for i in range(N_BENIGN):
        cls = classes[i % len(classes)]
        text, spans = note(r, [BENIGN[cls](r)])
        notes.append({"text": text, "spans": spans, "category": f"negative:{cls}", "split": "dev"})
    for _ in range(N_ADDRESS):
        payload = a_context(r)
        if r.random() < 0.3:  # a benign quad in the same note as the address
            payload = payload + [" " + r.choice(list(BENIGN.values()))(r)]
        text, spans = note(r, payload)
        notes.append({"text": text, "spans": spans, "category": "ip:ip", "split": "dev"})
    r.shuffle(notes)
    out = [{"id": f"q{n:04d}", **n_} for n, n_ in enumerate(notes, 1)]
    validate(out)
    return out


def validate(notes: list[dict]) -> None:
    for n in notes:
        end = 0
        for s in n["spans"]:
            v = n["text"][s["start"] : s["end"]]
            assert s["start"] >= end and s["kind"] == "ip", n["id"]
            assert ipaddress.ip_address(v).is_global, (n["id"], v)
            end = s["end"]
        assert bool(n["spans"]) == n["category"].startswith("ip:"), n["id"]
    benign = [n for n in notes if not n["spans"]]
    # most benign quads are valid global IPv4 addresses by shape: the corpus tests the rule, not the parser
    quads = [q for n in benign for q in _quads(n["text"])]
    assert sum(_global(q) for q in quads) >= 0.7 * len(quads), "too few benign quads look like addresses"
    assert len({n["id"] for n in notes}) == len(notes)


def _quads(text: str) -> list[str]:
    out, word = [], ""
    for ch in text + " ":
        if ch.isdigit() or ch == ".":
            word += ch
            continue
        parts = word.strip(".").split(".")
        if len(parts) == 4 and all(p.isdigit() for p in parts):
            out.append(".".join(parts))
        word = ""
    return out


def _global(quad: str) -> bool:
    try:
        return ipaddress.IPv4Address(quad).is_global
    except ValueError:
        return False


def dumps(notes: list[dict]) -> str:
    return "".join(json.dumps(n, ensure_ascii=False) + "\n" for n in notes)


def stats(notes: list[dict]) -> str:
    return "\n".join(
        f"{split}: " + _stats([n for n in notes if n["split"] == split]) for split in ("dev", "heldout-a", "heldout-b")
    )


def _stats(notes: list[dict]) -> str:
    cats = collections.Counter(n["category"] for n in notes)
    benign = [n for n in notes if not n["spans"]]
    quads = [q for n in benign for q in _quads(n["text"])]
    size = sum(len(n["text"].encode()) for n in notes)
    return "\n".join(
        [
            f"notes: {len(notes)}  benign: {len(benign)}  with addresses: {len(notes) - len(benign)}  "
            f"labelled addresses: {sum(len(n['spans']) for n in notes)}  text: {size / 1e6:.2f} MB",
            f"benign dotted quads: {len(quads)}, of which valid global IPv4 by shape: {sum(map(_global, quads))}",
            "notes per category: " + ", ".join(f"{k} {v}" for k, v in sorted(cats.items())),
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
