"""Concrete I/O (Layer 1): the only package, with runtime.py, that touches sockets and processes."""
