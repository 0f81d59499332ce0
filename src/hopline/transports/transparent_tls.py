"""Transparent mode's TLS dispositions (draft §5.4.4), Layer 1.

*Termination and re-origination* (``tls: terminate``): :class:`Minter` presents, for
each server name a client asks for (SNI), a certificate for that name minted on the fly
from the operator's CA (a client that trusts the CA sees a valid chain); a client that
sends no SNI gets one for the allowed destinations' IP addresses. Or
:class:`Certificate`: one configured certificate (a wildcard), for the names it covers.
(An SNI hopline will not answer for gets the default certificate, which a verifying
client refuses: a TLS alert from the SNI callback would be lost under uvloop.) The request then runs
as any other (level 1 or 2), and hopline opens its own TLS to the destination, verified
against the system's trust store (``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` to change it).
Minting needs ``cryptography`` (the ``auth`` extra).

*Passthrough* (``tls: passthrough``, level 1 only): :class:`Passthrough` reads no more of
a connection than its ClientHello (:func:`client_hello`), judges the connection on its
metadata (the original destination from the socket, and the SNI, which must name it;
``transparent.rules`` over ``http.destination``, ``http.source``, ``http.sni``),
then splices the encrypted bytes both ways, unread. A refused connection gets a TLS alert
(``access_denied``: not an allowed destination; ``unrecognized_name``: the SNI names
another host) and is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import logging
import os
import ssl
import struct
import tempfile
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from hopline.transports.interception import address, original_destination

log = logging.getLogger("hopline.transparent")

MAX_HELLO = 16384 + 5  # one TLS record
ACCESS_DENIED = 49
UNRECOGNIZED_NAME = 112


class CAError(Exception):
    """The operator CA cannot be used (the message says why)."""


class Minter:
    """Certificates for the names clients ask for, signed by the operator CA, each cached
    (at most ``cache`` names) as a server ``SSLContext``."""

    VALIDITY = datetime.timedelta(days=7)

    def __init__(self, cert: str, key: str, addresses: Iterable[str] = (), cache: int = 1024) -> None:
        try:
            from cryptography import x509
            from cryptography.hazmat.primitives import serialization
        except ImportError as exc:  # pragma: no cover - config/extras.py refuses the file first
            raise CAError("minting certificates needs cryptography: pip install 'hopline[auth]'") from exc
        try:
            with open(cert, "rb") as f:
                self.ca_pem = f.read()
            with open(key, "rb") as f:
                key_pem = f.read()
        except OSError as exc:
            raise CAError(f"cannot read the CA ({exc.filename}: {exc.strerror})") from None
        try:
            self.ca = x509.load_pem_x509_certificate(self.ca_pem)
            self.ca_key = serialization.load_pem_private_key(key_pem, password=None)
        except (ValueError, TypeError) as exc:
            raise CAError(f"the CA certificate or key is not usable PEM ({exc})") from None
        try:
            if not self.ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca:
                raise CAError("the CA certificate is not a CA (basicConstraints CA:FALSE)")
        except x509.ExtensionNotFound:
            raise CAError("the CA certificate is not a CA (no basicConstraints)") from None
        if self.ca_key.public_key().public_bytes(  # type: ignore[union-attr]
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        ) != self.ca.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        ):
            raise CAError("the CA key does not match the CA certificate")
        expiry = getattr(self.ca, "not_valid_after_utc", None)  # cryptography >= 42; naive UTC before
        self.ca_expiry = expiry or self.ca.not_valid_after.replace(tzinfo=datetime.timezone.utc)
        self.dir = tempfile.mkdtemp(prefix="hopline-tls-")  # 0700: a minted key is on disk only to be loaded
        self.limit = cache
        self.contexts: OrderedDict[str, ssl.SSLContext] = OrderedDict()
        self.default = self._context(None, sorted(set(addresses)))
        self.default.sni_callback = self._pick

    def server_context(self) -> ssl.SSLContext:
        """The listener's context: a client's SNI picks (or mints) its certificate."""
        return self.default

    def _pick(self, sslobj: Any, name: str | None, _: ssl.SSLContext) -> int | None:
        if not name:
            return None  # the default certificate: the destinations' addresses
        try:
            sslobj.context = self.context(name)
        except ValueError:
            pass  # not a host name: the default certificate, which a verifying client refuses
        return None

    def context(self, name: str) -> ssl.SSLContext:
        name = name.lower().rstrip(".")
        ctx = self.contexts.get(name)
        if ctx is not None:
            self.contexts.move_to_end(name)
            return ctx
        ctx = self._context(name, [name])
        self.contexts[name] = ctx
        if len(self.contexts) > self.limit:
            self.contexts.popitem(last=False)
        return ctx

    def _context(self, sni: str | None, names: list[str]) -> ssl.SSLContext:
        pem = self._mint(names)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        fd, path = tempfile.mkstemp(dir=self.dir, suffix=".pem")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(pem)
            ctx.load_cert_chain(path)
        finally:
            os.unlink(path)
        ctx.hopline_sni = sni  # type: ignore[attr-defined]  # read back per connection (ssl_object.context)
        return ctx

    def _mint(self, names: list[str]) -> bytes:
        """A leaf certificate (and its key, PEM) for ``names``, chained to the CA."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        sans: list[x509.GeneralName] = []
        for name in names:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(name)))
            except ValueError:
                if not name or len(name) > 253 or any(c in name for c in " /\\@:"):
                    raise ValueError(f"not a host name: {name!r}") from None
                sans.append(x509.DNSName(name))
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, (names[0] if names else "hopline")[:64])])
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self.ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(min(now + self.VALIDITY, self.ca_expiry))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(True, False, False, False, False, False, False, False, False), critical=True
            )  # digitalSignature
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.ca.public_key()),  # type: ignore[arg-type]
                critical=False,
            )
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        ed = isinstance(self.ca_key, (ed25519.Ed25519PrivateKey, ed448.Ed448PrivateKey))
        cert = builder.sign(self.ca_key, None if ed else hashes.SHA256())  # type: ignore[arg-type]
        return (
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
            + cert.public_bytes(serialization.Encoding.PEM)
            + self.ca_pem
        )

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.rmdir(self.dir)


class Certificate:
    """``tls: terminate`` with a configured certificate (a wildcard, typically) instead of a
    minting CA, presented to every client (one whose SNI it does not name sees a hostname
    mismatch, as it would with the destination's own certificate)."""

    def __init__(self, cert: str, key: str) -> None:
        self.path = cert
        self.key = key
        try:
            from cryptography import x509

            with open(cert, "rb") as f:
                leaf = x509.load_pem_x509_certificate(f.read())
            try:
                sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
                self.names = [n.lower() for n in sans.get_values_for_type(x509.DNSName)]
            except x509.ExtensionNotFound:
                self.names = []
        except ImportError as exc:  # pragma: no cover - config/extras.py refuses the file first
            raise CAError("reading the certificate needs cryptography: pip install 'hopline[auth]'") from exc
        except OSError as exc:
            raise CAError(f"cannot read the certificate ({exc.filename}: {exc.strerror})") from None
        except ValueError as exc:
            raise CAError(f"the certificate is not usable PEM ({exc})") from None
        if not self.names:
            raise CAError("the certificate names no host (no DNS subjectAltName)")
        self.contexts: dict[str, ssl.SSLContext] = {}
        self.default = self._context(None)
        self.default.sni_callback = self._pick

    def _context(self, sni: str | None) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            ctx.load_cert_chain(self.path, self.key)
        except (OSError, ssl.SSLError) as exc:
            raise CAError(f"the certificate and its key cannot be loaded ({exc})") from None
        ctx.hopline_sni = sni  # type: ignore[attr-defined]
        return ctx

    def covers(self, name: str) -> bool:
        """Whether one of the certificate's names matches ``name`` (a wildcard: one leftmost label)."""
        for pattern in self.names:
            if pattern == name:
                return True
            if pattern.startswith("*.") and "." in name and name.split(".", 1)[1] == pattern[2:]:
                return True
        return False

    def _pick(self, sslobj: Any, name: str | None, _: ssl.SSLContext) -> int | None:
        if not name:
            return None
        name = name.lower().rstrip(".")
        if not self.covers(name):
            return None  # the certificate as it is: a client that verifies it sees a hostname mismatch
        ctx = self.contexts.get(name)
        if ctx is None:
            if len(self.contexts) >= 1024:
                self.contexts.clear()
            ctx = self.contexts[name] = self._context(name)
        sslobj.context = ctx
        return None

    def server_context(self) -> ssl.SSLContext:
        return self.default

    def close(self) -> None:
        return None


def client_hello(data: bytes) -> tuple[bool, str | None]:
    """``(whole, sni)`` of the first bytes of a connection: ``whole`` once they hold a whole
    ClientHello record; ``sni`` its server name (None: none). ValueError: not a TLS ClientHello."""
    if len(data) >= 1 and data[0] != 0x16:
        raise ValueError("not a TLS handshake")
    if len(data) < 5:
        return False, None
    length = struct.unpack_from("!H", data, 3)[0]
    if len(data) < 5 + length:
        return False, None
    body = data[5 : 5 + length]
    if len(body) < 4 or body[0] != 0x01:
        raise ValueError("not a ClientHello")
    hello_length = int.from_bytes(body[1:4], "big")
    hello = body[4 : 4 + hello_length]
    if len(hello) < hello_length:  # a ClientHello over several records: judged on the first (no SNI seen)
        raise ValueError("a ClientHello larger than one record")
    try:
        at = 2 + 32  # version, random
        at += 1 + hello[at]  # session id
        at += 2 + struct.unpack_from("!H", hello, at)[0]  # cipher suites
        at += 1 + hello[at]  # compression methods
        if at >= len(hello):
            return True, None
        end = at + 2 + struct.unpack_from("!H", hello, at)[0]
        at += 2
        while at + 4 <= end:
            kind, size = struct.unpack_from("!HH", hello, at)
            at += 4
            if kind == 0:  # server_name: list length, then (type, length, name)...
                names = hello[at : at + size]
                pos = 2
                while pos + 3 <= len(names):
                    name_type, name_length = names[pos], struct.unpack_from("!H", names, pos + 1)[0]
                    if name_type == 0:
                        return True, names[pos + 3 : pos + 3 + name_length].decode("ascii").lower()
                    pos += 3 + name_length
                return True, None
            at += size
    except (IndexError, struct.error, UnicodeDecodeError):
        raise ValueError("a malformed ClientHello") from None
    return True, None


def alert(description: int) -> bytes:
    """A fatal TLS alert record."""
    return bytes([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, description])


class Passthrough:
    """The passthrough listener's connection handler (``asyncio.start_server``)."""

    def __init__(
        self,
        destinations: dict[str, str],
        agree: Callable[[str, str], Awaitable[bool]] | None,
        *,
        connect_timeout: float,
        hello_timeout: float,
        max_connections: int,
        allows: Callable[[dict[str, Any]], bool] | None = None,
    ) -> None:
        self.targets = {}
        for name, url in destinations.items():
            parts = urlsplit(url)
            self.targets[name] = (parts.hostname or "", parts.port or 443)
        self.agree = agree  # (sni, destination) -> whether the name names it; None: not checked
        self.allows = allows  # the rules over connection metadata (destination, source, sni); None: none
        self.connect_timeout = connect_timeout
        self.hello_timeout = hello_timeout
        self.slots = asyncio.Semaphore(max_connections)
        self.tasks: set[asyncio.Task[Any]] = set()

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self.tasks.add(task)
        try:
            if self.slots.locked():
                return  # over max_connections: closed at once
            async with self.slots:
                await self._serve(reader, writer)
        except (OSError, asyncio.IncompleteReadError, TimeoutError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            if task is not None:
                self.tasks.discard(task)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        found = original_destination(sock) if sock is not None else None
        peer = (writer.get_extra_info("peername") or ("?",))[0]
        if found is None:
            log.info("passthrough: a connection from %s was not redirected (no original destination): closed", peer)
            return
        destination = address(*found)
        target = self.targets.get(destination)
        if target is None:
            log.info("passthrough: refused %s -> %s: not an allowed destination", peer, destination)
            writer.write(alert(ACCESS_DENIED))
            return
        data = b""
        try:
            async with asyncio.timeout(self.hello_timeout):
                while True:
                    whole, sni = client_hello(data)
                    if whole:
                        break
                    if len(data) >= MAX_HELLO:
                        raise ValueError("a ClientHello larger than one record")
                    chunk = await reader.read(MAX_HELLO - len(data))
                    if not chunk:
                        return
                    data += chunk
        except ValueError as exc:
            log.info("passthrough: refused %s -> %s: %s", peer, destination, exc)
            writer.write(alert(ACCESS_DENIED))
            return
        if sni is not None and self.agree is not None and not await self.agree(sni, destination):
            log.info("passthrough: refused %s -> %s: its SNI %r names another host", peer, destination, sni)
            writer.write(alert(UNRECOGNIZED_NAME))
            return
        if self.allows is not None and not self.allows({"destination": destination, "source": peer, "sni": sni or ""}):
            log.info("passthrough: refused %s -> %s (SNI %r): policy", peer, destination, sni)
            writer.write(alert(ACCESS_DENIED))
            return
        try:
            async with asyncio.timeout(self.connect_timeout):
                up_reader, up_writer = await asyncio.open_connection(*target)
        except (OSError, TimeoutError) as exc:
            log.info("passthrough: %s unreachable: %s", destination, type(exc).__name__)
            return
        try:
            up_writer.write(data)
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            up_writer.close()
            with contextlib.suppress(Exception):
                await up_writer.wait_closed()

    async def aclose(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        for task in list(self.tasks):
            with contextlib.suppress(BaseException):
                await task


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """Bytes from ``source`` to ``sink`` as they come; its end half-closes ``sink``."""
    try:
        while True:
            chunk = await source.read(65536)
            if not chunk:
                break
            sink.write(chunk)
            await sink.drain()
    except (OSError, ConnectionError):
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError, NotImplementedError):
            if sink.can_write_eof():
                sink.write_eof()
