"""``journal sessions`` and ``journal show``: the sessions one checkpoint holds, read
as conversations.

A session lives where its preset's rules say (``presets.SESSIONS``, as ``find
--session`` reads them): in a transcript named for it, or in rows of a database; the
rule's ``format`` names its reader (``formats``). The checkpoint is chosen as ``ls``
chooses it (``--at``; past a damaged manifest or index, the newest older one). In it:

1. Each harness tree's index is read only where the rules' fixed leading part
   (``sessions/``, ``projects/``, ``opencode``...) can lie, for the transcripts and
   databases they name (``show``: only those whose name may hold the id asked for).
2. A transcript is read whole, every blob verified; a database is rebuilt from its
   snapshot into a temp file (as ``cat`` rebuilds it), once, and its sessions read
   there (``show``: only the rows whose id begins with the id asked for). Of two
   transcripts naming one session (Gemini, resumed in a later minute), the one
   written last is the session, as Gemini resumes it.
3. The checkpoint that last changed a session: a transcript's, the first checkpoint
   of its current version (``ls --long``'s walk back, at most ``ls.LOOKBACK``
   manifests); a database session's, found by reading the database's older
   versions, newest first (at most ``DB_LOOKBACK``), until one shows the session
   otherwise or not at all. A walk that stops first says "no later than"
   (``changed_exact`` false).

A transcript or database whose blobs are damaged is passed over with a warning and
noted in ``skipped`` (the command then exits 3, as a fallback restore does); records
that cannot be read (a line that is not a JSON object) are skipped and counted.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import NamedTuple

import msgspec

from ...format.model import KIND_FILE, KIND_JSONL, KIND_SQLITE, Entry, Manifest
from ...paths import shown
from ...presets import SESSIONS, SessionFiles, SessionTable
from ...repository.segments import read_blobs
from ..errors import AmbiguousSession, NoGoodCopy, SessionNotFound, UnknownHarness
from ..ls import entries_changed, lookup
from ..sessions import PlaceKind, SessionRules, check_session_id, cwd_file, harness_rules, ids_with_prefix, snapshot_db
from ..view import DAMAGE, View
from ..where import joined, range_prune
from .formats import DATABASES, read_transcript
from .model import Conversation, Turn

#: The most older versions of a database read to find where one of its sessions last changed.
DB_LOOKBACK = 8
#: Above every character a path holds: the paths beginning with ``p`` are ``[p, p + END)``.
END = "\U0010ffff"


class SessionInfo(msgspec.Struct, kw_only=True, omit_defaults=True):
    id: str
    harness: str                    # the preset
    tree: str
    path: str                       # TREE/PATH of the transcript or database holding it
    kind: PlaceKind                 # which of the two
    turns: int                      # its prompts
    bytes: int                      # its records' bytes: a transcript's size, a database session's rows
    prompt: str | None = None       # its first prompt's first line
    last_ns: int | None = None      # its last activity: its newest record's time (else the file's mtime)
    changed: int | None = None      # the checkpoint that last changed it
    changed_exact: bool = True      # False: unchanged at least since ``changed`` (the walk stopped there)
    unreadable: int = 0             # records that could not be read, skipped
    cwd: str | None = None          # its working directory, when its records say


class SessionList(msgspec.Struct, kw_only=True):
    seq: int                        # the checkpoint read
    created: str
    sessions: list[SessionInfo]     # by tree, then newest activity first
    snapshots: int = 0              # database versions rebuilt and read
    skipped: list[str] = []         # what could not be read, and why


class ShownSession(msgspec.Struct, kw_only=True):
    seq: int
    created: str
    session: SessionInfo
    turns: list[Turn]
    resume: list[str] = []          # the command that resumes it ([]: none known)
    in_cwd: bool = False            # ``resume`` must run in its working directory
    skipped: list[str] = []


class _Source(NamedTuple):
    """A transcript or a database of a harness tree, in the checkpoint read."""

    tree: str
    entry: Entry
    rule: SessionFiles | SessionTable
    named: str | None               # the id (or its first characters) a transcript's name holds


class _Found(NamedTuple):
    source: _Source
    id: str
    conversation: Conversation


def known_harnesses() -> list[str]:
    """The presets whose sessions journal can read."""
    return sorted(name for name, s in SESSIONS.items() if any(r.format for r in (*s.files, *s.tables)))


def readable_rules(harnesses: Mapping[str, str], harness: str | None = None) -> dict[str, SessionRules]:
    """The session rules of each tree (``harnesses``: tree -> preset, from the config)
    whose harness journal can read; only ``harness``'s when given (``UnknownHarness``
    if it is none of them)."""
    known = known_harnesses()
    if harness is not None and harness not in known:
        raise UnknownHarness(harness, known)
    return {tree: rules for tree, rules in harness_rules(harnesses).items()
            if rules.harness in known and harness in (None, rules.harness)}


def list_sessions(view: View, harnesses: Mapping[str, str], at: str | None = None,
                  harness: str | None = None) -> SessionList:
    """Every session of the newest checkpoint at or before ``at`` (module docstring)."""
    rules = readable_rules(harnesses, harness)
    seq, manifest, sources = _checkpoint(view, at, rules, "")
    reader = _Reader(view)
    found = reader.sessions(sources, "")
    infos = _infos(view, reader, seq, found, rules)
    infos.sort(key=lambda s: (s.tree, -(s.last_ns or 0), s.id))
    return SessionList(seq=seq, created=manifest.created, sessions=infos, snapshots=reader.snapshots,
                       skipped=view.skipped)


def show_session(view: View, query: str, harnesses: Mapping[str, str], at: str | None = None) -> ShownSession:
    """The one session whose id begins with ``query`` in the newest checkpoint at or
    before ``at``: ``SessionNotFound`` when none does, ``AmbiguousSession`` when several."""
    query = check_session_id(query, "show")
    rules = readable_rules(harnesses)
    seq, manifest, sources = _checkpoint(view, at, rules, query)
    reader = _Reader(view)
    found = reader.sessions(sources, query)
    if not found:
        trees = ", ".join(t for t in sorted(rules) if t in manifest.trees) or "none"
        unread = f", {len(view.skipped)} passed over as unreadable" if view.skipped else ""
        raise SessionNotFound(query, seq, f"harness trees: {trees}{unread}")
    if len(found) > 1:
        raise AmbiguousSession(query, seq, [f"{f.source.tree} {f.id}" for f in found])
    one, tree_rules = found[0], rules[found[0].source.tree]
    [info] = _infos(view, reader, seq, found, rules)
    rule = one.source.rule
    if info.cwd is None and isinstance(rule, SessionFiles) and rule.cwd_file:
        info.cwd = cwd_file(view, one.source.tree, one.source.entry.path, rule.cwd_file, seq)
    return ShownSession(seq=seq, created=manifest.created, session=info, turns=one.conversation.turns(),
                        resume=tree_rules.resume(one.id), in_cwd=tree_rules.sessions.in_cwd, skipped=view.skipped)


def _checkpoint(view: View, at: str | None, rules: dict[str, SessionRules],
                query: str) -> tuple[int, Manifest, list[_Source]]:
    """The checkpoint read, and its transcripts and databases that may hold a session
    whose id begins with ``query`` (any for ""); a checkpoint whose index is damaged is
    passed over for the newest older one."""
    last: Exception | None = None
    for seq, manifest in view.candidates(at):
        try:
            sources = [source for tree in sorted(rules) if tree in manifest.trees
                       for source in _sources(view, tree, manifest.trees[tree].root, rules[tree], query)]
        except DAMAGE as err:
            view.pass_over(seq, "a harness tree's index", err)
            last = err
            continue
        return seq, manifest, sources
    raise NoGoodCopy(view.op, "the harness trees", f"the index of every checkpoint is damaged: {last}")


def _sources(view: View, tree: str, root, rules: SessionRules, query: str) -> list[_Source]:
    """The transcripts and databases of ``tree`` a readable rule names, reading only the
    index pages where a rule's fixed leading part can lie."""
    patterns = [r.path for r in rules.sessions.files if r.format] + \
               [t.database for t in rules.sessions.tables if t.format]
    prunes = [range_prune(p, p + END) for p in map(_fixed, patterns)]
    out = []
    for entry in view.entries(root, lambda first, upper: all(prune(first, upper) for prune in prunes)):
        named = rules.file_rule(entry.path, query)
        table = rules.table_rule(entry.path)
        if named is not None and named[0].format and entry.kind in (KIND_JSONL, KIND_FILE):
            out.append(_Source(tree, entry, named[0], named[1]))
        elif named is None and table is not None and table.format and entry.kind == KIND_SQLITE:
            out.append(_Source(tree, entry, table, None))
    return out


def _fixed(pattern: str) -> str:
    """A rule's path up to its first ``*`` or ``{id}``: every path it names begins so."""
    cut = min((i for i in (pattern.find("*"), pattern.find("{")) if i >= 0), default=len(pattern))
    return pattern[:cut]


class _Reader:
    """Reads transcripts and databases, each damaged one passed over and noted."""

    def __init__(self, view: View):
        self.view = view
        self.snapshots = 0

    def sessions(self, sources: list[_Source], query: str) -> list[_Found]:
        """The sessions ``sources`` hold whose id begins with ``query``; of several
        holding one session, the one written last (a database's on a tie)."""
        newest: dict[tuple[str, str], _Found] = {}
        for source in sources:
            for found in self._read(source, query):
                key = (source.tree, found.id)
                if key not in newest or _written(found) >= _written(newest[key]):
                    newest[key] = found
        return [newest[key] for key in sorted(newest)]

    def _read(self, source: _Source, query: str) -> list[_Found]:
        if isinstance(source.rule, SessionTable):
            got = self.database(source, source.entry, query=query)
            return [_Found(source, sid, c) for sid, c in sorted((got or {}).items())]
        try:
            conversation = read_transcript(source.rule.format, read_blobs(source.entry, self.view.repo))
        except DAMAGE as err:
            self.view.skip(f"{_shown(source)} in the checkpoint read is damaged ({err})")
            return []
        session = conversation.id if source.rule.prefix and conversation.id else source.named
        return [_Found(source, session, conversation)] if session.startswith(query) else []

    def database(self, source: _Source, entry: Entry, ids: list[str] | None = None,
                 query: str = "") -> dict[str, Conversation] | None:
        """The sessions of the database snapshot ``entry`` (only ``ids``, or those whose
        id begins with ``query``, when given); None when it is damaged."""
        try:
            with snapshot_db(self.view, entry) as con:
                self.snapshots += 1
                if query:
                    ids = list(ids_with_prefix(con, source.rule, query))
                return DATABASES[source.rule.format](con, ids) if ids != [] else {}
        except DAMAGE as err:
            self.view.skip(f"a copy of {_shown(source)} is damaged ({err})")
        except sqlite3.DatabaseError as err:
            self.view.reporter.warn(f"{self.view.op}: {_shown(source)} has no tables this version of journal reads "
                                    f"({err}); its sessions are left out")
            return {}
        return None


def _written(found: _Found) -> tuple[int, bool]:
    last = found.conversation.last_ns or found.source.entry.mtime_ns or 0
    return last, isinstance(found.source.rule, SessionTable)


def _shown(source: _Source) -> str:
    return shown(joined(source.tree, source.entry.path))


def _infos(view: View, reader: _Reader, seq: int, found: list[_Found],
           rules: dict[str, SessionRules]) -> list[SessionInfo]:
    """Each session's summary, with the checkpoint that last changed it."""
    changed = _transcripts_changed(view, seq, [f for f in found if isinstance(f.source.rule, SessionFiles)])
    by_database: dict[tuple[str, str], list[_Found]] = {}
    for f in found:
        if isinstance(f.source.rule, SessionTable):
            by_database.setdefault((f.source.tree, f.source.entry.path), []).append(f)
    for group in by_database.values():
        digests = {f.id: f.conversation.digest() for f in group}
        changed.update({(group[0].source.tree, sid): when
                        for sid, when in _database_changed(view, reader, seq, group[0].source, digests).items()})
    out = []
    for f in found:
        conversation, entry, transcript = f.conversation, f.source.entry, isinstance(f.source.rule, SessionFiles)
        when, exact = changed[(f.source.tree, f.id)]
        out.append(SessionInfo(
            id=f.id, harness=rules[f.source.tree].harness, tree=f.source.tree, path=joined(f.source.tree, entry.path),
            kind=PlaceKind.TRANSCRIPT if transcript else PlaceKind.DATABASE, turns=conversation.prompts, bytes=conversation.bytes, prompt=conversation.first_prompt,
            last_ns=conversation.last_ns or (entry.mtime_ns if transcript else None), changed=when,
            changed_exact=exact, unreadable=conversation.unreadable, cwd=conversation.cwd))
    return out


def _transcripts_changed(view: View, seq: int, found: list[_Found]) -> dict[tuple[str, str], tuple[int, bool]]:
    """Where each transcript's current version began (one walk back per tree)."""
    out: dict[tuple[str, str], tuple[int, bool]] = {}
    trees = sorted({f.source.tree for f in found})
    for tree in trees:
        mine = [f for f in found if f.source.tree == tree]
        walked = entries_changed(view, seq, tree, {f.source.entry.path: f.source.entry for f in mine})
        out.update({(tree, f.id): walked[f.source.entry.path] for f in mine})
    return out


def _database_changed(view: View, reader: _Reader, seq: int, source: _Source,
                      digests: dict[str, bytes]) -> dict[str, tuple[int, bool]]:
    """For each session of the database ``source`` (its digest at checkpoint ``seq``),
    the checkpoint from which it stayed as it is: the first of the newest version
    before which an older one shows it otherwise, or not at all."""
    tree, path = source.tree, source.entry.path
    pending, found = dict(digests), {}
    since, exact = entries_changed(view, seq, tree, {path: source.entry})[path]
    settled = False                     # whether what is still pending changed at ``since`` exactly
    for _ in range(DB_LOOKBACK):
        older = [s for s in view.seqs if s < since]
        if not pending or not exact or not older:
            settled = exact             # no older checkpoint: the version began at the first one
            break
        try:
            tree_root = view.manifest(older[-1]).trees.get(tree)
            entry = tree_root and lookup(view, tree_root.root, [path]).get(path)
        except DAMAGE:
            break
        if not entry or entry.kind != KIND_SQLITE:
            settled = True              # no database before it: every session began with it
            break
        then = reader.database(source, entry, ids=sorted(pending))
        if then is None:
            break
        for sid in [s for s in pending if s not in then or then[s].digest() != pending[s]]:
            found[sid] = (since, True)
            del pending[sid]
        since, exact = entries_changed(view, older[-1], tree, {path: entry})[path]
    found.update({sid: (since, settled) for sid in pending})
    return found
