"""The object-storage seam: one contract, run against every backend (a directory; S3 through moto's
server on loopback), and the S3 backend's retries and read-backs under injected faults (HTTP errors,
connections reset before or after the request reached S3, answers slower than the read timeout)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import botocore.exceptions
import pytest

from memvault.errors import ServiceError
from memvault.storage.base import ObjectInfo, ObjectStore
from memvault.storage.local import DirectoryObjects
from memvault.storage.s3 import S3Objects
from memvault.storage.url import open_backend, parse_url
from s3support import ACCESS_KEY, SECRET_KEY, S3Env

# --- the contract, for every backend -----------------------------------------------------------


@pytest.fixture(params=["directory", "s3"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    if request.param == "directory":
        return DirectoryObjects(tmp_path / "objects", durable=False)
    s3: S3Env = request.getfixturevalue("s3_env")
    return S3Objects(s3.bucket, "store")


def test_create_only_if_absent(backend: ObjectStore) -> None:
    tag = backend.create("objects/ab/cd", b"first")
    assert tag is not None
    assert backend.create("objects/ab/cd", b"second") is None
    assert backend.create("objects/ab/cd", b"first") is None  # no earlier attempt of this call: a lost race
    assert backend.get_tagged("objects/ab/cd") == (b"first", tag)


def test_missing_objects_are_none(backend: ObjectStore) -> None:
    assert backend.get("objects/no/such") is None
    assert backend.get_tagged("objects/no/such") is None
    assert backend.list("objects/") == []


def test_tag_changes_with_each_swap(backend: ObjectStore) -> None:
    backend.create("refs/main", b"one")
    found = backend.get_tagged("refs/main")
    assert found is not None and found[0] == b"one"
    new = backend.swap("refs/main", b"two", found[1])
    assert new is not None and new != found[1]
    assert backend.get_tagged("refs/main") == (b"two", new)
    assert backend.list("refs/") == [ObjectInfo("refs/main", 3, new)]


def test_list_order_prefix_and_start_after(backend: ObjectStore) -> None:
    keys = ["objects/b", "objects/ab/c", "refs/x", "objects/aa", "objectsx", "objects/ab/b", "a"]
    for i, key in enumerate(keys):
        assert backend.create(key, b"x" * i)
    under = ["objects/aa", "objects/ab/b", "objects/ab/c", "objects/b"]
    assert [info.key for info in backend.list("objects/")] == under
    assert [info.key for info in backend.list("")] == sorted(keys)
    assert [info.key for info in backend.list("objects/", start_after="objects/ab/b")] == under[2:]
    assert [info.key for info in backend.list("objects/a", start_after="objects/aa")] == [
        "objects/ab/b",
        "objects/ab/c",
    ]
    assert {info.key: info.size for info in backend.list("")} == {key: i for i, key in enumerate(keys)}
    for info in backend.list(""):
        found = backend.get_tagged(info.key)
        assert found is not None and found[1] == info.tag


def test_list_follows_every_page(backend: ObjectStore) -> None:
    if isinstance(backend, S3Objects):
        backend.page_size = 2
    keys = [f"data/{c}" for c in "edcba"]
    for key in keys:
        backend.create(key, key.encode())
    assert [info.key for info in backend.list("data/")] == sorted(keys)
    assert [info.key for info in backend.list("data/", start_after="data/a")] == sorted(keys)[1:]
    if isinstance(backend, S3Objects):
        assert backend.requests["ListObjectsV2"] == 3 + 2  # 5 keys in pages of 2, then 4 keys


def test_delete_is_idempotent(backend: ObjectStore) -> None:
    backend.create("locks/writer", b"me")
    backend.delete("locks/writer")
    assert backend.get("locks/writer") is None
    backend.delete("locks/writer")
    backend.delete("locks/never-was")
    assert backend.create("locks/writer", b"again")
    assert backend.get("locks/writer") == b"again"


def test_swap_expects_the_current_tag(backend: ObjectStore) -> None:
    first = backend.swap("refs/head", b"1", None)
    assert first is not None
    assert backend.swap("refs/head", b"2", None) is None  # exists already
    second = backend.swap("refs/head", b"2", first)
    assert second is not None
    assert backend.swap("refs/head", b"3", first) is None  # stale
    assert backend.get("refs/head") == b"2"
    assert backend.swap("refs/other", b"x", second) is None  # absent
    assert backend.get("refs/other") is None
    backend.delete("refs/head")
    assert backend.swap("refs/head", b"4", second) is None  # deleted meanwhile


def test_keys_are_checked(backend: ObjectStore) -> None:
    for bad in ("../escape", "/abs", "a//b", "UPPER", ""):
        with pytest.raises(ValueError):
            backend.create(bad, b"x")


def _race(workers: int, attempt: Callable[[int], Any]) -> list[Any]:
    barrier = threading.Barrier(workers)
    results: list[Any] = [None] * workers

    def run(i: int) -> None:
        barrier.wait()
        results[i] = attempt(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_racing_creates_have_one_winner(backend: ObjectStore) -> None:
    workers = 12
    for round_ in range(3):
        key = f"locks/race-{round_}"
        tags = _race(workers, lambda i, key=key: backend.create(key, f"writer {i}".encode()))
        winners = [i for i, tag in enumerate(tags) if tag is not None]
        assert len(winners) == 1, tags
        assert backend.get_tagged(key) == (f"writer {winners[0]}".encode(), tags[winners[0]])
    if isinstance(backend, S3Objects):
        assert backend.requests["PutObject"] == 3 * workers  # counted from every thread


def test_racing_swaps_have_one_winner(backend: ObjectStore) -> None:
    backend.create("refs/main", b"base")
    found = backend.get_tagged("refs/main")
    assert found is not None
    workers = 10
    tags = _race(workers, lambda i: backend.swap("refs/main", f"writer {i}".encode(), found[1]))
    winners = [i for i, tag in enumerate(tags) if tag is not None]
    assert len(winners) == 1, tags
    assert backend.get_tagged("refs/main") == (f"writer {winners[0]}".encode(), tags[winners[0]])


def test_versioning(backend: ObjectStore, request: pytest.FixtureRequest) -> None:
    assert backend.versioning() is None
    if isinstance(backend, S3Objects):
        s3: S3Env = request.getfixturevalue("s3_env")
        s3.client.put_bucket_versioning(Bucket=s3.bucket, VersioningConfiguration={"Status": "Enabled"})
        assert backend.versioning() == "Enabled"
        s3.client.put_bucket_versioning(Bucket=s3.bucket, VersioningConfiguration={"Status": "Suspended"})
        assert backend.versioning() == "Suspended"


# --- S3 only: prefixes, addresses, configuration ----------------------------------------------


def test_s3_prefix_isolates_stores(s3_env: S3Env) -> None:
    a, ab, root = S3Objects(s3_env.bucket, "a"), S3Objects(s3_env.bucket, "ab"), S3Objects(s3_env.bucket, "")
    assert a.description == f"S3 bucket {s3_env.bucket}"
    a.create("k/1", b"a")
    ab.create("k/1", b"ab")
    s3_env.client.put_object(Bucket=s3_env.bucket, Key="a/folder/", Body=b"")  # a console "folder"
    assert sorted(s3_env.keys()) == ["a/folder/", "a/k/1", "ab/k/1"]
    assert [info.key for info in a.list("")] == ["k/1"]
    assert a.get("k/1") == b"a" and ab.get("k/1") == b"ab"
    assert [info.key for info in root.list("")] == ["a/k/1", "ab/k/1"]
    assert root.get("ab/k/1") == b"ab"


def test_s3_url_opens_the_bucket_from_the_environment(s3_env: S3Env) -> None:
    objects = open_backend(parse_url(s3_env.url("stores/one")))
    assert objects.create("refs/main", b"x")
    assert s3_env.keys() == ["stores/one/refs/main"]


def test_s3_environment_reaches_subprocesses(s3_env: S3Env) -> None:
    s3_env.client.put_object(Bucket=s3_env.bucket, Key="p/k", Body=b"from the test")
    code = "import sys; from memvault.storage.s3 import S3Objects; print(S3Objects(sys.argv[1], 'p').get('k'))"
    out = subprocess.run(
        [sys.executable, "-c", code, s3_env.bucket],
        env={**os.environ, **s3_env.env},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert out.stdout.strip() == "b'from the test'"


def test_s3_refusals_are_not_retried(s3_env: S3Env) -> None:
    objects = S3Objects("memvault-no-such-bucket", "p")
    with pytest.raises(ServiceError) as caught:
        objects.get("k")
    assert str(caught.value) == (
        "S3 bucket memvault-no-such-bucket failed to read k: HTTP 404 NoSuchBucket: the bucket does not exist; "
        "create it first (aws s3 mb s3://memvault-no-such-bucket, or in the S3 console), memvault does not create "
        "buckets."
    )
    assert objects.requests == {"GetObject": 1}
    with pytest.raises(ServiceError) as caught:
        objects.create("k", b"secret bytes")
    assert caught.value.reason.startswith("HTTP 404 NoSuchBucket: ") and not caught.value.outcome_unknown


def test_init_in_a_missing_bucket_says_to_create_it_first(s3_env: S3Env, tmp_path: Path) -> None:
    """``memvault init`` of ``s3://BUCKET/...`` where no BUCKET exists: the message says that the
    bucket must be created first, and how; nothing is left behind."""
    key = tmp_path / "key.bin"
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    env = {**os.environ, **s3_env.env, "MEMVAULT_KEY_FILE": str(key), "MEMVAULT_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-m", "memvault.cli", "--store", "s3://memvault-no-such-bucket/agents/support", "init"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    assert done.stderr == (
        "memvault: S3 bucket memvault-no-such-bucket failed to list /: HTTP 404 NoSuchBucket: the bucket does not "
        "exist; create it first (aws s3 mb s3://memvault-no-such-bucket, or in the S3 console), memvault does not "
        "create buckets.\n"
    )
    assert not (tmp_path / "cache").exists()


def test_s3_unreachable_endpoint(s3_env: S3Env, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    objects = S3Objects(s3_env.bucket, "p", attempts=3, backoff=0.01)
    with pytest.raises(ServiceError) as caught:
        objects.create("k", b"secret bytes")
    assert caught.value.reason == "EndpointConnectionError after 3 attempts"
    assert not caught.value.outcome_unknown  # nothing was ever sent
    assert objects.requests["PutObject"] == 3


# --- S3 under injected faults ------------------------------------------------------------------

DATA = b"SECRET-OBJECT-CONTENT-7f3a"


def _trace(s3: S3Env) -> list[tuple[str, int | str]]:
    assert s3.proxy is not None
    return [(method, status) for method, _path, status in s3.proxy.log]


@pytest.mark.parametrize("kind", ["500", "503", "409"])
def test_s3_transient_errors_are_retried(s3_faulty: S3Env, kind: str) -> None:
    assert s3_faulty.proxy is not None
    objects = s3_faulty.objects("store")
    s3_faulty.proxy.add_fault(kind, method="PUT")
    tag = objects.create("k", DATA)
    assert s3_faulty.proxy.counts["PUT"] == 2
    assert _trace(s3_faulty) == [("PUT", int(kind)), ("PUT", 200)]  # the 412-free retry needed no read-back
    assert objects.requests["PutObject"] == 2
    assert tag is not None and objects.get_tagged("k") == (DATA, tag)


def test_s3_reads_lists_deletes_and_swaps_are_retried(s3_faulty: S3Env) -> None:
    assert s3_faulty.proxy is not None
    proxy = s3_faulty.proxy
    objects = s3_faulty.objects("store")
    objects.create("a", b"1")
    proxy.clear()
    proxy.add_fault("503", method="GET", times=2)
    assert objects.get_tagged("a") is not None
    proxy.add_fault("500", method="GET")
    assert [info.key for info in objects.list("")] == ["a"]
    proxy.add_fault("reset_after", method="DELETE")
    objects.delete("a")
    assert objects.get("a") is None
    proxy.add_fault("409", method="PUT")
    assert objects.swap("a", b"2", None) is not None
    assert proxy.counts == {"GET": 3 + 2 + 1, "DELETE": 2, "PUT": 2}


def test_s3_persistent_errors_raise_a_service_error(s3_faulty: S3Env) -> None:
    assert s3_faulty.proxy is not None
    objects = s3_faulty.objects("store", attempts=3)
    s3_faulty.proxy.add_fault("503", method="PUT", times=100)
    with pytest.raises(ServiceError) as caught:
        objects.create("objects/ab", DATA)
    message = str(caught.value)
    assert message == f"S3 bucket {s3_faulty.bucket} failed to create objects/ab: HTTP 503 SlowDown after 3 attempts."
    assert not caught.value.outcome_unknown  # the read-back found nothing, and every attempt was answered
    assert _trace(s3_faulty) == [("PUT", 503)] * 3 + [("GET", 404)]
    for secret in (DATA.decode(), ACCESS_KEY, SECRET_KEY):
        assert secret not in message
    s3_faulty.proxy.add_fault("503", method="GET", times=100)
    with pytest.raises(ServiceError, match=r"failed to read objects/ab: HTTP 503 SlowDown after 3 attempts\.$"):
        objects.get("objects/ab")


def test_s3_reset_before_sending_is_retried(s3_faulty: S3Env) -> None:
    assert s3_faulty.proxy is not None
    objects = s3_faulty.objects("store")
    s3_faulty.proxy.add_fault("reset_before", method="PUT")
    tag = objects.create("k", DATA)
    assert _trace(s3_faulty) == [("PUT", "reset_before"), ("GET", 404), ("PUT", 200)]
    assert tag is not None and objects.get_tagged("k") == (DATA, tag)


def test_s3_lost_answer_is_resolved_by_reading_back(s3_faulty: S3Env) -> None:
    assert s3_faulty.proxy is not None
    objects = s3_faulty.objects("store")
    s3_faulty.proxy.add_fault("reset_after", method="PUT")
    tag = objects.create("k", DATA)
    assert _trace(s3_faulty) == [("PUT", "reset_after"), ("GET", 200)]  # the read-back, and no blind retry
    assert s3_faulty.keys() == ["store/k"]
    assert tag is not None and objects.get_tagged("k") == (DATA, tag)


def test_s3_lost_answer_for_a_taken_key_is_a_lost_race(s3_faulty: S3Env) -> None:
    assert s3_faulty.proxy is not None
    s3_faulty.client.put_object(Bucket=s3_faulty.bucket, Key="store/k", Body=b"the other writer")
    objects = s3_faulty.objects("store")
    s3_faulty.proxy.add_fault("reset_after", method="PUT")
    assert objects.create("k", DATA) is None
    assert _trace(s3_faulty) == [("PUT", "reset_after"), ("GET", 200)]
    assert objects.get("k") == b"the other writer"


def test_s3_lost_answer_of_a_swap(s3_faulty: S3Env) -> None:
    assert s3_faulty.proxy is not None
    objects = s3_faulty.objects("store")
    old = objects.swap("ref", b"old", None)
    assert old is not None
    s3_faulty.proxy.add_fault("reset_after", method="PUT")
    new = objects.swap("ref", DATA, old)
    assert new is not None and new != old
    assert objects.get_tagged("ref") == (DATA, new)
    s3_faulty.proxy.add_fault("reset_after", method="PUT")
    assert objects.swap("ref", b"newer", old) is None  # the stale tag failed: a 412 nobody saw
    assert objects.get("ref") == DATA


def test_s3_slow_answer_is_resolved_by_reading_back(s3_faulty: S3Env) -> None:
    assert s3_faulty.proxy is not None
    objects = s3_faulty.objects("store", read_timeout=0.5)
    s3_faulty.proxy.add_fault("slow:5", method="PUT")
    started = time.monotonic()
    tag = objects.create("k", DATA)
    assert time.monotonic() - started < 4
    assert s3_faulty.proxy.requests("GET") == [("GET", f"/{s3_faulty.bucket}/store/k", 200)]
    assert s3_faulty.proxy.counts["PUT"] == 1
    assert tag is not None and objects.get_tagged("k") == (DATA, tag)


def test_s3_outcome_unknown_when_the_read_back_fails(s3_faulty: S3Env) -> None:
    assert s3_faulty.proxy is not None
    objects = s3_faulty.objects("store", attempts=2)
    s3_faulty.proxy.add_fault("reset_after", method="PUT")
    s3_faulty.proxy.add_fault("503", method="GET", times=100)
    with pytest.raises(ServiceError) as caught:
        objects.create("k", DATA)
    assert caught.value.outcome_unknown
    assert str(caught.value) == (
        f"S3 bucket {s3_faulty.bucket} failed to create k: ConnectionClosedError, then reading it back failed "
        "(HTTP 503 SlowDown after 2 attempts). The command may or may not have been saved."
    )
    assert s3_faulty.keys() == ["store/k"]  # it did land


class _LandsThenFails:
    """An S3 client whose first PUT takes effect but answers 500 InternalError (a lost success)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.failed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def put_object(self, **kwargs: Any) -> Any:
        reply = self._client.put_object(**kwargs)
        if not self.failed:
            self.failed = True
            error = {"Error": {"Code": "InternalError"}, "ResponseMetadata": {"HTTPStatusCode": 500}}
            raise botocore.exceptions.ClientError(error, "PutObject")
        return reply


def test_s3_retry_of_a_landed_write_reads_back_after_412(s3_env: S3Env) -> None:
    client = _LandsThenFails(s3_env.client)
    objects = S3Objects(s3_env.bucket, "store", client=client)
    tag = objects.create("k", DATA)  # the retry's 412 is our own first attempt
    assert client.failed
    assert objects.requests == {"PutObject": 2, "GetObject": 1}
    old = objects.get_tagged("k")
    assert old == (DATA, tag)
    client.failed = False
    new = objects.swap("k", b"next", old[1])
    assert new is not None and objects.get_tagged("k") == (b"next", new)


def test_s3_versioning_without_permission_is_none(s3_env: S3Env) -> None:
    class Denied(_LandsThenFails):
        def get_bucket_versioning(self, **kwargs: Any) -> Any:
            error = {"Error": {"Code": "AccessDenied"}, "ResponseMetadata": {"HTTPStatusCode": 403}}
            raise botocore.exceptions.ClientError(error, "GetBucketVersioning")

    s3_env.client.put_bucket_versioning(Bucket=s3_env.bucket, VersioningConfiguration={"Status": "Enabled"})
    assert S3Objects(s3_env.bucket, "", client=s3_env.client).versioning() == "Enabled"
    assert S3Objects(s3_env.bucket, "", client=Denied(s3_env.client)).versioning() is None
