"""`python -m webhook` is the same as the `karta-webhook` command."""

from webhook.cli.main import main

raise SystemExit(main())
