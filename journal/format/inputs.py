"""The input journal's stored bytes: its keys and its three records (design §20).

Every submitted prompt is one immutable record in its session's directory, at the key
of its sequence number; delivery and client-id claims are records of their own::

    inputs/<session dir>/i<seq:012d>     the input (kind 7): a JSON head line, then the text
    inputs/<session dir>/d<seq:012d>     its delivery marker (kind 8, JSON)
    inputs/<session dir>/c<sha256(client id)>   a client-id claim (kind 9, JSON)

A session directory is ``<harness>.<label>-<digest>``: the harness name as given (it
must match ``HARNESS``), a readable label made of the session name (every character
outside ``[A-Za-z0-9_-]`` becomes ``_``, cut at 32), and the first 20 hex digits of
the SHA-256 of ``harness NUL session``, which is what tells two sessions apart. So a
user's string never reaches a key but through the digest and the label's safe
characters: no ``/``, no ``..``, no leading ``.``, a bounded length. Within a
directory every name is a letter and a fixed-width tail, and no letter is a prefix of
another's name, so no key is a strict prefix of another (hf-mount's phantom-directory
rule); a listing of one directory returns claims, then markers, then inputs, each in
ascending sequence order.

In an encrypted store (design §22) no name reaches a key, not even as a label: a
session directory is ``<h>.<s>``, the first 16 hex digits of the keyed digest of the
harness and the first 20 of that of ``harness NUL session``, and a claim is
``c<keyed digest of the client id>`` (``codec.name_digest``: HMAC-SHA-256 under a key
derived from the master key); the three records are sealed like every record.

Each record names its own place, and a reader checks it against the key it read: an
input's head its harness, session and sequence, a marker its sequence and the id of
the input record it marks, a claim its client id. So an object copied to another key
is refused, in a plain store as in an encrypted one, where the seal authenticates
those fields too. Input heads of version 1 (before heads named their sequence) are
read as before and are not bound to their sequence.

An input's id, as commands and the socket show it, is ``<session dir>/<seq>``.
"""

from __future__ import annotations

import hashlib
import re
from typing import Annotated, Literal

import msgspec

from ..errors import ConfigError, CorruptObject
from .codec import PLAIN, RECORD, Codec
from .model import Count, Id, Nanos, Text
from .objects import KIND_CLAIM, KIND_DELIVERY, KIND_INPUT, blob_id, decode_record, encode_record

INPUT_PREFIX = "inputs/"
SEQ_WIDTH = 12
MAX_SEQ = 10 ** SEQ_WIDTH - 1
#: The largest input a configuration may allow (``input_limit``; the default is 1 MiB).
MAX_INPUT_LIMIT = 16 << 20
HARNESS = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
DIGEST_HEX = 20
HARNESS_HEX = 16      # an encrypted store's session directory: the harness's keyed digest, cut to this
LABEL_CHARS = 32
INPUT_LETTER, DELIVERY_LETTER, CLAIM_LETTER = "i", "d", "c"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_SESSION_DIR = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}\.[A-Za-z0-9_-]{1,32}-[0-9a-f]{20}"
                          r"|[0-9a-f]{16}\.[0-9a-f]{20}")  # plain | encrypted
_NAME = re.compile(r"(?:(?P<letter>[di])(?P<seq>\d{12})|c[0-9a-f]{64})")
_ID = re.compile(r"(?P<dir>[^/]+)/(?P<seq>[0-9]{1,12})")

Seq = Annotated[int, msgspec.Meta(ge=1, le=MAX_SEQ)]
Harness = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")]
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f\x7f]*$")]
TextSize = Annotated[int, msgspec.Meta(ge=0, le=MAX_INPUT_LIMIT)]


#: An input head that names its sequence (``seq``): the record's whole identity,
#: harness, session and sequence, is in what its id (and, encrypted, its tag) covers.
INPUT_VERSION = 2
#: Format 10 and earlier: no ``seq``; read as before, not bound to its sequence.
UNBOUND_INPUT_VERSION = 1


class InputHead(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What an input record says about its text (the JSON line before it), its identity
    included: a reader checks ``harness``, ``session`` and ``seq`` against the key it
    read the record from, so a record copied to another key is refused. ``seq`` is
    None only in a version 1 head (written before heads named it)."""

    version: Literal[1, 2] = INPUT_VERSION
    harness: Harness
    session: Name
    seq: Seq | None = None
    pane: Name | None = None
    client_id: Name | None = None
    submitted: Text
    submitted_ns: Nanos
    size: TextSize
    host: Text


class Delivery(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A delivery marker: input ``seq`` (the record ``input``) was delivered. It counts only
    while the input stored at ``seq`` is that record: a marker left by an input that was
    lost, its sequence taken again, marks nothing. It repeats the input's time and client id."""

    version: Literal[1] = 1
    input: Id
    seq: Seq
    client_id: Name | None = None
    submitted_ns: Nanos
    delivered: Text
    delivered_ns: Nanos
    host: Text


class Claim(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A client id taken in a session: its input, once stored, is the first input with
    this client id at a sequence above ``after`` (the newest sequence known when the
    claim was written)."""

    version: Literal[1] = 1
    client_id: Name
    after: Annotated[int, msgspec.Meta(ge=0, le=MAX_SEQ)]
    created: Text
    created_ns: Nanos
    host: Text
    pid: Count


_encoder = msgspec.json.Encoder(order="deterministic")
_decode_head = msgspec.json.Decoder(InputHead).decode
_decode_delivery = msgspec.json.Decoder(Delivery).decode
_decode_claim = msgspec.json.Decoder(Claim).decode


def check_names(harness: str, session: str, pane: str | None = None, client_id: str | None = None) -> None:
    """Refuse names an input cannot carry (``ConfigError``, naming the field and the rule)."""
    if not isinstance(harness, str) or not HARNESS.fullmatch(harness):
        raise ConfigError(f"append input: harness {harness!r} is not a harness name: 1 to 64 letters, digits, "
                          "'-' and '_', starting with a letter or digit")
    for field, value, required in (("session", session, True), ("pane", pane, False),
                                   ("client id", client_id, False)):
        if value is None and not required:
            continue
        if not isinstance(value, str) or not 1 <= len(value) <= 256 or _CONTROL.search(value) \
                or not _encodes(value):
            raise ConfigError(f"append input: {field} {value!r} must be one line of 1 to 256 characters "
                              "(UTF-8, no control characters)")


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _encodes(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


def session_dir(harness: str, session: str, codec: Codec = PLAIN) -> str:
    """The directory name of a session (see the module docstring); the names are checked."""
    check_names(harness, session)
    if codec.encrypted:
        digest = codec.name_digest("session", f"{harness}\0{session}")[:DIGEST_HEX]
        return f"{_harness_part(harness, codec)}.{digest}"
    digest = hashlib.sha256(f"{harness}\0{session}".encode()).hexdigest()[:DIGEST_HEX]
    return f"{harness}.{_UNSAFE.sub('_', session)[:LABEL_CHARS]}-{digest}"


def _harness_part(harness: str, codec: Codec) -> str:
    """What a session directory starts with: the harness, or its keyed digest."""
    return codec.name_digest("harness", harness)[:HARNESS_HEX] if codec.encrypted else harness


def session_prefix(harness: str | None = None, session: str | None = None, codec: Codec = PLAIN) -> str:
    """The listing prefix of every input, one harness's, or one session's."""
    if session is not None:
        if harness is None:
            raise ConfigError("list inputs: a session is named without its harness (a session belongs to a harness)")
        return f"{INPUT_PREFIX}{session_dir(harness, session, codec)}/"
    if harness is not None:
        check_names(harness, "-")
        return f"{INPUT_PREFIX}{_harness_part(harness, codec)}."
    return INPUT_PREFIX


def input_key(sdir: str, seq: int) -> str:
    return f"{INPUT_PREFIX}{sdir}/{INPUT_LETTER}{seq:0{SEQ_WIDTH}d}"


def delivery_key(sdir: str, seq: int) -> str:
    return f"{INPUT_PREFIX}{sdir}/{DELIVERY_LETTER}{seq:0{SEQ_WIDTH}d}"


def claim_key(sdir: str, client_id: str, codec: Codec = PLAIN) -> str:
    return f"{INPUT_PREFIX}{sdir}/{_claim_name(client_id, codec)}"


def _claim_name(client_id: str, codec: Codec) -> str:
    if codec.encrypted:
        return CLAIM_LETTER + codec.name_digest("client", client_id)
    return CLAIM_LETTER + hashlib.sha256(client_id.encode()).hexdigest()


def input_id(sdir: str, seq: int) -> str:
    return f"{sdir}/{seq}"


def parse_id(text: str) -> tuple[str, int]:
    """``(session dir, seq)`` of an input id; ``ConfigError`` for anything else."""
    match = _ID.fullmatch(text) if isinstance(text, str) else None
    if match is None or not _SESSION_DIR.fullmatch(match["dir"]) or not 1 <= int(match["seq"]) <= MAX_SEQ:
        raise ConfigError(f"input: {text!r} is not an input id (<harness>.<label>-<20 hex>/<seq>, or "
                          "<16 hex>.<20 hex>/<seq> in an encrypted store, as `journal input append` and "
                          "`journal input list` print it)")
    return match["dir"], int(match["seq"])


def parse_key(key: str) -> tuple[str, str, int | None] | None:
    """``(session dir, letter, seq)`` of a key under ``inputs/`` (``seq`` None for a
    claim), or None for a key of any other shape."""
    rest = key[len(INPUT_PREFIX):] if key.startswith(INPUT_PREFIX) else ""
    sdir, _, name = rest.partition("/")
    match = _NAME.fullmatch(name)
    if match is None or not _SESSION_DIR.fullmatch(sdir):
        return None
    if match["letter"] is None:
        return sdir, CLAIM_LETTER, None
    seq = int(match["seq"])
    return (sdir, match["letter"], seq) if seq >= 1 else None


def _encode(kind: int, payload: bytes, codec: Codec) -> tuple[str, bytes]:
    """``(record id, stored bytes)``: the record, sealed in an encrypted store."""
    rid, record = encode_record(kind, payload, codec=codec)
    return rid, codec.seal(record, RECORD)


def _decode(data: bytes, key: str, kind: int, codec: Codec) -> bytes:
    return decode_record(codec.open(data, RECORD, key), key=key, expect_kind=kind, codec=codec)


def encode_input(head: InputHead, text: bytes, codec: Codec = PLAIN) -> tuple[str, bytes]:
    """``(record id, stored bytes)`` of one input."""
    return _encode(KIND_INPUT, _encoder.encode(head) + b"\n" + text, codec)


def decode_input(data: bytes, key: str, codec: Codec = PLAIN) -> tuple[InputHead, bytes, str]:
    """Verify one input's stored bytes read at ``key`` and return ``(head, text, record
    id)``: ``CorruptObject`` unless it decodes and its identity is its key's (harness,
    session and, from version 2 on, sequence)."""
    payload = _decode(data, key, KIND_INPUT, codec)
    line, newline, text = payload.partition(b"\n")
    try:
        if not newline:
            raise msgspec.DecodeError("no head line")
        head = _decode_head(line)
    except msgspec.DecodeError as err:  # a ValidationError (a field out of range) is one too
        raise CorruptObject(key, f"input head does not decode: {err}") from None
    if len(text) != head.size:
        raise CorruptObject(key, f"input says {head.size:,} bytes of text, holds {len(text):,}")
    if (head.seq is None) != (head.version == UNBOUND_INPUT_VERSION):
        raise CorruptObject(key, f"input head of version {head.version} {'without' if head.seq is None else 'with'} "
                                 "a sequence")
    parsed = parse_key(key)
    if parsed is None or parsed[1] != INPUT_LETTER or parsed[0] != session_dir(head.harness, head.session, codec):
        raise CorruptObject(key, f"input of session {head.harness}/{head.session} stored under another key")
    if head.seq is not None and head.seq != parsed[2]:
        raise CorruptObject(key, f"input #{head.seq} stored under the key of #{parsed[2]} (copied there; it is "
                                 "never listed)")
    return head, bytes(text), blob_id(payload, codec)


def encode_delivery(marker: Delivery, codec: Codec = PLAIN) -> bytes:
    return _encode(KIND_DELIVERY, _encoder.encode(marker), codec)[1]


def decode_delivery(data: bytes, key: str, codec: Codec = PLAIN) -> Delivery:
    """Verify one delivery marker read at ``key``; ``CorruptObject`` unless its sequence is its key's."""
    marker = _decode_json(data, key, KIND_DELIVERY, _decode_delivery, "delivery marker", codec)
    parsed = parse_key(key)
    if parsed is None or parsed[2] != marker.seq:
        raise CorruptObject(key, f"delivery marker of #{marker.seq} stored under another key")
    return marker


def encode_claim(claim: Claim, codec: Codec = PLAIN) -> bytes:
    return _encode(KIND_CLAIM, _encoder.encode(claim), codec)[1]


def decode_claim(data: bytes, key: str, codec: Codec = PLAIN) -> Claim:
    """Verify one client-id claim read at ``key``; ``CorruptObject`` unless its client id is its key's."""
    claim = _decode_json(data, key, KIND_CLAIM, _decode_claim, "client-id claim", codec)
    if key.rsplit("/", 1)[-1] != _claim_name(claim.client_id, codec):
        raise CorruptObject(key, "client-id claim of another client id")
    return claim


def _decode_json(data: bytes, key: str, kind: int, decoder, what: str, codec: Codec):
    payload = _decode(data, key, kind, codec)
    try:
        return decoder(payload)
    except msgspec.DecodeError as err:
        raise CorruptObject(key, f"{what} does not decode: {err}") from None
