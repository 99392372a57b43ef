"""The reliability suite: crashes, concurrency, bad input, faults and security (issue 7)."""
