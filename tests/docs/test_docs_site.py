"""The documentation site (issue 37): `mkdocs build --strict` passes, and the generated
reference pages (configuration, CLI) are what the code gives, so they cannot drift.

The strict build fails on a broken link or anchor, a page missing from the navigation, and
(scripts/mkdocs_hooks.py) a committed reference page that differs from the code."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
gen_docs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen_docs)


def mkdocs_build(config_dir: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--clean", "-d", str(site)],
        cwd=config_dir,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},  # Material's banner about MkDocs 2.0
    )


def test_the_site_builds_strictly(tmp_path):
    built = mkdocs_build(ROOT, tmp_path / "site")
    assert built.returncode == 0, built.stderr
    assert "WARNING" not in built.stderr, built.stderr
    # every page of the navigation is in the site, the generated ones included
    for page in (
        "index",
        "getting-started/index",
        "reference/configuration/index",
        "reference/cli/index",
        "examples/index",
        "architecture/index",
    ):
        assert (tmp_path / "site" / f"{page}.html").is_file(), page


@pytest.mark.parametrize("page", sorted(gen_docs.PAGES))
def test_a_generated_page_is_what_the_code_gives(page):
    committed = (ROOT / "docs" / page).read_text()
    assert committed == gen_docs.generate(page), f"docs/{page} is stale: run python scripts/gen_docs.py"


def test_the_configuration_reference_has_every_key_of_the_schema():
    from hopline.config.schema import BackendConfig, GatewayConfig

    text = (ROOT / "docs" / "reference" / "configuration.md").read_text()
    for name in GatewayConfig.model_fields:
        assert f"| `{name}` |" in text, name
    assert "### `backends.<id>` {#backends-id}" in text
    for name in BackendConfig.model_fields:
        assert f"| `{name}` |" in text, name


def test_the_cli_reference_has_every_command_and_option():
    import argparse

    from hopline.cli import build_parser

    text = (ROOT / "docs" / "reference" / "cli.md").read_text()
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    for name, parser in commands.items():
        assert f"## `hopline {name}`" in text, name
        for action in parser._actions:
            for option in action.option_strings:
                assert f"`{option}" in text, (name, option)


def test_a_stale_reference_page_a_broken_link_and_a_page_outside_the_nav_fail_the_build(tmp_path):
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", copy / "docs")
    (copy / "scripts").mkdir()
    for script in ("gen_docs.py", "mkdocs_hooks.py"):
        shutil.copy(ROOT / "scripts" / script, copy / "scripts" / script)
    cli = copy / "docs" / "reference" / "cli.md"
    cli.write_text(cli.read_text().replace("--max-children N", "--max-kids N"))
    (copy / "docs" / "examples.md").write_text("# Examples\n\n[gone](modes/nowhere.md)\n")
    (copy / "docs" / "orphan.md").write_text("# Not in the nav\n")
    built = mkdocs_build(copy, tmp_path / "site")
    assert built.returncode == 1
    assert "docs/reference/cli.md differs from the code: run python scripts/gen_docs.py" in built.stderr
    assert "'modes/nowhere.md'" in built.stderr and "orphan.md" in built.stderr


def test_the_readme_is_short_starts_with_the_two_commands_and_links_every_page():
    import re

    import yaml

    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    first_screen = "\n".join(readme.splitlines()[:30])
    assert "python3 -m venv .venv && . .venv/bin/activate && pip install . && hopline relay --port 8000" in first_screen
    assert "bash scripts/test" in first_screen
    links = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", readme)
    for link in links:  # every link into the site names a page that exists
        assert (ROOT / link).is_file(), link

    def pages(nav) -> list[str]:
        out = []
        for item in nav:
            value = next(iter(item.values())) if isinstance(item, dict) else item
            out += pages(value) if isinstance(value, list) else [value]
        return out

    nav = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)["nav"]
    missing = [p for p in pages(nav) if f"docs/{p}" not in links and p != "index.md"]
    assert not missing, f"pages no README link reaches in one click: {missing}"
