"""``journal find --session ID``: where a harness's session lives in history, and the
command that resumes it.

Each harness declares where its session ids live (``presets.SESSIONS``): transcripts
named for their session (a path rule holding ``{id}``), and rows of a database its
tree snapshots (a database path rule, a table, its id column). The answer is built in
four steps:

1. One walk of every checkpoint (``find.find_paths``, from ``--since`` on; each
   distinct index page read once) keeps the paths a file rule names whose id begins
   with ID, and every database a table rule names. A name that holds only the id's
   first N characters (Gemini's 8) is kept when they are ID's first N.
2. Such a transcript's newest copy gives its whole id from its first records: kept
   when it begins with ID. The session's working directory comes from the first
   record holding it, or from a file beside the transcript (Gemini's
   ``.project_root``); a transcript's blobs are read from its start up to the one that
   reaches ``FIRST_BYTES``.
3. A database is read only where it changed: each version (one rebuild per distinct
   content) is rebuilt from the store into a temp file as ``journal cat`` rebuilds it
   (every record verified, ``quick_check``), and asked for the rows whose id column
   begins with ID.
4. Each session (tree, id) lists the places holding it, their versions as ``find``
   gives them (a database's: those holding the row), its working directory, and the
   command that resumes it.

ID is compared as text, never read as a pattern: it must be at least 8 characters of
letters, digits, ``.``, ``_`` and ``-`` (``BadSessionId``, exit 2), and a database is
asked with ``substr(id, 1, n) = ?``, where ``_`` and ``%`` are plain characters. No
session: ``NoSuchSession`` (exit 1). Damage is passed over with a warning and noted in
``skipped`` (exit 3), as ``find`` does.
"""

from __future__ import annotations

import contextlib
import enum
import os
import posixpath
import re
import sqlite3
import tempfile
from collections.abc import Iterator, Mapping

import msgspec

from .errors import BadSessionId, NoSuchSession
from ..format.model import KIND_FILE, KIND_JSONL, KIND_SQLITE, Entry
from ..paths import shown
from ..presets import PRESETS, SESSIONS, Sessions, SessionFiles, SessionTable
from ..repository.segments import read_blobs
from .find import Found, PathHistory, Version, find_paths
from .ls import lookup
from .conversations.model import dig
from .view import DAMAGE, View

#: The shortest ID taken: Gemini's file names hold 8 characters of the id.
MIN_ID = 8
SESSION_ID = re.compile(r"[A-Za-z0-9._-]+\Z")
#: The most bytes of a transcript read for its first records (its id, its directory).
FIRST_BYTES = 1 << 20
#: The most bytes of a file read for the directory it names.
CWD_FILE_BYTES = 4096


class PlaceKind(str, enum.Enum):
    TRANSCRIPT = "transcript"
    DATABASE = "database"


class Place(msgspec.Struct, kw_only=True):
    """A path holding the session: a transcript, or a database with its row."""

    path: str                       # TREE/PATH
    kind: PlaceKind
    first: int                      # the first checkpoint holding it
    last: int                       # the newest checkpoint holding it
    checkpoints: int                # how many checkpoints hold it
    versions: list[Version]         # as ``find`` gives them, newest first


class Session(msgspec.Struct, kw_only=True):
    id: str
    harness: str                    # the preset
    tree: str
    first: int
    last: int
    places: list[Place]
    cwd: str | None = None          # its working directory, when its files say
    resume: list[str] = []          # the command that resumes it ([]: none known)
    in_cwd: bool = False            # ``resume`` must run in ``cwd``


class SessionResult(msgspec.Struct, kw_only=True):
    query: str
    sessions: list[Session]
    manifests: int = 0              # checkpoints looked at
    snapshots: int = 0              # database versions rebuilt and read
    skipped: list[str] = []         # what could not be read, and why


def check_session_id(text: str, op: str = "find") -> str:
    """``text`` as an ID to look for; ``BadSessionId`` (exit 2) for one no harness writes."""
    if not SESSION_ID.match(text):
        raise BadSessionId(repr(shown(text)), "holds a character no session id has", op)
    if len(text) < MIN_ID:
        raise BadSessionId(repr(text), f"only {len(text)} characters", op)
    return text


def find_sessions(view: View, query: str, harnesses: Mapping[str, str], since: str | None = None,
                  tree: str | None = None) -> SessionResult:
    """The sessions whose id begins with ``query`` (module docstring), in tree ``tree``
    only if given. ``harnesses``: tree name -> preset, from the config; a tree it does
    not name is its preset's when its name is one."""
    query = check_session_id(query)
    rules = harness_rules(harnesses, tree)
    walk = find_paths(view, lambda name, path: rules[name].keeps(path, query), sorted(rules), since)
    finder = _Finder(view, walk, query)
    for found in walk.result.found:
        name, _, path = found.path.partition("/")
        finder.add(rules[name], name, path, found)
    result = SessionResult(query=query, sessions=finder.sessions(), manifests=walk.result.manifests,
                           snapshots=finder.snapshots, skipped=view.skipped)
    if not result.sessions:
        trees = ", ".join(sorted(walk.trees & set(rules))) or "none"
        looked = f"{result.manifests} checkpoint{'s' * (result.manifests != 1)}"
        unread = f", {len(result.skipped)} passed over as unreadable" if result.skipped else ""
        raise NoSuchSession(query, f"in {looked} (harness trees: {trees}{unread})")
    return result


def harness_rules(harnesses: Mapping[str, str], tree: str | None = None) -> dict[str, SessionRules]:
    """Each harness tree's session rules, by tree name (only ``tree`` if given).
    ``harnesses``: tree name -> preset, from the config; a tree it does not name is
    its preset's when its name is one."""
    return {name: SessionRules(preset, SESSIONS[preset]) for name, preset in
            {**{p: p for p in PRESETS}, **harnesses}.items()
            if preset in SESSIONS and (tree is None or name == tree)}


def _path_regex(path: str, id_regex: str = "") -> re.Pattern:
    """A rule's path as a regex: ``*`` is any part of one name, ``{id}`` the group ``id``."""
    pieces = [re.escape(piece).replace(r"\*", "[^/]*") for piece in path.split("{id}")]
    return re.compile(f"(?P<id>{id_regex})".join(pieces) + r"\Z")


class SessionRules:
    """One tree's session rules, compiled."""

    def __init__(self, harness: str, sessions: Sessions):
        self.harness = harness
        self.sessions = sessions
        self.files = [(rule, _path_regex(rule.path, rule.id)) for rule in sessions.files]
        self.tables = [(rule, _path_regex(rule.database)) for rule in sessions.tables]

    def file_rule(self, path: str, query: str = "") -> tuple[SessionFiles, str] | None:
        """The rule naming transcript ``path`` and the id (or prefix) its name holds,
        when that id may begin with ``query`` (any id for "")."""
        for rule, regex in self.files:
            got = regex.match(path)
            if got and (not query or (got["id"] == query[:rule.prefix] if rule.prefix
                                      else got["id"].startswith(query))):
                return rule, got["id"]
        return None

    def table_rule(self, path: str) -> SessionTable | None:
        return next((rule for rule, regex in self.tables if regex.match(path)), None)

    def keeps(self, path: str, query: str) -> bool:
        return self.file_rule(path, query) is not None or self.table_rule(path) is not None

    def resume(self, session: str) -> list[str]:
        return [arg.replace("{id}", session) for arg in self.sessions.resume]


class _Finder:
    """Steps 2 to 4 of the module docstring, path by path."""

    def __init__(self, view: View, walk: PathHistory, query: str):
        self.view = view
        self.walk = walk
        self.query = query
        self.snapshots = 0
        self.found: dict[tuple[str, str], Session] = {}
        self.rows: dict[tuple, dict[str, str | None]] = {}      # a database's content -> its matching rows

    def add(self, rules: SessionRules, tree: str, path: str, found: Found) -> None:
        present = [v for v in found.versions if v.kind is not None]
        if not present:
            return
        named = rules.file_rule(path, self.query)
        if named is not None:
            self._transcript(rules, *named, tree, path, found, present)
        elif (table := rules.table_rule(path)) is not None:
            self._database(rules, table, tree, path, found, present)

    def sessions(self) -> list[Session]:
        out = sorted(self.found.values(), key=lambda s: (s.tree, s.id))
        for session in out:
            session.places.sort(key=lambda p: p.path)
            session.first = min(p.first for p in session.places)
            session.last = max(p.last for p in session.places)
        return out

    def _session(self, rules: SessionRules, tree: str, session: str, cwd: str | None, place: Place) -> None:
        got = self.found.get((tree, session))
        if got is None:
            got = self.found[(tree, session)] = Session(
                id=session, harness=rules.harness, tree=tree, first=place.first, last=place.last, places=[],
                resume=rules.resume(session), in_cwd=rules.sessions.in_cwd)
        got.cwd = got.cwd or cwd
        got.places.append(place)

    def _transcript(self, rules: SessionRules, rule: SessionFiles, session: str, tree: str, path: str, found: Found,
                    present: list[Version]) -> None:
        entry = self.walk.entries[(tree, path, present[0].first)]
        if entry.kind not in (KIND_JSONL, KIND_FILE):
            return
        cwd = None
        if rule.id_field or rule.cwd_field:
            try:
                found_id, cwd = _first_values(self.view, entry, (rule.id_field, rule.cwd_field))
            except DAMAGE as err:
                self.view.skip(f"the first records of {shown(found.path)} in checkpoint {present[0].first} are "
                           f"unreadable ({err})")
                found_id = None
            if rule.prefix:
                if found_id is None or not found_id.startswith(self.query):
                    return
                session = found_id
        if rule.cwd_file and cwd is None:
            cwd = cwd_file(self.view, tree, path, rule.cwd_file, present[0].last)
        self._session(rules, tree, session, cwd, _place(found.path, PlaceKind.TRANSCRIPT, found.versions))

    def _database(self, rules: SessionRules, table: SessionTable, tree: str, path: str, found: Found,
                  present: list[Version]) -> None:
        """Each version of the database, read once per distinct content; a version whose
        snapshot is damaged is passed over."""
        held: dict[str, list[Version]] = {}
        cwds: dict[str, str | None] = {}
        for version in present:
            entry = self.walk.entries[(tree, path, version.first)]
            if entry.kind != KIND_SQLITE:
                continue
            rows = self.rows.get(entry.refs)
            if rows is None:
                try:
                    rows = self.rows[entry.refs] = self._rows(entry, table)
                except DAMAGE as err:
                    self.view.skip(f"the copy of {shown(found.path)} in checkpoint {version.first} is damaged ({err})")
                    continue
            for session, cwd in rows.items():
                held.setdefault(session, []).append(version)
                cwds[session] = cwds.get(session) or cwd       # the newest version's, when it says
        for session, versions in held.items():
            self._session(rules, tree, session, cwds[session], _place(found.path, PlaceKind.DATABASE, versions))

    def _rows(self, entry: Entry, table: SessionTable) -> dict[str, str | None]:
        """The rows of ``table`` whose id begins with the query (id -> working directory),
        from the snapshot rebuilt in a temp directory."""
        with snapshot_db(self.view, entry) as con:
            self.snapshots += 1
            return ids_with_prefix(con, table, self.query)


@contextlib.contextmanager
def snapshot_db(view: View, entry: Entry) -> Iterator[sqlite3.Connection]:
    """A read-only connection to the database snapshot ``entry``, rebuilt into a temp
    directory as ``cat`` rebuilds it (every record verified, ``quick_check``), removed
    after; raises what a damaged snapshot raises (``DAMAGE``)."""
    from ..sqlite.rebuild import rebuild_db

    with tempfile.TemporaryDirectory(prefix="journal-read-") as tmp:
        db = os.path.join(tmp, "snapshot.db")
        rebuild_db(entry, view.repo, db)
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            yield con
        finally:
            con.close()


def ids_with_prefix(con: sqlite3.Connection, table: SessionTable, prefix: str) -> dict[str, str | None]:
    """The ids in ``table`` that begin with ``prefix`` (compared as text), each with its
    working directory; none when this version of the harness has no such table or column."""
    columns = _quoted(table.id) + (f", {_quoted(table.cwd)}" if table.cwd else "")
    try:
        rows = con.execute(f"SELECT {columns} FROM {_quoted(table.table)} WHERE substr({_quoted(table.id)}, "
                           "1, ?) = ?", (len(prefix), prefix)).fetchall()
    except sqlite3.DatabaseError:
        rows = []
    return {str(row[0]): (str(row[1]) if len(row) > 1 and row[1] else None) for row in rows}


def cwd_file(view: View, tree: str, path: str, name: str, seq: int) -> str | None:
    """The first line of the file ``name`` (relative to ``path``'s directory) in checkpoint
    ``seq``: a session's working directory (Gemini's ``.project_root``); a damaged one is
    passed over (``View.skip``)."""
    rel = posixpath.normpath(posixpath.join(posixpath.dirname(path), name))
    if rel.startswith(("../", "/")) or rel in ("..", "."):
        return None
    try:
        root = view.manifest(seq).trees[tree].root
        entry = lookup(view, root, [rel]).get(rel)
        if entry is None or entry.kind != KIND_FILE or entry.size > CWD_FILE_BYTES:
            return None
        data = b"".join(read_blobs(entry, view.repo))
    except DAMAGE as err:
        view.skip(f"{shown(tree + '/' + rel)} in checkpoint {seq} is unreadable ({err})")
        return None
    line = data.decode("utf-8", "replace").strip().partition("\n")[0]
    return line or None


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _place(path: str, kind: PlaceKind, versions: list[Version]) -> Place:
    present = [v for v in versions if v.kind is not None]
    return Place(path=path, kind=kind, first=min(v.first for v in present), last=max(v.last for v in present),
                 checkpoints=sum(v.checkpoints for v in present), versions=versions)


def _first_values(view: View, entry: Entry, fields: tuple[tuple[str, ...], ...]) -> list[str | None]:
    """For each key path of ``fields`` (an empty one: skipped), the first string a
    record of the transcript holds there, reading its blobs up to the one that
    reaches ``FIRST_BYTES``."""
    found: list[str | None] = [None] * len(fields)
    wanted = {i: keys for i, keys in enumerate(fields) if keys}
    tail, read = b"", 0
    for payload in read_blobs(entry, view.repo):
        read += len(payload)
        lines = (tail + payload).split(b"\n")
        tail = lines.pop()
        for line in lines:
            record = _decoded(line)
            for i, keys in list(wanted.items()):
                value = dig(record, *keys)
                if isinstance(value, str):
                    found[i] = value
                    del wanted[i]
            if not wanted:
                return found
        if read >= FIRST_BYTES:
            break
    return found


def _decoded(line: bytes):
    try:
        return msgspec.json.decode(line)
    except msgspec.DecodeError:
        return None


