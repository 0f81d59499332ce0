"""Hot reload: the watcher yields valid changes, skips invalid ones, and backend diffs."""

from __future__ import annotations

import asyncio
import logging
import os

import pytest

from hopline.config.load import ConfigError, parse_config
from hopline.config.watch import BackendDiff, ConfigWatcher, diff_backends

A = "backends:\n  a: {command: x}\n"
AB = "backends:\n  a: {command: x}\n  b: {url: 'http://h/mcp'}\n"
BAD = "backends:\n  a: {comand: x}\n"
WAIT = 5.0  # upper bound for one change to be noticed at interval 0.05


def cfg(text: str):
    return parse_config(text, env={})


def test_diff_backends():
    old = cfg("backends:\n  a: {command: x}\n  b: {command: y}\n  c: {command: z}\n")
    new = cfg("backends:\n  a: {command: x}\n  b: {command: y, enabled: false}\n  d: {command: w}\n")
    assert diff_backends(old, new) == BackendDiff(added=["d"], removed=["c"], changed=["b"])
    assert not diff_backends(old, old) and diff_backends(old, new)
    assert diff_backends(cfg(A), cfg("listen: {port: 1}\n" + A)) == BackendDiff()


async def wait_for_log(caplog, text: str) -> None:
    async with asyncio.timeout(WAIT):
        while not any(text in r.getMessage() for r in caplog.records):
            await asyncio.sleep(0.01)


async def test_watcher_yields_a_valid_change_and_skips_an_invalid_one(tmp_path, caplog):
    path = tmp_path / "gw.yaml"
    path.write_text(A)
    watcher = ConfigWatcher(path, interval=0.05, env={})
    assert list(watcher.load().backends) == ["a"]
    changes = watcher.changes()
    try:
        path.write_text(AB)
        async with asyncio.timeout(WAIT):
            new = await anext(changes)
        assert list(new.backends) == ["a", "b"] and watcher.current is new

        caplog.set_level(logging.ERROR, logger="hopline.config")
        path.write_text(BAD)
        pending = asyncio.ensure_future(anext(changes))
        await wait_for_log(caplog, "backends.a.comand: unknown key")
        assert not pending.done() and list(watcher.current.backends) == ["a", "b"]
        assert f"{path}: cannot use this configuration" in caplog.text

        path.write_text(A)
        async with asyncio.timeout(WAIT):
            newer = await pending
        assert list(newer.backends) == ["a"]
    finally:
        await changes.aclose()


async def test_changes_without_load_starts_from_the_file_as_it_is(tmp_path):
    path = tmp_path / "gw.yaml"
    path.write_text(A)
    watcher = ConfigWatcher(path, interval=0.05, env={})
    changes = watcher.changes()
    try:
        pending = asyncio.ensure_future(anext(changes))
        async with asyncio.timeout(WAIT):
            while watcher.current is None:
                await asyncio.sleep(0.01)
        assert not pending.done()  # the starting file is the baseline, not a change
        path.write_text(AB)
        async with asyncio.timeout(WAIT):
            assert list((await pending).backends) == ["a", "b"]
    finally:
        await changes.aclose()


def test_poll_ignores_touches_comments_and_reverts(tmp_path):
    path = tmp_path / "gw.yaml"
    path.write_text(A)
    watcher = ConfigWatcher(path, env={})
    first = watcher.load()
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert watcher.poll() is None  # touched, same bytes
    path.write_text("# a comment\n" + A)
    assert watcher.poll() is None and watcher.current is first  # same configuration
    path.write_text(AB)
    assert list(watcher.poll().backends) == ["a", "b"]
    assert watcher.poll() is None  # nothing new since


def test_poll_survives_a_vanished_file_and_logs_once(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="hopline.config")
    path = tmp_path / "gw.yaml"
    path.write_text(A)
    watcher = ConfigWatcher(path, env={})
    watcher.load()
    path.unlink()
    assert watcher.poll() is None and watcher.poll() is None
    assert sum("unreadable" in r.getMessage() for r in caplog.records) == 1
    path.write_text(A)
    assert watcher.poll() is None  # back with the content already in use
    path.write_text(AB)
    assert watcher.poll() is not None


def test_invalid_file_is_logged_once_until_it_changes(tmp_path, caplog):
    caplog.set_level(logging.ERROR, logger="hopline.config")
    path = tmp_path / "gw.yaml"
    path.write_text(A)
    watcher = ConfigWatcher(path, env={})
    watcher.load()
    path.write_text(BAD)
    assert watcher.poll() is None and watcher.poll() is None
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert watcher.poll() is None
    assert sum("not reloaded" in r.getMessage() for r in caplog.records) == 1


def test_load_raises_for_an_invalid_file(tmp_path):
    path = tmp_path / "gw.yaml"
    path.write_text(BAD)
    with pytest.raises(ConfigError):
        ConfigWatcher(path).load()
    assert "no config" in repr(ConfigWatcher(path))
