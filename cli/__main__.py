"""`python -m cli` is `commwall`."""

import sys

from cli.main import main

sys.exit(main())
