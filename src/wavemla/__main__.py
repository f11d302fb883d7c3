"""``python -m wavemla <verb>``: the same entry point as the ``wavemla`` command."""

import sys

from wavemla.cli import main

sys.exit(main())
