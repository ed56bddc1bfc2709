"""DSF on the emulated fabric: addressing and reachability (with Input Balanced Mode), programming, the os-ken app."""
