"""The conductor's own stdin/stdout as two half channels (see transports.stdio).

The conductor must keep writing after its stdin ends, and must accept regular
files as stdin/stdout; :func:`hopline.transports.stdio.open_own_stdio_halves`
does both for every stdio listener.
"""

from hopline.transports.stdio import open_own_stdio_halves as open_upstream

__all__ = ["open_upstream"]
