"""Batch sweeps (`ppsched sweep GRID.yaml`): a grid file expanded into solver runs.

`grid` reads and checks the file (with line numbers), `expand` turns it into tasks,
`runner` solves them on local processes or a Dask cluster and streams JSONL rows,
`exports`, `summary` and `plots` turn the rows into CSV/Parquet, a table and figures.
The command itself is `ppsched.api.cli.sweep`.
"""
