import sys

from socai_cli.main import main

sys.exit(main())
