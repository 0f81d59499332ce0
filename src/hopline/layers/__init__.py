"""The seven layers of the draft's pipeline (§6): pure parts, no I/O."""
