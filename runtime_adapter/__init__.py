"""Executing schedules on torch.distributed (planned; see the project issues).

This package depends on `solver`, never on `api` (DESIGN.md section 5).
"""
