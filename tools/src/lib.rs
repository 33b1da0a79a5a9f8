//! What the tools' binaries share.

pub mod fuse_probe;
pub mod lazyfs;
