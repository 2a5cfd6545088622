"""`python -m tenure_cli`: the same command as the `tenure` console script."""

from tenure_cli.main import main

raise SystemExit(main())
