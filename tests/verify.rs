//! Oracle tests for verify (filled in by its issue).
