"""Executing schedules on torch.distributed: the executor (`executor`, `run` its command
line), the profiler (`profiler`, `profile_ranks`; `profile_cli` its command line).

This package depends on `solver`, never on `api` (DESIGN.md section 5).
"""
