"""`python -m warmkernel`: the same entry point as the `warmkernel` console script."""

from warmkernel.cli import main

raise SystemExit(main())
