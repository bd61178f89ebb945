"""`python -m dashboard` is `commwall`."""

import sys

from dashboard.cli import main

sys.exit(main())
