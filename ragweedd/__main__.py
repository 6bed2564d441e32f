"""python -m ragweedd  ->  the ragweedd command line (``run`` starts the daemon)."""

from ragweedd.cli.daemon import main

if __name__ == "__main__":
    raise SystemExit(main())
