"""Tenants: API keys (``Authorization: Bearer KEY``) and who a request comes from.

Keys are configured as ``PPSCHED_API_KEYS=tenant=key,...`` or as a file of hashed keys
(``PPSCHED_API_KEYS_FILE``: one ``tenant:sha256-hex-of-key`` per line, ``#`` comments).
Only the SHA-256 digests are kept in memory; a presented key is hashed and compared with
every configured digest in constant time. With no keys configured the service is open
(a laptop), as it always was: a request's owner is then its client address, which the
per-caller quotas and the fair job queue use.

A bad configuration (a duplicate tenant, a malformed line, an empty or short key) stops
start-up with a one-line error naming the variable and the line; a key never appears in
an error, a log line or a response.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ppsched.api.service.solving import SolveSpec
from ppsched.solver.model import ProfileError

TENANT_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_DIGEST = re.compile(r"^[0-9a-f]{64}$")
MIN_KEY_CHARS = 16
"""Shorter keys are refused: a key is a password that scripts hold, so it can be long."""
_KEY_RULE = (f"a key of at least {MIN_KEY_CHARS} printable ASCII characters without "
             "spaces (as an HTTP header carries it)")
_TENANT_RULE = "letters, digits, '_', '.', '-' (at most 64, starting with a letter or digit)"


class TenantConfigError(ProfileError):
    """A key setting that cannot be used: names the variable and the line, never a key."""

    def __init__(self, variable: str, where: str, accepted: str) -> None:
        super().__init__(variable, where, accepted)


@dataclass(frozen=True)
class Caller:
    """Who sent a request: its tenant (keys configured) or only its client address."""

    tenant: str | None
    client: str
    scope: bytes = b""
    """A secret of the tenant's (derived from its key's digest) that scopes the ids of
    its stored schedules; empty in open mode."""

    @property
    def owner(self) -> str:
        """The name jobs and quotas are kept under: the tenant, else ``client:ADDRESS``
        (a tenant name has no ':', so the two never meet)."""
        return self.tenant if self.tenant is not None else f"client:{self.client}"


def hash_key(key: str) -> str:
    """The hex SHA-256 of a key: what a keys file holds."""
    return hashlib.sha256(key.encode()).hexdigest()


class Tenants:
    """The configured tenants by their keys' digests; empty means open mode."""

    def __init__(self, digests: dict[str, str]) -> None:
        # tenant -> bytes of its key's digest (a list: every entry is compared each time)
        self._entries = [(tenant, bytes.fromhex(digest)) for tenant, digest in
                         digests.items()]

    @property
    def enabled(self) -> bool:
        return bool(self._entries)

    @property
    def names(self) -> list[str]:
        return [tenant for tenant, _ in self._entries]

    def authenticate(self, key: str) -> tuple[str, bytes] | None:
        """(tenant, its schedule scope) for a presented key, None for an unknown one.

        Every configured digest is compared (hmac.compare_digest, no early exit), so the
        time taken does not depend on which tenant, if any, matched."""
        presented = hashlib.sha256(key.encode()).digest()
        found: tuple[str, bytes] | None = None
        for tenant, digest in self._entries:
            if hmac.compare_digest(presented, digest) and found is None:
                found = (tenant, hashlib.sha256(b"ppsched-schedules:" + digest).digest())
        return found

    @classmethod
    def from_settings(cls, keys: str | None, keys_file: Path | None) -> Tenants:
        """Parse ``PPSCHED_API_KEYS`` or ``PPSCHED_API_KEYS_FILE`` (not both).

        Raises:
            TenantConfigError: a duplicate tenant, a malformed item or line, a short key.
        """
        if keys and keys_file is not None:
            raise TenantConfigError("PPSCHED_API_KEYS", "set together with "
                                    "PPSCHED_API_KEYS_FILE", "one of the two")
        if keys_file is not None:
            return cls(parse_keys_file(keys_file))
        return cls(parse_keys(keys or ""))


def parse_keys(text: str) -> dict[str, str]:
    """``tenant=key,...`` -> {tenant: digest of key}; items are numbered from 1 in errors."""
    variable = "PPSCHED_API_KEYS"
    digests: dict[str, str] = {}
    if not text.strip():
        return digests
    for number, item in enumerate(text.split(","), 1):
        where = f"item {number}"
        tenant, sep, key = item.strip().partition("=")
        if not sep:
            raise TenantConfigError(variable, f"{where} (no '=')", "tenant=key items "
                                    "separated by commas")
        _check_tenant(variable, where, tenant, digests)
        if not key:
            raise TenantConfigError(variable, f"{where} (tenant {tenant!r}: empty key)",
                                    "a non-empty key after '='")
        if not _usable(key):
            raise TenantConfigError(variable, f"{where} (tenant {tenant!r}: a key of "
                                    f"{len(key)} characters)", _KEY_RULE)
        digests[tenant] = hash_key(key)
    return digests


def parse_keys_file(path: Path) -> dict[str, str]:
    """A file of ``tenant:sha256-hex`` lines (blank lines and ``#`` comments skipped)."""
    variable = "PPSCHED_API_KEYS_FILE"
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise TenantConfigError(variable, str(path), f"a readable UTF-8 file "
                                f"({type(exc).__name__})") from None
    digests: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"line {number}"
        tenant, sep, digest = line.partition(":")
        tenant, digest = tenant.strip(), digest.strip().lower()
        if not sep:
            raise TenantConfigError(variable, f"{where} (no ':')", "lines "
                                    "'tenant:sha256-hex-of-key' (make one with `ppsched "
                                    "keys hash TENANT`)")
        _check_tenant(variable, where, tenant, digests)
        if not digest:
            raise TenantConfigError(variable, f"{where} (tenant {tenant!r}: empty key "
                                    "digest)", "64 hex digits after ':'")
        if not _DIGEST.match(digest):
            raise TenantConfigError(variable, f"{where} (tenant {tenant!r}: a digest of "
                                    f"{len(digest)} characters)", "the 64 hex digits of "
                                    "the key's SHA-256 (`ppsched keys hash TENANT`)")
        if digest == hash_key(""):
            raise TenantConfigError(variable, f"{where} (tenant {tenant!r}: the digest of "
                                    "an empty key)", "the digest of a non-empty key")
        digests[tenant] = digest
    return digests


def _check_tenant(variable: str, where: str, tenant: str, seen: dict[str, str]) -> None:
    if not TENANT_PATTERN.match(tenant):
        raise TenantConfigError(variable, f"{where} (tenant {tenant[:70]!r})",
                                f"a tenant name of {_TENANT_RULE}")
    if tenant in seen:
        raise TenantConfigError(variable, f"{where} (tenant {tenant!r} again)",
                                "each tenant once")


def _usable(key: str) -> bool:
    return len(key) >= MIN_KEY_CHARS and key.isascii() and key.isprintable() and \
        " " not in key


def key_line(tenant: str, key: str) -> str:
    """The keys-file line for `tenant` and `key`.

    Raises:
        TenantConfigError: a bad tenant name or a short key.
    """
    _check_tenant("TENANT", "the argument", tenant, {})
    if not _usable(key):
        raise TenantConfigError("KEY", f"a key of {len(key)} characters", f"{_KEY_RULE} "
                                "on stdin")
    return f"{tenant}:{hash_key(key)}"


@dataclass(frozen=True)
class ScopedSpec(SolveSpec):
    """A solve whose result id is the tenant's own: the request's content key, keyed
    with the tenant's secret scope. Another tenant sending the same request gets another
    id (and its own solve), and cannot compute this one without the first tenant's key."""

    scope: bytes = b""

    @property
    def key(self) -> str:
        base = super().key
        if not self.scope:
            return base
        return hmac.new(self.scope, base.encode(), hashlib.sha256).hexdigest()[:32]

    def to_dict(self) -> dict[str, Any]:
        # The worker and the stored job get the solve's fields, never the scope.
        return {f.name: getattr(self, f.name) for f in fields(SolveSpec)}


def scoped(spec: SolveSpec, caller: Caller | None) -> SolveSpec:
    """`spec` with ids in the caller's tenant's own namespace (unchanged in open mode)."""
    return scoped_by(spec, caller.scope if caller is not None else b"")


def scoped_by(spec: SolveSpec, scope: bytes) -> SolveSpec:
    """`spec` with ids in the namespace of a caller's `scope` (`Caller.scope`; empty: the
    open mode's)."""
    if not scope:
        return spec
    values = {f.name: getattr(spec, f.name) for f in fields(SolveSpec)}
    return ScopedSpec(**values, scope=scope)

