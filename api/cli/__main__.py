"""`python -m ppsched.api.cli ...`: the same as the `ppsched` console script."""

from ppsched.api.cli.entry import main

raise SystemExit(main())
