//! `blockwise write` integration tests.
