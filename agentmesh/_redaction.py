"""Redaction: secrets masked by key name and by shape, in logs and in what leaves the process.

Envelopes, reports, checkpoints and log lines all use it, so it imports nothing of
agentmesh: the lowest layers may depend on it without loading the logging configuration.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any, Final

import pydantic_core

__all__ = ["REDACTED", "redact", "redact_data", "redact_mapping", "redact_text"]

REDACTED: Final = "[REDACTED]"
"""What a secret is replaced with."""

# Compared after lower-casing and turning every run of non-alphanumerics into "_", so
# "X-Api-Key", "x_api_key" and "apiKey" are one name; a key also counts when it ends in
# "_" + one of these ("anthropic_api_key", "client_secret", "access_token").
_SECRET_KEY_NAMES: Final = frozenset(
    {
        "api_key",
        "apikey",
        "x_api_key",
        "authorization",
        "proxy_authorization",
        "token",
        "secret",
        "password",
        "cookie",
    }
)
_SECRET_KEY_SUFFIXES: Final = tuple("_" + name for name in _SECRET_KEY_NAMES)
_NON_ALNUM: Final = re.compile(r"[^a-z0-9]+")
_CAMEL_BOUNDARY: Final = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")

# Secrets inside free text: exception messages, reprs of request objects, query strings.
# The value classes never match "[REDACTED]", so running the pattern twice (before and
# after rendering) is idempotent, and they stop at quotes and backslashes, so
# substituting inside a rendered JSON line keeps it valid JSON.
_SECRET_TEXT: Final = re.compile(
    r"""
    sk-ant-[A-Za-z0-9_-]+
    # OpenAI's keys (sk-..., sk-proj-...) and Google's (AIza + 35), by their shape
    | (?<![A-Za-z0-9])sk-[A-Za-z0-9_-]{20,}
    | (?<![A-Za-z0-9])(?-i:AIza)[0-9A-Za-z_-]{35}
    | (?P<field>
        (?<![A-Za-z0-9])
        (?:proxy-authorization|authorization|x[-_]api[-_]key|api[-_]?key
           |access[-_]?token|password|secret|token
           # camelCase names: accessToken, clientSecret, dbPassword, refreshToken
           |(?-i:[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)*(?:Token|Secret|Password|ApiKey)))
        ["']?\s*[:=]\s*["']?
        (?:(?:bearer|basic|digest|token|negotiate)\s+)?+
      )
      (?!\[REDACTED\])[^\s"'`,;&})\]\\]+
    | (?P<scheme>bearer\s+)(?!\[REDACTED\])[A-Za-z0-9._~+/-]+=*
    | (?P<userinfo>
        # scheme://user: of a URL with a password; the user and the host stay readable.
        (?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@:"'`\\]*:
      )
      # The password runs to the last "@" before the path: an unescaped "@", "?" or "#"
      # in it is common. (An unescaped "/" cannot be told from the path.)
      (?!\[REDACTED\]@)[^\s/"'`\\]+(?=@)
    """,
    re.IGNORECASE | re.VERBOSE,
)

# Deeper than this, a value is redacted whole: the walk must end on self-referencing
# structures, and over-redacting a pathological value is cheaper than leaking it.
_MAX_DEPTH: Final = 32


def _replace_secret(match: re.Match[str]) -> str:
    prefix = match["field"] or match["scheme"] or match["userinfo"] or ""
    return prefix + REDACTED


def _may_hold_secret(text: str) -> bool:
    # Python's regex engine has no fast literal scan for a case-insensitive alternation
    # (about 17 us on a 280-character line); lower() and substring tests reject clean
    # text in about 1 us. Every branch of _SECRET_TEXT contains one of these words.
    lowered = text.lower()
    return (
        "sk-ant-" in lowered
        or _key_prefix(lowered)
        or "bearer" in lowered
        or "authorization" in lowered
        or ("api" in lowered and "key" in lowered)
        or "token" in lowered
        or "password" in lowered
        or "secret" in lowered
        or ("://" in lowered and "@" in lowered)
    )


def _key_prefix(lowered: str) -> bool:
    # OpenAI's `sk-...` starts a word ("task-0", an id in every event, does not count:
    # a match there would send every event through the slow walk); Google's `AIza...`.
    at = lowered.find("sk-")
    while at != -1:
        if at == 0 or not lowered[at - 1].isalnum():
            return True
        at = lowered.find("sk-", at + 1)
    return "aiza" in lowered


def redact_text(text: str) -> str:
    """`text` with secret-shaped parts masked: keys, bearer tokens, `token=...`, and the
    password of a URL (`postgresql://bob:[REDACTED]@db/x`)."""
    if not _may_hold_secret(text):
        return text
    redacted, count = _SECRET_TEXT.subn(_replace_secret, text)
    return redacted if count else text


@functools.lru_cache(maxsize=1024)
def _is_secret_name(name: str) -> bool:
    # "clientSecret" and "client_secret" are one name: split camelCase into words first.
    normalised = _NON_ALNUM.sub("_", _CAMEL_BOUNDARY.sub("_", name).lower()).strip("_")
    return normalised in _SECRET_KEY_NAMES or normalised.endswith(_SECRET_KEY_SUFFIXES)


def _is_secret_key(key: object) -> bool:
    if isinstance(key, str):
        return _is_secret_name(key)
    if isinstance(key, bytes):
        # Raw HTTP headers arrive as bytes; latin-1 decodes any byte string.
        return _is_secret_name(key.decode("latin-1"))
    return False


def _conceal(value: object) -> object:
    # "api_key=None" or "token=''" says a credential is missing, which is worth seeing.
    if value is None or isinstance(value, bool) or (isinstance(value, str | bytes) and not value):
        return value
    return REDACTED


def redact(value: Any) -> Any:
    """`value` with secrets masked, by key name and by shape, as in log lines.

    For what leaves the process by other ways than logs: envelopes and reports carry
    tool arguments (`attemptedQuery`) and error messages.
    """
    if type(value) is str:  # the common case, without the walk through the other shapes
        return redact_text(value)
    return _redact_value(value, 0)


def redact_data(value: Any) -> Any:
    """JSON data (what a store keeps) with secrets masked, as `redact` masks it.

    Its JSON text is screened once first: a value at rest seldom holds a secret, and one
    that holds no secret word, in a key or in a string, needs no walk through its parts
    (every secret key name contains one of the words screened for). Such a value is
    kept as it is, however deeply nested.
    """
    try:
        text = pydantic_core.to_json(value).decode().lower()
    except (ValueError, RecursionError):  # not JSON data: walked as `redact` walks it
        return redact(value)
    if _may_hold_secret(text) or "cookie" in text:
        return redact(value)
    return value


def _redact_value(value: object, depth: int) -> object:
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, int | float) or value is None:
        return value
    if depth >= _MAX_DEPTH:
        return REDACTED
    if isinstance(value, Mapping):
        return _redact_mapping(value, depth + 1)
    if isinstance(value, list | tuple):
        return _redact_sequence(value, depth + 1)
    if isinstance(value, bytes):
        return _redact_bytes(value)
    # Other objects are rendered by repr later; the post-render pass covers their text.
    return value


_SCALARS: Final = frozenset({int, float, bool, type(None)})


def _redact_mapping(mapping: Mapping[Any, Any], depth: int) -> Mapping[Any, Any]:
    # One screening of all keys and string values together is cheaper than one per item.
    texts = [value for value in mapping.values() if type(value) is str]
    try:
        clean = not _may_hold_secret("\n".join([*mapping, *texts]))
    except TypeError:  # a key that is not a string
        clean = False
    if clean:
        return _redact_values(mapping, depth, texts_clean=True)
    return _redact_keyed(mapping, depth, texts_clean=not _may_hold_secret("\n".join(texts)))


def _redact_item(key: object, value: object, depth: int, texts_clean: bool) -> object:
    # Exact-type fast paths: this runs for every item of every emitted event.
    if _is_secret_name(key) if type(key) is str else _is_secret_key(key):
        return _conceal(value)
    if type(value) is str:
        return value if texts_clean else redact_text(value)
    if type(value) in _SCALARS:
        return value
    return _redact_value(value, depth)


def _redact_keyed(mapping: Mapping[Any, Any], depth: int, texts_clean: bool) -> Mapping[Any, Any]:
    """`mapping` with its keys masked as well as its values, in its order.

    Two keys can mask to one text (two DSNs differing only in their password, or a key
    already showing "[REDACTED]"): the later masked one gets a " (2)" suffix, so no value
    is lost. A key that needed no masking keeps its name.
    """
    keys = [(key, _redact_key(key)) for key in mapping]
    if all(new is key for key, new in keys):
        return _redact_values(mapping, depth, texts_clean)
    taken = {key for key, new in keys if new is key}
    redacted: dict[Any, Any] = {}
    for (key, new), value in zip(keys, mapping.values(), strict=True):
        if new is not key:
            new = _unique_key(new, taken)
            taken.add(new)
        redacted[new] = _redact_item(key, value, depth, texts_clean)
    return redacted


def _redact_values(mapping: Mapping[Any, Any], depth: int, texts_clean: bool) -> Mapping[Any, Any]:
    # Copy on first change only: the caller owns `mapping`, and most events hold no secret.
    copy: dict[Any, Any] | None = None
    for key, value in mapping.items():
        # `_redact_item` inlined: this loop runs for every emitted event.
        if _is_secret_name(key) if type(key) is str else _is_secret_key(key):
            new = _conceal(value)
        elif type(value) is str:
            if texts_clean:
                continue
            new = redact_text(value)
        elif type(value) in _SCALARS:
            continue
        else:
            new = _redact_value(value, depth)
        if new is not value:
            if copy is None:
                copy = dict(mapping)
            copy[key] = new
    return mapping if copy is None else copy


def _redact_key(key: object) -> object:
    if isinstance(key, str):
        return redact_text(key)
    if isinstance(key, bytes):
        return _redact_bytes(key)
    # Numbers, enums and other hashable keys are rendered by repr later, in logs.
    return key


def _unique_key(key: Any, taken: set[Any]) -> Any:
    """`key`, or `key (2)`, `key (3)`...: the first name not in `taken`."""
    number = 2
    candidate = key
    while candidate in taken:
        suffix = f" ({number})"
        candidate = key + suffix.encode() if isinstance(key, bytes) else f"{key}{suffix}"
        number += 1
    return candidate


def _redact_bytes(value: bytes) -> bytes:
    text = value.decode("latin-1")
    redacted = redact_text(text)
    return value if redacted is text else redacted.encode("latin-1")


def _redact_sequence(items: list[Any] | tuple[Any, ...], depth: int) -> list[Any] | tuple[Any, ...]:
    if len(items) == 2 and _is_secret_key(items[0]):
        # A (name, value) header pair, as in httpx's raw headers.
        new_items = [items[0], _conceal(items[1])]
    else:
        new_items = [_redact_value(item, depth) for item in items]
    if all(new is old for new, old in zip(new_items, items, strict=True)):
        return items
    return new_items if isinstance(items, list) else tuple(new_items)


def redact_mapping(mapping: Mapping[Any, Any]) -> Mapping[Any, Any]:
    """`mapping` with secrets masked, the same object when it holds none: a log event."""
    return _redact_mapping(mapping, 0)
