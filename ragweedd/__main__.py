"""python -m ragweedd  ->  the ragweedd command line (``run`` starts the daemon)."""

from ragweedd.cli.command import main

if __name__ == "__main__":
    raise SystemExit(main())
