import sys

from flowstack_cli.main import main

sys.exit(main())
