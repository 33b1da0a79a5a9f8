//! The FUSE side: each kernel request becomes one call on the [`Model`], under one lock.
//!
//! Files are opened with `FOPEN_DIRECT_IO` and every attribute and entry is answered with a zero
//! time-to-live, so the kernel keeps no page or attribute of its own: after a power cut, the next
//! read sees what the model kept, not what the kernel remembered.

use std::ffi::OsStr;
use std::sync::Arc;
use std::sync::Condvar;
use std::sync::Mutex;
use std::sync::MutexGuard;
use std::time::Duration;
use std::time::SystemTime;

use fuser::Errno;
use fuser::FileAttr;
use fuser::FileHandle;
use fuser::FileType;
use fuser::Filesystem;
use fuser::FopenFlags;
use fuser::Generation;
use fuser::INodeNo;
use fuser::LockOwner;
use fuser::OpenFlags;
use fuser::RenameFlags;
use fuser::ReplyAttr;
use fuser::ReplyCreate;
use fuser::ReplyData;
use fuser::ReplyDirectory;
use fuser::ReplyEmpty;
use fuser::ReplyEntry;
use fuser::ReplyOpen;
use fuser::ReplyStatfs;
use fuser::ReplyWrite;
use fuser::Request;
use fuser::TimeOrNow;
use fuser::WriteFlags;

use super::backing::BackingDir;
use super::model::Attr;
use super::model::Ino;
use super::model::Model;

const NO_CACHE: Duration = Duration::ZERO;

/// The model of one mount and a signal for "a file was closed".
pub struct Shared {
    pub model: Mutex<Model<BackingDir>>,
    pub closed: Condvar,
}

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, Model<BackingDir>> {
        self.model.lock().unwrap_or_else(|e| e.into_inner())
    }
}

pub struct Handler(pub Arc<Shared>);

fn errno(code: i32) -> Errno {
    Errno::from_i32(code)
}

fn file_attr(attr: &Attr) -> FileAttr {
    FileAttr {
        ino: INodeNo(attr.ino),
        size: attr.size,
        blocks: attr.size.div_ceil(512),
        atime: attr.mtime,
        mtime: attr.mtime,
        ctime: attr.mtime,
        crtime: attr.mtime,
        kind: if attr.is_dir { FileType::Directory } else { FileType::RegularFile },
        perm: attr.perm,
        nlink: if attr.is_dir { 2 } else { 1 },
        uid: attr.uid,
        gid: attr.gid,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

impl Handler {
    /// Answers an entry for `ino` and counts the kernel's new reference to it.
    fn entry(&self, model: &mut Model<BackingDir>, ino: Result<Ino, i32>, reply: ReplyEntry) {
        match ino.and_then(|ino| model.attr(ino)) {
            Ok(attr) => {
                model.remember(attr.ino);
                reply.entry(&NO_CACHE, &file_attr(&attr), Generation(0));
            }
            Err(code) => reply.error(errno(code)),
        }
    }

    fn create_node(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        is_dir: bool,
    ) -> Result<Ino, i32> {
        let perm = (mode & !umask & 0o7777) as u16;
        self.0.lock().create(parent.0, name, is_dir, perm, (req.uid(), req.gid()))
    }
}

fn empty(reply: ReplyEmpty, result: Result<(), i32>) {
    match result {
        Ok(()) => reply.ok(),
        Err(code) => reply.error(errno(code)),
    }
}

impl Filesystem for Handler {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let mut model = self.0.lock();
        let ino = model.lookup(parent.0, name);
        self.entry(&mut model, ino, reply);
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.0.lock().forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.0.lock().attr(ino.0) {
            Ok(attr) => reply.attr(&NO_CACHE, &file_attr(&attr)),
            Err(code) => reply.error(errno(code)),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        // Only the size matters to a power cut; modes and times are accepted and not kept.
        let mut model = self.0.lock();
        let result = match size {
            Some(size) => model.truncate(ino.0, size),
            None => Ok(()),
        };
        match result.and_then(|()| model.attr(ino.0)) {
            Ok(attr) => reply.attr(&NO_CACHE, &file_attr(&attr)),
            Err(code) => reply.error(errno(code)),
        }
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        let ino = self.create_node(req, parent, name, mode, umask, true);
        let mut model = self.0.lock();
        self.entry(&mut model, ino, reply);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        empty(reply, self.0.lock().unlink(parent.0, name));
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        empty(reply, self.0.lock().rmdir(parent.0, name));
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if flags.intersects(RenameFlags::RENAME_EXCHANGE | RenameFlags::RENAME_WHITEOUT) {
            return reply.error(errno(libc::EINVAL));
        }
        let no_replace = flags.contains(RenameFlags::RENAME_NOREPLACE);
        empty(reply, self.0.lock().rename(parent.0, name, newparent.0, newname, no_replace));
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.0.lock().opened(ino.0) {
            Ok(()) => reply.opened(FileHandle(0), FopenFlags::FOPEN_DIRECT_IO),
            Err(code) => reply.error(errno(code)),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let ino = self.create_node(req, parent, name, mode, umask, false);
        let mut model = self.0.lock();
        match ino.and_then(|ino| model.opened(ino).and_then(|()| model.attr(ino))) {
            Ok(attr) => {
                model.remember(attr.ino);
                reply.created(&NO_CACHE, &file_attr(&attr), Generation(0), FileHandle(0), FopenFlags::FOPEN_DIRECT_IO);
            }
            Err(code) => reply.error(errno(code)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.0.lock().read(ino.0, offset, size) {
            Ok(bytes) => reply.data(&bytes),
            Err(code) => reply.error(errno(code)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.0.lock().write(ino.0, offset, data) {
            Ok(n) => reply.written(u32::try_from(n).unwrap_or(u32::MAX)),
            Err(code) => reply.error(errno(code)),
        }
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        // close(2) makes nothing durable.
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.0.lock().released(ino.0);
        self.0.closed.notify_all();
        reply.ok();
    }

    fn fsync(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        empty(reply, self.0.lock().sync_file(ino.0));
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let entries = match self.0.lock().read_dir(ino.0) {
            Ok(entries) => entries,
            Err(code) => return reply.error(errno(code)),
        };
        for (index, (child, is_dir, name)) in entries.into_iter().enumerate().skip(offset as usize) {
            let kind = if is_dir { FileType::Directory } else { FileType::RegularFile };
            if reply.add(INodeNo(child), index as u64 + 1, kind, &name) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        empty(reply, self.0.lock().sync_dir(ino.0));
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        // Plenty of room: the backing directory's real limits are the host's business.
        reply.statfs(1 << 24, 1 << 23, 1 << 23, 1 << 20, 1 << 19, 4096, 255, 4096);
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        reply.ok();
    }
}
