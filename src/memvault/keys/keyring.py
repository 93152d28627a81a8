"""The keyring: wrapped per-version data keys and the MAC-chained record of commits, key
destructions, rotations and access-time files (the freshness high-water mark).

It lives beside the git repository, outside history, because it must stay mutable: destroying one
data key (crypto-shredding) makes one version unreadable without rewriting any commit. The file is
a header and framed records (DEK, COMMIT, ABORT, TOMBSTONE, DESTROY, EPOCH, ATIMES, and a side
branch's BRANCH_KEYS and BRANCH, whose meaning :mod:`~memvault.keys.marks` keeps), appended under
the store lock, rewritten only by a redaction or a rotation; docs/format.md §3 gives every byte and
every reading rule.
"""

from __future__ import annotations

import copy
import json
import os
import stat
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from .. import crypto
from ..errors import IntegrityError, MemvaultError, read_failure
from ..fsutil import durable_flush, opened, write_all
from . import framing as fr
from . import keyfile
from .framing import commit_fields, frame_records
from .keyfile import MAX_KEYRING_BYTES
from .marks import BranchMarks, HighWater, freshness_problem
from .sealedkeys import SealedKeys

__all__ = ["Keyring", "KeyringScan", "HighWater", "ZERO_ID", "freshness_problem"]

_DEK_AAD = b"memvault/v1/dek"
_HW_MAC = b"memvault/v1/hw"
_ABORT_MAC = b"memvault/v1/abort"
_TOMBSTONE_AAD = b"memvault/v1/tombstone"
_DESTROY_MAC = b"memvault/v1/destroy"
_EPOCH_MAC = b"memvault/v1/epoch"
_EPOCH_BODY = struct.Struct(">I32s")
_ATIMES_MAC = b"memvault/v1/atimes"
_ATIMES_BODY = struct.Struct(">32s32s")
_NO_MAC = bytes(32)
#: Parent id of the first commit.
ZERO_ID = b"0" * 40
#: Records that count only with the record closing their append: ``closers -> members``.
_GROUP_MEMBERS = {
    (fr.COMMIT, fr.COMMIT_RAW): (fr.DESTROY, fr.EPOCH),
    (fr.BRANCH,): (fr.BRANCH_KEYS, fr.DEK),
}


#: DEK records in a row, outside any group, that a read takes in as one run (docs/format.md §3.3).
_RUN_RECORDS = 256


def _read_error(err: OSError) -> MemvaultError:
    """What a failed open or read of the keyring means (:func:`~memvault.errors.read_failure`)."""
    return read_failure(err, what="The store's keyring", damaged="The store's keyring cannot be read.")


@dataclass(frozen=True)
class KeyringScan:
    """The records :meth:`Keyring.scan` framed: data key records ``dek_id -> (epoch, sealed)``,
    commit records ``commit_id -> (seq, parent_id)``, and how many bytes of a torn tail follow."""

    deks: dict[bytes, tuple[int, bytes]]
    commits: dict[bytes, tuple[int, bytes]]
    torn_bytes: int


class Keyring:
    """Reader/appender of the keyring file. Not thread-safe by itself; the store serialises."""

    def __init__(
        self,
        path: Path,
        store_id: bytes,
        wrap_keys: dict[int, bytes],
        mac_key: bytes,
        tombstone_key: bytes | None = None,
    ) -> None:
        self._path = path
        self._store_id = store_id
        self._wrap_keys = wrap_keys
        self._wrap_openers: dict[int, Callable[[bytes, bytes], bytes]] = {}  #: epoch -> cipher set up once
        self._mac_key = mac_key
        self._tombstone_key = tombstone_key
        #: Called before the file is rewritten (a redaction's purge, a rotation): the store's
        #: commit journal makes everything durable and wipes its entries then.
        self.before_rewrite: Callable[[], None] | None = None
        self._reset()

    def _reset(self) -> None:
        self._sealed = SealedKeys()
        self._deks: dict[bytes, bytes] = {}
        self._tombstones: dict[bytes, bytes] = {}
        self._offset = fr.HEADER.size
        self._chain = _NO_MAC
        self._inode: tuple[int, int] | None = None
        self.high_water: HighWater | None = None
        self._previous: HighWater | None = None
        #: The side branches' records read so far: their data keys and high-water marks.
        self.branches = BranchMarks(self._mac_key, self._store_id)
        #: The newest key epoch any data key record is wrapped under (0: none yet). A rotation
        #: re-wraps every data key under the new epoch, so a record of an older epoch was written
        #: after it by a process that did not know of it.
        self.newest_epoch = 0
        #: The newest epoch an EPOCH record announces (0: none).
        self.announced_epoch = 0
        #: SHA-256 of the access-time file as the last ATIMES record names it (None: no record).
        self.atimes_digest: bytes | None = None
        #: Data keys a DESTROY record destroyed: ``dek_id -> sealed info``.
        self._destroyed: dict[bytes, bytes] = {}
        #: DESTROY records since the last COMMIT or ABORT, and those of the last COMMIT (an ABORT
        #: of that commit takes them back): ``(dek_id, the DEK record they removed or None)``.
        self._destroying: list[tuple[bytes, bytes | None]] = []
        self._destroyed_by_last: list[tuple[bytes, bytes | None]] = []

    @staticmethod
    def create(path: Path, store_id: bytes, *, durable: bool) -> None:
        """Make a new keyring file (:func:`.keyfile.create`)."""
        keyfile.create(path, store_id, durable=durable)

    @property
    def size(self) -> int:
        """Bytes of complete records read so far (the append position)."""
        return self._offset

    def records(self) -> bytes:
        """The complete records of the file as read so far (after :meth:`refresh`), without the
        header: what a copy of the store elsewhere replays."""
        with open(self._path, "rb") as f:
            f.seek(fr.HEADER.size)
            return f.read(self._offset - fr.HEADER.size)

    def refresh(self) -> None:
        """Read records appended since the last call (complete records only)."""
        try:
            fd = os.open(self._path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not hang the read
        except FileNotFoundError:
            raise IntegrityError("The store's keyring is missing.") from None
        except OSError as err:
            raise _read_error(err) from None
        try:
            with os.fdopen(fd, "rb") as f:
                st = os.fstat(f.fileno())
                if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_KEYRING_BYTES:
                    raise IntegrityError("The store's keyring is not a regular file of a size memvault writes.")
                if self._inode is not None and (self._inode != (st.st_dev, st.st_ino) or st.st_size < self._offset):
                    # Rewritten by a redaction, or replaced (an older copy put back; the file system
                    # may give a new file the number of one just deleted, and a file written in
                    # place keeps its own; the keyring only grows): read it from the start.
                    self._reset()
                self._inode = (st.st_dev, st.st_ino)
                if self._offset == fr.HEADER.size:
                    magic, version, store_id = fr.HEADER.unpack(f.read(fr.HEADER.size).ljust(fr.HEADER.size, b"\0"))
                    if magic != fr.MAGIC or version != fr.VERSION or store_id != self._store_id:
                        raise IntegrityError("The store's keyring is damaged or belongs to another store.")
                f.seek(self._offset)
                data = f.read(max(0, st.st_size - self._offset))  # later appends: next refresh
        except OSError as err:
            raise _read_error(err) from None
        self._consume(data)
        self._sealed.settle()

    def _consume(self, data: bytes) -> None:
        """Parse the complete records at the start of ``data``, the bytes at :attr:`_offset`.

        Some records count only with the record their append ends with: DESTROY and EPOCH records
        with the COMMIT record that follows them, a side branch's BRANCH_KEYS records (and the DEK
        records among them) with its BRANCH record. Without it they are a torn tail, left unread
        and cut off by the next append, so a torn redaction never destroys a key its commit did
        not publish, and a torn branch write leaves no data key behind."""
        group: list[tuple[int, bytes]] = []
        closers: tuple[int, ...] = ()
        pos = group_from = 0
        while True:
            if not group and (run := fr.dek_run(data, pos, at_least=_RUN_RECORDS)):
                end = pos + run * fr.DEK_RECORD_SIZE
                self._take_run(data[pos:end])
                pos = end
                continue
            framed = fr.frame_record(data, pos)
            if framed is None:
                break
            end, rtype, body = framed
            if group and rtype in closers:
                self._apply_group(group, rtype, body)
                group = []
            elif group and rtype in _GROUP_MEMBERS[closers]:
                group.append((rtype, body))
            elif group:
                raise IntegrityError("The store's keyring is damaged.")
            elif rtype in (fr.DESTROY, fr.EPOCH, fr.BRANCH_KEYS):
                group_from, closers = pos, (fr.BRANCH,) if rtype == fr.BRANCH_KEYS else (fr.COMMIT, fr.COMMIT_RAW)
                group.append((rtype, body))
            elif rtype == fr.DEK:
                self._parse_dek(body)
            else:
                self._apply_group([], rtype, body)
            pos = end
        self._offset += group_from if group else pos

    def _take_run(self, run: bytes) -> None:
        """Take in ``run``, consecutive DEK records outside any group (:func:`.framing.dek_run`),
        as :meth:`_parse_dek` would one by one: a destroyed key's record is skipped."""
        step, head = fr.DEK_RECORD_SIZE, fr.RECORD.size
        destroyed: Iterable[bytes] = self._destroyed
        if len(self._destroyed) > 16:  # many: see which the run names before searching for each
            destroyed = self._destroyed.keys() & {run[at : at + 16] for at in range(head, len(run), step)}
        cut = sorted(at for dek_id in destroyed for at in fr.dek_records_of(run, dek_id))
        start = 0
        for at in [*cut, len(run)]:
            if at > start:
                self.newest_epoch = max(self.newest_epoch, fr.newest_dek_epoch(run[start:at]))
                self._sealed.put_run(run[start:at])
            start = at + step

    def _apply_group(self, group: list[tuple[int, bytes]], rtype: int, body: bytes) -> None:
        """Take in the records of ``group`` and the record ``(rtype, body)`` that closes it."""
        if rtype == fr.BRANCH:
            self._chain = self.branches.apply([b for t, b in group if t == fr.BRANCH_KEYS], body, self._chain)
            group = [(t, b) for t, b in group if t == fr.DEK]
        for member_type, member_body in group:
            self._parse(member_type, member_body)
        if rtype != fr.BRANCH:
            self._parse(rtype, body)

    def scan(self, *, parsed_only: bool) -> KeyringScan:
        """Frame the file's records again, tolerating damage (for ``verify``).

        Args:
            parsed_only: use only the bytes :meth:`refresh` parsed (a writer may append
                meanwhile); commit records are listed only then (their MACs were checked).
                Otherwise every data key record in the file is listed, also after damage.

        A keyring that is not a regular file of a size memvault writes gives an empty scan.
        """
        try:
            fd = os.open(self._path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)  # a FIFO must not hang
        except OSError:
            return KeyringScan({}, {}, 0)
        try:
            with os.fdopen(fd, "rb") as f:
                st = os.fstat(f.fileno())
                if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_KEYRING_BYTES:
                    return KeyringScan({}, {}, 0)
                data = f.read(st.st_size)
        except OSError:
            return KeyringScan({}, {}, 0)
        if len(data) < fr.HEADER.size:
            return KeyringScan({}, {}, 0)
        limit = self._offset if parsed_only else len(data)
        records, pos = frame_records(data[fr.HEADER.size :])
        deks: dict[bytes, tuple[int, bytes]] = {}
        commits: dict[bytes, tuple[int, bytes]] = {}
        for end, rtype, body in records:
            if end + fr.HEADER.size > limit:
                break
            if rtype == fr.DEK and len(body) == fr.DEK_SIZE:
                dek_id, epoch = fr.DEK_HEAD.unpack_from(body)
                deks[dek_id] = (epoch, body[fr.DEK_HEAD.size :])
            elif parsed_only:
                fields = commit_fields(rtype, body)
                if fields is not None:
                    seq, commit_id, parent_id, _mac = fields
                    commits[commit_id] = (seq, parent_id)
        return KeyringScan(deks, commits, len(data) - fr.HEADER.size - pos)

    def recorded_commits(self) -> dict[bytes, tuple[int, bytes]]:
        """``commit id -> (seq, parent id)`` of every commit record :meth:`refresh` read (MACs
        checked), replaced and withdrawn ones included."""
        return self.scan(parsed_only=True).commits

    def adopt(self, deks: dict[bytes, tuple[int, bytes]]) -> None:
        """Take data key records :meth:`scan` found after damage, so the versions they protect can
        still be checked; each is authenticated when used, as always."""
        for dek_id, entry in deks.items():
            self._sealed.put_if_absent(fr.DEK_HEAD.pack(dek_id, entry[0]) + entry[1])

    def _parse_dek(self, body: bytes) -> None:
        if len(body) != fr.DEK_SIZE:
            raise IntegrityError("The store's keyring is damaged.")
        dek_id, epoch = fr.DEK_HEAD.unpack_from(body)
        if dek_id in self._destroyed:
            return  # destroyed for good (a copy put back, or not yet purged): never used
        self._sealed.put(body)
        if epoch > self.newest_epoch:
            self.newest_epoch = epoch

    def _parse(self, rtype: int, body: bytes) -> None:
        if rtype == fr.DEK:
            self._parse_dek(body)
        elif rtype == fr.COMMIT or rtype == fr.COMMIT_RAW:
            fields = commit_fields(rtype, body)
            if fields is None:
                raise IntegrityError("The store's keyring is damaged.")
            seq, commit_id, parent_id, tag = fields
            crypto.mac_verify(self._mac_key, self._hw_message(seq, commit_id, parent_id), tag)
            hw = self.high_water
            if hw is not None and not (
                seq == hw.seq + 1 or (seq == hw.seq and parent_id == hw.parent_id and commit_id != hw.commit_id)
            ):
                raise IntegrityError("The store's keyring is damaged.")
            # A replacement (same seq) keeps the mark before the replaced one as "previous".
            previous = self._previous if hw is not None and seq == hw.seq else hw
            self._previous, self.high_water, self._chain = previous, HighWater(seq, commit_id, parent_id), tag
            self._destroyed_by_last, self._destroying = self._destroying, []
        elif rtype == fr.ABORT:
            if len(body) != fr.ABORT_BODY.size:
                raise IntegrityError("The store's keyring is damaged.")
            seq, commit_id, tag = fr.ABORT_BODY.unpack(body)
            crypto.mac_verify(self._mac_key, self._abort_message(seq, commit_id), tag)
            hw = self.high_water
            if hw is None or (hw.seq, hw.commit_id) != (seq, commit_id):
                raise IntegrityError("The store's keyring is damaged.")
            self.high_water, self._previous, self._chain = self._previous, None, tag
            for dek_id, entry in self._destroyed_by_last:  # the commit they came with was withdrawn
                del self._destroyed[dek_id]
                if entry is not None:
                    self._sealed.put(entry)
            self._destroyed_by_last = []
        elif rtype == fr.TOMBSTONE:
            if len(body) < 16 + crypto.SEAL_OVERHEAD:
                raise IntegrityError("The store's keyring is damaged.")
            if self._tombstone_key is not None:
                # Authenticate now: a forged tombstone must not make a live version look redacted.
                try:
                    crypto.open_sealed(self._tombstone_key, body[16:], self._tombstone_aad(body[:16]))
                except IntegrityError:
                    raise IntegrityError("The store's keyring is damaged.") from None
            self._tombstones[body[:16]] = body[16:]
            self._sealed.pop(body[:16])
            self._deks.pop(body[:16], None)
        elif rtype == fr.DESTROY:
            if len(body) < 16 + crypto.SEAL_OVERHEAD + 32:
                raise IntegrityError("The store's keyring is damaged.")
            dek_id, sealed, tag = body[:16], body[16:-32], body[-32:]
            crypto.mac_verify(self._mac_key, self._destroy_message(dek_id, sealed, self._chain), tag)
            if dek_id in self._destroyed:
                raise IntegrityError("The store's keyring is damaged.")
            self._chain = tag
            self._destroyed[dek_id] = sealed
            self._destroying.append((dek_id, self._sealed.pop(dek_id)))
            self._deks.pop(dek_id, None)
        elif rtype == fr.EPOCH:
            if len(body) != _EPOCH_BODY.size:
                raise IntegrityError("The store's keyring is damaged.")
            epoch, tag = _EPOCH_BODY.unpack(body)
            crypto.mac_verify(self._mac_key, self._epoch_message(epoch, self._chain), tag)
            self._chain = tag
            self.announced_epoch = max(self.announced_epoch, epoch)
        elif rtype == fr.ATIMES:
            if len(body) != _ATIMES_BODY.size:
                raise IntegrityError("The store's keyring is damaged.")
            digest, tag = _ATIMES_BODY.unpack(body)
            crypto.mac_verify(self._mac_key, _ATIMES_MAC + self._store_id + digest + self._chain, tag)
            self._chain = tag
            self.atimes_digest = digest
        else:
            raise IntegrityError("The store's keyring is damaged.")

    def atimes_record(self, digest: bytes) -> bytes:
        """Encode an ATIMES record naming the SHA-256 of the access-time file about to be written,
        chained to the last record read (refresh first, under the store lock)."""
        tag = crypto.mac(self._mac_key, _ATIMES_MAC + self._store_id + digest + self._chain)
        body = _ATIMES_BODY.pack(digest, tag)
        return fr.RECORD.pack(fr.ATIMES, len(body)) + body

    def _destroy_message(self, dek_id: bytes, sealed: bytes, prev: bytes) -> bytes:
        return _DESTROY_MAC + self._store_id + dek_id + crypto.sha256(sealed) + prev

    def _epoch_message(self, epoch: int, prev: bytes) -> bytes:
        return _EPOCH_MAC + self._store_id + struct.pack(">I", epoch) + prev

    def _hw_message(self, seq: int, commit_id: bytes, parent_id: bytes, prev: bytes | None = None) -> bytes:
        prev = self._chain if prev is None else prev
        return _HW_MAC + self._store_id + struct.pack(">Q", seq) + commit_id + parent_id + prev

    def _abort_message(self, seq: int, commit_id: bytes) -> bytes:
        return _ABORT_MAC + self._store_id + struct.pack(">Q", seq) + commit_id + self._chain

    def _dek_aad(self, dek_id: bytes, epoch: int) -> bytes:
        return _DEK_AAD + self._store_id + dek_id + struct.pack(">I", epoch)

    def dek(self, dek_id: bytes) -> bytes:
        """The data key ``dek_id``; :class:`IntegrityError` if absent or not authentic."""
        key = self._deks.get(dek_id)
        if key is None:
            entry = self._sealed.get(dek_id)
            if entry is None:
                self.refresh()
                entry = self._sealed.get(dek_id)
                if entry is None:
                    raise IntegrityError()
            epoch, sealed = entry
            wrap_key = self._wrap_keys.get(epoch)
            if wrap_key is None:
                # Either the record was tampered with, or another process rotated the master key
                # after this store object was opened: the same bytes, so one generic error.
                raise IntegrityError(
                    "Memory store integrity check failed, or the master key was rotated since this "
                    "store was opened (open it again)."
                )
            unwrap = self._wrap_openers.get(epoch)
            if unwrap is None:
                unwrap = self._wrap_openers[epoch] = crypto.opener(wrap_key)
            key = unwrap(sealed, self._dek_aad(dek_id, epoch))
            self._deks[dek_id] = key
        return key

    def has(self, dek_id: bytes) -> bool:
        return dek_id in self._sealed

    def forget_keys(self) -> None:
        """Drop the data keys unwrapped so far (each is unwrapped again from its record when next
        needed): after a walk of the history they are keys of versions the head no longer needs."""
        self._deks.clear()

    def dek_record(self, dek_id: bytes, dek: bytes, epoch: int) -> bytes:
        """Encode a DEK record for :meth:`append` (and remember the key)."""
        body = fr.DEK_HEAD.pack(dek_id, epoch) + crypto.seal(self._wrap_keys[epoch], dek, self._dek_aad(dek_id, epoch))
        self._deks[dek_id] = dek
        return fr.RECORD.pack(fr.DEK, len(body)) + body

    def commit_record(
        self, seq: int, commit_id: bytes, parent_id: bytes, *, raw_ids: bool = False, prev: bytes | None = None
    ) -> bytes:
        """Encode a high-water record chained to the last record read (refresh first), or to
        ``prev`` (records encoded before it for the same append); ids are 40 hex ASCII.
        ``raw_ids`` (format version 2 stores and later): type 5, the ids stored as 20 bytes."""
        tag = crypto.mac(self._mac_key, self._hw_message(seq, commit_id, parent_id, prev))
        if raw_ids:
            ids = bytes.fromhex(commit_id.decode()), bytes.fromhex(parent_id.decode())
            body = fr.COMMIT_RAW_BODY.pack(seq, *ids, tag)
            return fr.RECORD.pack(fr.COMMIT_RAW, len(body)) + body
        body = fr.COMMIT_BODY.pack(seq, commit_id, parent_id, tag)
        return fr.RECORD.pack(fr.COMMIT, len(body)) + body

    def chained_records(self, destroy: dict[bytes, dict[str, object]], epoch: int | None) -> tuple[bytes, bytes]:
        """Encode DESTROY records (``dek_id -> info``) and an EPOCH record, chained to the last
        record read (refresh first); return them and the mac of the last, which the commit record
        that follows them in the same :meth:`append` chains to (``commit_record(prev=...)``)."""
        if self._tombstone_key is None:
            raise ValueError("this keyring cannot write destroy records")
        out: list[bytes] = []
        prev = self._chain
        for dek_id in sorted(destroy):
            payload = json.dumps(destroy[dek_id], sort_keys=True, separators=(",", ":")).encode()
            sealed = crypto.seal(self._tombstone_key, payload, self._tombstone_aad(dek_id))
            prev = crypto.mac(self._mac_key, self._destroy_message(dek_id, sealed, prev))
            body = dek_id + sealed + prev
            out.append(fr.RECORD.pack(fr.DESTROY, len(body)) + body)
        if epoch is not None:
            prev = crypto.mac(self._mac_key, self._epoch_message(epoch, prev))
            body = _EPOCH_BODY.pack(epoch, prev)
            out.append(fr.RECORD.pack(fr.EPOCH, len(body)) + body)
        return b"".join(out), prev

    def branch_records(
        self, branch_id: bytes, deks: bytes, *, fork: bool, seq: int, commit_id: bytes, parent_id: bytes
    ) -> bytes:
        """The append of one commit of side branch ``branch_id`` (8 bytes) whose DEK records are
        ``deks``: BRANCH_KEYS records naming their keys, the DEK records, its BRANCH record
        (``fork``: the branch's first commit), chained to the last record read (refresh first,
        under the store lock). Ids are 40 hex digits."""
        dek_ids = [body[:16] for _end, rtype, body in frame_records(deks)[0] if rtype == fr.DEK]
        keys, branch = self.branches.encode(
            branch_id, dek_ids, fork=fork, seq=seq, commit_id=commit_id, parent_id=parent_id, chain=self._chain
        )
        return keys + deks + branch

    def abort_record(self, seq: int, commit_id: bytes) -> bytes:
        """Encode an abort of the newest high-water record (refresh first)."""
        tag = crypto.mac(self._mac_key, self._abort_message(seq, commit_id))
        body = fr.ABORT_BODY.pack(seq, commit_id, tag)
        return fr.RECORD.pack(fr.ABORT, len(body)) + body

    def accepts(self, runs: list[bytes]) -> int:
        """How many of ``runs`` (each whole framed records ending in a COMMIT record, e.g. a
        replica's log records) :meth:`append` would take in, in order, after the records read so
        far: the MAC chain and the sequence numbers are checked; nothing changes."""
        saved = dict(vars(self))
        for name, value in saved.items():  # the trial parses copies; the originals stay untouched
            if isinstance(value, (dict, list, set, SealedKeys)):
                setattr(self, name, value.copy())
            elif isinstance(value, BranchMarks):
                setattr(self, name, copy.deepcopy(value))
        accepted = 0
        try:
            for run in runs:
                self._consume(run)
                if self._offset != saved["_offset"] + sum(map(len, runs[: accepted + 1])):
                    break  # not whole records, or a DESTROY or EPOCH record without its COMMIT
                accepted += 1
        except IntegrityError:
            pass
        finally:
            vars(self).clear()
            vars(self).update(saved)
        return accepted

    def append(self, records: bytes, *, durable: bool) -> int:
        """Append encoded records in one write (caller holds the store lock); return old size.

        Any torn tail left by a crashed writer is cut off first. If the write or its sync fails
        (no space, I/O error), the file is cut back to where it was, so no record of a failed
        append survives, and the error is re-raised; if even that cut fails, the in-memory view
        is re-read from the file, so :attr:`high_water` says what the file really holds.
        """
        self._unshare()
        self.refresh()
        start = self._offset
        fd = os.open(self._path, os.O_WRONLY | os.O_NOFOLLOW)
        try:
            try:
                os.ftruncate(fd, start)
                os.lseek(fd, start, os.SEEK_SET)
                write_all(fd, records)
                if durable:
                    durable_flush(fd, data_only=True)
            except BaseException:
                self._undo_append(fd, start, durable=durable)
                raise
        finally:
            os.close(fd)
        # The file now holds exactly ``records`` from ``start`` (the caller holds the store lock):
        # take them in without reading them back. Records copied from elsewhere (a replica's
        # object storage) that do not verify are cut off again.
        try:
            self._consume(records)
        except IntegrityError:
            with opened(os.open(self._path, os.O_WRONLY | os.O_NOFOLLOW)) as fd:
                self._undo_append(fd, start, durable=durable)
            raise
        return start

    def _unshare(self) -> None:
        """A file of the keyring's own before an append (:func:`.keyfile.unshare`)."""
        if keyfile.unshare(self._path):
            self._reset()

    def _undo_append(self, fd: int, start: int, *, durable: bool) -> None:
        """After a failed append: cut the file back to ``start``, then re-read it from scratch."""
        try:
            os.ftruncate(fd, start)
            if durable:
                durable_flush(fd, data_only=True)
        except OSError:
            pass  # whatever stayed is a torn tail or complete records: the re-read below tells
        self._reset()
        try:
            self.refresh()
        except (OSError, MemvaultError):
            self._reset()  # read again from the start on next use

    # -- redaction ------------------------------------------------------------------------------

    @property
    def destroyed_ids(self) -> frozenset[bytes]:
        """The data keys DESTROY records have destroyed (read so far)."""
        return frozenset(self._destroyed)

    def is_destroyed(self, dek_id: bytes) -> bool:
        """True if a tombstone or a DESTROY record says the data key ``dek_id`` was destroyed."""
        return dek_id in self._tombstones or dek_id in self._destroyed

    def unchained_destructions(self) -> dict[bytes, dict[str, object]]:
        """``dek_id -> info`` of every key a TOMBSTONE destroyed and no DESTROY record chains yet
        (a redaction made before format version 3), to chain when the store is upgraded."""
        return {dek_id: self.tombstone(dek_id) or {} for dek_id in self._tombstones if dek_id not in self._destroyed}

    def purge(self) -> int:
        """Rewrite the keyring without the DEK records of keys a DESTROY record destroyed (left by
        an interrupted redaction, or copied back), zeroing them in the old file; return how many.
        Caller holds the store lock."""
        self.refresh()
        if not self._destroyed:  # no DESTROY record: nothing to purge (and no file to scan)
            return 0
        present = {dek_id for dek_id in self.scan(parsed_only=True).deks if dek_id in self._destroyed}

        def drop(rtype: int, record: bytes) -> bytes | None:
            return None if rtype == fr.DEK and record[fr.RECORD.size : fr.RECORD.size + 16] in present else record

        if present:
            self._rewrite(drop, b"")
        return len(present)

    def tombstone(self, dek_id: bytes) -> dict[str, object] | None:
        """``{"time", "actor", "reason"}`` if the data key ``dek_id`` was destroyed, else None."""
        sealed = self._tombstones.get(dek_id) or self._destroyed.get(dek_id)
        if sealed is None:
            return None
        if self._tombstone_key is None:
            return {}
        try:
            info = json.loads(crypto.open_sealed(self._tombstone_key, sealed, self._tombstone_aad(dek_id)))
        except (IntegrityError, ValueError, RecursionError):
            raise IntegrityError("The store's keyring is damaged.") from None
        if not isinstance(info, dict):
            raise IntegrityError("The store's keyring is damaged.")
        return dict(info)

    def _tombstone_aad(self, dek_id: bytes) -> bytes:
        return _TOMBSTONE_AAD + self._store_id + dek_id

    def destroy(self, dek_ids: set[bytes], info: dict[str, object], *, durable: bool) -> int:
        """Destroy data keys (crypto-shredding); return how many were present.

        Writes a new keyring without their DEK records, with a tombstone each (see
        :meth:`_rewrite` for how the files are swapped). Caller holds the store lock.
        """
        if self._tombstone_key is None:
            raise ValueError("this keyring cannot write tombstones")
        destroyed = 0

        def drop(rtype: int, record: bytes) -> bytes | None:
            nonlocal destroyed
            if rtype == fr.DEK and record[fr.RECORD.size : fr.RECORD.size + 16] in dek_ids:
                destroyed += 1
                return None
            return record

        payload = json.dumps(info, sort_keys=True, separators=(",", ":")).encode()
        tombstones = []
        for dek_id in sorted(dek_ids - set(self._tombstones)):
            body = dek_id + crypto.seal(self._tombstone_key, payload, self._tombstone_aad(dek_id))
            tombstones.append(fr.RECORD.pack(fr.TOMBSTONE, len(body)) + body)
        self._rewrite(drop, b"".join(tombstones))
        return destroyed

    def rewrap(self, epoch: int, progress: Callable[[int, int], None] | None = None) -> int:
        """Re-wrap every data key under the wrap key of ``epoch`` (master-key rotation); return
        how many. The old wrapped records are overwritten in the old file. Caller holds the lock."""
        wrap_key = self._wrap_keys[epoch]
        count = 0
        total = len(self._sealed)

        def rewrap_record(rtype: int, record: bytes) -> bytes | None:
            nonlocal count
            if rtype != fr.DEK:
                return record
            dek_id, old_epoch = fr.DEK_HEAD.unpack_from(record, fr.RECORD.size)
            if dek_id in self._destroyed:
                return None  # destroyed for good: dropped, never re-wrapped
            if old_epoch == epoch:
                return record
            dek = self.dek(dek_id)
            count += 1
            if progress is not None:
                progress(count, total)
            body = fr.DEK_HEAD.pack(dek_id, epoch) + crypto.seal(wrap_key, dek, self._dek_aad(dek_id, epoch))
            return fr.RECORD.pack(fr.DEK, len(body)) + body

        self._rewrite(rewrap_record, b"")
        return count

    def _rewrite(self, transform: Callable[[int, bytes], bytes | None], extra: bytes) -> None:
        """Rewrite the keyring through ``transform`` (:func:`.keyfile.rewrite`), then read it again."""
        if self.before_rewrite is not None:
            self.before_rewrite()
        keyfile.remove_leftovers(self._path)
        self.refresh()
        keyfile.rewrite(self._path, self._offset, transform, extra)
        self._reset()
        self.refresh()

    def replaced_on_disk(self) -> bool:
        """True if the keyring file is not the one last read (a redaction or rotation by another
        store object or process rewrote it)."""
        try:
            st = os.stat(self._path)
        except FileNotFoundError:
            return True
        return self._inode is not None and (self._inode != (st.st_dev, st.st_ino) or st.st_size < self._offset)

    def add_wrap_key(self, epoch: int, key: bytes) -> None:
        """Make a new epoch's wrap key known (after a master-key rotation)."""
        self._wrap_keys[epoch] = key
        self._wrap_openers.pop(epoch, None)
