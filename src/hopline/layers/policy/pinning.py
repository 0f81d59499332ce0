"""Tool pinning, the tool-definition allowlist and shadowing refusal (Layer 5).

The draft's security considerations: a compromised backend may return tool
definitions built to manipulate the model ("SHOULD validate tool definitions against
a schema allowlist"), and may try to shadow other backends' tools. This is a
:class:`~hopline.pipeline.SurfaceLayer`: what it hides is absent from every list
and refused at invoke exactly as an unknown tool (the gateway and the chain's guard ask
the same :meth:`ToolPinning.visible`). Its decisions do not depend on the caller.

Fingerprint: ``sha256:`` + hex SHA-256 of the canonical JSON (keys sorted, no spaces,
UTF-8; ``json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``)
of ``{name, description, inputSchema, outputSchema}`` — the fields present.

For each tool, in this order:

1. **Shadowing** (tools and prompts; ``refuse_shadowing``): refused when its name
   contains the name delimiter (it would read as another backend's namespaced name), or
   its name, title or description mentions ``<other backend><delimiter>…`` of another
   configured backend. Refused items are audited (``shadowing``) once.
2. **Allowlist** (optional): a tool whose fingerprint is not listed is hidden
   (``allowlist``, once).
3. **Pin**: the pinned fingerprint of (backend, tool) comes from the lockfile or from
   first sight (``on_new: pin``, audited ``pin``); ``on_new: withhold`` hides tools
   the lockfile does not know (``new_tool``). A tool whose fingerprint differs from its
   pin is a *rug pull*, audited once per new fingerprint (``rug_pull``, with both
   fingerprints) and handled per ``on_change``: ``flag`` (shown, audit only),
   ``withhold`` (hidden until approved) or ``allow`` (re-pinned to the new definition).

Approving a withheld change = putting the new fingerprint (from the audit record) in
the lockfile: it is re-read when its modification time changes, checked at most every
``check_interval`` seconds. The lockfile is JSON the operator commits::

    {"version": 1, "tools": {"<backend>": {"<tool>": "sha256:…"}}}

With ``write: true`` hopline writes first-sight and ``allow`` pins into it (coalesced,
atomic replace) — for bootstrapping one instance; replicas should share a committed
file. An invoke whose definition is unknown (empty) gets the last verdict for that
tool.

Replicas (a :class:`PinStore` handed in: :class:`RedisPins`): pins are shared, so a
definition that changed between two replicas' starts is a rug pull on the later one
too. :meth:`ToolPinning.prime` loads the store's pins before the first list; a
first-sight pin is claimed in the store (the first replica's wins: a replica that
pinned another fingerprint takes the store's, judged again); the lockfile's pins, the
operator's approvals, overwrite the store's; every ``check_interval`` the store is read
again. Between a first sight and its claim's answer (one round trip) a replica judges
by its own pin. The store down: pins stay local until it answers (logged once).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import re
import time
from typing import Any, Callable, Iterable, Literal, Mapping, Protocol

from hopline.context import Principal
from hopline.layers.policy.audit import AuditLog
from hopline.pipeline import Item

log = logging.getLogger("hopline.policy")

FINGERPRINT_FIELDS = ("description", "inputSchema", "outputSchema")
LOCKFILE_VERSION = 1
_FINGERPRINT = re.compile(r"sha256:[0-9a-f]{64}")
_CHARSET = "A-Za-z0-9_-"


def fingerprint(name: str, definition: Mapping[str, Any]) -> str:
    doc = {"name": name, **{k: definition[k] for k in FINGERPRINT_FIELDS if k in definition}}
    canonical = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def is_fingerprint(text: str) -> bool:
    return bool(_FINGERPRINT.fullmatch(text))


def read_lockfile(path: str) -> dict[tuple[str, str], str]:
    """The pins in a lockfile; ``{}`` when it does not exist; ``ValueError`` when malformed."""
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ValueError(f"lockfile {path} cannot be read: {type(exc).__name__}") from None
    if not isinstance(data, dict) or data.get("version") != LOCKFILE_VERSION or not isinstance(data.get("tools"), dict):
        raise ValueError(
            f'lockfile {path} is not {{"version": {LOCKFILE_VERSION}, "tools": {{backend: {{tool: fingerprint}}}}}}'
        )
    pins: dict[tuple[str, str], str] = {}
    for backend, tools in data["tools"].items():
        if not isinstance(tools, dict):
            raise ValueError(f"lockfile {path}: tools.{backend} must map tool names to fingerprints")
        for tool, fp in tools.items():
            if not isinstance(fp, str) or not is_fingerprint(fp):
                raise ValueError(f"lockfile {path}: tools.{backend}.{tool} is not a sha256:<64 hex digits> fingerprint")
            pins[(backend, tool)] = fp
    return pins


def write_lockfile(path: str, pins: Mapping[tuple[str, str], str]) -> None:
    tools: dict[str, dict[str, str]] = {}
    for (backend, tool), fp in sorted(pins.items()):
        tools.setdefault(backend, {})[tool] = fp
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump({"version": LOCKFILE_VERSION, "tools": tools}, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


Pin = tuple[str, str]  # (backend, tool)


class PinStore(Protocol):
    """Pins shared by replicas."""

    async def claim(self, pins: Mapping[Pin, str], replace: Iterable[Pin]) -> dict[Pin, str]:
        """Set each pin unless the store has one (``replace``: set it anyway); the store's
        pin of each key after that."""
        ...

    async def load(self) -> dict[Pin, str]: ...

    async def aclose(self) -> None:
        """Let go of the store's connections (the pins stay in the store)."""
        ...


class RedisPins:
    """:class:`PinStore` in one Redis hash (``{prefix}pins``, field ``backend`` NUL ``tool``)."""

    def __init__(self, client: Any, *, prefix: str = "hopline:", timeout: float = 0.25) -> None:
        self.client = client
        self.key = f"{prefix}pins"
        self.timeout = timeout

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> RedisPins:
        from hopline.redis_client import connect

        return cls(connect(url, kwargs.get("timeout", 0.25)), **kwargs)

    async def claim(self, pins: Mapping[Pin, str], replace: Iterable[Pin]) -> dict[Pin, str]:
        if not pins:  # HMGET of no field is a Redis error
            return {}
        replace = set(replace)
        fields = [f"{b}\0{t}" for b, t in pins]
        async with asyncio.timeout(self.timeout):
            async with self.client.pipeline(transaction=False) as pipe:
                for (key, fp), field in zip(pins.items(), fields):
                    (pipe.hset if key in replace else pipe.hsetnx)(self.key, field, fp)
                pipe.hmget(self.key, fields)
                answers = await pipe.execute()
        return {key: value.decode() for key, value in zip(pins, answers[-1]) if value is not None}

    async def load(self) -> dict[Pin, str]:
        async with asyncio.timeout(self.timeout):
            raw = await self.client.hgetall(self.key)
        out: dict[Pin, str] = {}
        for field, value in raw.items():
            backend, _, tool = field.decode().partition("\0")
            if is_fingerprint(value.decode()):
                out[(backend, tool)] = value.decode()
        return out

    async def aclose(self) -> None:
        await self.client.aclose()


class ToolPinning:
    """The pinning / allowlist / shadowing surface layer; see the module docstring."""

    def __init__(
        self,
        *,
        backends: Iterable[str],
        delimiter: str,
        on_change: Literal["flag", "withhold", "allow"] = "withhold",
        on_new: Literal["pin", "withhold"] = "pin",
        allowlist: Iterable[str] | None = None,
        refuse_shadowing: bool = True,
        lockfile: str | None = None,
        write: bool = False,
        check_interval: float = 2.0,
        audit: AuditLog | None = None,
        clock: Callable[[], float] = time.monotonic,
        shared: PinStore | None = None,
    ) -> None:
        self.delimiter = delimiter
        self.on_change = on_change
        self.on_new = on_new
        self.allowlist = frozenset(allowlist) if allowlist is not None else None
        self.refuse_shadowing = refuse_shadowing
        self.lockfile = lockfile
        self.write = write and lockfile is not None
        self.check_interval = check_interval
        self.audit = audit
        self._clock = clock
        self.version = 0  # bumped when the lockfile changes what is pinned
        self._backends = sorted(set(backends))
        self._shadow: dict[str, re.Pattern[str] | None] = {}
        self._pins: dict[tuple[str, str], str] = read_lockfile(lockfile) if lockfile else {}  # ValueError: config error
        self._stamp = self._stat()
        self._next_check = clock() + check_interval
        self._memo: dict[tuple[int, str, str], tuple[Any, int, bool]] = {}
        self._last: dict[tuple[str, str], bool] = {}
        self._events: set[tuple[str, str, str, str]] = set()
        self._flush_pending = False
        self.shared = shared
        self._claims: dict[Pin, str] = {}  # pins to claim in the shared store
        self._replace: set[Pin] = set()  # ... overwriting what it has (lockfile approvals, on_change: allow)
        self._sharing: asyncio.Task | None = None
        self._next_share = 0.0  # when the shared store is read again
        self._store_down = False
        if shared is not None:  # the lockfile's pins are the operator's: they overwrite the store's
            self._claims.update(self._pins)
            self._replace.update(self._pins)

    # -- the surface layer --------------------------------------------------------------------
    def visible(self, principal: Principal, item: Item) -> bool:
        if item.kind != "tool" and item.kind != "prompt":
            return True
        if self.lockfile is not None and self._clock() >= self._next_check:
            self._check_lockfile()
        if self.shared is not None and self._clock() >= self._next_share:
            self._share_soon()
        definition = item.definition
        key = (id(definition), item.backend, item.name)
        memo = self._memo.get(key)
        if memo is not None and memo[0] is definition and memo[1] == self.version:
            return memo[2]
        verdict = self._judge(item)
        if len(self._memo) >= 8192:
            self._memo.clear()
        self._memo[key] = (definition, self.version, verdict)  # holds the dict: its id stays unique
        return verdict

    def decision_key(self, principal: Principal) -> int:
        """Changes whenever an unchanged definition may be judged differently (lockfile edits)."""
        if self.lockfile is not None and self._clock() >= self._next_check:
            self._check_lockfile()
        if self.shared is not None and self._clock() >= self._next_share:
            self._share_soon()
        return self.version

    # -- judging one item ---------------------------------------------------------------------
    def _judge(self, item: Item) -> bool:
        d = item.definition
        key = (item.backend, item.name)
        if not d:  # an invoke that did not carry the definition: what its list showed
            last = self._last.get(key)
            if last is not None:
                return last
        verdict = self._decide(item)
        if d:
            if len(self._last) >= 65536:
                self._last.clear()
            self._last[key] = verdict
        return verdict

    def _decide(self, item: Item) -> bool:
        d = item.definition
        problem = self._shadowing(item) if self.refuse_shadowing else None
        if problem:
            self._event("shadowing", item, "", decision="deny", reason=problem)
            return False
        if item.kind != "tool" or not d:
            return True
        fp = fingerprint(item.name, d)
        if self.allowlist is not None and fp not in self.allowlist:
            self._event("allowlist", item, fp, decision="deny", reason="definition not in the allowlist", seen=fp)
            return False
        key = (item.backend, item.name)
        pinned = self._pins.get(key)
        if pinned is None:
            if self.on_new == "withhold":
                self._event("new_tool", item, fp, decision="withhold", reason="not in the lockfile", seen=fp)
                return False
            self._pins[key] = fp
            self._event("pin", item, fp, decision="pin", reason="first sight", seen=fp)
            self._schedule_flush()
            self._claim(key, fp, replace=False)
            return True
        if pinned == fp:
            return True
        self._event(
            "rug_pull",
            item,
            fp,
            decision=self.on_change,
            reason="definition changed since it was pinned",
            pinned=pinned,
            seen=fp,
        )
        if self.on_change == "allow":
            self._pins[key] = fp
            self._schedule_flush()
            self._claim(key, fp, replace=True)
            return True
        return self.on_change == "flag"

    def _shadowing(self, item: Item) -> str | None:
        if self.delimiter in item.name:
            return f"its name contains the name delimiter {self.delimiter!r}"
        rx = self._shadow_pattern(item.backend)
        if rx is None:
            return None
        d = item.definition
        for field_name in ("name", "title", "description"):
            text = item.name if field_name == "name" else d.get(field_name)
            if isinstance(text, str):
                m = rx.search(text)
                if m:
                    return f"its {field_name} names {m.group(0)!r}, a tool of another backend"
        return None

    def _shadow_pattern(self, backend: str) -> re.Pattern[str] | None:
        if backend not in self._shadow:
            others = [b for b in self._backends if b != backend]
            alternatives = "|".join(re.escape(b) for b in sorted(others, key=len, reverse=True))
            self._shadow[backend] = (
                re.compile(f"(?<![{_CHARSET}])(?:{alternatives}){re.escape(self.delimiter)}[{_CHARSET}]+")
                if others
                else None
            )
        return self._shadow[backend]

    def _event(self, event: str, item: Item, fp: str, **fields: Any) -> None:
        once = (event, item.backend, item.name, fp)
        if once in self._events:
            return
        if len(self._events) >= 65536:
            self._events.clear()
        self._events.add(once)
        if event in ("rug_pull", "shadowing", "allowlist"):
            log.warning(
                "tool %s of backend %s: %s (%s)", item.name, item.backend, fields.get("reason"), fields.get("decision")
            )
        if self.audit is not None:
            self.audit.record(event, kind=item.kind, backend=item.backend, target=item.name, **fields)

    # -- the lockfile ---------------------------------------------------------------------------
    def _stat(self) -> tuple[int, int] | None:
        if self.lockfile is None:
            return None
        try:
            st = os.stat(self.lockfile)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def _check_lockfile(self) -> None:
        self._next_check = self._clock() + self.check_interval
        stamp = self._stat()
        if stamp == self._stamp or self.lockfile is None:
            return
        self._stamp = stamp
        try:
            pins = read_lockfile(self.lockfile)
        except ValueError as exc:
            log.error("%s; keeping the pins in effect", exc)
            return
        merged = {**self._pins, **pins}
        if merged != self._pins:
            for key, fp in pins.items():
                if self._pins.get(key) != fp:
                    self._claim(key, fp, replace=True)
            self._pins = merged
            self.version += 1
            self._last.clear()
            log.info("lockfile %s reloaded (%d pins)", self.lockfile, len(pins))

    # -- the shared store -----------------------------------------------------------------------
    async def prime(self) -> None:
        """Take the shared store's pins (before the first list; the lockfile's stay)."""
        if self.shared is not None:
            await self._share()

    def _claim(self, key: Pin, fp: str, *, replace: bool) -> None:
        if self.shared is None:
            return
        self._claims[key] = fp
        if replace:
            self._replace.add(key)
        self._share_soon()

    def _share_soon(self) -> None:
        if self._sharing is not None and not self._sharing.done():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._next_share = self._clock() + self.check_interval
        self._sharing = loop.create_task(self._share(), name="pins-shared")

    async def _share(self) -> None:
        """Claim what was pinned here since, and take the store's pins."""
        assert self.shared is not None
        claims, replace = self._claims, self._replace
        self._claims, self._replace = {}, set()
        self._next_share = self._clock() + self.check_interval
        try:
            store = await self.shared.claim(claims, replace) if claims else {}
            store.update({k: v for k, v in (await self.shared.load()).items() if k not in store})
        except Exception as exc:  # Redis down or slow: keep the pins here, claim them later
            for key, fp in claims.items():
                self._claims.setdefault(key, fp)
            self._replace |= replace & set(self._claims)
            if not self._store_down:
                self._store_down = True
                log.warning("shared pin store unreachable (%s); pins stay local until it answers", type(exc).__name__)
            return
        if self._store_down:
            self._store_down = False
            log.warning("shared pin store reachable again")
        changed = {k: v for k, v in store.items() if self._pins.get(k) != v and k not in self._claims}
        if changed:
            self._pins.update(changed)
            self.version += 1
            self._last.clear()

    async def aclose(self) -> None:
        if self._sharing is not None:
            self._sharing.cancel()
        if self.shared is not None:
            await self.shared.aclose()

    def _schedule_flush(self) -> None:
        if not self.write or self._flush_pending:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        self._flush_pending = True
        loop.call_soon(self.flush)  # one write for all the pins of one list

    def flush(self) -> None:
        """Write the pins to the lockfile now (``write: true`` only)."""
        self._flush_pending = False
        if not self.write or self.lockfile is None:
            return
        try:
            write_lockfile(self.lockfile, self._pins)
        except OSError as exc:
            log.error("cannot write lockfile %s: %s", self.lockfile, exc.strerror or exc)
            return
        self._stamp = self._stat()

    def __repr__(self) -> str:
        return (
            f"<ToolPinning {len(self._pins)} pins on_change={self.on_change} on_new={self.on_new} "
            f"version={self.version}>"
        )
