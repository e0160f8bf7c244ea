import sys

from mysql_cdc.cli import main

sys.exit(main())
