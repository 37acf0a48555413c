"""What the loop's per-step code uses to cost less than the general way, each with the measurement
that justified it in its docstring: JSON through the standard library's C accelerators
(fastjson.py), a cheaper `__init__` for frozen dataclasses (frozen.py), and pydantic models built
from values the runtime itself checked (trusted.py). None imports any other loopwarden module."""
