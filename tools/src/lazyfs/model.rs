//! The file system's state, without FUSE: what processes see, and what a power cut leaves.
//!
//! Every inode has two states. What processes see: a file's bytes and size, a directory's entries.
//! What survives a power cut: a file's bytes and size as of its last `fsync`/`fdatasync`, a
//! directory's entries as of its last `fsync` (so a new, renamed or deleted name is durable only
//! once its directory is synced, as POSIX requires and as LazyFS models it). [`Model::power_cut`]
//! throws away everything that was never synced.
//!
//! The durable bytes of each file live in a [`Durable`] store (files in a backing directory for a
//! mount, a map in tests); the unsynced bytes live in memory as dirty pages over them.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::ffi::OsString;
use std::time::SystemTime;

pub use super::backing::Durable;
pub use super::backing::Ino;
pub use super::backing::MemoryDurable;

/// The root directory's inode number (FUSE's).
pub const ROOT: Ino = 1;

/// The unit of the in-memory overlay: a write dirties the pages it touches.
pub const PAGE: usize = 4096;

/// An errno value (`libc::ENOENT`, …).
pub type Errno = i32;

/// What a power cut threw away.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Lost {
    /// Bytes written (or truncated away) since the file's last sync, summed over files.
    pub unsynced_bytes: u64,
    /// Files whose content or size went back to their last sync.
    pub files: u64,
    /// Directory entries created, renamed or removed since their directory's last sync.
    pub entries: u64,
}

/// What `stat` answers.
#[derive(Debug, Clone, Copy)]
pub struct Attr {
    pub ino: Ino,
    pub is_dir: bool,
    pub size: u64,
    pub perm: u16,
    pub uid: u32,
    pub gid: u32,
    pub mtime: SystemTime,
}

struct FileState {
    /// The size processes see.
    len: u64,
    /// Durable bytes below this are still the file's content; above it (and outside dirty pages)
    /// the file reads zeros: a truncation since the last sync cut them off.
    valid_len: u64,
    /// The size as of the last sync.
    durable_len: u64,
    /// Whole pages that differ from the durable bytes.
    dirty: BTreeMap<u64, Box<[u8]>>,
    /// Bytes written or cut since the last sync (for the report of a power cut).
    unsynced_bytes: u64,
}

struct DirState {
    parent: Ino,
    entries: BTreeMap<OsString, Ino>,
    durable: BTreeMap<OsString, Ino>,
}

enum Kind {
    File(FileState),
    Dir(DirState),
}

struct Inode {
    kind: Kind,
    perm: u16,
    uid: u32,
    gid: u32,
    mtime: SystemTime,
    /// References the kernel holds (FUSE lookup count): the inode stays while it has any.
    lookups: u64,
    /// Open file handles.
    open: u32,
}

pub struct Model<D: Durable> {
    inodes: HashMap<Ino, Inode>,
    next_ino: Ino,
    durable: D,
}

fn io_errno(e: std::io::Error) -> Errno {
    e.raw_os_error().unwrap_or(libc::EIO)
}

impl<D: Durable> Model<D> {
    /// An empty file system: a root directory, durable as it is.
    pub fn new(durable: D) -> Model<D> {
        let root = Inode {
            kind: Kind::Dir(DirState { parent: ROOT, entries: BTreeMap::new(), durable: BTreeMap::new() }),
            perm: 0o755,
            uid: 0,
            gid: 0,
            mtime: SystemTime::now(),
            lookups: 1,
            open: 0,
        };
        Model { inodes: HashMap::from([(ROOT, root)]), next_ino: ROOT + 1, durable }
    }

    fn inode(&self, ino: Ino) -> Result<&Inode, Errno> {
        self.inodes.get(&ino).ok_or(libc::ENOENT)
    }

    fn dir(&self, ino: Ino) -> Result<&DirState, Errno> {
        match &self.inode(ino)?.kind {
            Kind::Dir(dir) => Ok(dir),
            Kind::File(_) => Err(libc::ENOTDIR),
        }
    }

    fn dir_mut(&mut self, ino: Ino) -> Result<&mut DirState, Errno> {
        match &mut self.inodes.get_mut(&ino).ok_or(libc::ENOENT)?.kind {
            Kind::Dir(dir) => Ok(dir),
            Kind::File(_) => Err(libc::ENOTDIR),
        }
    }

    fn file_mut(&mut self, ino: Ino) -> Result<&mut FileState, Errno> {
        match &mut self.inodes.get_mut(&ino).ok_or(libc::ENOENT)?.kind {
            Kind::File(file) => Ok(file),
            Kind::Dir(_) => Err(libc::EISDIR),
        }
    }

    pub fn lookup(&self, parent: Ino, name: &OsStr) -> Result<Ino, Errno> {
        let dir = self.dir(parent)?;
        match name.as_encoded_bytes() {
            b"." => Ok(parent),
            b".." => Ok(dir.parent),
            _ => dir.entries.get(name).copied().ok_or(libc::ENOENT),
        }
    }

    pub fn attr(&self, ino: Ino) -> Result<Attr, Errno> {
        let inode = self.inode(ino)?;
        let (is_dir, size) = match &inode.kind {
            Kind::File(file) => (false, file.len),
            Kind::Dir(_) => (true, 0),
        };
        Ok(Attr { ino, is_dir, size, perm: inode.perm, uid: inode.uid, gid: inode.gid, mtime: inode.mtime })
    }

    /// A new file or directory `name` in `parent`, visible at once, durable once `parent` is synced.
    pub fn create(
        &mut self,
        parent: Ino,
        name: &OsStr,
        is_dir: bool,
        perm: u16,
        owner: (u32, u32),
    ) -> Result<Ino, Errno> {
        if self.dir(parent)?.entries.contains_key(name) {
            return Err(libc::EEXIST);
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        let kind = if is_dir {
            Kind::Dir(DirState { parent, entries: BTreeMap::new(), durable: BTreeMap::new() })
        } else {
            Kind::File(FileState { len: 0, valid_len: 0, durable_len: 0, dirty: BTreeMap::new(), unsynced_bytes: 0 })
        };
        let (uid, gid) = owner;
        let inode = Inode { kind, perm, uid, gid, mtime: SystemTime::now(), lookups: 0, open: 0 };
        self.inodes.insert(ino, inode);
        self.dir_mut(parent)?.entries.insert(name.to_owned(), ino);
        self.touch(parent);
        Ok(ino)
    }

    fn touch(&mut self, ino: Ino) {
        if let Some(inode) = self.inodes.get_mut(&ino) {
            inode.mtime = SystemTime::now();
        }
    }

    /// The page `page` as processes see it: dirty, or durable bytes below `valid_len`, else zeros.
    fn page(&mut self, ino: Ino, page: u64) -> Result<Box<[u8]>, Errno> {
        let Kind::File(file) = &self.inode(ino)?.kind else { return Err(libc::EISDIR) };
        if let Some(bytes) = file.dirty.get(&page) {
            return Ok(bytes.clone());
        }
        let valid_len = file.valid_len;
        let mut bytes = vec![0u8; PAGE].into_boxed_slice();
        let start = page * PAGE as u64;
        if start < valid_len {
            let valid = usize::try_from(valid_len - start).unwrap_or(PAGE).min(PAGE);
            self.durable.read(ino, start, &mut bytes[..valid]).map_err(io_errno)?;
        }
        Ok(bytes)
    }

    pub fn read(&mut self, ino: Ino, offset: u64, size: u32) -> Result<Vec<u8>, Errno> {
        let len = self.attr(ino)?.size;
        let end = offset.saturating_add(u64::from(size)).min(len);
        let mut out = Vec::with_capacity(end.saturating_sub(offset) as usize);
        let mut at = offset;
        while at < end {
            let page = at / PAGE as u64;
            let within = (at % PAGE as u64) as usize;
            let take = (PAGE - within).min((end - at) as usize);
            out.extend_from_slice(&self.page(ino, page)?[within..within + take]);
            at += take as u64;
        }
        Ok(out)
    }

    /// Writes into the overlay only: nothing reaches the durable bytes before [`Model::sync_file`].
    pub fn write(&mut self, ino: Ino, offset: u64, data: &[u8]) -> Result<usize, Errno> {
        let end = offset.checked_add(data.len() as u64).ok_or(libc::EFBIG)?;
        let mut at = offset;
        while at < end {
            let page = at / PAGE as u64;
            let within = (at % PAGE as u64) as usize;
            let take = (PAGE - within).min((end - at) as usize);
            let mut bytes = self.page(ino, page)?;
            let from = (at - offset) as usize;
            bytes[within..within + take].copy_from_slice(&data[from..from + take]);
            self.file_mut(ino)?.dirty.insert(page, bytes);
            at += take as u64;
        }
        let file = self.file_mut(ino)?;
        file.len = file.len.max(end);
        file.unsynced_bytes += data.len() as u64;
        self.touch(ino);
        Ok(data.len())
    }

    pub fn truncate(&mut self, ino: Ino, len: u64) -> Result<(), Errno> {
        let file = self.file_mut(ino)?;
        if len < file.len {
            file.unsynced_bytes += file.len - len;
            file.valid_len = file.valid_len.min(len);
            let first_gone = len.div_ceil(PAGE as u64);
            file.dirty.retain(|page, _| *page < first_gone);
            if !len.is_multiple_of(PAGE as u64) {
                if let Some(bytes) = file.dirty.get_mut(&(len / PAGE as u64)) {
                    bytes[(len % PAGE as u64) as usize..].fill(0);
                }
            }
        } else {
            file.unsynced_bytes += len - file.len;
        }
        file.len = len;
        self.touch(ino);
        Ok(())
    }

    /// `fsync`/`fdatasync` of a file: its bytes and size become durable.
    pub fn sync_file(&mut self, ino: Ino) -> Result<(), Errno> {
        let file = self.file_mut(ino)?;
        let (len, valid_len) = (file.len, file.valid_len);
        let dirty = std::mem::take(&mut file.dirty);
        // Bytes cut off since the last sync are zeros now, also in the durable copy.
        self.durable.set_len(ino, valid_len.min(len)).map_err(io_errno)?;
        self.durable.set_len(ino, len).map_err(io_errno)?;
        for (page, bytes) in &dirty {
            let start = page * PAGE as u64;
            let keep = usize::try_from(len.saturating_sub(start)).unwrap_or(PAGE).min(PAGE);
            self.durable.write(ino, start, &bytes[..keep]).map_err(io_errno)?;
        }
        let file = self.file_mut(ino)?;
        file.valid_len = len;
        file.durable_len = len;
        file.unsynced_bytes = 0;
        Ok(())
    }

    /// `fsync` of a directory: its entries as they are now become durable.
    pub fn sync_dir(&mut self, ino: Ino) -> Result<(), Errno> {
        let dir = self.dir_mut(ino)?;
        dir.durable = dir.entries.clone();
        Ok(())
    }

    pub fn unlink(&mut self, parent: Ino, name: &OsStr) -> Result<(), Errno> {
        let ino = self.lookup(parent, name)?;
        if self.attr(ino)?.is_dir {
            return Err(libc::EISDIR);
        }
        self.dir_mut(parent)?.entries.remove(name);
        self.touch(parent);
        self.collect_garbage();
        Ok(())
    }

    pub fn rmdir(&mut self, parent: Ino, name: &OsStr) -> Result<(), Errno> {
        let ino = self.lookup(parent, name)?;
        if !self.dir(ino)?.entries.is_empty() {
            return Err(libc::ENOTEMPTY);
        }
        self.dir_mut(parent)?.entries.remove(name);
        self.touch(parent);
        self.collect_garbage();
        Ok(())
    }

    /// Moves `name` to `new_name`, replacing a file there (or an empty directory by a directory).
    pub fn rename(
        &mut self,
        parent: Ino,
        name: &OsStr,
        new_parent: Ino,
        new_name: &OsStr,
        no_replace: bool,
    ) -> Result<(), Errno> {
        let ino = self.lookup(parent, name)?;
        let is_dir = self.attr(ino)?.is_dir;
        if let Some(&target) = self.dir(new_parent)?.entries.get(new_name) {
            if target == ino {
                return Ok(());
            }
            if no_replace {
                return Err(libc::EEXIST);
            }
            match (is_dir, self.attr(target)?.is_dir) {
                (false, true) => return Err(libc::EISDIR),
                (true, false) => return Err(libc::ENOTDIR),
                (true, true) if !self.dir(target)?.entries.is_empty() => return Err(libc::ENOTEMPTY),
                _ => {}
            }
        }
        if is_dir {
            // A directory cannot move below itself.
            let mut at = new_parent;
            while at != ROOT {
                if at == ino {
                    return Err(libc::EINVAL);
                }
                at = self.dir(at)?.parent;
            }
            self.dir_mut(ino)?.parent = new_parent;
        }
        self.dir_mut(parent)?.entries.remove(name);
        self.dir_mut(new_parent)?.entries.insert(new_name.to_owned(), ino);
        self.touch(parent);
        self.touch(new_parent);
        self.collect_garbage();
        Ok(())
    }

    /// `.`, `..` and the entries of `ino`, in name order.
    pub fn read_dir(&self, ino: Ino) -> Result<Vec<(Ino, bool, OsString)>, Errno> {
        let dir = self.dir(ino)?;
        let mut out = vec![(ino, true, OsString::from(".")), (dir.parent, true, OsString::from(".."))];
        for (name, &child) in &dir.entries {
            out.push((child, self.attr(child)?.is_dir, name.clone()));
        }
        Ok(out)
    }

    /// The kernel took a reference (a lookup, create or mkdir was answered with this inode).
    pub fn remember(&mut self, ino: Ino) {
        if let Some(inode) = self.inodes.get_mut(&ino) {
            inode.lookups += 1;
        }
    }

    /// The kernel dropped `n` references.
    pub fn forget(&mut self, ino: Ino, n: u64) {
        if let Some(inode) = self.inodes.get_mut(&ino) {
            inode.lookups = inode.lookups.saturating_sub(n);
            if inode.lookups == 0 {
                self.collect_garbage();
            }
        }
    }

    pub fn opened(&mut self, ino: Ino) -> Result<(), Errno> {
        self.inodes.get_mut(&ino).ok_or(libc::ENOENT)?.open += 1;
        Ok(())
    }

    pub fn released(&mut self, ino: Ino) {
        if let Some(inode) = self.inodes.get_mut(&ino) {
            inode.open = inode.open.saturating_sub(1);
            if inode.open == 0 && inode.lookups == 0 {
                self.collect_garbage();
            }
        }
    }

    /// Open file handles on the whole file system.
    pub fn open_handles(&self) -> u64 {
        self.inodes.values().map(|inode| u64::from(inode.open)).sum()
    }

    /// A power cut: every file back to its last sync, every directory to its last sync.
    pub fn power_cut(&mut self) -> Lost {
        let mut lost = Lost::default();
        for inode in self.inodes.values_mut() {
            match &mut inode.kind {
                Kind::File(file) => {
                    if !file.dirty.is_empty() || file.len != file.durable_len || file.valid_len != file.durable_len {
                        lost.files += 1;
                        lost.unsynced_bytes += file.unsynced_bytes;
                    }
                    file.dirty.clear();
                    file.len = file.durable_len;
                    file.valid_len = file.durable_len;
                    file.unsynced_bytes = 0;
                }
                Kind::Dir(dir) => {
                    let changed = dir.entries.iter().filter(|(name, ino)| dir.durable.get(*name) != Some(ino)).count()
                        + dir.durable.keys().filter(|name| !dir.entries.contains_key(*name)).count();
                    lost.entries += changed as u64;
                    dir.entries = dir.durable.clone();
                }
            }
        }
        // A directory's `..` is where its durable entry now is.
        let mut parents = Vec::new();
        for (&ino, inode) in &self.inodes {
            if let Kind::Dir(dir) = &inode.kind {
                parents.extend(dir.entries.values().map(|&child| (child, ino)));
            }
        }
        for (child, parent) in parents {
            if let Ok(dir) = self.dir_mut(child) {
                dir.parent = parent;
            }
        }
        self.collect_garbage();
        lost
    }

    /// Drops inodes no name (visible or durable) reaches and the kernel no longer holds.
    fn collect_garbage(&mut self) {
        let mut reachable = BTreeSet::from([ROOT]);
        let mut todo = vec![ROOT];
        while let Some(ino) = todo.pop() {
            if let Some(Inode { kind: Kind::Dir(dir), .. }) = self.inodes.get(&ino) {
                for &child in dir.entries.values().chain(dir.durable.values()) {
                    if reachable.insert(child) {
                        todo.push(child);
                    }
                }
            }
        }
        let gone: Vec<Ino> = self
            .inodes
            .iter()
            .filter(|(ino, inode)| !reachable.contains(ino) && inode.lookups == 0 && inode.open == 0)
            .map(|(ino, _)| *ino)
            .collect();
        for ino in gone {
            if let Some(Inode { kind: Kind::File(_), .. }) = self.inodes.remove(&ino) {
                // Nothing refers to these bytes any more; a failed delete only leaks a file.
                let _ = self.durable.remove(ino);
            }
        }
    }
}
