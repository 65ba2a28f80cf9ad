"""Integration-test fixtures: BlockBuster on for the daemon's own code (see `blocking`)."""

from blocking import blockbuster

__all__ = ["blockbuster"]
