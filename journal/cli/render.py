"""The words every command uses (design §10, "One vocabulary"):

*files* (every entry but directories), *directories*, *deletions* (vanished paths a
checkpoint drops) and *bytes uploaded* (the manifest included), said the same way by
``checkpoint``, ``log``, ``status``, ``restore`` and the browse commands; ``--json``
uses the same names. Every count is a number and its noun (``count``: ``1 file``,
``3 files``, never ``file(s)``), every number has thousands separators (``number``).
"""

from __future__ import annotations

import datetime as _dt
import time

from ..paths import shown
from .output import count, number, plural  # noqa: F401 (the helpers every command prints with)


def changes(files: int, dirs: int, files_deleted: int, dirs_deleted: int) -> str:
    """``3 files and 1 directory changed, 2 files and 0 directories deleted``."""
    deleted = (f"{count(files_deleted, 'file')} and {count(dirs_deleted, 'directory')} deleted"
               if files_deleted or dirs_deleted else "nothing deleted")
    return f"{count(files, 'file')} and {count(dirs, 'directory')} changed, {deleted}"


def uploaded(objects: int, nbytes: int) -> str:
    return f"{count(objects, 'object')} and {count(nbytes, 'byte')} uploaded"


def checkpoint_line(rec) -> str:
    """One committed checkpoint, from a ``CheckpointRecord``."""
    return f"checkpoint {rec.seq}: {checkpoint_did(rec)}"


def checkpoint_did(rec) -> str:
    what = changes(rec.files_changed, rec.directories_changed, rec.files_deleted, rec.directories_deleted)
    return f"{what}; {uploaded(rec.objects_uploaded, rec.bytes_uploaded)} in {rec.seconds:.2f}s"


def held_line(held: int) -> str:
    return (f"held back: {count(held, 'vanished file')} kept in the checkpoint (the warning above says why); "
            "`journal checkpoint --allow-deletions` drops them")


def when(t: float | None, now: float | None = None) -> str:
    """``2026-12-04 20:01:02 UTC (3m ago)``."""
    if t is None:
        return "-"
    stamp = _dt.datetime.fromtimestamp(t, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"{stamp} ({ago((time.time() if now is None else now) - t)})"


def ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit} ago"
    return f"{seconds:.0f}s ago"


def status_lines(rep, now: float | None = None) -> list[str]:
    """``journal status`` as text, from a ``StatusReport``."""
    now = time.time() if now is None else now
    lines = supervisor_lines(rep.supervisor, rep.status, now)
    rec = rep.last_checkpoint
    if rec is None:
        lines.append("last checkpoint: none recorded")
    else:
        lines.append(f"last checkpoint: {rec.seq} at {when(rec.time, now)}: {checkpoint_did(rec)}")
    lines.append(f"last successful run: {when(rep.last_success, now)}")
    lines.append(f"lag since last success: {'-' if rep.lag_seconds is None else f'{rep.lag_seconds:.1f}s'}")
    err = rep.last_error
    if err is None:
        lines.append("last error: none")
    else:
        after = (f"cleared: a later run succeeded at {when(err.cleared_at, now)}" if err.cleared
                 else "NOT cleared: nothing has succeeded since")
        lines.append(f"last error: {when(err.time, now)}, {err.op}: {err.message}")
        lines.append(f"  {after}")
    rs = rep.restore
    if rs is not None:
        how = "INCOMPLETE" if not rs.complete else "complete from a FALLBACK" if rs.fallback else "complete"
        if rs.include:
            how = f"PARTIAL (only {', '.join(map(repr, rs.include))}), {how}"
        trees = ", ".join(f"{name} from {'-' if seq is None else seq}" for name, seq in sorted(rs.trees.items()))
        lines.append(f"last restore: {how}, at {when(rs.time, now)}, newest checkpoint "
                     f"{'-' if rs.seq is None else rs.seq}{': ' + trees if trees else ''}")
        lines += [f"  fallback: {note}" for note in rs.notes]
        if rs.lineage == "stale":
            lines.append("  this disk was stale (the store had moved on): the live trees became the newest checkpoint")
        if rs.fork is not None:
            lines.append(f"  FORK {rs.fork}: {rs.fork_note}")
    size = rep.local_state
    lines.append(f"local state: {count(size.bytes, 'byte')} (chunks {number(size.chunks)}, sqlite-base "
                 f"{number(size.sqlite_base)}, maps {number(size.maps)}, pages {number(size.pages)})"
                 + share_of_live(size))
    sup = rep.supervisor
    if sup.input_socket:
        lines.append(f"input socket: {sup.input_socket}" + (" (served)" if sup.input_served
                                                             else f" NOT SERVED: {sup.input_error}"))
    lines += [f"warning: {w}" for w in rep.warnings]
    return lines


def share_of_live(size) -> str:
    """``; 41% of the live trees' 75,431,226 bytes`` (a ``LocalSize``); nothing when the
    local state records no tree."""
    if not size.live:
        return ""
    return f"; {size.share:.0%} of the live trees' {count(size.live, 'byte')}"


def supervisor_lines(sup, recorded, now: float) -> list[str]:
    """The supervisor as ``judge_supervisor`` found it (a ``SupervisorReport``), and what
    of its record is stale."""
    if sup.state == "running":
        timer = f", a checkpoint every {sup.interval:g}s" if sup.interval else ""
        cmd = f"CMD pid {sup.cmd_pid}" if sup.cmd_pid else "CMD not started"
        return [f"supervisor: running, pid {sup.pid} ({cmd}{timer})"]
    if sup.state == "died":
        lines = [f"supervisor: NOT RUNNING (started {when(recorded.started, now)}, no stop recorded); "
                 "status.json is stale:"]
        return lines + [f"  stale: {item}" for item in sup.stale]
    if sup.state == "stopped":
        return [f"supervisor: not running (stopped {when(recorded.stopped, now)})"]
    return ["supervisor: not running"]


#: What ``journal log`` says once, under its table, when a row is marked ``EXPIRED``.
EXPIRED_NOTE = ("EXPIRED: a gc tombstone names the checkpoint; a gc after the grace period deletes it "
                "(`journal restore --at` may still use it until then)")


def log_lines(entries) -> list[str]:
    """``journal log`` as text, from ``ManifestInfo``s (newest first). An expired
    checkpoint's row ends in ``EXPIRED``, said once under the table (``EXPIRED_NOTE``)."""
    lines = [f"{'seq':>6}  {'time':24}  {'host':16} {'files':>7} {'size':>13} {'uploaded':>11} {'objects':>7}"]
    for e in entries:
        mark = "  EXPIRED" if e.expired else ""
        if e.error:
            lines.append(f"{e.seq:>6}  UNREADABLE: {e.error}{mark}")
            continue
        lines.append(f"{e.seq:>6}  {e.created:24}  {e.host[:16]:16} {number(e.files):>7} {number(e.size):>13} "
                     f"{number(e.bytes_uploaded):>11} {number(e.objects_uploaded):>7}{mark}")
        if e.fork is not None:
            lines.append(f"{'':>6}  FORK of checkpoint {e.parent or 0}, not on the main line: {e.fork}; "
                         f"`journal ls --at {e.seq}` shows it")
        for name, why in sorted(e.restored.items()):
            lines.append(f"{'':>6}  RESTORED {name}: {why}")
    if any(e.expired for e in entries):
        lines.append(EXPIRED_NOTE)
    return lines


def tally(what: dict[str, int]) -> str:
    """Counts by label, as ``--json`` names them: ``1 same, 2 write``."""
    return ", ".join(f"{number(n)} {label}" for label, n in sorted(what.items()))


def restored_line(t, dry_run: bool) -> str:
    """One tree of ``journal restore``, from a ``TreeRestore``: its files and its
    directories counted apart, each by what was done (``actions``, ``directories``)."""
    parts = [f"{count(sum(t.actions.values()), 'file')} ({tally(t.actions) or 'none'})"]
    if t.directories:
        parts.append(f"{count(sum(t.directories.values()), 'directory')} ({tally(t.directories)})")
    verb = "would restore" if dry_run else "restored"
    return (f"{t.name}: {verb} from checkpoint {t.seq} into {t.dest}: {', '.join(parts)}; "
            f"{count(t.bytes, 'byte')} {'to write' if dry_run else 'written'}")


def verify_lines(result) -> list[str]:
    """``journal verify`` as text, from a ``VerifyResult``: each finding, the orphans,
    and a summary that counts with ``--json``'s names (``packs_hashed``: packs hashed;
    ``blobs``: blobs hashed; ``snapshots``: snapshots checked; a finding's severity:
    errors and warnings)."""
    from ..verify import WARNING

    lines = []
    for f in result.findings:
        where = f"manifest {f.manifest}" if f.manifest is not None else "store"
        lines.append(f"{'warning: ' if f.severity == WARNING else ''}{f.kind}: {where}: {f.key}: {f.detail}")
    if result.orphans:
        lines.append(f"orphans: {count(result.orphans, 'pack')} ({count(result.orphan_bytes, 'byte')}) that no "
                     f"checkpoint names, {number(result.orphans_marked)} of them marked by a gc tombstone; "
                     "`journal gc` deletes them (information, not damage)")
    what = [count(result.manifests, "manifest"), count(result.pages, "page"), count(result.packs, "pack")]
    if result.inputs:
        what.append(count(result.inputs, "input"))
    if result.full:
        what += [f"{count(result.packs_hashed, 'pack')} hashed", f"{count(result.blobs, 'blob')} hashed",
                 f"{count(result.snapshots, 'snapshot')} checked"]
    warnings = len(result.findings) - len(result.errors)
    what.append(count(len(result.errors), "error"))
    if warnings:
        what.append(count(warnings, "warning"))
    lines.append(f"{'ok' if result.ok else 'FINDINGS'}: {', '.join(what)}")
    if result.sample is not None:
        lines.append(f"sample: {result.sample:g}% of the packs checkpoints reach, {number(result.packs_sampled)} "
                     f"(--seed {result.seed} draws the same ones): {number(result.packs_hashed)} hashed, "
                     f"{count(result.blobs, 'blob')} hashed")
    return lines


#: Why ``journal gc`` tombstones an object, by its tombstone item's kind.
_TOMBSTONE_WHY = {"manifest": "expired checkpoint", "forgotten": "checkpoint `journal forget` named",
                  "pack": "no kept checkpoint needs it", "orphan": "no checkpoint ever named it",
                  "input": "expired input"}


def gc_lines(plan, result, dry_run: bool, grace: str) -> list[str]:
    """``journal gc`` as text, from its ``GcPlan`` and (unless ``dry_run``) ``GcResult``;
    ``grace`` as the command line gave it (``24h``)."""
    verb = "would" if dry_run else "will"
    lines = [f"keep {count(len(plan.kept), 'checkpoint')}: " + ", ".join(str(s) for s in sorted(plan.kept)),
             f"expire {count(len(plan.expire), 'checkpoint')}: " + (", ".join(str(s) for s in plan.expire) or "none")]
    if plan.unreadable:
        lines.append(f"left alone (unreadable): {', '.join(str(s) for s in plan.unreadable)}")
    for seq, parent in sorted(plan.forks.items()):
        fate = "; ".join(plan.kept[seq]) if seq in plan.kept else f"{verb} expire: its parent is not kept"
        lines.append(f"  fork {seq} (built on checkpoint {parent}): {'kept: ' if seq in plan.kept else ''}{fate}")
    if plan.explained:
        lines.append("why, checkpoint by checkpoint (newest first):")
        lines += [f"  {v.seq}  {v.created or '-'}  {v.decision}: {'; '.join(v.why)}" for v in plan.explained]
    lines += _tombstone_lines(plan)
    also = " or by this run (--yes)" if plan.sweep_marked else ""
    lines.append(f"delete {count(plan.delete_count, 'object')} tombstoned more than {grace} ago{also}: "
                 f"{count(plan.bytes_freed, 'byte')} {verb} be freed")
    lines += [f"  e.g. {item.key} ({item.kind}, {count(item.bytes, 'byte')})" for item in plan.delete[:3]]
    if plan.waiting:
        lines.append(f"wait: {count(plan.waiting, 'orphan pack')}, kept until a checkpoint newer than the mark is "
                     "committed (an upload in flight when it was made may still commit)")
    later = _later_line(plan, dry_run, grace) if plan.tombstone_count else None
    if later:
        lines.append(later)
    samples = list(plan.kept_samples.items())[:5]
    if samples:
        lines.append("kept packs (a sample), each with what needs it:")
        lines += [f"  kept {key}: {why}" for key, why in samples]
    if result is not None:
        lines += _gc_done(result)
    return lines


def _tombstone_lines(plan) -> list[str]:
    """What a gc tombstones: counts, bytes, kinds and a few examples."""
    lines = [_tombstoned(plan.tombstone_count, plan.tombstone_bytes, plan.tombstone_kinds)]
    return lines + [f"  e.g. {item.key} ({count(item.bytes, 'byte')}): {_TOMBSTONE_WHY.get(item.kind, item.kind)}"
                    for item in plan.tombstone[:3]]


def _tombstoned(objects: int, nbytes: int, kinds: dict) -> str:
    """``tombstone 14 objects (1,024 bytes): 2 forgotten, 12 packs``."""
    named = ", ".join(count(n, "forgotten checkpoint" if kind == "forgotten" else str(kind))
                      for kind, n in sorted(kinds.items()))
    return f"tombstone {count(objects, 'object')} ({count(nbytes, 'byte')})" + (f": {named}" if named else "")


def _later_line(plan, dry_run: bool, grace: str) -> str | None:
    """When what this run tombstones goes: without ``--yes`` a gc never sweeps the
    tombstones it writes itself (design §16), so the next run past the grace deletes it;
    orphans wait for a newer checkpoint too. With it, only what waits is left (None: nothing)."""
    marks = "would tombstone" if dry_run else "tombstoned"
    if plan.sweep_marked:
        waits = [what for kind, what in (("orphan", "its orphan packs, once a checkpoint newer than its mark is "
                                                    "committed"), ("input", "the markers of the inputs it deletes"))
                 if plan.tombstone_kinds.get(kind)]
        return f"later: of what this run {marks}, a later `journal gc` deletes {' and '.join(waits)}" if waits else None
    when = "the next `journal gc`" if not plan.grace_seconds else f"a `journal gc` run at least {grace} from now"
    orphans = (" (orphan packs: once a newer checkpoint is committed too)"
               if plan.tombstone_kinds.get("orphan") else "")
    return (f"later: what this run {marks} is deleted by {when}{orphans}; a gc never deletes what it "
            "tombstoned itself, even with --grace 0")


def _gc_done(result) -> list[str]:
    first, written = result.tombstone_key or "none", result.tombstones_written
    if written > 1:
        first = f"{first}+{written - 1}"  # the first key, and how many more: one word
    lines = []
    if result.protected:
        lines.append(f"kept {count(result.protected, 'planned deletion')}: a checkpoint committed during gc "
                     "needs them")
    lines.append(f"done: tombstone {first}, deleted {count(result.deleted, 'object')}, "
                 f"{count(result.bytes_freed, 'byte')} freed, {count(result.tombstones_removed, 'tombstone')} swept"
                 + (f" ({number(result.tombstones_rewritten)} written again with only what still waits)"
                    if result.tombstones_rewritten else ""))
    if result.lease_renewals:
        lines.append(f"the gc lease was renewed {count(result.lease_renewals, 'time')} during this long run")
    return lines


#: A line to print, and whether it goes to stderr (a warning, a failure's last word).
Said = tuple[str, bool]


def restore_lines(result) -> list[Said]:
    """``journal restore`` as text, from a ``RestoreResult``: each tree (what was
    restored, lost, taken out), the warnings (stderr), and how the restore ended
    (INCOMPLETE on stderr; a FALLBACK says its exit status)."""
    from .base import EXIT_FALLBACK

    dry_run = result.dry_run
    said: list[Said] = []
    if not result.trees:
        said.append(("nothing to restore: the store has no checkpoint of a configured tree", False))
    for t in result.trees:
        if t.error:
            said.append((f"{t.name}: FAILED: {t.error}", False))
            continue
        said.append((restored_line(t, dry_run), False))
        if dry_run:   # a partial restore: what its patterns select
            said += [(f"  {t.name}/{shown(path)}", False) for path in t.included]
        for path in t.lost:
            why = f"refused: {t.refused[path]}" if path in t.refused else "no good copy in any checkpoint"
            said.append((f"{t.name}: LOST {shown(path)}: {why}", False))
        said += [(f"{t.name}: LOST {shown(path)}: too long a path to create under {t.dest}", False)
                 for path in t.uncreatable]
        said += [(f"{t.name}: {'would take out' if dry_run else 'took out'} {shown(path)} (not in checkpoint "
                  f"{t.seq})", False) for path in t.removed]
    said += [(f"warning: {w}", True) for w in result.warnings]
    would = "dry run, nothing was changed: the restore would be" if dry_run else "restore"
    if result.include:
        paths = sum(len(t.included) for t in result.trees)
        would = would.replace("restore", f"restore of {count(paths, 'path')} matching "
                                         f"{', '.join(map(repr, result.include))}", 1)
    if not result.complete:
        said.append((f"{would} INCOMPLETE", True))
    elif result.fallback:
        said.append((f"{would} complete from a FALLBACK (exit {EXIT_FALLBACK}): "
                     f"{'; '.join(result.fallback_notes())}", False))
    else:
        said.append((f"{would} complete", False))
    return said


def init_lines(store: str, repo, key, other) -> list[Said]:
    """``journal init`` as text: the store ready (opened with which key), and, on
    stderr, the store this machine still follows (``other``, from ``followed``)."""
    said = [(f"store {store} ready (id {repo.store_id}"
             + (f", encrypted; opened with {key.describe()})" if repo.codec.encrypted else ")"), False)]
    if other is not None:
        said.append((f"note: this machine still follows store {other.store_id} (it knew checkpoint {other.seq} "
                     f"there) and goes on checkpointing to it; to follow this store instead, run `journal takeover` "
                     f"with this store configured", True))
    return said


def takeover_lines(result) -> list[str]:
    """``journal takeover`` as text, from a ``TakeoverResult``: the checkpoint taken over,
    and the store or the checkpoints this machine leaves behind."""
    if result.seq:
        lines = [f"took over store {result.store_id} after checkpoint {result.seq} ({result.previous_writer}); "
                 "the next `journal checkpoint` publishes this container's files"]
    else:
        lines = [f"took over store {result.store_id}, which holds no checkpoint; the next `journal checkpoint` "
                 "publishes this container's files as checkpoint 1"]
    if result.left_store is not None:
        lines.append(f"this machine no longer follows store {result.left_store} (it knew checkpoint "
                     f"{result.left_seq} there); that store is left as it is")
    elif result.left_seq is not None:
        one = result.left_seq == result.seq + 1
        gone = f"checkpoint {result.left_seq}" if one else f"checkpoints {result.seq + 1}-{result.left_seq}"
        lines.append(f"{gone}, which this machine knew, {'is' if one else 'are'} not in the store any more; "
                     "left behind")
    return lines


def trees_lines(cfg) -> list[str]:
    """``journal trees`` as text, from the effective ``Config``: where each setting
    points, and each tree with the rules it adds to the defaults."""
    from ..config import DEFAULT_JSONL, no_trees_hint

    lines = [f"config:    {cfg.source or '(none: presets only)'}",
             f"store:     {cfg.store}{' (the default: JOURNAL_STORE is not set)' if cfg.default_store else ''}",
             f"local:     {cfg.local or '(unset: set AM_LOCAL)'}",
             f"state dir: {cfg.state_dir}",
             f"interval:  {cfg.interval:g}s",
             f"inputs:    at most {cfg.input_limit:,} bytes each; socket {cfg.input_socket}"]
    if not cfg.trees:
        lines.append(f"trees:     none: {no_trees_hint(cfg, in_trees=True)}")
    for t in cfg.trees:
        extra = f"  exclude {', '.join(t.exclude)}" if t.exclude else ""
        jsonl = [p for p in t.jsonl if p not in DEFAULT_JSONL]   # every tree reads *.jsonl and *.ndjson so
        if jsonl:
            extra += f"  jsonl {', '.join(jsonl)}"
        if t.sqlite:
            extra += f"  sqlite {', '.join(t.sqlite)}"
        lines.append(f"  {t.name:10} {t.path}{extra}")
    return lines


def forget_lines(done) -> list[str]:
    """``journal forget`` as text, from its ``Forgotten``."""
    verb = "would forget" if done.dry_run else "forgot"
    lines = [f"{verb} {count(len(done.forgotten), 'checkpoint')}: "
             + (", ".join(str(s) for s in done.forgotten) or "none")]
    if done.already:
        lines.append(f"  forgotten before: {', '.join(str(s) for s in done.already)}")
    lines += [f"  fork {fork} (built on checkpoint {parent}) is no longer kept with its parent: gc keeps it while it "
              f"is newer than the oldest checkpoint kept (`journal forget {fork}` forgets it too)"
              for fork, parent in done.forks.items()]
    lines.append(_tombstoned(done.tombstoned, done.tombstone_bytes, done.tombstone_kinds))
    if done.tombstoned:
        lines.append("later: a `journal gc` past its --grace deletes them (and `gc --grace 0 --yes` at once); "
                     "no --keep-* rule keeps a forgotten checkpoint again")
    if done.tombstone_key:
        lines.append(f"done: tombstone {done.tombstone_key}")
    return lines
