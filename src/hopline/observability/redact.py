"""Secrets out of what the admin listener shows: :func:`redact` for the configuration
(as JSON data), :func:`scrub` for any text or data shown beside it.

What :func:`redact` replaces with :data:`REDACTED`:

- every value under ``headers`` and ``env`` (the names stay);
- the value of every key that names a secret: ``secret``, ``key``, ``token``,
  ``password``, ``pem``, ``jwk``, ``authorization``, ``cookie``, ``credential(s)``, and
  any name ending ``_secret``, ``_token``, ``_password``, ``_key`` or ``_credentials``
  (``client_secret``, ``api_key``...);
- in command ``args``, the value of a flag naming a secret (``--token X``,
  ``--api-key=X``);
- in every URL, anywhere: the userinfo, the query and the fragment
  (``https://u:p@h/x?k=v`` shows as ``https://<redacted>@h/x?<redacted>``).

It returns the redacted data and the set of secret values it took out, so that
:func:`scrub` can take those same values out of anything else (an error message that
quoted one).
"""

from __future__ import annotations

import re
from typing import Any, Iterable
from urllib.parse import urlsplit, urlunsplit

REDACTED = "<redacted>"
WHOLE = frozenset({"headers", "env"})  # every value below these keys is a secret
SECRET_NAMES = frozenset(
    {
        "secret",
        "key",
        "token",
        "password",
        "passwd",
        "pem",
        "jwk",
        "authorization",
        "cookie",
        "credential",
        "credentials",
        "apikey",
        "previous_session_keys",  # state: (a list of keys; api_keys is a list of names and keys)
    }
)
SECRET_SUFFIXES = (
    "_secret",
    "_token",
    "_password",
    "_key",
    "_credentials",
    "-secret",
    "-token",
    "-password",
    "-key",
)
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s\"'<>]+")
_FLAG = re.compile(r"^(-{1,2}[A-Za-z0-9_-]+)(=)(.*)$", re.S)
MIN_SECRET = 8  # shorter values are not scrubbed from other text (they would match ordinary words)


def secret_name(name: str) -> bool:
    n = name.lower()
    return n in SECRET_NAMES or n.endswith(SECRET_SUFFIXES)


def _flag_secret(flag: str) -> bool:
    return secret_name(flag.lstrip("-").replace("-", "_")) or any(
        w in flag.lower() for w in ("token", "secret", "password", "passwd", "apikey", "api-key", "api_key")
    )


def redact(data: Any) -> tuple[Any, set[str]]:
    """``(data with secrets replaced, the secret values taken out)``."""
    found: set[str] = set()
    return _walk(data, None, found), found


def _take(value: Any, found: set[str]) -> str:
    for leaf in _leaves(value):
        if isinstance(leaf, str) and leaf:
            found.add(leaf)
            found.update(_url_parts(leaf))
        elif leaf is not None and not isinstance(leaf, bool):
            found.add(str(leaf))
    return REDACTED


def _leaves(value: Any) -> Iterable[Any]:
    if isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _leaves(v)
    else:
        yield value


def _walk(value: Any, name: str | None, found: set[str]) -> Any:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            key = str(k)
            if key.lower() in WHOLE and isinstance(v, dict):
                out[key] = {str(hk): (None if hv is None else _take(hv, found)) for hk, hv in v.items()}
            elif secret_name(key) and v is not None and not isinstance(v, bool):
                out[key] = _take(v, found)
            else:
                out[key] = _walk(v, key, found)
        return out
    if isinstance(value, (list, tuple)):
        if name == "args":
            return _args(list(value), found)
        return [_walk(v, name, found) for v in value]
    if isinstance(value, str):
        return url_scrub(value, found)
    return value


def _args(args: list[Any], found: set[str]) -> list[Any]:
    out: list[Any] = []
    hide_next = False
    for arg in args:
        if not isinstance(arg, str):
            out.append(arg)
            hide_next = False
            continue
        if hide_next:
            out.append(_take(arg, found))
            hide_next = False
            continue
        m = _FLAG.match(arg)
        if m is not None and _flag_secret(m.group(1)):
            _take(m.group(3), found)
            out.append(f"{m.group(1)}={REDACTED}")
        else:
            out.append(url_scrub(arg, found))
            hide_next = arg.startswith("-") and _flag_secret(arg)
    return out


def _url_parts(text: str) -> set[str]:
    parts: set[str] = set()
    for m in _URL.finditer(text):
        try:
            u = urlsplit(m.group(0))
        except ValueError:
            continue
        userinfo = u.netloc.rpartition("@")[0]
        for part in (userinfo, *userinfo.split(":"), u.query, u.fragment, *re.split(r"[&=]", u.query)):
            if len(part) >= MIN_SECRET:
                parts.add(part)
    return parts


def url_scrub(text: str, found: set[str] | None = None) -> str:
    """``text`` with every URL's userinfo, query and fragment replaced (``found`` gets them)."""
    if "://" not in text:
        return text

    def one(m: re.Match[str]) -> str:
        raw = m.group(0)
        try:
            u = urlsplit(raw)
        except ValueError:
            return REDACTED
        _userinfo, at, host = u.netloc.rpartition("@")
        if not (at or u.query or u.fragment):
            return raw
        if found is not None:
            found.update(_url_parts(raw))
        return urlunsplit(
            (
                u.scheme,
                f"{REDACTED}@{host}" if at else host,
                u.path,
                REDACTED if u.query else "",
                REDACTED if u.fragment else "",
            )
        )

    return _URL.sub(one, text)


def scrub(data: Any, secrets: Iterable[str] = ()) -> Any:
    """``data`` (text, or JSON data) with URLs scrubbed and every value in ``secrets``
    (of at least :data:`MIN_SECRET` characters) replaced, wherever it appears."""
    known = sorted((s for s in secrets if len(s) >= MIN_SECRET), key=len, reverse=True)
    pattern = re.compile("|".join(re.escape(s) for s in known)) if known else None

    def text(value: str) -> str:
        value = url_scrub(value)
        return pattern.sub(REDACTED, value) if pattern is not None else value

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return text(value)
        if isinstance(value, dict):
            return {text(str(k)): walk(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [walk(v) for v in value]
        return value

    return walk(data)
