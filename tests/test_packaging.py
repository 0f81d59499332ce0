"""A plain `pip install .` (not editable) must ship every subpackage and data file."""

from __future__ import annotations

from pathlib import Path

import hopline

SRC = Path(hopline.__file__).resolve().parent


def test_every_package_directory_has_an_init():
    missing = [str(d.relative_to(SRC)) for d in SRC.rglob("*") if d.is_dir() and d.name != "__pycache__" and any(d.glob("*.py")) and not (d / "__init__.py").exists()]
    assert not missing, f"setuptools' find_packages would leave these out of a wheel: {missing}"


def test_data_files_are_declared_as_package_data():
    text = (SRC.parent.parent / "pyproject.toml").read_text()
    for data in SRC.rglob("*.toml"):
        assert f'"{data.name}"' in text or '"*.toml"' in text, f"{data} is not in [tool.setuptools.package-data]"
