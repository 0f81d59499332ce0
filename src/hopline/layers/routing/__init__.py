"""Layer 3: routing (namespace, catalog, URIs, cursors, paging, task ids). Pure, no I/O."""
