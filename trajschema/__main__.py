"""``python -m trajschema``: the command line (see ``trajschema --help``)."""

from trajschema.cli import main

if __name__ == "__main__":  # pytest's doctest collection imports this module too
    raise SystemExit(main())
