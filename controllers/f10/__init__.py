"""F10 on the emulated fabric: route planning (backups, detours), programming, detector reports, pushback,
the epoch rescheduler and its greedy placement."""
