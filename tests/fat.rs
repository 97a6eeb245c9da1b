//! Oracle tests for fat (filled in by its issue).
