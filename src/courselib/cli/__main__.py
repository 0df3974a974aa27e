import sys

from courselib.cli.main import main

sys.exit(main())
