"""`loopwarden app`: the report service in a native window (Qt WebEngine through PySide6, the `app`
extra). The server runs in-process on a port the kernel picks on 127.0.0.1, with a random token per
launch that only the window presents (`embedded`); the window adds the native folder dialog, "open
PDF" and "show in folder" (`routes`, `window`); a second launch on the same run store brings the
first window to the front (`instance`). Nothing here imports Qt until a window is opened."""
