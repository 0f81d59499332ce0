"""Backend ids: the rule an operator-assigned id must satisfy, and how to derive one.

A backend id prefixes every name hopline exposes for that backend
(``{backend}{delimiter}{name}``, draft §2.2 NAME-DELIMITER and NAME-CHARSET), so it
must be 1–64 characters from the binding's NAME-CHARSET and must not contain the
delimiter, or splitting an exposed name on the first delimiter would be ambiguous
(DESIGN §3.4). Pure functions; the charset and default delimiter are read from the
binding, never written here as literals.
"""

from __future__ import annotations

import re

from hopline.binding import MCP_HANDSHAKE

NAME_CHARSET = MCP_HANDSHAKE.name_charset  # "[a-zA-Z0-9_-]"
DEFAULT_DELIMITER = MCP_HANDSHAKE.name_delimiter  # "__"
MAX_ID_LENGTH = 64
ID_PATTERN = f"^{NAME_CHARSET}{{1,{MAX_ID_LENGTH}}}$"
FALLBACK_ID = "server"

_ID = re.compile(ID_PATTERN)
_CHARSET_RUN = re.compile(f"{NAME_CHARSET}+")
_OUTSIDE_CHARSET = re.compile(NAME_CHARSET.replace("[", "[^", 1) + "+")


def is_charset_text(text: str) -> bool:
    """True when ``text`` is non-empty and made only of NAME-CHARSET characters."""
    return bool(_CHARSET_RUN.fullmatch(text))


def id_problem(backend_id: str, delimiter: str | None) -> str | None:
    """Why ``backend_id`` is not a valid id (with a suggested one), or None if it is."""
    if not _ID.fullmatch(backend_id):
        return (
            f"backend id {backend_id!r} must be 1-{MAX_ID_LENGTH} characters from {NAME_CHARSET}"
            f" (try {derive_id(backend_id, delimiter or DEFAULT_DELIMITER)!r})"
        )
    if delimiter and delimiter in backend_id:
        return (
            f"backend id {backend_id!r} contains the name delimiter {delimiter!r}"
            f" (try {derive_id(backend_id, delimiter)!r})"
        )
    if delimiter and runs_into(backend_id, delimiter):
        return (
            f"backend id {backend_id!r} ends so that it runs into the delimiter {delimiter!r}, and exposed"
            f" names would split at the wrong place (try {derive_id(backend_id, delimiter)!r})"
        )
    return None


def runs_into(backend_id: str, delimiter: str) -> bool:
    """True when ``backend_id + delimiter`` holds the delimiter earlier than where it was
    joined ("a_" + "__" + "x" splits as "a", "_x"), or the id contains it."""
    return (backend_id + delimiter).find(delimiter) != len(backend_id)


def replacement_char(delimiter: str) -> str:
    """The character that stands in for invalid text: '-' unless the delimiter uses it."""
    return "-" if "-" not in delimiter else "_" if "_" not in delimiter else "-"


def derive_id(name: str, delimiter: str = DEFAULT_DELIMITER, max_length: int = MAX_ID_LENGTH) -> str:
    """A valid backend id derived deterministically from any server name.

    A name that already is a valid id (and fits ``max_length``) is returned unchanged.
    Otherwise each run of characters outside NAME-CHARSET becomes one replacement
    character ('-', or '_' when the delimiter contains '-'); each occurrence of the
    delimiter becomes that character too; runs of it collapse to one and it is
    stripped from both ends; the result is cut to ``max_length`` (at most 64); trailing
    characters that would run into the delimiter are dropped. An empty result
    becomes "server" (or "s" / "b" when the delimiter rules that out).
    """
    limit = max(1, min(max_length, MAX_ID_LENGTH))
    if _ID.fullmatch(name) and len(name) <= limit and not (delimiter and runs_into(name, delimiter)):
        return name
    rep = replacement_char(delimiter)
    out = _OUTSIDE_CHARSET.sub(rep, name)
    while True:
        if delimiter and delimiter in out:
            out = out.replace(delimiter, rep)
        collapsed = re.sub(re.escape(rep) + "{2,}", rep, out)
        if collapsed == out and not (delimiter and delimiter in out):
            break
        out = collapsed
    # Cutting and stripping only remove characters, so they cannot create a delimiter.
    out = out.strip(rep)[:limit].strip(rep)
    while out and delimiter and runs_into(out, delimiter):
        out = out[:-1].rstrip(rep)
    if out:
        return out
    # A one-character id runs into a delimiter only if the delimiter repeats that character.
    return next(c[:limit] for c in (FALLBACK_ID, "s", "b") if not (delimiter and runs_into(c[:limit], delimiter)))
