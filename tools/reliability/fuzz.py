"""Decoder fuzzing: every decoder of store bytes, fed arbitrary and mutated inputs.

``DECODERS`` is the table, one row per decoder: its name, the entry point journal
reads store bytes through (each raises a ``JournalError`` on bad input, or returns),
valid seeds made by journal's own encoders (records of every kind, the input journal's
too), and the input's shape, which picks the
structure-aware mutations (a record's header fields; a JSON or msgpack payload's
values; a record re-sealed around a mutated payload, so its hash holds and the decoder
behind the hash check is reached). Adding a decoder is one row.

The contract, per input: the decoder returns or raises a ``JournalError``; any other
exception is a finding, and so are more than ``TIME_BUDGET`` seconds (a per-input
interval timer) and a ``MemoryError`` (the fuzzing child runs under ``RLIMIT_AS``: its
address space when it starts plus ``MEMORY_BUDGET``). The child works in an empty
sandbox directory (its working and temp directory), which must still be empty after
the run: no decoder writes anything.

``fuzz_row`` is the seeded engine ``tools/torture.py --fuzz N`` runs (about 20 µs a
mutation); ``tests/test_fuzz_decoders.py`` drives the same table with hypothesis.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import struct
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from journal.crypto.keyring import Keyring
from journal.crypto.keys import HKDF, SCRYPT, ScryptCost, Secret, read_key_object, unwrap, wrap
from journal.errors import JournalError
from journal.format.codec import RECORD as SEALED_RECORD
from journal.format import objects
from journal.format.index import decode_page, iter_pages
from journal.format.inputs import (Claim, Delivery, InputHead, claim_key, decode_claim, decode_delivery, decode_input,
                                   delivery_key, encode_claim, encode_delivery, encode_input, input_key, session_dir)
from journal.format.model import (KIND_DIR, KIND_FILE, KIND_JSONL, KIND_SQLITE, KIND_SYMLINK, BlobRef, Entry,
                                  Manifest, Page, PageRef, StoreInfo, TreeRoot, encode)
from journal.format.objects import (FLAG_DELTA, HEADER, KIND_CHUNK, KIND_CLAIM, KIND_DBPAGE, KIND_DELIVERY,
                                    KIND_INPUT, KIND_MANIFEST, KIND_NAMES, KIND_PAGE, KIND_PAGEMAP, KIND_SEGMENT,
                                    decode_record, embedded_base, embedded_members, encode_record,
                                    parse_header)
from journal.format.pagemap import PageLoc, PageMap, RECORD, decode_map, encode_map, load_snapshot
from journal.format.tombstone import Chunk, Tombstone, TombstoneItem, read_item, read_tombstone
from journal.gc.lease import LeaseRecord, _decode as decode_lease
from journal.repository.repository import Repository, seal_config
from journal.store.memory import MemoryStore

from .procs import limit_memory, run_forked

TIME_BUDGET = 2.0
MEMORY_BUDGET = 768 << 20
KEY = "fuzz"
PACK = "ab" * 32
BASE = b'{"version":1,"level":0,"entries":[]} base payload ' * 40


def _id(n: int) -> str:
    return hashlib.sha256(b"%d" % n).hexdigest()


def _ref(n: int, size: int = 100, pack: str = PACK) -> BlobRef:
    return BlobRef(_id(n), pack, 56 * n, 56 + size, size)


# --- seeds: valid objects, made by journal's own encoders ------------------------------

def _pages() -> list[bytes]:
    leaf = Page(level=0, entries=(
        Entry(path="a.json", kind=KIND_FILE, mode=0o644, mtime_ns=5, size=200, refs=(_ref(1), _ref(2)),
              bases=(None, _ref(3))),
        Entry(path="d", kind=KIND_DIR, mode=0o755),
        Entry(path="d/s.jsonl", kind=KIND_JSONL, mode=0o600, mtime_ns=7, size=100, refs=(_ref(4),)),
        Entry(path="link", kind=KIND_SYMLINK, mode=0o777, target="d/s.jsonl"),
        Entry(path="state.db", kind=KIND_SQLITE, mode=0o644, size=8192, refs=(_ref(5), _ref(6)))))
    inner = Page(level=1, children=(PageRef("a", _ref(7, pack=""), 3, 300), PageRef("m", _ref(8), 2, 8192)))
    return [encode(leaf), encode(inner)]


def _manifests() -> list[bytes]:
    base = dict(seq=1, parent=None, parent_id=None, created="2026-01-01T00:00:00.000Z", created_ns=1, host="h",
                pid=1, writer="w" * 32)
    return [encode(Manifest(**base, trees={"codex": TreeRoot(root=_ref(9), files=3, bytes=300),
                                           "empty": TreeRoot(root=None, files=0, bytes=0)},
                            packs=(PACK,), added_bytes=5, added_objects=3)),
            encode(Manifest(**{**base, "parent": 0, "parent_id": _id(1)}, trees={},
                            restored={"codex": "rolled back"}))]


def _maps() -> list[bytes]:
    full = {p: PageLoc(_id(100 + p), _ref(20 + p // 2, 8192), p % 2) for p in range(6)}
    delta = {1: PageLoc(_id(200), _ref(30, 8192), 0, delta=True), 6: PageLoc(_id(201), _ref(31, 4096), 0)}
    v1 = msgspec.msgpack.encode(PageMap(version=2, full=False, page_size=4096, page_count=3, packs=[PACK],
                                        records=b"".join(RECORD.pack(p, 0, 56 * p, 200, bytes.fromhex(_id(p)))
                                                         for p in range(3)),
                                        deltas=struct.pack(">II", 0, 2)))
    return [encode_map(True, 4096, 6, full, lambda ref: ref.pack),
            encode_map(False, 4096, 7, delta, lambda ref: "" if ref.id == _id(31) else ref.pack), v1]


def _records() -> list[bytes]:
    out = _inputs() + _deliveries() + _claims()
    out += [encode_record(KIND_CHUNK, b"chunk " * 200)[1], encode_record(KIND_SEGMENT, b'{"a": 1}\n' * 50)[1],
           encode_record(KIND_DBPAGE, bytes(4096))[1], encode_record(KIND_PAGEMAP, _maps()[0])[1]]
    out += [encode_record(KIND_PAGE, p)[1] for p in _pages()]
    out += [encode_record(KIND_MANIFEST, m)[1] for m in _manifests()]
    out.append(encode_record(KIND_SEGMENT, BASE[::-1], base=BASE)[1])
    out.append(encode_record(KIND_CHUNK, BASE + b"!", base=BASE)[1])
    out.append(encode_record(KIND_PAGE, BASE.replace(b"base", b"next"), base=BASE, names=objects.BaseAt(PACK, 112, 300))[1])
    out.append(encode_record(KIND_PAGE, BASE[:-1], base=BASE, names=objects.BaseRef(encode(_ref(11))))[1])
    out.append(encode_record(KIND_PAGEMAP, BASE + b"?", base=BASE, names=objects.BaseAt(PACK, 0, 400))[1])
    out.append(encode_record(KIND_DBPAGE, BASE * 2, base=BASE, names=objects.Members(struct.pack(">II", 3, 4)))[1])
    return out


def _tombstones() -> list[bytes]:
    chunk = Chunk()
    for item in (TombstoneItem(f"packs/{PACK[:2]}/{PACK}", "pack", 10),
                 TombstoneItem("manifests/000000000001", "manifest", 5),
                 TombstoneItem(f"packs/{_id(3)[:2]}/{_id(3)}", "orphan", 7)):
        chunk.add(item)
    return [chunk.record(Tombstone(created="2026-01-01T00:00:00Z", created_ns=1, host="h", mark_seq=4, items=[]))]


def _leases() -> list[bytes]:
    return [msgspec.json.encode(LeaseRecord(holder="host h pid 1", token="t" * 32, acquired_ns=1, expires_ns=2))]


SESSION = session_dir("codex", "s1")
INPUT_KEY, DELIVERY_KEY, CLAIM_KEY = input_key(SESSION, 1), delivery_key(SESSION, 1), claim_key(SESSION, "c1")


def _inputs() -> list[bytes]:
    head = InputHead(harness="codex", session="s1", seq=1, client_id="c1", submitted="2026-01-01T00:00:00.000Z",
                     submitted_ns=1, size=6, host="h")
    unbound = msgspec.structs.replace(head, version=1, seq=None, client_id=None, size=0)   # format 10 and earlier
    return [encode_input(head, b"hello\n")[1], encode_input(unbound, b"")[1]]


def _deliveries() -> list[bytes]:
    return [encode_delivery(Delivery(input=_id(1), seq=1, client_id="c1", submitted_ns=1,
                                     delivered="2026-01-01T00:00:01.000Z", delivered_ns=2, host="h"))]


def _claims() -> list[bytes]:
    return [encode_claim(Claim(client_id="c1", after=0, created="2026-01-01T00:00:00.000Z", created_ns=1, host="h",
                               pid=1))]


def _configs() -> list[bytes]:
    info = StoreInfo(store_id="0" * 32, created="2026-01-01T00:00:00.000Z")
    return [seal_config(info), encode(info)]


#: An encrypted store's keyring (a fixed master key) and its user keys, for the sealed rows.
KEYRING = Keyring(bytes(range(32)))
STORE_ID = "1" * 32
SECRETS = {HKDF: Secret(HKDF, b"k" * 32, "key file fuzz"), SCRYPT: Secret(SCRYPT, b"passphrase", "passphrase")}


def _key_objects() -> list[bytes]:
    by_file = wrap(KEYRING, SECRETS[HKDF], STORE_ID, "2026-01-01T00:00:00.000Z")
    # a passphrase key at a small cost (mutations reach the reader's cost bound)
    by_phrase = msgspec.structs.replace(by_file, kdf=SCRYPT, scrypt=ScryptCost(n=16, r=8, p=1))
    return [encode(by_file), encode(by_phrase)]


def _key_object(raw: bytes) -> object:
    obj = read_key_object(raw, KEY)
    return unwrap(obj, SECRETS[obj.kdf], STORE_ID)


def _sealed_records() -> list[bytes]:
    return [KEYRING.seal(encode_record(kind, payload, codec=KEYRING)[1], SEALED_RECORD)
            for kind, payload in ((KIND_CHUNK, b"hello world\n" * 20), (KIND_SEGMENT, b'{"a":1}\n'),
                                  (KIND_MANIFEST, _manifests()[0]))]


def _sealed_record(raw: bytes) -> object:
    return decode_record(KEYRING.open(raw, SEALED_RECORD, KEY), key=KEY, base=BASE, codec=KEYRING)


# --- the decoders, as journal calls them on store bytes ------------------------------

def _load_manifest(record: bytes) -> object:
    store = MemoryStore()
    store.put_if_absent("config", _configs()[0])
    store.put_if_absent("manifests/000000000001", record)
    return Repository.open(store).load_manifest(1)


def _manifest_payload(payload: bytes) -> object:
    return _load_manifest(encode_record(KIND_MANIFEST, payload)[1])


def _walk(payload: bytes) -> object:
    """A tree whose every page is ``payload``: children that repeat, cycle or disagree."""
    pages = list(iter_pages(_ref(12), lambda ref: payload, TreeRoot(root=_ref(12), files=4, bytes=8492)))
    return len(pages)


def _snapshot(payload: bytes) -> object:
    """``payload`` as a snapshot's map: its full map, or a delta over the seed's full map."""
    pm, _pages_ = decode_map(payload, PACK, KEY)
    full = _maps()[0]
    refs = (_ref(13, len(payload)),) if pm.full else (_ref(14, len(full)), _ref(13, len(payload)))
    return load_snapshot(refs, lambda ref: payload if ref is refs[-1] else full).page_size


def _tombstone(raw: bytes) -> object:
    return [read_item(item, KEY) for item in read_tombstone(raw, KEY).items]


def _config(raw: bytes) -> object:
    store = MemoryStore()
    store.put_if_absent("config", raw)
    store.put_if_absent("manifests/000000000001", b"x")
    return Repository.open(store).info


@dataclass(frozen=True)
class Decoder:
    name: str
    decode: Callable[[bytes], object]
    seeds: Callable[[], list[bytes]]
    shape: str          # "record", "json", "msgpack", "config": which mutations fit
    kind: int = 0       # a record kind to seal a mutated payload into ("record" rows: the seed's own)


DECODERS: dict[str, Decoder] = {d.name: d for d in (
    Decoder("record-header", lambda b: parse_header(b, key=KEY), _records, "record"),
    Decoder("record", lambda b: decode_record(b, key=KEY, base=BASE), _records, "record"),
    Decoder("delta-base", lambda b: embedded_base(b, key=KEY), _records, "record"),
    Decoder("delta-members", lambda b: embedded_members(b, key=KEY), _records, "record"),
    Decoder("manifest", _manifest_payload, _manifests, "json"),
    Decoder("manifest-record", _load_manifest, lambda: [encode_record(KIND_MANIFEST, m)[1] for m in _manifests()],
            "record"),
    Decoder("index-page", lambda b: decode_page(b, KEY), _pages, "json"),
    Decoder("page-walk", _walk, _pages, "json"),
    Decoder("page-map", _snapshot, _maps, "msgpack"),
    Decoder("tombstone", _tombstone, _tombstones, "json"),
    Decoder("lease", decode_lease, _leases, "json"),
    Decoder("config", _config, _configs, "config"),
    Decoder("input", lambda b: decode_input(b, INPUT_KEY), _inputs, "record"),
    Decoder("delivery", lambda b: decode_delivery(b, DELIVERY_KEY), _deliveries, "record"),
    Decoder("claim", lambda b: decode_claim(b, CLAIM_KEY), _claims, "record"),
    Decoder("key-object", _key_object, _key_objects, "json"),
    Decoder("sealed-record", _sealed_record, _sealed_records, "record"),
)}


# --- mutations -----------------------------------------------------------------------

INTERESTING_INTS = (0, 1, -1, 255, 256, 0x7FFF, 0xFFFF, 0x10000, 2**31 - 1, 2**31, 2**32, 2**48, 2**53, 2**63 - 1,
                    2**63, 2**64, -(2**63), 10**30)
INTERESTING_STRS = ("", ".", "..", "../../x", "/abs", "a/../b", "a//b", "\x00", "\n", "x" * 300, "é" * 200,
                    "0" * 64, "f" * 64, "AB" * 32, "packs/ab/" + "ab" * 32, "manifests/000000000001", "config")


def mutate(data: bytes, shape: str, rng: random.Random, seeds: list[bytes]) -> bytes:
    """One mutation of ``data``, picked for its ``shape``."""
    r = rng.random()
    if r < 0.08:
        return rng.randbytes(rng.choice((0, 1, 8, 55, 56, 57, 200, 4096)))
    if shape == "record" and r < 0.45:
        return _mutate_record(data, rng, seeds)
    if shape in ("json", "config") and r < 0.6:
        mutated = _mutate_json(data, rng)
        if mutated is not None:
            return _reseal_config(mutated) if shape == "config" and rng.random() < 0.7 else mutated
    if shape == "msgpack" and r < 0.6:
        mutated = _mutate_msgpack(data, rng)
        if mutated is not None:
            return mutated
    return _mutate_bytes(data, rng, seeds)


def _mutate_bytes(data: bytes, rng: random.Random, seeds: list[bytes]) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 4, 8))):
        op = rng.randrange(8)
        pos = rng.randrange(len(buf) + 1)
        if op == 0 and buf:
            buf[min(pos, len(buf) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1 and buf:
            buf[min(pos, len(buf) - 1)] = rng.choice((0, 0xFF, 0x7F, 0x80, 0x22, 0x5B, 0x7B, 0x0A))
        elif op == 2:
            buf[pos:pos] = rng.randbytes(rng.randint(1, 16))
        elif op == 3:
            del buf[pos:pos + rng.randint(1, 64)]
        elif op == 4:
            del buf[pos:]
        elif op == 5 and buf:
            start = rng.randrange(len(buf))
            piece = buf[start:start + rng.randint(1, 256)]
            buf[pos:pos] = piece * rng.randint(1, 8)
        elif op == 6:
            other = rng.choice(seeds)
            start = rng.randrange(len(other) + 1)
            buf[pos:] = other[start:]
        else:
            word = struct.pack(">Q", rng.choice(INTERESTING_INTS) & (2**64 - 1))
            buf[pos:pos + 8] = word[rng.choice((0, 4, 6, 7)):]
    return bytes(buf)


def _mutate_record(data: bytes, rng: random.Random, seeds: list[bytes]) -> bytes:
    """A header field set to an interesting value, or the payload mutated and the record
    sealed again (so the hash holds)."""
    if len(data) < HEADER.size:
        return _mutate_bytes(data, rng, seeds)
    magic, version, kind, flags, raw, stored, digest = HEADER.unpack_from(data)
    if rng.random() < 0.5:
        field_ = rng.randrange(5)
        pick = rng.choice(INTERESTING_INTS) & (2**64 - 1)
        if field_ == 0:
            kind = rng.randrange(max(KIND_NAMES) + 2)
        elif field_ == 1:
            flags = rng.randrange(1 << 16) if rng.random() < 0.3 else rng.choice((0, 1, 2, 3, 4, 5, 8, 9, 0xD))
        elif field_ == 2:
            raw = pick
        elif field_ == 3:
            stored = pick
        else:
            version = rng.randrange(4)
        return HEADER.pack(magic, version, kind & 0xFF, flags & 0xFFFF, raw, stored, digest) + data[HEADER.size:]
    try:
        payload = decode_record(data, key=KEY, base=BASE)
    except JournalError:
        return _mutate_bytes(data, rng, seeds)
    if kind == KIND_INPUT:  # a JSON head line, then the text
        head, _, text = payload.partition(b"\n")
        mutated = (_mutate_json(head, rng) or head) + b"\n" + text if rng.random() < 0.7 else \
            head + b"\n" + _mutate_bytes(text, rng, seeds)
    else:
        shape = "json" if kind in (KIND_PAGE, KIND_MANIFEST, KIND_DELIVERY, KIND_CLAIM) else \
            "msgpack" if kind == KIND_PAGEMAP else "bytes"
        mutated = mutate(payload, shape, rng, seeds)
    try:
        if flags & FLAG_DELTA:
            prefix = data[HEADER.size:HEADER.size + 2 + struct.unpack_from(">H", data, HEADER.size)[0]] \
                if objects._has_prefix(kind, flags) else b""
            blob_id, record = encode_record(kind, mutated, base=BASE, names=_naming(kind, flags, prefix))
        else:
            blob_id, record = encode_record(kind, mutated)
    except (JournalError, ValueError, struct.error):
        return _mutate_bytes(data, rng, seeds)
    return record


def _naming(kind: int, flags: int, prefix: bytes) -> objects.BaseName | None:
    """How a delta record names its base or members, read back from its prefix."""
    body = prefix[2:]
    if flags & objects.FLAG_BASE_AT:
        pack, offset, length = objects.BASE_AT.unpack(body)
        return objects.BaseAt(pack.hex(), offset, length)
    if flags & objects.FLAG_MEMBERS:
        return objects.Members(body)
    if kind == KIND_PAGE:
        return objects.BaseRef(body)
    return None


def _mutate_value(value, rng: random.Random, depth: int = 0):
    if isinstance(value, dict) and value and rng.random() < 0.7:
        key = rng.choice(list(value))
        out = dict(value)
        op = rng.randrange(4)
        if op == 0:
            del out[key]
        elif op == 1:
            out[rng.choice(INTERESTING_STRS)] = out[key]
        else:
            out[key] = _mutate_value(out[key], rng, depth + 1)
        return out
    if isinstance(value, list) and value and rng.random() < 0.7:
        out = list(value)
        i = rng.randrange(len(out))
        op = rng.randrange(5)
        if op == 0:
            out.insert(i, out[i])
        elif op == 1:
            out = out * rng.choice((2, 3, 50))
        elif op == 2:
            del out[i]
        elif op == 3:
            out.reverse()
        else:
            out[i] = _mutate_value(out[i], rng, depth + 1)
        return out
    choices = (lambda: rng.choice(INTERESTING_INTS), lambda: rng.choice(INTERESTING_STRS), lambda: None,
               lambda: [], lambda: {}, lambda: True, lambda: 1.5, lambda: _nest(rng.choice((10, 1000, 100_000))))
    if isinstance(value, bool) or value is None:
        return rng.choice(choices)()
    if isinstance(value, int):
        return rng.choice((lambda: value + 1, lambda: value - 1, lambda: -value, *choices))()
    if isinstance(value, str):
        return rng.choice((lambda: value + rng.choice(INTERESTING_STRS), lambda: value[:len(value) // 2],
                           lambda: value.upper(), *choices))()
    return rng.choice(choices)()


def _nest(depth: int):
    value: list = []
    for _ in range(min(depth, 400)):  # deeper nesting is made as text, below
        value = [value]
    return value


def _mutate_json(data: bytes, rng: random.Random) -> bytes | None:
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        return None
    if rng.random() < 0.05:  # nesting deeper than any parser's recursion
        depth = rng.choice((1000, 100_000))
        return b"[" * depth + data + b"]" * depth
    return json.dumps(_mutate_value(value, rng), separators=(",", ":")).encode()


def _mutate_msgpack(data: bytes, rng: random.Random) -> bytes | None:
    try:
        value = msgspec.msgpack.decode(data)
    except msgspec.DecodeError:
        return None
    if isinstance(value, dict) and value and rng.random() < 0.5:
        key = rng.choice([k for k, v in value.items() if isinstance(v, bytes)] or list(value))
        if isinstance(value[key], bytes):
            value[key] = _mutate_bytes(value[key], rng, [value[key]])
            return msgspec.msgpack.encode(value)
    try:
        return msgspec.msgpack.encode(_mutate_value(value, rng))
    except (OverflowError, TypeError):
        return None


def _reseal_config(body: bytes) -> bytes:
    """A config whose checksum matches its (mutated) body."""
    at = body.rfind(b',"checksum":"')
    if at >= 0:
        body = body[:at] + b"}"
    if not body.endswith(b"}"):
        return body
    return body[:-1] + b',"checksum":"' + hashlib.sha256(body).hexdigest().encode() + b'"}'


# --- running a decoder on many inputs ------------------------------------------------

@dataclass
class Finding:
    decoder: str
    index: int
    problem: str
    data: bytes

    def line(self) -> str:
        return f"fuzz {self.decoder}: input {self.index} ({len(self.data)} bytes): {self.problem}"


@dataclass
class FuzzResult:
    decoder: str
    inputs: int = 0
    typed_errors: int = 0     # inputs refused with a JournalError (the rest decoded)
    slowest: float = 0.0
    seconds: float = 0.0
    findings: list[Finding] = field(default_factory=list)

    def line(self) -> str:
        return (f"fuzz {self.decoder}: {self.inputs} inputs, {self.typed_errors} refused with a journal error, "
                f"slowest {self.slowest * 1000:.1f} ms, {len(self.findings)} findings")


class _Timeout(Exception):
    pass


def _alarm(_signum, _frame):
    raise _Timeout()


def check_one(decoder: Decoder, data: bytes) -> tuple[str | None, float, bool]:
    """Run ``decoder`` on ``data``: (what broke the contract or None, seconds, whether it
    was refused with a ``JournalError``)."""
    signal.setitimer(signal.ITIMER_REAL, TIME_BUDGET)
    started = time.perf_counter()
    try:
        decoder.decode(data)
        problem, refused = None, False
    except JournalError:
        problem, refused = None, True
    except _Timeout:
        problem, refused = f"ran past {TIME_BUDGET:.0f} s", False
    except MemoryError:
        problem, refused = f"ran out of memory (more than {MEMORY_BUDGET >> 20} MiB)", False
    except BaseException as err:  # the finding itself
        problem, refused = f"{type(err).__name__}: {str(err)[:200]}", False
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return problem, time.perf_counter() - started, refused


def inputs(decoder: Decoder, n: int, seed: int):
    """The row's ``n`` inputs: its seeds first, then mutations of them (``mutate``),
    some of mutations; deterministic in ``seed``."""
    rng = random.Random(f"{decoder.name}:{seed}")
    seeds = decoder.seeds()
    pool = list(seeds)
    for i in range(n):
        if i < len(seeds):
            data = seeds[i]
        else:
            data = mutate(rng.choice(pool), decoder.shape, rng, seeds)
            if len(pool) < 64 and rng.random() < 0.1 and len(data) < 1 << 16:
                pool.append(data)
        yield i, data


def fuzz_row(name: str, n: int, seed: int = 0, sandbox: str | None = None) -> FuzzResult:
    """Fuzz one decoder in this process (call it in a child: it limits its memory and
    moves into ``sandbox``)."""
    decoder = DECODERS[name]
    if sandbox is not None:
        os.chdir(sandbox)
        tempfile.tempdir = sandbox
    limit_memory(MEMORY_BUDGET)
    signal.signal(signal.SIGALRM, _alarm)
    result = FuzzResult(name)
    started = time.monotonic()
    for index, data in inputs(decoder, n, seed):
        problem, seconds, refused = check_one(decoder, data)
        result.inputs += 1
        result.typed_errors += refused
        result.slowest = max(result.slowest, seconds)
        if problem is not None and len(result.findings) < 20:
            result.findings.append(Finding(name, index, problem, data[:1 << 20]))
    result.seconds = time.monotonic() - started
    return result


def fuzz(n: int, seed: int = 0, names: list[str] | None = None, workdir: str | Path | None = None) -> list[FuzzResult]:
    """Fuzz every decoder (or ``names``) with ``n`` inputs each, each in a forked child;
    a child that died, or a sandbox left non-empty, is a finding too."""
    results = []
    for name in names or list(DECODERS):
        with tempfile.TemporaryDirectory(prefix=f"fuzz-{name}-", dir=workdir) as sandbox:
            out = run_forked(lambda: fuzz_row(name, n, seed, sandbox), timeout=max(600.0, n * 0.05))
            result = out.value if out.ok else FuzzResult(name, findings=[Finding(name, -1, f"the fuzzing child "
                                                                                 f"ended {out.status}: "
                                                                                 f"{out.message[-300:]}", b"")])
            left = sorted(os.listdir(sandbox))
            if left:
                result.findings.append(Finding(name, -1, f"decoding wrote into its sandbox: {left[:5]}", b""))
        results.append(result)
    return results
