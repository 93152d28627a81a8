"""Child process for the object-storage race tests (run as a script, never collected): one
"host" with its own cache directory, writing to a store in S3 through the memory tool's commands.

Usage: ``_worker.py URL CACHE_DIR WORKER N READY_FILE GO_FILE`` (passphrase in
``MEMVAULT_TEST_PASSPHRASE``, the AWS environment set by the parent). After the start barrier it
runs ``N`` rounds of two commands (create a file of its own, insert a line into the shared file)
and prints one JSON line per acknowledged command: ``{"session", "command", "result"}``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import memvault
from memvault.protocol.commands import run_command


def main() -> int:
    url, cache, worker, n, ready, go = sys.argv[1:7]
    store = memvault.MemoryStore.open(url, passphrase=os.environ["MEMVAULT_TEST_PASSPHRASE"], cache_dir=cache)
    Path(ready).touch()
    while not Path(go).exists():
        time.sleep(0.005)
    for k in range(int(n)):
        for command in (
            {
                "command": "create",
                "path": f"/memories/w{worker}/note{k}.md",
                "file_text": f"worker {worker} note {k}\n",
            },
            {"command": "insert", "path": "/memories/shared.md", "insert_line": 0, "insert_text": f"w{worker} {k}"},
        ):
            session = f"w{worker}-{k}-{command['command']}"
            result = run_command(store, command, actor=f"w{worker}", session=session)
            print(json.dumps({"session": session, "command": command, "result": str(result)}), flush=True)
    if store.remote is not None:
        print(json.dumps(dict(store.remote.stats)), file=sys.stderr)
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
