"""What makes an offline audit provable: the keys an auditor names, the inputs' digests, and
a verdict signed with the auditor's own key.

- **Keys file** (``socai audit --keys FILE``; ``socai audit keys`` writes a deployment's):
  ``{"format": "socai.keys", "version": 1, "table_seal_public_keys": ["<64 hex>", …],
  "ledger_seal_public_keys": […]}`` (``schemas/keys.v1.schema.json``): the table's hand-seal
  public keys (``socai.events.seal``) and the ledger's journal page-seal public keys
  (``socai.audit.journal``). Public keys only: a keys file is handed to auditors as is.
- **Signed verdict** (``socai audit … --sign KEY --verdict FILE``): the verdict of
  ``AuditReport.verdict`` (the same content an unsigned ``--verdict`` writes) inside a
  document that also says what was proven about the inputs (``Proof``: whether the hand
  and journal seals were checked, with which key ids, the periods and sequence ranges) and
  names every input by role, file name, size and sha256, signed with Ed25519 by the
  auditor's key: ``{"format": "socai.audit.verdict", "version": 2, …, "signed_by":
  {"key_id": …, "public_key": …}, "signature": …}`` (``schemas/verdict.v2.schema.json``).
  The signature covers ``"socai/audit-verdict/v2" NUL`` and the document without its
  ``signature``, as canonical JSON (keys sorted, no spaces, UTF-8). ``verify_verdict``
  checks the signature, the signer against the keys a reader trusts, and that the files a
  reader holds are the ones audited: one changed byte in any of them, or in the verdict,
  and it fails.
- **Auditor key**: 64 hex digits (the Ed25519 private key) in a file of its own
  (``socai audit keygen --out auditor.key`` makes one, readable by its owner only).

Ed25519 is OpenSSL's, through ``cryptography``; the key ids are ``socai.events.seal.key_id``.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from socai import errors
from socai.audit.report import AuditReport
from socai.events import seal

KEYS_FORMAT: Final = "socai.keys"
KEYS_VERSION: Final = 1
VERDICT_FORMAT: Final = "socai.audit.verdict"
VERDICT_VERSION: Final = 2  # version 1 is the unsigned verdict (AuditReport.verdict_text)
VERDICT_LABEL: Final = b"socai/audit-verdict/v2"
FILE_MAX_BYTES: Final = 1024 * 1024  # a keys file or a verdict: small documents
HASH_CHUNK_BYTES: Final = 1024 * 1024


@dataclass(frozen=True)
class Keys:
    """Key id → raw public key, per signer."""

    table: Mapping[str, bytes]
    ledger: Mapping[str, bytes]


def _read_small(path: Path, what: str) -> str:
    if not path.is_file():
        raise errors.InvalidArgument("BAD_FILE", f"cannot read {path}: no such file")
    if path.stat().st_size > FILE_MAX_BYTES:
        raise errors.InvalidArgument("BAD_FILE", f"{path}: larger than {FILE_MAX_BYTES} bytes for {what}")
    return path.read_text(encoding="utf-8")


def read_keys(text: str) -> Keys:
    """The keys ``--keys`` names: a keys file (the module docstring), or the table's hand-seal
    public keys as hex separated by commas. Raises InvalidArgument("BAD_SEAL_KEY") for a key
    that is not 64 hex digits, ("BAD_FILE") for a file that is not a keys file."""
    path = Path(text)
    if not path.is_file():
        try:
            return Keys(seal.parse_public_keys(text.split(",")), {})
        except ValueError as exc:
            raise errors.InvalidArgument("BAD_SEAL_KEY", f"--keys {text[:40]!r}: not a keys file, and {exc}") from exc
    try:
        doc = json.loads(_read_small(path, "a keys file"))
    except json.JSONDecodeError as exc:
        raise errors.InvalidArgument("BAD_FILE", f"{path}: not JSON: {exc.msg}") from exc
    if not isinstance(doc, dict) or doc.get("format") != KEYS_FORMAT:
        raise errors.InvalidArgument("BAD_FILE", f"{path}: not a socai keys file (format {KEYS_FORMAT!r})")
    if doc.get("version") != KEYS_VERSION:
        raise errors.InvalidArgument(
            "BAD_FILE", f"{path}: keys file version {doc.get('version')!r}, not {KEYS_VERSION}"
        )

    def parsed(field: str) -> dict[str, bytes]:
        items = doc.get(field, [])
        if not isinstance(items, list) or not all(isinstance(k, str) for k in items):
            raise errors.InvalidArgument("BAD_FILE", f"{path}: {field} must be a list of hex keys")
        try:
            return seal.parse_public_keys(items)
        except ValueError as exc:
            raise errors.InvalidArgument("BAD_SEAL_KEY", f"{path} {field}: {exc}") from exc

    return Keys(parsed("table_seal_public_keys"), parsed("ledger_seal_public_keys"))


def keys_document(table: Iterable[bytes], ledger: Iterable[bytes]) -> dict[str, Any]:
    """A keys file's content for the given raw public keys."""
    return {
        "format": KEYS_FORMAT,
        "version": KEYS_VERSION,
        "table_seal_public_keys": [k.hex() for k in table],
        "ledger_seal_public_keys": [k.hex() for k in ledger],
    }


# --- inputs -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Input:
    """An audited file: its role (``events``, ``journal``), name, size and sha256 (of the
    bytes as they are, compressed ones too)."""

    role: str
    name: str
    size_bytes: int
    sha256: str

    def as_json(self) -> dict[str, Any]:
        return {"role": self.role, "name": self.name, "bytes": self.size_bytes, "sha256": self.sha256}


def file_input(role: str, path: Path | str) -> Input:
    source = Path(path)
    digest = hashlib.sha256()
    size = 0
    with source.open("rb") as handle:
        while chunk := handle.read(HASH_CHUNK_BYTES):
            digest.update(chunk)
            size += len(chunk)
    return Input(role, source.name, size, digest.hexdigest())


# --- the auditor's key --------------------------------------------------------------------------


def new_private_key() -> bytes:
    return Ed25519PrivateKey.generate().private_bytes_raw()


def write_private_key(path: Path, private_key: bytes) -> None:
    """Write the key as 64 hex digits, readable by its owner only (created so, never widened)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as out:
        out.write(private_key.hex() + "\n")


def read_private_key(path: Path | str) -> bytes:
    """Raises InvalidArgument("BAD_FILE") when the file is missing, ("BAD_SIGNING_KEY") when it
    does not hold 64 hex digits."""
    text = _read_small(Path(path), "a signing key").strip()
    try:
        return seal.parse_private_key(text)
    except ValueError as exc:
        raise errors.InvalidArgument("BAD_SIGNING_KEY", f"{path}: {exc}") from exc


def public_key_of(private_key: bytes) -> bytes:
    return Ed25519PrivateKey.from_private_bytes(private_key).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


# --- the signed verdict ---------------------------------------------------------------------------


def _canonical(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _signed_bytes(doc: Mapping[str, Any]) -> bytes:
    return VERDICT_LABEL + b"\x00" + _canonical({k: v for k, v in doc.items() if k != "signature"})


def signed_verdict(
    report: AuditReport, inputs: Iterable[Input], private_key: bytes, *, audited_at: str
) -> dict[str, Any]:
    """The signed verdict document of ``report`` (the module docstring)."""
    public = public_key_of(private_key)
    totals = {
        "hands_verified": report.hands_verified,
        "gold_moved": sum(g.gold_moved for g in report.games.values()),
        "fees_gold": sum(g.fees_gold for g in report.games.values()),
        "mismatches": len(report.mismatches),
    }
    doc: dict[str, Any] = {
        "format": VERDICT_FORMAT,
        "version": VERDICT_VERSION,
        "audited_at": audited_at,
        "ok": report.ok,
        "inputs": [i.as_json() for i in inputs],
        "totals": totals,
        "proof": report.proof.as_json(),
        "verdict": report.verdict(),
        "signed_by": {"key_id": seal.key_id(public), "public_key": public.hex()},
    }
    doc["signature"] = Ed25519PrivateKey.from_private_bytes(private_key).sign(_signed_bytes(doc)).hex()
    return doc


def verdict_json(doc: Mapping[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


@dataclass
class VerdictCheck:
    """What ``verify_verdict`` found: every problem (none: the verdict stands), who signed it,
    and notes a reader should see (an untrusted signer, inputs not compared)."""

    problems: list[str]
    notes: list[str]
    key_id: str = ""
    ok_verdict: bool | None = None  # the verdict's own ok, once the signature holds

    @property
    def ok(self) -> bool:
        return not self.problems


def read_verdict(path: Path | str) -> dict[str, Any]:
    """Raises InvalidArgument("BAD_FILE") for a file that is not a signed verdict."""
    source = Path(path)
    try:
        doc = json.loads(_read_small(source, "a verdict"))
    except json.JSONDecodeError as exc:
        raise errors.InvalidArgument("BAD_FILE", f"{source}: not JSON: {exc.msg}") from exc
    if not isinstance(doc, dict) or doc.get("format") != VERDICT_FORMAT:
        raise errors.InvalidArgument(
            "BAD_FILE", f"{source}: not a signed verdict (format {VERDICT_FORMAT!r}; `socai audit --sign` writes one)"
        )
    if doc.get("version") != VERDICT_VERSION:
        raise errors.InvalidArgument(
            "BAD_FILE", f"{source}: verdict version {doc.get('version')!r}, not {VERDICT_VERSION}"
        )
    return doc


def verify_verdict(
    doc: Mapping[str, Any], *, trusted: Mapping[str, bytes] | None = None, inputs: Iterable[Input] = ()
) -> VerdictCheck:
    """Check a signed verdict: its signature with the public key it names, that key against
    ``trusted`` (key id → public key; None: the reader trusts none yet, which is a note), and
    each of ``inputs`` against the input of the same role the verdict names."""
    check = VerdictCheck([], [])
    signer = doc.get("signed_by")
    signature = doc.get("signature")
    if not isinstance(signer, dict) or not isinstance(signature, str):
        check.problems.append("the verdict names no signer or signature")
        return check
    try:
        public = bytes.fromhex(str(signer.get("public_key", "")))
        key = Ed25519PublicKey.from_public_bytes(public)
        key.verify(bytes.fromhex(signature), _signed_bytes(doc))
    except (ValueError, InvalidSignature):
        check.problems.append("the signature does not verify: the verdict was changed after it was signed")
        return check
    check.key_id = seal.key_id(public)
    if signer.get("key_id") != check.key_id:
        check.problems.append(
            f"signed_by names key id {signer.get('key_id')!r}, but its public key's id is {check.key_id}"
        )
    if trusted is None:
        check.notes.append(
            f"signed by key id {check.key_id}, whose public key the verdict carries: check it is your auditor's "
            "(--public-key)"
        )
    elif check.key_id not in trusted or trusted[check.key_id] != public:
        check.problems.append(
            f"signed by key id {check.key_id}, not one of the keys given ({', '.join(sorted(trusted))})"
        )
    named = {i.get("role"): i for i in doc.get("inputs", []) if isinstance(i, dict)}
    given = list(inputs)
    for item in given:
        want = named.get(item.role)
        if want is None:
            check.problems.append(f"{item.role} {item.name}: the verdict names no {item.role} input")
        elif want.get("sha256") != item.sha256:
            check.problems.append(
                f"{item.role} {item.name}: sha256 {item.sha256} is not the audited file's {want.get('sha256')} "
                f"({want.get('name')}): not the file that was audited"
            )
    if not given:
        check.notes.append("no input given: the files themselves were not compared (--events, --journal)")
    check.ok_verdict = bool(doc.get("ok"))
    return check
