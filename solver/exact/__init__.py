"""The exact models: CP-SAT and the MILP, the window search (LNS) and the memory
relaxations that prove how far a schedule is from optimal.
"""
