"""Redis store tests run against the real Redis, with BlockBuster on (see `blocking`)."""

from blocking import blockbuster

__all__ = ["blockbuster"]
