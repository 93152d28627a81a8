"""A junk object in a store's log (S3: moto's server on loopback). Anyone allowed a conditional PUT
under ``log/`` can create one at the next commit's place (or further ahead), and neither memvault
nor, under the recommended bucket policy and Object Lock, the operator can remove it. What is
committed must still read on every host, writers must refuse with the recovery command, and a key
holder's void (never a keyless writer's) must let commits step over it."""

from __future__ import annotations

import contextlib
import io
import json
import secrets
import threading
from pathlib import Path

import pytest

import memvault
from conftest import FAST_KDF, PASSPHRASE
from memvault import errors
from memvault.cli import main
from memvault.errors import IntegrityError, InvalidInputError, RollbackDetectedError
from memvault.history import log
from memvault.protocol.commands import run_command
from memvault.remote import layout
from memvault.remote.layout import log_key
from memvault.verify import verify
from s3support import as_host

JUNK = b"junk a bucket writer put here"


def _create(url: str, cache: Path) -> memvault.MemoryStore:
    with as_host(cache):  # each cache directory stands for a host of its own
        return memvault.MemoryStore.create(url, passphrase=PASSPHRASE, kdf=FAST_KDF, cache_dir=cache)


def _open(url: str, cache: Path) -> memvault.MemoryStore:
    with as_host(cache):
        return memvault.MemoryStore.open(url, passphrase=PASSPHRASE, cache_dir=cache)


def _write(store: memvault.MemoryStore, name: str, text: str = "x\n") -> str:
    command = {"command": "create", "path": f"/memories/{name}", "file_text": text}
    return str(run_command(store, command, actor="tester", session="s"))


def _files(store: memvault.MemoryStore) -> dict[str, bytes]:
    snapshot = store.snapshot()
    out = {}
    for name in snapshot.child_names("/memories"):
        node = snapshot.get(f"/memories/{name}")
        assert node is not None and not node.is_dir
        out[name] = store.read_node(node)
    return out


def _keys(s3_env, prefix: str) -> list[str]:
    return [k[len(prefix) + 1 :] for k in s3_env.keys() if k.startswith(f"{prefix}/")]


def _put_if_absent(s3_env, key: str, body: bytes) -> None:
    """What a keyless bucket writer may do under the recommended policy: a conditional PUT."""
    s3_env.client.put_object(Bucket=s3_env.bucket, Key=key, Body=body, IfNoneMatch="*")


def _history(s3_env, tmp_path: Path, prefix: str, n: int = 3) -> memvault.MemoryStore:
    store = _create(s3_env.url(prefix), tmp_path / "a")
    for i in range(n):
        _write(store, f"{i}.md", f"{i}\n")
    return store


def _cli(monkeypatch, tmp_path: Path, *args: str) -> tuple[int, str]:
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)
    monkeypatch.setenv("MEMVAULT_CACHE_DIR", str(tmp_path / "operator"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(list(args))
    return status, out.getvalue()


def test_junk_at_the_next_number_stops_no_read_and_a_void_steps_over_it(
    s3_env, tmp_path: Path, monkeypatch, capsys
) -> None:
    store = _history(s3_env, tmp_path, "j")  # commits #0 to #3
    other = _open(s3_env.url("j"), tmp_path / "b")
    committed = _files(store)
    _put_if_absent(s3_env, f"j/{log_key(4)}", JUNK)
    # Reads keep working on every host, one that saw the log before and a new one.
    assert _files(store) == committed and _files(other) == committed
    fresh = _open(s3_env.url("j"), tmp_path / "c")
    assert _files(fresh) == committed and fresh.head[1] == 3
    # Writes refuse, naming the recovery command, and change nothing.
    before = sorted(s3_env.keys())
    for host in (store, other, fresh):
        with pytest.raises(errors.LogBlockedError, match=r"repair-log --void 4") as info:
            _write(host, "new.md")
        assert info.value.seq == 4 and "junk a bucket" not in str(info.value)
    assert sorted(s3_env.keys()) == before
    assert store.head[1] == 3
    report = verify(fresh)
    assert [p.code for p in report.problems if p.severity == "error"] == ["junk-log-record"]
    # The operator voids it; the junk stays where it is.
    status, out = _cli(monkeypatch, tmp_path, "--store", s3_env.url("j"), "repair-log", "--void", "4")
    assert status == 0, capsys.readouterr().err
    assert f"Voided {log_key(4)}." in out and "Nothing stops commits; the next is #4." in out
    assert s3_env.client.get_object(Bucket=s3_env.bucket, Key=f"j/{log_key(4)}")["Body"].read() == JUNK
    voids = [k for k in _keys(s3_env, "j") if k.startswith(f"{log_key(4)}.v0-")]
    assert len(voids) == 1
    # Every host commits past it, and sees the others' commits.
    assert _write(other, "after.md", "after\n").startswith("File created")
    assert f"{log_key(4, 1)}" in _keys(s3_env, "j")
    _write(store, "later.md", "later\n")
    _write(fresh, "last.md")
    for host in (store, other, fresh):
        assert _files(host) == {**committed, "after.md": b"after\n", "later.md": b"later\n", "last.md": b"x\n"}
        assert [e.seq for e in log(host)] == [6, 5, 4, 3, 2, 1, 0]
        assert host.head[1] == 6
    report = verify(_open(s3_env.url("j"), tmp_path / "d"))
    assert report.ok, report.problems
    assert [p.code for p in report.problems] == ["voided-log-record"]
    for host in (store, other, fresh):
        host.close()


def test_junk_further_ahead_stops_no_read_and_writers_pass_it_once_voided(s3_env, tmp_path: Path, monkeypatch) -> None:
    store = _history(s3_env, tmp_path, "g")  # #0 to #3; the next is #4
    committed = _files(store)
    _put_if_absent(s3_env, f"g/{log_key(9)}", JUNK)
    fresh = _open(s3_env.url("g"), tmp_path / "b")
    assert _files(fresh) == committed and _files(store) == committed
    with pytest.raises(errors.LogBlockedError, match=r"repair-log --void 9 --yes") as info:
        _write(fresh, "n.md")
    assert "delete markers" in str(info.value)
    assert fresh.head[1] == 3
    # It cannot be authenticated: voiding it needs --yes, and nothing is written without.
    before = sorted(s3_env.keys())
    status, _out = _cli(monkeypatch, tmp_path, "--store", s3_env.url("g"), "repair-log", "--void", "9")
    assert status == 2 and sorted(s3_env.keys()) == before
    status, out = _cli(monkeypatch, tmp_path, "--store", s3_env.url("g"), "repair-log", "--void", "9", "--yes")
    assert status == 0 and f"Voided {log_key(9)}." in out
    for i in range(4, 11):  # through #9, which takes its second attempt
        _write(fresh if i % 2 else store, f"w{i}.md")
    assert log_key(9, 1) in _keys(s3_env, "g") and log_key(10) in _keys(s3_env, "g")
    assert [e.seq for e in log(store)][0] == 10 and set(_files(store)) == set(_files(fresh))
    store.close()
    fresh.close()


def test_a_keyless_writer_can_neither_void_nor_skip(s3_env, tmp_path: Path) -> None:
    store = _history(s3_env, tmp_path, "k")
    other = _open(s3_env.url("k"), tmp_path / "b")
    # A void not made with the store's key: junk too, and the junk it names still stops commits.
    _put_if_absent(s3_env, f"k/{log_key(4)}", JUNK)
    forged_key = secrets.token_bytes(32)
    info = s3_env.client.head_object(Bucket=s3_env.bucket, Key=f"k/{log_key(4)}")
    forged = layout.encode_void(forged_key, store.store_id, layout.VoidRecord(4, 0, info["ETag"], len(JUNK)))
    _put_if_absent(s3_env, f"k/{layout.void_key(4, 0, 'a' * 16)}", forged)
    with pytest.raises(errors.LogBlockedError):
        _write(other, "n.md")
    codes = sorted(p.code for p in verify(other).problems)
    assert codes == ["forged-log-void", "junk-log-record"]
    # A key holder's void of #4 copied to name a genuine later record does not void it.
    with store.writing():
        assert store.remote is not None and store.remote.void(4) == [log_key(4)]
    _write(store, "4.md", "4\n")  # at log/4.r1
    _write(store, "5.md", "5\n")  # at log/5
    genuine = [k for k in _keys(s3_env, "k") if k.startswith(f"{log_key(4)}.v0-") and "a" * 16 not in k]
    replayed = s3_env.client.get_object(Bucket=s3_env.bucket, Key=f"k/{genuine[0]}")["Body"].read()
    _put_if_absent(s3_env, f"k/{layout.void_key(5, 0, 'b' * 16)}", replayed)
    # ... nor does a copy of a genuine record at a later attempt of its number replace it.
    five = s3_env.client.get_object(Bucket=s3_env.bucket, Key=f"k/{log_key(5)}")["Body"].read()
    _put_if_absent(s3_env, f"k/{log_key(5, 1)}", five)
    late = _open(s3_env.url("k"), tmp_path / "c")
    for host in (late, other):
        assert _files(host)["5.md"] == b"5\n" and host.head[1] == 5
    _write(late, "6.md")  # the log goes on at #6
    assert log_key(6) in _keys(s3_env, "k")
    codes = sorted(p.code for p in verify(late).problems)
    assert codes == ["forged-log-void", "forged-log-void", "stray-log-record", "voided-log-record"]
    for host in (store, other, late):
        host.close()


def test_void_refuses_what_it_cannot_or_need_not_void(s3_env, tmp_path: Path) -> None:
    store = _history(s3_env, tmp_path, "r")
    remote = store.remote
    assert remote is not None
    with store.writing():
        with pytest.raises(InvalidInputError, match="part of the history"):
            remote.void(2)  # an authentic commit
        with pytest.raises(InvalidInputError, match="nothing to void"):
            remote.void(4)  # the next number is free
    # A genuine record damaged in the bucket (no policy) is not a record a host can take in; the
    # host that saw it reports the replacement rather than following a void of it.
    _write(store, "3b.md")
    damaged = bytearray(s3_env.client.get_object(Bucket=s3_env.bucket, Key=f"r/{log_key(4)}")["Body"].read())
    damaged[-1] ^= 1
    s3_env.client.put_object(Bucket=s3_env.bucket, Key=f"r/{log_key(4)}", Body=bytes(damaged))
    other = _open(s3_env.url("r"), tmp_path / "b")
    assert other.head[1] == 3
    with other.writing():
        assert other.remote is not None and other.remote.void(4) == [log_key(4)]
    _write(other, "4.md")
    with pytest.raises(RollbackDetectedError, match="replaced"):
        store.head  # noqa: B018
    store.close()
    other.close()


def test_a_host_that_took_in_a_record_a_key_holder_voided_detects_the_fork(s3_env, tmp_path: Path) -> None:
    """Records deleted from under a later one (no deny-delete policy): a new host cannot tell the
    survivor from junk; voiding it (--yes) forks the history, which the host that had it notices."""
    store = _history(s3_env, tmp_path, "f", n=5)  # #0 to #5
    s3_env.client.delete_object(Bucket=s3_env.bucket, Key=f"f/{log_key(4)}")
    fresh = _open(s3_env.url("f"), tmp_path / "b")  # a new host
    assert fresh.head[1] == 3
    with pytest.raises(errors.LogBlockedError, match="--void 5 --yes"):
        _write(fresh, "n.md")
    with fresh.writing():
        assert fresh.remote is not None and fresh.remote.void(5, beyond_gap=True) == [log_key(5)]
    _write(fresh, "n4.md")
    _write(fresh, "n5.md")
    assert log_key(5, 1) in _keys(s3_env, "f")
    with pytest.raises(RollbackDetectedError, match="Fork detected"):
        store.head  # noqa: B018
    store.close()
    fresh.close()


def test_racing_voids_and_a_commit_racing_the_void(s3_env, tmp_path: Path) -> None:
    store = _history(s3_env, tmp_path, "v")
    b = _open(s3_env.url("v"), tmp_path / "b")
    c = _open(s3_env.url("v"), tmp_path / "c")
    # Store pulled before the junk arrives; the junk lands right before its log record, and a key
    # holder voids it meanwhile: the lost race runs the command again, past the void.
    remote = store.remote
    assert remote is not None
    create = remote.objects.create
    fired = threading.Event()

    def attacker_first(key: str, data: bytes) -> str | None:
        if key == log_key(4) and not fired.is_set():
            fired.set()
            _put_if_absent(s3_env, f"v/{log_key(4)}", JUNK)
            with b.writing():
                assert b.remote is not None and b.remote.void(4) == [log_key(4)]
        return create(key, data)

    remote.objects.create = attacker_first  # type: ignore[method-assign]
    assert _write(store, "raced.md", "raced\n").startswith("File created")
    assert fired.is_set() and log_key(4, 1) in _keys(s3_env, "v")
    # Two key holders void the same object at once: both voids stand, one step over it.
    _put_if_absent(s3_env, f"v/{log_key(5)}", JUNK)
    voided: list[list[str]] = []
    barrier = threading.Barrier(2)

    def void_from(host: memvault.MemoryStore) -> None:
        assert host.remote is not None
        with host.writing():
            host.head  # noqa: B018
            barrier.wait()
            try:
                voided.append(host.remote.void(5))
            except InvalidInputError:  # the other's void landed before this host's pull
                voided.append([])

    threads = [threading.Thread(target=void_from, args=(h,)) for h in (b, c)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [log_key(5)] in voided
    _write(c, "after.md")
    assert log_key(5, 1) in _keys(s3_env, "v")
    for host in (store, b, c):
        assert host.head[1] == 5 and _files(host)["raced.md"] == b"raced\n"
    store.close()
    b.close()
    c.close()


def test_repair_log_lists_what_it_finds(s3_env, tmp_path: Path, monkeypatch) -> None:
    store = _history(s3_env, tmp_path, "l")
    _put_if_absent(s3_env, f"l/{log_key(4)}", JUNK)
    status, out = _cli(monkeypatch, tmp_path, "--store", s3_env.url("l"), "--json", "repair-log")
    assert status == 0
    assert json.loads(out) == {
        "voided": [],
        "next_commit": 4,
        "findings": [{"kind": "junk", "seq": 4, "key": log_key(4)}],
    }
    status, out = _cli(monkeypatch, tmp_path, "--store", s3_env.url("l"), "repair-log")
    assert status == 0 and "Commits stop at #4: memvault repair-log --void 4" in out
    store.close()


def test_a_commit_takes_the_same_round_trips_after_a_void(s3_faulty, tmp_path: Path) -> None:
    store = _create(s3_faulty.url("t"), tmp_path / "a")
    _write(store, "a.md")
    _put_if_absent(s3_faulty, f"t/{log_key(2)}", JUNK)
    with store.writing():
        assert store.remote is not None and store.remote.void(2) == [log_key(2)]
    _write(store, "b.md")  # at log/2.r1
    before = len(s3_faulty.proxy.requests())
    store.head  # noqa: B018
    assert len(s3_faulty.proxy.requests()) - before == 1  # the pull's list, and nothing else
    before = len(s3_faulty.proxy.requests())
    _write(store, "c.md")
    made = s3_faulty.proxy.requests()[before:]
    assert [m for m, _p, _s in made].count("GET") == 1  # the pull's list
    assert sum(1 for m, p, _s in made if m == "PUT" and "/log/" in p) == 1
    store.close()


def test_a_lost_data_key_is_fetched_again_once_the_bucket_has_it(s3_env, tmp_path: Path) -> None:
    url = s3_env.url("lost")
    a = _create(url, tmp_path / "a")
    _write(a, "x.md", "x text\n")
    (dek,) = [k for k in s3_env.keys() if "/deks/" in k][-1:]
    saved = s3_env.client.get_object(Bucket=s3_env.bucket, Key=dek)["Body"].read()
    s3_env.client.delete_object(Bucket=s3_env.bucket, Key=dek)
    with pytest.raises(IntegrityError, match="lacks the data key objects of 1 version"):
        _open(url, tmp_path / "b")
    again = _open(url, tmp_path / "b")  # the records were taken in: it opens (no index shard is read at open) ...
    with pytest.raises(IntegrityError):  # ... and the head's version cannot be read
        _files(again)
    again.close()
    s3_env.client.put_object(Bucket=s3_env.bucket, Key=dek, Body=saved)  # restored, e.g. from a version
    b = _open(url, tmp_path / "b")
    assert _files(b) == {"x.md": b"x text\n"}
    assert verify(b).ok
    assert b.remote is not None and b.remote.stats["refetched_keys"] == 1
    assert not (tmp_path / "b" / "remote-lost-keys").exists()
    a.close()
    b.close()


def test_junk_in_a_store_in_a_shared_directory(tmp_path: Path) -> None:
    objects = tmp_path / "objects"
    url = f"file://{objects}"
    store = _create(url, tmp_path / "a")
    _write(store, "a.md")
    (objects / log_key(2)).write_bytes(JUNK)  # a writer of the directory
    other = _open(url, tmp_path / "b")
    assert _files(other) == {"a.md": b"x\n"} == _files(store)
    with pytest.raises(errors.LogBlockedError, match="--void 2"):
        _write(other, "b.md")
    with other.writing():
        assert other.remote is not None and other.remote.void(2) == [log_key(2)]
    _write(other, "b.md")
    assert (objects / log_key(2, 1)).is_file() and (objects / log_key(2)).read_bytes() == JUNK
    assert set(_files(store)) == {"a.md", "b.md"}
    store.close()
    other.close()


def test_a_record_at_a_later_attempt_is_guarded_by_the_mark_like_any(s3_env, tmp_path: Path) -> None:
    store = _history(s3_env, tmp_path, "m")
    _put_if_absent(s3_env, f"m/{log_key(4)}", JUNK)
    with store.writing():
        assert store.remote is not None and store.remote.void(4) == [log_key(4)]
    _write(store, "4.md")  # at log/4.r1: this host's mark names that object
    key = f"m/{log_key(4, 1)}"
    saved = s3_env.client.get_object(Bucket=s3_env.bucket, Key=key)["Body"].read()
    s3_env.client.put_object(Bucket=s3_env.bucket, Key=key, Body=saved + b"x")
    with pytest.raises(RollbackDetectedError, match="replaced"):
        store.head  # noqa: B018
    s3_env.client.delete_object(Bucket=s3_env.bucket, Key=key)
    with pytest.raises(RollbackDetectedError, match="no longer holds commit #4"):
        store.head  # noqa: B018
    s3_env.client.put_object(Bucket=s3_env.bucket, Key=key, Body=saved)  # put back as it was
    assert store.head[1] == 4
    store.close()


def test_a_cli_write_on_a_blocked_log_names_the_recovery(s3_env, tmp_path: Path, monkeypatch, capsys) -> None:
    store = _history(s3_env, tmp_path, "c")
    _put_if_absent(s3_env, f"c/{log_key(4)}", JUNK)
    text = tmp_path / "note.md"
    text.write_text("note\n")
    status, _out = _cli(monkeypatch, tmp_path, "--store", s3_env.url("c"), "put", "/memories/note.md", str(text))
    err = capsys.readouterr().err
    assert status == 3 and "memvault repair-log --void 4" in err and "not an authentic log record" in err
    status, out = _cli(monkeypatch, tmp_path, "--store", s3_env.url("c"), "cat", "/memories/0.md")
    assert status == 0 and out == "0\n"
    store.close()


def test_one_repair_voids_every_junk_object_placed_ahead_at_that_number(s3_env, tmp_path: Path) -> None:
    store = _history(s3_env, tmp_path, "p")
    junk = [log_key(4), log_key(4, 1), log_key(4, 2)]
    for key in junk:
        _put_if_absent(s3_env, f"p/{key}", JUNK + key.encode())
    with pytest.raises(errors.LogBlockedError, match="--void 4"):
        _write(store, "n.md")
    with store.writing():
        assert store.remote is not None and store.remote.void(4) == junk
    _write(store, "n.md")
    assert log_key(4, 3) in _keys(s3_env, "p")
    other = _open(s3_env.url("p"), tmp_path / "b")
    assert _files(other) == _files(store) and other.head[1] == 4
    store.close()
    other.close()
