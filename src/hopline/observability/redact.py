"""Secrets out of what the admin listener shows: :func:`redact` for the configuration
(as JSON data), :func:`scrub` for any text or data shown beside it.

What :func:`redact` replaces with :data:`REDACTED`:

- every value under ``headers`` and ``env`` (the names stay);
- the value of every key that names a secret: ``secret``, ``key``, ``token``,
  ``password``, ``pem``, ``jwk``, ``authorization``, ``cookie``, ``credential(s)``, and
  any name ending ``_secret``, ``_token``, ``_password``, ``_key`` or ``_credentials``
  (``client_secret``, ``api_key``...);
- in command ``args``: the value of a flag naming a secret (``--token X``,
  ``--api-key=X``, ``--auth X``, ``--password X``); every header value given to a
  header flag (``--header "Authorization: Bearer X"``, the mcp-remote pattern, shows as
  ``--header "Authorization: <redacted>"``; ``-H``, ``--header=...``); a header-looking
  argument with a secret name anywhere (``Cookie: X``, ``X-Api-Key: X``); an
  environment-looking ``NAME=value`` whose name is secret (``GITHUB_TOKEN=X``); a lone
  ``Bearer X`` or ``Basic X``;
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
_HEADER = re.compile(r"^(\s*[A-Za-z0-9!#$%&'*+.^_`|~-]+\s*:)(\s*)(.*)$", re.S)  # "Name: value"
_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_.-]*)=(.*)$", re.S)  # "NAME=value"
_SCHEME = re.compile(r"^((?:Bearer|Basic|Token|Digest)\s+)(\S.*)$", re.S | re.I)  # "Bearer X"
HEADER_FLAGS = frozenset({"--header", "-H", "--headers", "--http-header", "--extra-header", "--add-header"})
# a flag, header or variable name with one of these words (split at - _ .) names a secret
SECRET_WORDS = frozenset(
    {
        "auth",
        "authorization",
        "authtoken",
        "bearer",
        "cookie",
        "credential",
        "credentials",
        "jwt",
        "key",
        "apikey",
        "pass",
        "passwd",
        "password",
        "passphrase",
        "pat",
        "pwd",
        "secret",
        "token",
    }
)
# ... or one of these anywhere in it (apiKey, authToken, x-goog-api-key)
SECRET_PARTS = ("token", "secret", "password", "passwd", "apikey", "api-key", "api_key", "authorization", "cookie")
MIN_SECRET = 8  # shorter values are not scrubbed from other text (they would match ordinary words)


def secret_name(name: str) -> bool:
    n = name.lower()
    return n in SECRET_NAMES or n.endswith(SECRET_SUFFIXES)


def _flag_secret(flag: str) -> bool:
    """Whether a flag (``--api-key``), header name (``X-Auth-Token``) or variable name
    (``GITHUB_TOKEN``) names a secret."""
    name = flag.strip().lstrip("-").lower()
    if not name:
        return False
    return (
        secret_name(name.replace("-", "_"))
        or any(w in SECRET_WORDS for w in re.split(r"[-_.]+", name))
        or any(w in name for w in SECRET_PARTS)
    )


def redact_args(args: Iterable[Any]) -> list[Any]:
    """A command's arguments as they may be shown (a startup line, ``hopline check``)."""
    return _args(list(args), set())


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
    hide_next: str | None = None  # "value": the next argument is a secret; "header": it is a header
    for arg in args:
        if not isinstance(arg, str):
            out.append(arg)
            hide_next = None
            continue
        if hide_next is not None and not arg.startswith("--"):
            out.append(_header_value(arg, found) if hide_next == "header" else _take_credential(arg, found))
            hide_next = None
            continue
        hide_next = None
        m = _FLAG.match(arg)
        if m is not None and m.group(1) in HEADER_FLAGS:
            out.append(f"{m.group(1)}={_header_value(m.group(3), found)}")
        elif m is not None and _flag_secret(m.group(1)):
            out.append(f"{m.group(1)}={_take_credential(m.group(3), found)}")
        elif arg in HEADER_FLAGS:
            out.append(arg)
            hide_next = "header"
        elif arg.startswith("-"):
            out.append(url_scrub(arg, found))
            hide_next = "value" if _flag_secret(arg) else None
        else:
            out.append(_loose(arg, found))
    return out


def _header_value(text: str, found: set[str]) -> str:
    """A header flag's value: ``Name: <redacted>``, or all of it when it is no ``Name: value``."""
    m = _HEADER.match(text)
    if m is None or "://" in m.group(1):
        return _take_credential(text, found)
    if not m.group(3):
        return text
    return f"{m.group(1)}{m.group(2)}{_take_credential(m.group(3), found)}"


def _take_credential(value: str, found: set[str]) -> str:
    """``_take``, and its parts too (``X`` of ``Bearer X``, of ``sid=X; b=Y``), so that
    :func:`scrub` finds a part quoted alone."""
    found.update(p for p in re.split(r"[\s;,=:\"'{}]+", value) if len(p) >= MIN_SECRET)
    return _take(value, found)


def _loose(arg: str, found: set[str]) -> str:
    """An argument that is no flag: a secret header, ``NAME=secret`` or ``Bearer X`` is redacted."""
    m = _HEADER.match(arg)
    if m is not None and m.group(3) and _flag_secret(m.group(1).strip(" :")) and "://" not in arg:
        return f"{m.group(1)}{m.group(2)}{_take_credential(m.group(3), found)}"
    m = _ASSIGN.match(arg)
    if m is not None and m.group(2) and _flag_secret(m.group(1)):
        return f"{m.group(1)}={_take_credential(m.group(2), found)}"
    m = _SCHEME.match(arg)
    if m is not None:
        return f"{m.group(1)}{_take_credential(m.group(2), found)}"
    return url_scrub(arg, found)


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
