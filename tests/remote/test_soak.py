"""The soak of a store in S3 at CI sizes (tests/s3soak.py; benchmarks/long_checks.py runs the same
test at long sizes through ``MEMVAULT_SOAK_*`` and ``MEMVAULT_GC_COMMITS``): racing hosts through a
faulty proxy, compactions, a paused host and redactions lose or double no acknowledged commit, leave
every host verifying clean and no redacted text in the bucket; after many commits and a ``gc``, the
bucket holds few objects and about the replica's bytes."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import s3soak
import s3support

#: CI sizes: a few hosts and commits, a short pause, a handful of faults.
CI_SIZE = s3soak.SoakSize(
    hosts=3, commits=15, gc_every=10, redactions=2, fault_interval=0.2, max_faults=8, slow_seconds=0.3,
    commit_window=3.0, grace=10.0, min_pause=1.0, max_pause=5.0, pause_at=0.3,
)  # fmt: skip
TARGET_OBJECTS = 50
TARGET_BYTES_RATIO = 1.5


def test_soak_loses_and_doubles_nothing_and_leaves_no_redacted_text(s3_env, tmp_path: Path) -> None:
    size = s3soak.SoakSize.from_env(CI_SIZE)
    assert size.grace > size.commit_window + size.max_pause  # docs/format.md §12.8, invariant 7
    with s3support.FaultProxy(s3_env.endpoint) as proxy:
        result = s3soak.run_soak(s3_env.endpoint, proxy, s3_env.client, s3_env.bucket, tmp_path, size)
    problems, figures = s3soak.check_soak(result, s3_env.client, s3_env.bucket)
    print("SOAK-FIGURES " + json.dumps(figures, sort_keys=True))
    assert not problems, problems
    writers = size.hosts * size.commits
    assert len(result.acked) == writers + size.redactions
    # init, each acknowledged create and each redaction: nothing else committed.
    assert figures["commits"] == 1 + writers + 2 * size.redactions
    assert figures["versions_redacted"] == size.redactions and len(result.destroyed) >= size.redactions
    assert figures["faults"]["total"] >= 1
    assert result.paused["compactions_inside"] >= 1
    assert result.paused["seconds"] > result.paused["longest_compaction_inside"]
    assert len(result.verify) == size.hosts + 2  # the writers, the gc host and a new host
    assert any(g["checkpoint"] is not None and g["reason"] != "final" for g in result.gcs)


def test_many_commits_and_a_gc_leave_few_objects_and_about_the_replicas_bytes(s3_env, tmp_path: Path) -> None:
    commits = int(os.environ.get("MEMVAULT_GC_COMMITS", "120"))
    url = s3_env.url(f"gc{secrets.token_hex(2)}")
    found = s3soak.gc_size_check(url, tmp_path, s3_env.client, s3_env.bucket, commits)
    print("GC-FIGURES " + json.dumps(found, sort_keys=True))
    assert found["commits"] == commits
    assert found["objects_before"] >= 4 * (commits - 1)  # a record, a pack, an index, a data key each
    assert found["objects_after"] <= TARGET_OBJECTS
    assert found["bytes_after"] <= TARGET_BYTES_RATIO * found["replica_bytes"]
