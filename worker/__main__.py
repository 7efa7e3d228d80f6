"""``python -m worker`` is ``sgt-worker``."""

from __future__ import annotations

import sys

from worker.cli import main

sys.exit(main())
