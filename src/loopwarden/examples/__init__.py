"""Runnable examples: `python -m loopwarden.examples.collapse`."""
