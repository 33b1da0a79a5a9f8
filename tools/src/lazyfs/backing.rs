//! The durable bytes of a mount: one file per inode in a backing directory.
//!
//! These files stand for what a disk holds after a power cut, so they are never synced to the real
//! disk themselves: the host's own durability is not what a run tests.

use std::collections::HashMap;
use std::fs::File;
use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use super::model::Durable;
use super::model::Ino;

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
