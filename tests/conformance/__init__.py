"""One test suite for every memory and summary store backend, sync and async."""
