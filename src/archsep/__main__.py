"""`python -m archsep` is the `archsep` command."""
import sys

from .cli import main

sys.exit(main())
