import sys

from rewards.cli import main

sys.exit(main())
