import sys

from rearank.cli import main

sys.exit(main())
