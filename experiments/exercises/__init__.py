"""Write a backward pass yourself, have it checked, train with it (docs/exercises.md).

``python -m experiments.exercises`` (``__main__``) lists, starts and checks the exercises;
``catalogue``: each one and its cases; ``terms``: the named terms of each derivation;
``grading``: the check and its verdict; ``mistakes``: the mistake, named in those terms;
``stubs``: the file ``start`` writes; ``learner``: a learner's file loaded (``learner.check``
from a notebook; ``--backward DIR`` of the studies, which import this package only then);
``break_backward``: backward passes broken one term at a time, gradient-checked.
"""
