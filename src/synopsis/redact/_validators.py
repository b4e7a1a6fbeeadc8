"""Validators: the checks that turn a pattern's candidate into a finding, or reject it.

A pattern only says "this looks like a card number"; the validator says "and it is one": a
card number passes Luhn and belongs to a known issuer range, an IBAN passes mod-97 and has its
country's length, a Chinese resident ID has a real region, a real birth date and the GB 11643
check character, a JWT's header decodes to JSON with ``alg``. Secrets with no checksum are
kept precise with a shape test: enough entropy, several character classes, not words joined by
``_``. Everything is pure and runs in time linear in the candidate, which the patterns bound.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import ipaddress
import json
import math
import re
from collections import Counter
from typing import Final

__all__ = [
    "basic_credentials_ok",
    "card_ok",
    "character_classes",
    "cn_resident_id_ok",
    "digits_of",
    "iban_ok",
    "ip_ok",
    "is_placeholder",
    "jwt_ok",
    "looks_random",
    "luhn_ok",
    "nanp_ok",
    "phone_ok",
    "shannon_entropy",
    "tld_ok",
    "version_context",
]


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


def digits_of(value: str) -> str:
    return "".join(char for char in value if char.isascii() and char.isdigit())


# ---------------------------------------------------------------------------------------------
# Checksums


def luhn_ok(digits: str) -> bool:
    """The Luhn (mod 10) check every payment card number carries in its last digit."""
    total = 0
    for position, char in enumerate(reversed(digits)):
        digit = int(char)
        if position % 2:
            digit = digit * 2 - 9 if digit > 4 else digit * 2
        total += digit
    return total % 10 == 0


# (first digits, allowed lengths) of the issuers whose cards people paste: Visa, Mastercard,
# American Express, Discover, JCB, UnionPay, Diners Club. An issuer range keeps a 16-digit
# order number that happens to pass Luhn (one in ten does) from being taken for a card.
_CARD_RANGES: Final = (
    ((4, 4), (13, 16, 19)),
    ((51, 55), (16,)),
    ((2221, 2720), (16,)),
    ((34, 34), (15,)),
    ((37, 37), (15,)),
    ((6011, 6011), (16, 19)),
    ((644, 649), (16, 19)),
    ((65, 65), (16, 19)),
    ((3528, 3589), (16, 19)),
    ((62, 62), (16, 17, 18, 19)),
    ((300, 305), (14, 16, 19)),
    ((36, 36), (14, 16, 19)),
    ((38, 39), (14, 16, 19)),
)


def card_ok(digits: str) -> bool:
    """A payment card number: a known issuer range, that issuer's length, and Luhn."""
    for (low, high), lengths in _CARD_RANGES:
        prefix = int(digits[: len(str(low))])
        if low <= prefix <= high and len(digits) in lengths:
            return luhn_ok(digits)
    return False


# Lengths of the IBAN registry (SWIFT), by country code.
_IBAN_LENGTHS: Final = {
    **dict.fromkeys(["NO"], 15),
    **dict.fromkeys(["BE"], 16),
    **dict.fromkeys(["DK", "FI", "FO", "GL", "NL", "SD", "FK"], 18),
    **dict.fromkeys(["MK", "SI"], 19),
    **dict.fromkeys(["AT", "BA", "EE", "KZ", "LT", "LU", "XK", "MN"], 20),
    **dict.fromkeys(["CH", "HR", "LI", "LV"], 21),
    **dict.fromkeys(["BG", "BH", "CR", "DE", "GB", "GE", "IE", "ME", "RS", "VA"], 22),
    **dict.fromkeys(["AE", "GI", "IL", "IQ", "OM", "SO", "TL"], 23),
    **dict.fromkeys(["AD", "CZ", "ES", "MD", "PK", "RO", "SA", "SE", "SK", "TN", "VG"], 24),
    **dict.fromkeys(["LY", "PT", "ST"], 25),
    **dict.fromkeys(["IS", "TR"], 26),
    **dict.fromkeys(["BI", "DJ", "FR", "GR", "IT", "MC", "MR", "SM"], 27),
    **dict.fromkeys(["AL", "AZ", "BY", "CY", "DO", "GT", "HU", "LB", "NI", "PL", "SV"], 28),
    **dict.fromkeys(["BR", "EG", "PS", "QA", "UA"], 29),
    **dict.fromkeys(["JO", "KW", "MU", "YE"], 30),
    **dict.fromkeys(["MT", "SC"], 31),
    **dict.fromkeys(["LC"], 32),
    **dict.fromkeys(["RU"], 33),
}


def iban_length(country: str) -> int | None:
    return _IBAN_LENGTHS.get(country)


def iban_ok(compact: str) -> bool:
    """An IBAN without spaces: its country's length and the ISO 7064 mod-97 check."""
    if iban_length(compact[:2]) != len(compact) or not compact.isalnum():
        return False
    rotated = compact[4:] + compact[:4]
    number = "".join(str(int(char, 36)) for char in rotated)
    return int(number) % 97 == 1


_CN_PROVINCES: Final = _words(
    "11 12 13 14 15 21 22 23 31 32 33 34 35 36 37 41 42 43 44 45 46 "
    "50 51 52 53 54 61 62 63 64 65 71 81 82 83 91"
)
_CN_WEIGHTS: Final = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_CN_CHECK: Final = "10X98765432"


def cn_resident_id_ok(value: str) -> bool:
    """An 18-character Chinese resident ID: province, birth date and GB 11643 check character."""
    if len(value) != 18 or not value[:17].isdigit() or value[:2] not in _CN_PROVINCES:
        return False
    try:
        datetime.date(int(value[6:10]), int(value[10:12]), int(value[12:14]))
    except ValueError:
        return False
    total = sum(int(char) * weight for char, weight in zip(value, _CN_WEIGHTS, strict=False))
    return value[17].upper() == _CN_CHECK[total % 11]


# ---------------------------------------------------------------------------------------------
# Tokens


def _b64decode(segment: str, *, urlsafe: bool) -> bytes | None:
    padded = segment + "=" * (-len(segment) % 4)
    try:
        if urlsafe:
            return base64.urlsafe_b64decode(padded)
        return base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError):
        return None


def jwt_ok(token: str) -> bool:
    """Three base64url segments whose first decodes to a JSON object naming its ``alg``."""
    header = _b64decode(token.split(".", 1)[0], urlsafe=True)
    if header is None:
        return False
    try:
        decoded = json.loads(header)
    except (UnicodeDecodeError, ValueError):
        return False
    return isinstance(decoded, dict) and isinstance(decoded.get("alg"), str)


def basic_credentials_ok(encoded: str) -> bool:
    """``Authorization: Basic`` credentials: base64 of printable ``user:password``."""
    raw = _b64decode(encoded, urlsafe=False)
    if raw is None:
        return False
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    _user, colon, password = text.partition(":")
    return bool(colon and password) and text.isprintable()


def shannon_entropy(value: str) -> float:
    """Bits per character of the value's own character distribution."""
    if not value:
        return 0.0
    size = len(value)
    return -sum(n / size * math.log2(n / size) for n in Counter(value).values())


def character_classes(value: str) -> int:
    """How many of lower case, upper case and digits the value uses."""
    return sum(
        (
            any(c.islower() for c in value),
            any(c.isupper() for c in value),
            any(c.isdigit() for c in value),
        )
    )


_WORD_SEGMENT: Final = re.compile(r"[A-Za-z]*\d{0,3}")
_SEPARATORS: Final = re.compile(r"[_\-./]")


def _is_wordy(value: str) -> bool:
    """``production_db_credentials_v2``, ``settings.OPENAI_API_KEY``: names, not secrets."""
    return all(_WORD_SEGMENT.fullmatch(segment) for segment in _SEPARATORS.split(value))


def looks_random(value: str, *, min_length: int = 16, min_classes: int = 2) -> bool:
    """The shape of a generated secret: long, high entropy, mixed classes, not words."""
    return (
        len(value) >= min_length
        and shannon_entropy(value) >= 3.0
        and character_classes(value) >= min_classes
        and not _is_wordy(value)
    )


_PLACEHOLDER_WORDS: Final = _words(
    "null none nil true false yes no on off undefined string required optional redacted hidden "
    "secret "
    "password passwd pwd xxx xxxx your_password yourpassword your-password example"
)
_MASKED_OR_TEMPLATE: Final = re.compile(
    r"[*xX•.\-_#]+"  # ******, xxxx, ----: masked already
    r"|[$%<\[{/~].*",  # $VAR, %(x)s, <password>, [REDACTED], {{ x }}, a path
    re.DOTALL,
)
_IDENTIFIER_PATH: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_OBJECT_NAMES: Final = _words(
    "self cls this os sys args opts options config conf cfg settings env process params "
    "request ctx secrets vars"
)
_SECRET_WORDS: Final = ("pass", "pwd", "secret", "token", "key")


def is_placeholder(value: str) -> bool:
    """A value that stands for a secret instead of being one.

    ``${DB_PASSWORD}``, ``****``, ``<password>``, ``null``, and in code a variable or an
    attribute: ``db_password``, ``DB_PASSWORD``, ``settings.DbPassword``, ``os.environ``
    (a random mixed-case value that happens to contain ``key`` is not a name).
    (Written without backtracking patterns: values can be a kilobyte long.)
    """
    lowered = value.lower()
    if lowered in _PLACEHOLDER_WORDS or _MASKED_OR_TEMPLATE.fullmatch(value):
        return True
    if not _IDENTIFIER_PATH.fullmatch(value) or not ("_" in value or "." in value):
        return False
    head = value.split(".", 1)[0]
    named = (value.islower() or value.isupper()) and any(w in lowered for w in _SECRET_WORDS)
    return named or ("." in value and head in _OBJECT_NAMES)


# ---------------------------------------------------------------------------------------------
# Personal data

# Generic top-level domains seen in real addresses; any two-letter code counts as a country.
# A list keeps ``weights@np.transpose`` and ``self@property.setter`` in code from reading as
# e-mail addresses.
_GENERIC_TLDS: Final = _words(
    "com org net edu gov mil int info biz name pro mobi asia tel travel jobs aero coop museum "
    "app dev page cloud online site tech store shop blog email mail xyz top club vip work live "
    "news media space website link global world life today group company services solutions "
    "network systems digital studio design agency expert academy center team zone wang ink "
    "local test example invalid localhost"
)


def tld_ok(domain: str) -> bool:
    tld = domain.rsplit(".", 1)[-1].lower()
    return len(tld) == 2 or tld in _GENERIC_TLDS


_PHONE_GROUPS: Final = re.compile(r"[0-9]+")


def phone_ok(candidate: str) -> bool:
    """An international number: 8 to 15 digits, sane separators, balanced parentheses.

    Groups after the country code have two digits or more (``+35236450.6`` is a number).
    """
    if not 8 <= len(digits_of(candidate)) <= 15:
        return False
    if any(len(group) < 2 for group in _PHONE_GROUPS.findall(candidate)[1:]):
        return False
    if candidate.count("(") != candidate.count(")") or candidate.count("(") > 1:
        return False
    return not any(pair in candidate for pair in ("  ", "--", "..", "-.", ".-", "()"))


def nanp_ok(digits: str) -> bool:
    """A North American number: area code and exchange both start with 2 to 9."""
    local = digits[-10:]
    return len(local) == 10 and local[0] not in "01" and local[3] not in "01"


def ip_ok(candidate: str, *, keep_private: bool) -> bool:
    """A valid IPv4/IPv6 address; with ``keep_private``, private and loopback ones pass."""
    try:
        address = ipaddress.ip_address(candidate)
    except ValueError:
        return False
    if keep_private and (
        address.is_private or address.is_loopback or address.is_link_local or address.is_unspecified
    ):
        return False
    if address.version == 6:
        return _ipv6_shape_ok(candidate)
    return True


def _ipv6_shape_ok(candidate: str) -> bool:
    """Enough of an address that ``a::b`` in code or ``::`` in prose is not taken for one."""
    groups = [group for group in candidate.split("%", 1)[0].split(":") if group]
    if candidate == "::1" or len(groups) >= 3:
        return True
    return len(groups) == 2 and any(len(group) == 4 for group in groups)


# A dotted quad right after these is a version, not an address: ``v1.2.3.4``,
# ``version 10.0.0.1``, ``Chrome/120.0.0.0``, ``pkg==1.2.3.4``, ``版本 2.0.0.1``. Not ``x@``:
# that is ``user@10.0.0.1`` far more often than an npm ``pkg@1.2.3.4``.
_VERSION_CONTEXT: Final = re.compile(
    r"(?:(?<![A-Za-z])(?:v|version|ver\.?|rev\.?|release|build)|版本号?|==|>=|<=|~=|!=|"
    r"[A-Za-z]/)[ \t:=：]*\Z",
    re.IGNORECASE,
)


def version_context(text: str, start: int) -> bool:
    """True when the candidate starting at ``start`` follows a version marker."""
    return bool(_VERSION_CONTEXT.search(text, max(0, start - 16), start))
