//! The Raft network over HTTP with bincode bodies (written next).
