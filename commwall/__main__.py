"""`python -m commwall` is `commwall`."""

import sys

from commwall.cli.main import main

sys.exit(main())
