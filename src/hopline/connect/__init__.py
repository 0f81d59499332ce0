"""Per-user upstream accounts (``auth.backends.<id>.mode: user_oauth``): docs/features/upstream-oauth.md."""
