"""One screen per module."""
