"""Command-line tools: each module backs one ``wavemla <verb>``."""
