"""``python -m memvault.cli``: the ``memvault`` command."""

import sys

from . import main

sys.exit(main())
