"""The built-in detectors: one pattern per kind of secret or personal datum, plus its validator.

Every pattern was written to run in linear time on any input (the test suite feeds each one
100 KB of adversarial text). The rules that make it so:

* a token starts only where a run of its characters starts (a look-behind for the same class),
  so a long run is tried once, not at each of its positions;
* repetitions are bounded (``{16,512}``) or possessive (``*+``), so a failed match gives up
  instead of backtracking through the run;
* nothing nests an unbounded repetition inside another;
* context that needs a look at the surroundings (a version number before a dotted quad) is read
  by the validator from a fixed-size window, not by an unbounded look-behind.

Tokens also start right after a JSON escape (``\\n``, ``\\t``, ``\\u4f60``): tool output often
carries JSON whose strings hold whole files, and ``"...\\nghp_..."`` must still be caught.

The list is ordered: where two findings overlap, the earlier detector wins (a JWT inside
``Authorization: Bearer`` is reported as ``jwt``; the password of a URL is not also read as the
local part of an e-mail address).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import ClassVar, Final, Protocol

from synopsis.redact import _validators as v

__all__ = [
    "PII_KINDS",
    "SECRET_KINDS",
    "Detector",
    "PatternDetector",
    "builtin_detectors",
]

Span = tuple[int, int]
Check = Callable[[re.Match[str]], bool]


class Detector(Protocol):
    """Finds the spans of one kind of value in a text."""

    @property
    def kind(self) -> str: ...

    @property
    def hints(self) -> tuple[str, ...]:
        """Lower-case substrings one of which every match contains; empty means "always run"."""
        ...

    def find(self, text: str) -> Iterator[Span]: ...


@dataclass(frozen=True, slots=True)
class PatternDetector:
    """A compiled pattern, the group that holds the value, and the validator of a match."""

    kind: str
    pattern: re.Pattern[str]
    check: Check | None = None
    #: the group that holds the value to redact; with several, the first that took part
    groups: tuple[int | str, ...] = (0,)
    hints: tuple[str, ...] = ()

    def find(self, text: str) -> Iterator[Span]:
        for match in self.pattern.finditer(text):
            start, end = next((match.span(g) for g in self.groups if match.start(g) >= 0), (0, 0))
            if end > start and (self.check is None or self.check(match)):
                yield start, end


def _start(chars: str, first: str) -> str:
    """Where a token whose run is made of ``chars`` and whose first character is in ``first``
    begins: not inside a run, or right after a JSON escape.

    ``\\n``, ``\\t`` and ``\\u4f60`` end with letters or digits, yet the token after them
    starts a new run: ``"...\\nghp_..."`` and ``"\\u624b\\u673a13800138000"`` must be caught.
    The look-ahead for the first character comes first because it is by far the cheapest test:
    it makes the scan several times faster on text where the token is absent.
    """
    behind = rf"(?:(?<![\\{chars}])|(?<=\\[nrt])|(?<=\\u[0-9A-Fa-f]{{4}}))"
    return rf"(?=[{first}]){behind}"


def _ascii(pattern: str) -> re.Pattern[str]:
    """ASCII classes: ``\\d`` and ``\\s`` must not match full-width digits or spaces."""
    return re.compile(pattern, re.ASCII)


def _value(group: int | str, test: Callable[[str], bool]) -> Check:
    return lambda match: test(match.group(group))


_ALNUM: Final = "A-Za-z0-9"
_B64URL: Final = "A-Za-z0-9_\\-"
_ASSIGN: Final = r"""\\?["']?[ \t]{0,5}(?P<sep>[:=：]|是|为)[ \t]{0,5}"""


# ---------------------------------------------------------------------------------------------
# Secrets

# The whole block, also with escaped newlines (inside JSON). A block cut short, without its END
# line, is still a secret: it is taken up to the first character a block cannot hold.
_PRIVATE_KEY = PatternDetector(
    "private_key",
    _ascii(
        r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
        r"(?:[A-Za-z0-9+/=:,.\s]|\\[nrt]|-(?!-))*+"
        r"(?:-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----)?"
    ),
    hints=("private key",),
)
_JWT = PatternDetector(
    "jwt",
    _ascii(
        _start(_B64URL + ".", "e") + r"eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{2,}+\.[A-Za-z0-9_-]*+"
    ),
    check=lambda match: v.jwt_ok(match.group()),
    hints=("eyj",),
)
_AWS_ACCESS_KEY = PatternDetector(
    "aws_access_key",
    _ascii(_start(_ALNUM, "A") + r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}(?![A-Za-z0-9])"),
    hints=("akia", "asia", "abia", "acca", "a3t"),
)
_AWS_SECRET_KEY = PatternDetector(
    "aws_secret_key",
    _ascii(
        r"(?=[aAsS])(?<![A-Za-z])(?i:aws_?secret_?(?:access_?)?key|secret_?access_?key)"
        + _ASSIGN
        + r"""\\?["']?(?P<value>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"""
    ),
    check=_value("value", lambda value: v.character_classes(value) >= 2),
    groups=("value",),
    hints=("secret",),
)
_GCP_API_KEY = PatternDetector(
    "gcp_api_key",
    _ascii(_start(_B64URL, "A") + r"AIza[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])"),
    hints=("aiza",),
)
_ANTHROPIC_KEY = PatternDetector(
    "anthropic_key",
    _ascii(_start(_B64URL, "s") + r"sk-ant-[a-z]{2,10}\d{0,3}-[A-Za-z0-9_-]{32,400}+(?![\w-])"),
    hints=("sk-ant-",),
)
_OPENAI_KEY = PatternDetector(
    "openai_key",
    _ascii(
        _start(_B64URL, "s")
        + r"sk-(?!ant-)(?:[a-z]{2,12}-)?(?P<body>[A-Za-z0-9_-]{20,400}+)(?![A-Za-z0-9_-])"
    ),
    check=_value("body", lambda body: v.looks_random(body, min_length=20, min_classes=3)),
    hints=("sk-",),
)
_GITHUB_TOKEN = PatternDetector(
    "github_token",
    _ascii(
        _start(_B64URL, "g")
        + r"(?:gh[pousr]_[A-Za-z0-9]{36,251}+|github_pat_[A-Za-z0-9_]{60,251}+)(?![A-Za-z0-9_])"
    ),
    check=lambda match: v.character_classes(match.group().partition("_")[2]) >= 2,
    hints=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
)
_SLACK_WEBHOOK = PatternDetector(
    "slack_webhook",
    _ascii(r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]{20,300}+"),
    hints=("hooks.slack.com",),
)
_SLACK_TOKEN = PatternDetector(
    "slack_token",
    _ascii(_start(_B64URL, "x") + r"(?:xox[abposre]|xapp)-[A-Za-z0-9-]{10,250}+(?![\w-])"),
    check=lambda match: any(c.isdigit() for c in match.group()[5:]),
    hints=("xox", "xapp-"),
)
_STRIPE_KEY = PatternDetector(
    "stripe_key",
    _ascii(
        _start(_B64URL, "srw")
        + r"(?:[sr]k_(?:live|test)_[A-Za-z0-9]{16,247}+|whsec_[A-Za-z0-9]{24,247}+)(?![\w-])"
    ),
    check=lambda match: v.character_classes(match.group().rpartition("_")[2]) >= 2,
    hints=("k_live_", "k_test_", "whsec_"),
)
_HUGGINGFACE_TOKEN = PatternDetector(
    "huggingface_token",
    _ascii(_start(_B64URL, "h") + r"hf_[A-Za-z0-9]{30,40}+(?![\w-])"),
    check=lambda match: v.character_classes(match.group()[3:]) >= 2,
    hints=("hf_",),
)
_AZURE_STORAGE_KEY = PatternDetector(
    "azure_storage_key",
    _ascii(
        r"(?=[aAsS])(?<![A-Za-z])(?i:AccountKey|SharedAccessKey)[ \t]{0,3}=[ \t]{0,3}"
        r"(?P<value>[A-Za-z0-9+/]{20,100}+={0,2})(?![A-Za-z0-9+/=])"
    ),
    check=_value("value", lambda value: v.character_classes(value) >= 2),
    groups=("value",),
    hints=("accountkey", "sharedaccesskey"),
)
_AZURE_SAS_SIGNATURE = PatternDetector(
    "azure_sas_signature",
    _ascii(r"[?&;]sig=(?P<value>[A-Za-z0-9%+/=]{20,200}+)"),
    check=_value("value", lambda value: v.character_classes(value) >= 2),
    groups=("value",),
    hints=("sig=",),
)
_URL_PASSWORD = PatternDetector(
    "url_password",
    _ascii(
        _start(_ALNUM + "+.-", "A-Za-z")
        + r"[A-Za-z][A-Za-z0-9+.-]{0,30}+:(?://|\\/\\/)[^\s:/@\"'\\]{0,256}+:"
        + r"(?P<value>[^\s/@\"'\\]{1,256}+)@"
    ),
    check=_value("value", lambda value: not v.is_placeholder(value)),
    groups=("value",),
    hints=("://", ":\\/\\/"),
)
_BASIC_AUTH = PatternDetector(
    "basic_auth",
    _ascii(
        r"(?=[bB])(?<![A-Za-z])(?i:basic)[ \t]{1,5}"
        r"(?P<value>[A-Za-z0-9+/]{8,1024}+={0,2})(?![\w+/=-])"
    ),
    check=_value("value", v.basic_credentials_ok),
    groups=("value",),
    hints=("basic",),
)
_BEARER_TOKEN = PatternDetector(
    "bearer_token",
    _ascii(r"(?=[bB])(?<![A-Za-z])(?i:bearer)[ \t]{1,5}(?P<value>[A-Za-z0-9_\-+/=.~]{16,2048}+)"),
    check=_value("value", v.looks_random),
    groups=("value",),
    hints=("bearer",),
)


_CLI_PASSWORD = PatternDetector(
    "password",
    _ascii(
        r"(?=-)(?<![\w-])(?:-u|--user)[ =][\"']?[^\s:\"']{1,128}+:"
        r"(?P<value>[^\s\"']{1,256}+)"
    ),
    check=_value("value", lambda value: len(value) >= 3 and not v.is_placeholder(value)),
    groups=("value",),
    hints=("-u", "--user"),
)


def _assignment(keywords: str) -> str:
    """``keyword = value`` in code, config, env dumps, JSON (also escaped JSON) and prose."""
    return (
        keywords
        + _ASSIGN
        + r"""(?:\\?(?P<quote>["'])(?P<quoted>[^"'\\\n]{1,128}+)\\?(?P=quote)"""
        + r"""|(?P<bare>[!#$%*+\-./0-9:=?@A-Z^_`a-z|~]{1,128}+)(?![(\[{]))"""
    )


_KEY_VALUE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def _password_ok(match: re.Match[str]) -> bool:
    quoted = match.group("quoted")
    value = quoted if quoted is not None else match.group("bare")
    if len(value) < 3 or v.is_placeholder(value):
        return False
    if quoted is not None:
        return True
    # A bare word is a password in ``password=postgres`` (env, connection strings), but not in
    # prose (``password: The one you chose``) or code (``self.password = user``), where
    # real passwords almost always carry a digit or a symbol.
    spaced = match.start("bare") > match.end("sep")
    word = value.replace("_", "").isalpha()
    if spaced and _KEY_VALUE.match(value):  # ``password= dbname=prod``: an empty password
        return False
    return not (word and (spaced or match.group("sep") != "="))


_PASSWORD = PatternDetector(
    "password",
    _ascii(
        _assignment(
            r"(?=[pP密口])(?:(?<![A-Za-z])(?i:(?:pg)?password|passwd|pwd)|密码|口令|(?<=[_.-])(?i:pass))"
        )
    ),
    check=_password_ok,
    groups=("quoted", "bare"),
    hints=("pass", "pwd", "密码", "口令"),
)


def _secret_value_ok(match: re.Match[str]) -> bool:
    value = match.group("quoted") or match.group("bare")
    return v.looks_random(value) and not v.is_placeholder(value)


_GENERIC_SECRET = PatternDetector(
    "generic_secret",
    _ascii(
        _assignment(
            r"(?=[aAcCsSrRiItTmMpP密秘令])(?:(?<![A-Za-z])(?i:api[_-]?key|apikey|client[_-]?secret|secret[_-]?key|secret"
            r"|(?:access|auth|refresh|session|id)[_-]?token|token|access[_-]?key"
            r"|(?:storage|account|master|signing)[_-]?key|private[_-]?key)|密钥|秘钥|令牌)"
        )
    ),
    check=_secret_value_ok,
    groups=("quoted", "bare"),
    hints=("key", "secret", "token", "密钥", "秘钥", "令牌"),
)


# ---------------------------------------------------------------------------------------------
# Personal data


_EMAIL = PatternDetector(
    "email",
    _ascii(
        _start(_ALNUM + "._%+\\-", "A-Za-z0-9._%+\\-")
        + r"[A-Za-z0-9._%+-]{1,64}+@"
        + r"(?P<domain>(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.){1,8}[A-Za-z]{2,24})"
        # not followed by ``:path/``: ``git@github.com:org/repo.git`` is an SSH remote
        + r"(?![A-Za-z0-9-])(?!:[A-Za-z0-9_.~-]{0,100}/)"
    ),
    check=_value("domain", v.tld_ok),
    hints=("@",),
)
_CN_RESIDENT_ID = PatternDetector(
    "cn_resident_id",
    _ascii(
        _start(_ALNUM, "1-9")
        + r"[1-9][0-9]{5}(?:18|19|20)[0-9]{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12][0-9]|3[01])"
        + r"[0-9]{3}[0-9Xx](?![A-Za-z0-9])"
    ),
    check=lambda match: v.cn_resident_id_ok(match.group()),
)
_PAYMENT_CARD = PatternDetector(
    "payment_card",
    _ascii(
        _start(_ALNUM + "_.\\-", "0-9")
        + r"(?:[0-9]{4}(?P<s>[ -])[0-9]{4}(?P=s)[0-9]{4}(?P=s)[0-9]{4}(?:(?P=s)[0-9]{3})?"
        + r"|[0-9]{4}(?P<t>[ -])[0-9]{6}(?P=t)[0-9]{4,5}"
        + r"|[0-9]{13,19}+)(?![0-9A-Za-z_]|[.,-][0-9])"
    ),
    check=lambda match: v.card_ok(v.digits_of(match.group())),
)
_PHONE_CN_MOBILE = PatternDetector(
    "phone",
    _ascii(
        _start(_ALNUM + "_.+", "0-9+")
        + r"(?:(?:\+|00)86[ -]?)?1[3-9][0-9](?:[ -]?[0-9]{4}){2}(?![0-9A-Za-z_])"
    ),
)
_PHONE_CN_LANDLINE = PatternDetector(
    "phone",
    _ascii(
        _start(_ALNUM + "_.\\-", "0")
        + r"0(?:10|2[0-9]|[3-9][0-9]{2})-[2-9][0-9]{6,7}(?![0-9A-Za-z_]|-[0-9])"
    ),
)
_PHONE_INTERNATIONAL = PatternDetector(
    "phone",
    _ascii(_start(_ALNUM + "_+", "+") + r"\+[1-9][0-9 ().-]{6,22}[0-9](?![0-9])"),
    check=lambda match: v.phone_ok(match.group()),
)
_PHONE_NANP = PatternDetector(
    "phone",
    _ascii(
        _start(_ALNUM + "_.+\\-", "0-9(")
        + r"(?:1[-. ])?(?:\([0-9]{3}\) ?[0-9]{3}[-. ]|[0-9]{3}(?P<n>[-.])[0-9]{3}(?P=n))"
        + r"[0-9]{4}(?![0-9A-Za-z_]|[-.][0-9])"
    ),
    check=lambda match: v.nanp_ok(v.digits_of(match.group())),
)


@dataclass(frozen=True, slots=True)
class IbanDetector:
    """IBANs, printed in groups of four or not; a trailing word is dropped (``... 7034 EUR``)."""

    kind: str = "iban"
    hints: tuple[str, ...] = ()
    candidates: ClassVar[re.Pattern[str]] = _ascii(
        _start(_ALNUM, "A-Z")
        + r"[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}+(?: ?[A-Z0-9]{1,3})?(?![A-Za-z0-9])"
    )

    def find(self, text: str) -> Iterator[Span]:
        for match in self.candidates.finditer(text):
            candidate = match.group()
            for _ in range(3):
                if v.iban_ok(candidate.replace(" ", "")):
                    yield match.start(), match.start() + len(candidate)
                    break
                candidate = candidate.rpartition(" ")[0]


@dataclass(frozen=True, slots=True)
class IpDetector:
    """IPv6 and IPv4 addresses with valid groups and octets; versions are not addresses."""

    keep_private: bool = False
    kind: str = "ip_address"
    hints: tuple[str, ...] = ()
    ipv6: ClassVar[re.Pattern[str]] = _ascii(
        _start(_ALNUM + ":.", "0-9A-Fa-f:")
        + r"[0-9A-Fa-f:.]{2,60}+(?:%[0-9A-Za-z]{1,16})?(?![0-9A-Za-z:])"
    )
    ipv4: ClassVar[re.Pattern[str]] = _ascii(
        _start(_ALNUM + ".", "0-9") + r"(?:[0-9]{1,3}\.){3}[0-9]{1,3}(?![0-9A-Za-z_]|\.[0-9])"
    )

    def find(self, text: str) -> Iterator[Span]:
        if ":" in text:
            for match in self.ipv6.finditer(text):
                candidate = match.group().rstrip(".")
                if candidate.count(":") >= 2 and v.ip_ok(candidate, keep_private=self.keep_private):
                    yield match.start(), match.start() + len(candidate)
        for match in self.ipv4.finditer(text):
            if v.ip_ok(match.group(), keep_private=self.keep_private) and not v.version_context(
                text, match.start()
            ):
                yield match.span()


# ---------------------------------------------------------------------------------------------
# The catalogue

_SECRETS: Final[tuple[Detector, ...]] = (
    _PRIVATE_KEY,
    _JWT,
    _AWS_ACCESS_KEY,
    _AWS_SECRET_KEY,
    _GCP_API_KEY,
    _ANTHROPIC_KEY,
    _OPENAI_KEY,
    _GITHUB_TOKEN,
    _SLACK_WEBHOOK,
    _SLACK_TOKEN,
    _STRIPE_KEY,
    _HUGGINGFACE_TOKEN,
    _AZURE_STORAGE_KEY,
    _AZURE_SAS_SIGNATURE,
    _URL_PASSWORD,
    _BASIC_AUTH,
    _BEARER_TOKEN,
    _PASSWORD,
    _CLI_PASSWORD,
    _GENERIC_SECRET,
)
SECRET_KINDS: Final = frozenset(detector.kind for detector in _SECRETS)
PII_KINDS: Final = frozenset(
    {"email", "cn_resident_id", "iban", "payment_card", "phone", "ip_address"}
)


def builtin_detectors(*, keep_private_ips: bool = False) -> tuple[Detector, ...]:
    """Every built-in detector, in priority order (secrets first)."""
    return (
        *_SECRETS,
        _EMAIL,
        _CN_RESIDENT_ID,
        IbanDetector(),
        _PAYMENT_CARD,
        _PHONE_CN_MOBILE,
        _PHONE_CN_LANDLINE,
        _PHONE_INTERNATIONAL,
        _PHONE_NANP,
        IpDetector(keep_private=keep_private_ips),
    )
