"""Namespaced capability names: ``{backend}{NAME-DELIMITER}{name}`` (draft §8, §8.2).

Contract
- In: operator-assigned backend ids and backend-supplied names (any strings).
- Out: ``join`` builds an exposed name, ``split`` takes it apart on the *first*
  delimiter, ``is_valid_name`` says whether a string may be exposed (NAME-CHARSET,
  1..max_length), ``alias`` gives a deterministic charset-clean stand-in for a name
  that may not be exposed as it is.
- ``check_backend_id`` is the load-time gate for backend ids. An id that passes it
  makes ``split(join(b, n)) == (b, n)`` hold for every non-empty ``n``: it is
  non-empty, inside the charset, free of the delimiter, and does not end in a way
  that overlaps the delimiter (with ``__``, ``"a_"`` is refused because
  ``"a_" + "__" + "x"`` splits as ``("a", "_x")``). It also leaves room, within
  ``max_length``, for the delimiter plus a 10-character alias tag, so every name a
  prefixed backend exposes (alias or not) starts with its own prefix.
- Never raises on backend-supplied input except ``check_backend_id`` (ValueError);
  never performs I/O. Which name belongs to which backend is decided by the table
  in ``catalog.py``, not by ``split``: ``split`` only parses.
"""

from __future__ import annotations

import hashlib
import re

ALIAS_TAG_HEX = 8  # hex digits of sha256 kept in an alias
ALIAS_TAG_LEN = 1 + ALIAS_TAG_HEX  # "_" + hex


class Namespace:
    """The draft's NAME-DELIMITER and NAME-CHARSET with a length limit."""

    __slots__ = ("delimiter", "charset", "max_length", "_char", "_name")

    def __init__(self, delimiter: str = "__", charset: str = r"[a-zA-Z0-9_-]", max_length: int = 64) -> None:
        self.delimiter = delimiter
        self.charset = charset
        self.max_length = max_length
        self._char = re.compile(charset)
        self._name = re.compile(f"(?:{charset})+")
        if not delimiter or not all(self._char.fullmatch(c) for c in delimiter):
            raise ValueError(f"delimiter {delimiter!r} must be non-empty and made of charset {charset} characters")
        if not all(self._char.fullmatch(c) for c in "_0123456789abcdef"):
            raise ValueError(f"charset {charset} must admit '_' and lower-case hex digits (alias tags use them)")
        if self.max_backend_length < 1:
            raise ValueError(f"max_length {max_length} leaves no room for a backend id, {delimiter!r} and an alias tag")

    @property
    def max_backend_length(self) -> int:
        """Longest backend id: the delimiter, one name character and an alias tag must still fit."""
        return self.max_length - len(self.delimiter) - 1 - ALIAS_TAG_LEN

    def check_backend_id(self, backend_id: str) -> None:
        """Refuse (ValueError) a backend id that would make ``split`` ambiguous or overflow."""
        if not isinstance(backend_id, str) or not backend_id:
            raise ValueError(f"backend id {backend_id!r} must be a non-empty string")
        bad = sorted({c for c in backend_id if not self._char.fullmatch(c)})
        if bad:
            raise ValueError(f"backend id {backend_id!r} has characters outside {self.charset}: {''.join(bad)!r}")
        if self.delimiter in backend_id:
            raise ValueError(f"backend id {backend_id!r} contains the name delimiter {self.delimiter!r}")
        if (backend_id + self.delimiter).find(self.delimiter) != len(backend_id):
            raise ValueError(
                (
                    f"backend id {backend_id!r} ends so that it runs into the delimiter {self.delimiter!r}; names "
                    "would split at the wrong place"
                )
            )
        if len(backend_id) > self.max_backend_length:
            raise ValueError(
                (
                    f"backend id {backend_id!r} is longer than {self.max_backend_length} characters (max_length "
                    f"{self.max_length})"
                )
            )

    def join(self, backend_id: str, name: str) -> str:
        return f"{backend_id}{self.delimiter}{name}"

    def split(self, exposed: str) -> tuple[str, str] | None:
        """``(backend, name)`` at the first delimiter; None if absent or either side is empty."""
        if not isinstance(exposed, str):
            return None
        backend, sep, name = exposed.partition(self.delimiter)
        return (backend, name) if sep and backend and name else None

    def is_valid_name(self, name: str) -> bool:
        return isinstance(name, str) and 1 <= len(name) <= self.max_length and self._name.fullmatch(name) is not None

    def sanitize(self, name: str) -> str:
        """Every character outside the charset replaced by ``_``."""
        return "".join(c if self._char.fullmatch(c) else "_" for c in name)

    def alias(self, wanted: str, backend: str, original: str) -> str:
        """A valid stand-in for ``wanted``: sanitized, truncated, tagged with sha256(backend NUL original).

        Deterministic; the tag makes distinct (backend, original) pairs distinct
        with overwhelming probability. Reversal is by table lookup, not by parsing.
        """
        digest = hashlib.sha256(f"{backend}\0{original}".encode("utf-8", "surrogatepass")).hexdigest()
        head = self.sanitize(wanted)[: self.max_length - ALIAS_TAG_LEN]
        return f"{head}_{digest[:ALIAS_TAG_HEX]}"

    def __repr__(self) -> str:
        return f"Namespace(delimiter={self.delimiter!r}, charset={self.charset!r}, max_length={self.max_length})"
