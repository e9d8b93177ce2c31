"""``python -m adaptstream.cli``: the same as the ``adaptstream`` command."""

from adaptstream.cli import main

main()
