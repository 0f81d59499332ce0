"""MkDocs hooks (mkdocs.yml `hooks:`): the generated reference pages come from the code.

At build time each page of scripts/gen_docs.py's PAGES is rendered from the code, so the site
cannot show a stale reference; a committed copy that differs is a warning, which fails
``mkdocs build --strict`` and names the command that brings it up to date.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

log = logging.getLogger("mkdocs.plugins.hopline")

_spec = importlib.util.spec_from_file_location("hopline_gen_docs", Path(__file__).with_name("gen_docs.py"))
gen_docs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen_docs)

_generated: dict[str, str] = {}


def on_pre_build(config, **kwargs) -> None:
    _generated.clear()
    for page in gen_docs.PAGES:
        _generated[page] = gen_docs.generate(page)
        committed = Path(config["docs_dir"]) / page
        if not committed.is_file() or committed.read_text() != _generated[page]:
            log.warning("docs/%s differs from the code: run python scripts/gen_docs.py", page)


def on_page_read_source(page, config, **kwargs) -> str | None:
    return _generated.get(page.file.src_uri)
