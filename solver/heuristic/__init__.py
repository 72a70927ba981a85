"""The list-scheduling searches: the Zero Bubble heuristic and its knob search, the paper's
algorithm, the greedy and lookahead builds, the local search, and the raced timers they share.
"""
