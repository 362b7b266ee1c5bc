"""``python -m runtime.cli``: the ``switchboard`` command."""

import sys

from runtime.cli import main

sys.exit(main())
