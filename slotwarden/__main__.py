"""`python -m slotwarden`: the same as the `slotwarden` command."""

from slotwarden.cli.commands import main

raise SystemExit(main())
