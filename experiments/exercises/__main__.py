"""Write a backward pass yourself, and be told which gradient is wrong and what the mistake is.

    python -m experiments.exercises                     # the exercises, one line each
    python -m experiments.exercises start layernorm     # writes exercises/layernorm.py
    python -m experiments.exercises check layernorm     # checks its layernorm_backward
    python -m experiments.four_variants --tiny --backward exercises   # trains with yours

``start NAME [--dir DIR]`` writes ``DIR/NAME.py`` (``stubs.py``), never over a
file that exists; ``check NAME [--file PATH]`` checks its ``NAME_backward``
(``grading.py``; from Python: ``experiments.exercises.learner.check``). Exit status: 0 right
(and ``start``, the list); 1 a wrong answer (wrong values, shape or dtype, not implemented yet,
a case that does not return, the learner's code raised: its traceback is shown); 2 bad input
(an unknown exercise, a missing file or function, a file ``start`` would overwrite), one line.
"""
import os
import sys
from pathlib import Path

from experiments import cli

PROG = "python -m experiments.exercises"
with cli.errors(PROG):   # Ctrl-C while NumPy loads: one line
    from experiments.exercises import learner, stubs
    from experiments.exercises.catalogue import EXERCISES

DEFAULT_DIR = Path("exercises")


def list_exercises():
    """``list``: each exercise, what the learner derives and its section of docs/derivations.md,
    then how to start, check and train with one."""
    width = max(len(n) for n in EXERCISES) + 2
    say = max(len(ex.summary) for ex in EXERCISES.values()) + 2
    print("Write a backward pass yourself; the check says which gradient is wrong, and what the "
          "mistake is in the terms of the derivation.\n")
    print(f"{'exercise':<{width}}{'you derive':<{say}}docs/derivations.md")
    for ex in EXERCISES.values():
        print(f"{ex.name:<{width}}{ex.summary:<{say}}#{ex.section}")
    print(f"\nStart one: {PROG} start layernorm    (writes exercises/layernorm.py)\n"
          f"Check it:  {PROG} check layernorm    (from Python: experiments.exercises.learner.check)\n"
          f"Train with yours: python -m experiments.four_variants --tiny --backward exercises")
    return 0


def start(ex, folder):
    """``start``: write ``folder/<name>.py`` for the exercise ``ex``.

    Raises:
        cli.UsageError: the file exists (it is never overwritten).
    """
    path = folder / f"{ex.name}.py"
    check = f"{PROG} check {ex.name}" + ("" if folder == DEFAULT_DIR else f" --file {path}")
    if os.path.lexists(path):
        raise cli.UsageError(f"{path} exists: check it with {check}, or move it away to start "
                             "again")
    cli.write_outputs(cli.output_dir(folder), {path.name: stubs.template(ex, check, folder)})
    print(f"Wrote {path}: write {ex.function} in it, then\n    {check}")
    return 0


def run(argv):
    """The command (``list``, ``start``, ``check``; no command lists); returns the status.
    Raises ``cli.UsageError``: an unknown command or exercise, a missing file or function, a
    file ``start`` would overwrite."""
    p = cli.ArgumentParser(prog=PROG, description="Write a backward pass of a layer yourself "
                           "and check it: which gradient is wrong, and what the mistake is.")
    sub = p.add_subparsers(dest="command", metavar="{list,start,check}")
    sub.add_parser("list", help="the exercises (the default)")
    s = sub.add_parser("start", help="write an exercise's file: its forward, the backward to "
                       "write, the steps")
    c = sub.add_parser("check", help="check your backward: each gradient right, or what is wrong")
    for q in (s, c):
        q.add_argument("name", choices=EXERCISES, metavar="NAME", help=f"the exercise ({PROG} "
                       f"lists them)")
    s.add_argument("--dir", type=cli.path_arg, default=DEFAULT_DIR, metavar="DIR",
                   help="the folder of the file")
    c.add_argument("--file", type=cli.path_arg, metavar="PATH",
                   help="your file (default: exercises/NAME.py)")
    args = p.parse_args(argv)
    if args.command in (None, "list"):
        return list_exercises()
    ex = EXERCISES[args.name]
    if args.command == "start":
        return start(ex, args.dir)
    verdict = learner.check_file(ex, args.file or DEFAULT_DIR / f"{ex.name}.py")
    learner.show(verdict, f"{PROG}: ")
    return 0 if verdict.status == "right" else 1


if __name__ == "__main__":
    with cli.errors(PROG):
        sys.exit(run(sys.argv[1:]))
