"""`python -m webhook` is the same as the `karta-webhook` command."""

from webhook.cli import main

raise SystemExit(main())
