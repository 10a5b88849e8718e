"""``python -m ddpctl`` runs the CLI (same as the ``ddpctl`` console script)."""

from ddpctl.cli.main import main

if __name__ == "__main__":
    main()
