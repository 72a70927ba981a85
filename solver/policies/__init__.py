"""Activation policies (DESIGN.md 6.3): which microbatches to recompute or offload under a
memory limit, and the PipeOffload schedules.
"""
