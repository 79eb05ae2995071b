"""`python -m proxy` is the same program as the `context-proxy` console script."""

from proxy.cli import main

raise SystemExit(main())
