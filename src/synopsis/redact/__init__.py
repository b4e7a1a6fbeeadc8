"""Redaction of secrets and personal data before anything leaves the process.

A pure step: text -> text and messages -> messages, no I/O, run before the summarizer call,
the archive and the memory store::

    redactor = Redactor(mode="hash")
    clean, findings = redactor.redact_messages(history)

What it finds (``kind`` names, in priority order):

* secrets (:data:`SECRET_KINDS`): ``private_key`` (whole PEM blocks, also inside JSON such as
  a GCP service-account file), ``jwt``, ``aws_access_key``, ``aws_secret_key``,
  ``gcp_api_key``, ``anthropic_key``, ``openai_key``, ``github_token``, ``slack_webhook``,
  ``slack_token``, ``stripe_key``, ``huggingface_token``, ``azure_storage_key``,
  ``azure_sas_signature``, ``url_password`` (``scheme://user:PASSWORD@host``), ``basic_auth``,
  ``bearer_token``, ``password`` (``password=``, ``pwd=``, ``"password": "..."``, ``密码：``),
  ``generic_secret`` (``api_key = "..."``, ``secret: ...``, ``token=...`` with a random-looking
  value);
* personal data (:data:`PII_KINDS`): ``email``, ``cn_resident_id`` (GB 11643 check character),
  ``iban`` (mod 97), ``payment_card`` (issuer range and Luhn), ``phone`` (E.164, North American,
  Chinese mobile and landline), ``ip_address`` (IPv4 and IPv6).

Why our own detectors and not detect-secrets (1.5.0 was evaluated): detect-secrets is a scanner
of files in a repository. Its plugins report which *line* holds a secret and the secret's value,
not where in the line it starts; several import ``requests`` for online verification; its
settings are process-global; its OpenAI pattern only knows the legacy key format, its JWT pattern
uses a lazy quantifier over an open-ended run, and its private-key plugin flags the ``BEGIN``
line, not the block. Redaction needs exact spans, offline and thread-safe, in linear time on
hostile input, and for personal data too, which detect-secrets does not cover. So its plugins
served as the reference for the secret formats (AWS prefixes, GitHub and Slack token shapes,
the Stripe and Azure key names), and each detector here is a focused pattern plus a validator
(see ``_detectors`` for the rules that keep every pattern linear). No dependency is added.

Measured on the labelled corpus the tests generate (``bench/bench_redaction.py`` prints the
table): precision and recall 1.0 for every kind, every near-miss (Luhn-invalid cards,
checksum-invalid IDs, versions, UUIDs, git SHAs, non-JWT base64, ``sk-`` in prose,
``@decorator``, order numbers, ...) left intact. Throughput is about 3-4 MB/s of text on one
core (``str.lower()`` on the same text: about 200 MB/s), so a 100 KB history costs some 30 ms.
Decisions worth knowing:

* A dotted quad right after a version marker (``v``, ``version``, ``==``, ``Chrome/``, ``版本``)
  is a version, not an address; elsewhere ``1.2.3.4`` is an address.
* An 11-digit number starting with 13-19 is read as a Chinese mobile number; a 13-19 digit
  number in a card issuer's range that passes Luhn is read as a card.
* ``password: word`` in prose is not a password unless the word has a digit, a capital or a
  symbol; ``password=word`` (config, connection strings) always is.
* A synopsis marker tag (``<synopsis:summary version="2" ...>``, ``</synopsis:skill>``) is
  structure, never data: no finding overlaps one, so a redacted summary is still a summary.
* ``git@github.com:org/repo`` is an SSH remote, not an e-mail address; an address needs a real
  top-level domain (any two-letter country code or a common generic one).
"""

import typing as _typing

from synopsis._lazy import exports as _exports

if _typing.TYPE_CHECKING:
    from synopsis.redact._detectors import PII_KINDS, SECRET_KINDS
    from synopsis.redact._redactor import (
        Finding,
        Mode,
        RedactionResult,
        Redactor,
        count_kinds,
        redactor_from,
    )
    from synopsis.redact.history import redact_history


__all__ = [
    "PII_KINDS",
    "SECRET_KINDS",
    "Finding",
    "Mode",
    "RedactionResult",
    "Redactor",
    "count_kinds",
    "redact_history",
    "redactor_from",
]

_EXPORTS = {
    "synopsis.redact._detectors": (
        "PII_KINDS",
        "SECRET_KINDS",
    ),
    "synopsis.redact._redactor": (
        "Finding",
        "Mode",
        "RedactionResult",
        "Redactor",
        "count_kinds",
        "redactor_from",
    ),
    "synopsis.redact.history": ("redact_history",),
}

# Each name is imported the first time it is read (PEP 562; see synopsis._lazy).
__getattr__, __dir__ = _exports(__name__, _EXPORTS)
