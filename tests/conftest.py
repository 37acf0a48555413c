"""Suite-wide settings."""

from __future__ import annotations

from loopwarden.events import EventStamper

# Every event the runtime stamps during the tests is validated as well: a wrong value type fails
# here, while production builds events without re-validating (events.py).
EventStamper.validate = True
