"""Entry point for ``ddp-train`` and ``python -m ddp_train`` (stub; built in its own issue)."""

import sys


def main(argv=None) -> int:
    print("ddp-train: not implemented yet", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
