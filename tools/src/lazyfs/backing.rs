//! The durable bytes: what a disk holds after a power cut. A mount keeps them in a backing
//! directory, one file per inode ([`BackingDir`]); the model's tests in a map ([`MemoryDurable`]).
//!
//! The backing files are never synced to the real disk themselves: the host's own durability is
//! not what a run tests.

use std::collections::HashMap;
use std::fs::File;
use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

/// An inode number, as the kernel and the model name files.
pub type Ino = u64;

/// Where the durable bytes of every file are kept. Reads past the end of what was written give
/// zeros.
pub trait Durable: Send {
    fn read(&mut self, ino: Ino, offset: u64, buf: &mut [u8]) -> std::io::Result<()>;
    fn write(&mut self, ino: Ino, offset: u64, data: &[u8]) -> std::io::Result<()>;
    fn set_len(&mut self, ino: Ino, len: u64) -> std::io::Result<()>;
    fn remove(&mut self, ino: Ino) -> std::io::Result<()>;
}

/// Durable bytes in memory: for tests of the model.
#[derive(Default)]
pub struct MemoryDurable(HashMap<Ino, Vec<u8>>);

impl Durable for MemoryDurable {
    fn read(&mut self, ino: Ino, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        buf.fill(0);
        let bytes = self.0.get(&ino).map(Vec::as_slice).unwrap_or_default();
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(bytes.len());
        let end = start.saturating_add(buf.len()).min(bytes.len());
        buf[..end - start].copy_from_slice(&bytes[start..end]);
        Ok(())
    }

    fn write(&mut self, ino: Ino, offset: u64, data: &[u8]) -> std::io::Result<()> {
        let bytes = self.0.entry(ino).or_default();
        let start = usize::try_from(offset).map_err(std::io::Error::other)?;
        if bytes.len() < start + data.len() {
            bytes.resize(start + data.len(), 0);
        }
        bytes[start..start + data.len()].copy_from_slice(data);
        Ok(())
    }

    fn set_len(&mut self, ino: Ino, len: u64) -> std::io::Result<()> {
        self.0.entry(ino).or_default().resize(usize::try_from(len).map_err(std::io::Error::other)?, 0);
        Ok(())
    }

    fn remove(&mut self, ino: Ino) -> std::io::Result<()> {
        self.0.remove(&ino);
        Ok(())
    }
}

pub struct BackingDir {
    dir: PathBuf,
    files: HashMap<Ino, File>,
}

impl BackingDir {
    /// Uses `dir`, which must be empty or absent: a mount starts as an empty file system.
    pub fn create(dir: PathBuf) -> std::io::Result<BackingDir> {
        std::fs::create_dir_all(&dir)?;
        if std::fs::read_dir(&dir)?.next().is_some() {
            return Err(std::io::Error::other(format!("backing directory {} is not empty", dir.display())));
        }
        Ok(BackingDir { dir, files: HashMap::new() })
    }

    fn file(&mut self, ino: Ino) -> std::io::Result<&File> {
        if !self.files.contains_key(&ino) {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(self.dir.join(ino.to_string()))?;
            self.files.insert(ino, file);
        }
        self.files.get(&ino).ok_or_else(|| std::io::Error::other("backing file vanished"))
    }
}

impl Durable for BackingDir {
    fn read(&mut self, ino: Ino, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        buf.fill(0);
        let file = self.file(ino)?;
        let mut done = 0;
        while done < buf.len() {
            match file.read_at(&mut buf[done..], offset + done as u64)? {
                0 => break,
                n => done += n,
            }
        }
        Ok(())
    }

    fn write(&mut self, ino: Ino, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.file(ino)?.write_all_at(data, offset)
    }

    fn set_len(&mut self, ino: Ino, len: u64) -> std::io::Result<()> {
        self.file(ino)?.set_len(len)
    }

    fn remove(&mut self, ino: Ino) -> std::io::Result<()> {
        self.files.remove(&ino);
        match std::fs::remove_file(self.dir.join(ino.to_string())) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}
