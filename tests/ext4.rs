//! Oracle tests for ext4 (filled in by its issue).
