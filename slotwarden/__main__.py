"""`python -m slotwarden`: the same as the `slotwarden` command."""

from slotwarden.cli import main

raise SystemExit(main())
