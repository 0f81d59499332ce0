"""The modes, each a composition of layers (:class:`~hopline.composition.Composition`):
what each module declares is what ``hopline declare`` reports and what is built."""

from __future__ import annotations

from hopline.composition import Composition
from hopline.modes import conversion, federation, forward, relay, reverse, sidecar, transparent

COMPOSITIONS: dict[str, Composition] = {
    m.COMPOSITION.mode: m.COMPOSITION for m in (relay, forward, reverse, transparent, sidecar, federation, conversion)
}
