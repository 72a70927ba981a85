"""The user-facing front doors of ppsched: the `ppsched` command line (and the service)."""
