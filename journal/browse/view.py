"""What a browse command reads: manifests and index pages, each at most once, and
which checkpoint answers.

A checkpoint is chosen as ``restore --at`` chooses it (``repository/moment.py``: a
sequence number, ``latest~N``, or a time: the newest checkpoint at or before it), and past
damage as restore falls back: a checkpoint whose manifest, or whose index pages the
answer needs, fail their checks is passed over for the newest older one, with a
warning, and noted in ``skipped`` (the command then exits 3, as a fallback restore
does). Unlike restore, nothing is listed or read up front: the manifests are listed
once, and each manifest and page is read when the answer needs it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping

from ..errors import ConfigError, CorruptObject, ObjectNotFound
from .errors import BadBrowsePath, NoGoodCopy
from ..repository.errors import NoReadableCheckpoint
from ..format.index import decode_page, walk_pages
from ..format.model import BlobRef, Entry, Manifest, Page
from ..report import SILENT, Reporter
from ..repository.moment import before_oldest, checkpoint_named, parse_moment
from ..repository.repository import RecordCache, Repository, manifest_key
from .where import shown_path

#: What a damaged or missing object raises when it is read.
DAMAGE = (CorruptObject, ObjectNotFound)


class View:
    """The checkpoints of one store as one command reads them (see the module docstring)."""

    def __init__(self, repo: Repository, op: str, reporter: Reporter = SILENT, *,
                 manifests: MutableMapping[int, Manifest | Exception] | None = None,
                 pages: MutableMapping[str, Page] | None = None, records: RecordCache | None = None):
        """``manifests``, ``pages`` and ``records`` (whole page records, a delta's base):
        where what is read is kept, by default for the whole command (records up to 64
        MiB); a long-lived reader (``mount``) passes smaller bounded ones, and what is
        dropped from them is read again when next needed."""
        self.repo = repo
        self.op = op
        self.reporter = reporter
        self.skipped: list[str] = []    # checkpoints passed over past damage, and why: the answer is a fallback
        self._seqs: list[int] | None = None
        self._manifests = {} if manifests is None else manifests
        self._pages = {} if pages is None else pages
        self._records = RecordCache() if records is None else records  # a delta's base is read once

    @property
    def seqs(self) -> list[int]:
        """Every checkpoint in the store, ascending (one listing of ``manifests/``)."""
        if self._seqs is None:
            self._seqs = self.repo.manifest_seqs()
        return self._seqs

    def forget_listing(self) -> None:
        """List ``manifests/`` again at the next ``seqs``: a long-lived reader sees new
        checkpoints, and no more those gc deleted."""
        self._seqs = None

    def manifest(self, seq: int) -> Manifest:
        """Manifest ``seq``, read and checked once; raises ``CorruptObject``/``ObjectNotFound``."""
        got = self._manifests.get(seq)
        if got is None:
            try:
                got = self.repo.load_manifest(seq)[0]
            except DAMAGE as err:
                got = err
            self._manifests[seq] = got
        if isinstance(got, Exception):
            raise got
        return got

    def manifest_once(self, seq: int) -> Manifest:
        """Manifest ``seq`` as ``manifest`` gives it, but not kept if it was not already:
        for a reader that meets each checkpoint once (``find`` over a week of them would
        otherwise hold every manifest until it ends)."""
        got = self._manifests.get(seq)
        if got is None:
            return self.repo.load_manifest(seq)[0]
        if isinstance(got, Exception):
            raise got
        return got

    def fetch_page(self, ref: BlobRef, key: str) -> Page:
        """One index page, read, verified and checked (``index.decode_page``); not kept."""
        return decode_page(self.repo.read_page(ref, self._records)[0], key)

    def load_page(self, ref: BlobRef, key: str) -> Page:
        """One index page as ``fetch_page`` gives it, kept by id: a page two checkpoints
        share (the same id: the same subtree) is read once."""
        page = self._pages.get(ref.id)
        if page is None:
            page = self._pages[ref.id] = self.fetch_page(ref, key)
        return page

    def entries(self, root: BlobRef | None, prune: Callable[[str, str | None], bool]) -> Iterator[Entry]:
        """The entries of the pages of the tree under ``root`` that ``prune`` keeps, in path order."""
        if root is None:
            return
        for _, page in walk_pages(root, self.load_page, prune):
            yield from page.entries

    def skip(self, note: str) -> None:
        """Note (and warn) that something damaged was passed over."""
        self.skipped.append(note)
        self.reporter.warn(f"{self.op}: {note}; passed over")

    def pass_over(self, seq: int, what: str, err: Exception) -> None:
        """Note (and warn) that checkpoint ``seq`` cannot answer: ``what`` in it is damaged."""
        note = f"checkpoint {seq} is unusable ({what}: {err})"
        self.skipped.append(note)
        self.reporter.warn(f"{self.op}: {note}; trying an older one")

    def is_fork(self, seq: int) -> bool:
        """Whether manifest ``seq`` is a fork (False for one that cannot be read)."""
        try:
            return self.manifest(seq).is_fork
        except DAMAGE:
            return False

    def candidates(self, at: str | None, flag: str = "--at") -> Iterator[tuple[int, Manifest]]:
        """The readable checkpoints at or before ``at`` (all of them without it), newest
        first; a fork (design §11, "Lineage") only when ``at`` is its number. A manifest
        that cannot be read is passed over (``pass_over``) when an older one answers in
        its place. Raises ``ConfigError`` for an ``at`` that names no checkpoint the
        store holds, or a time before the oldest (or no checkpoint at all),
        ``NoReadableCheckpoint`` when none reads."""
        seqs = self.seqs
        if not seqs:
            raise ConfigError(f"{self.op}: the store holds no checkpoint yet; `journal checkpoint` makes one")
        moment = None if at is None else parse_moment(at, self.op, flag)
        at_seq = None if moment is None else checkpoint_named(moment, seqs, self.is_fork, self.op, flag)
        at_ns = None if moment is None else moment.last_ns
        pool = [s for s in seqs if at_seq is None or s <= at_seq]
        unreadable: list[tuple[int, Exception]] = []
        found = False
        for seq in reversed(pool):
            try:
                manifest = self.manifest(seq)
            except DAMAGE as err:
                unreadable.append((seq, err))
                continue
            if at_ns is not None and manifest.created_ns > at_ns:
                unreadable.clear()  # those were after ``at`` too: checkpoints are made in order
                continue
            if manifest.is_fork and seq != at_seq:
                continue  # off the main line: read only when asked for by its number
            for bad, err in unreadable:
                self.pass_over(bad, "its manifest", err)
            unreadable.clear()
            found = True
            yield seq, manifest
        if found:
            return
        if unreadable:
            raise NoReadableCheckpoint(self.op, len(unreadable), manifest_key(unreadable[0][0]), str(unreadable[0][1]))
        raise before_oldest(self.op, flag, at, seqs)

    def answer(self, at: str | None, tree: str, read: Callable[[int, BlobRef | None], object],
               flag: str = "--at") -> tuple[int, object]:
        """``(seq, read(seq, root))`` for the newest checkpoint at or before ``at`` whose
        manifest reads and whose pages ``read`` reads (under the root of ``tree`` there)
        are sound; each one passed over is noted. ``BadBrowsePath`` when that checkpoint
        holds no tree ``tree``; ``NoGoodCopy`` when no checkpoint is sound."""
        last: Exception | None = None
        for seq, manifest in self.candidates(at, flag):
            if tree not in manifest.trees:
                held = ", ".join(sorted(manifest.trees)) or "no tree"
                raise BadBrowsePath(self.op, shown_path(tree, ""), f"no such tree in checkpoint {seq} (it holds "
                                                                   f"{held}); `journal ls` lists the trees")
            try:
                return seq, read(seq, manifest.trees[tree].root)
            except DAMAGE as err:
                self.pass_over(seq, f"tree {tree}", err)
                last = err
        raise NoGoodCopy(self.op, shown_path(tree, ""), f"the index of every checkpoint is damaged: {last}")
