"""The explorer: a Textual app that renders what the parsing and analysis layers return."""
