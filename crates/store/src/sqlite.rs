//! Filled by the SQLite implementation.
