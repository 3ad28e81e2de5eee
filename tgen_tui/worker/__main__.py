"""``python -m tgen_tui.worker --core N --parent-pid P``: see tgen_tui.worker.protocol."""

import sys

from tgen_tui.worker.main import main

sys.exit(main())
