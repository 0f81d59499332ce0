"""Modes (draft §5): each a composition of layers."""
